"""``--storage-options JSON`` on every command that takes a location (issue 29): the object
reaches fsspec for every URL the command opens (a header an HTTP server demands, an S3
endpoint); anything but a JSON object is one usage line, exit 2, before anything is read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from faulty_http import FaultyHandler, FaultyServer, serve

import napari_n5zarr
from napari_n5zarr.cli import main

CORPUS = Path(__file__).parent / "data/corpus"
JAVA = CORPUS / "zarr_implementations/data/n5-java.n5"
EXPECTED = np.load(CORPUS / "expected_derived/zarr_implementations_reference_image.npy").T
TOKEN = {"headers": {"X-Token": "let-me-in"}}


class _GuardHandler(FaultyHandler):
    """403 for any request without the header ``X-Token: let-me-in``."""

    def _respond(self) -> None:
        if self.headers.get("X-Token") != "let-me-in":
            self.server.requests.append(f"REFUSED {self.path}")
            self._send(403, b"no token")
            return
        super()._respond()

    do_GET = do_HEAD = _respond


class _GuardedServer(FaultyServer):
    def __init__(self, root: Path) -> None:
        super().__init__(root=root)
        self.RequestHandlerClass = _GuardHandler


@pytest.fixture
def guarded_http():
    yield from serve(_GuardedServer(JAVA.parent))


COMMANDS = [
    ["info", "c.n5"],
    ["tree", "c.n5"],
    ["convert", "c.n5", "d.n5"],
    ["add-zarr-metadata", "c.n5"],
    ["view", "c.n5"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("{anon: true}", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('"anon"', "expected a JSON object"),
        ("true", "expected a JSON object"),
    ],
)
def test_anything_but_a_json_object_is_one_usage_line(command, value, said, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--storage-options", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("n5zarr: error: argument --storage-options: ")
    assert said in err
    assert not (tmp_path / "d.n5").exists()


def test_http_headers_reach_every_request(guarded_http, tmp_path, capsys):
    url = f"{guarded_http.url}/n5-java.n5/gzip"
    options = ["--storage-options", json.dumps(TOKEN)]

    assert main(["info", url]) == 4  # the server refuses requests without the header
    capsys.readouterr()
    guarded_http.requests.clear()
    assert main(["info", url, *options]) == 0
    assert "gzip" in capsys.readouterr().out
    assert main(["tree", f"{guarded_http.url}/n5-java.n5", *options]) == 0
    assert "gzip" in capsys.readouterr().out
    dest = tmp_path / "copy.n5"
    assert main(["convert", url, str(dest), *options]) == 0, capsys.readouterr().err
    np.testing.assert_array_equal(napari_n5zarr.open(dest / "s0")[...], EXPECTED)
    assert guarded_http.requests
    assert not any(r.startswith("REFUSED") for r in guarded_http.requests)


def test_s3_endpoint_and_anon_from_the_option(public_s3, no_credentials, tmp_path, capsys):
    # no AWS_ENDPOINT_URL, no credentials: the endpoint and anonymity come from the option
    options = ["--storage-options", json.dumps({"endpoint_url": public_s3, "anon": True})]
    assert main(["info", "s3://pub/java.n5/gzip", *options]) == 0, capsys.readouterr().err
    assert "gzip" in capsys.readouterr().out
    local = tmp_path / "local.n5"
    assert main(["convert", "s3://pub/java.n5/raw", str(local), *options]) == 0
    np.testing.assert_array_equal(napari_n5zarr.open(local / "s0")[...], EXPECTED)
    # DEST over S3 too: written through the same options, read back with them
    assert main(["convert", str(local), "s3://pub/from-cli.n5", *options]) == 0
    capsys.readouterr()
    back = napari_n5zarr.open(
        "s3://pub/from-cli.n5/s0", storage_options={"endpoint_url": public_s3, "anon": True}
    )
    np.testing.assert_array_equal(back[...], EXPECTED)
