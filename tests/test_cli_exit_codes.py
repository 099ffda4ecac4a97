"""One exit status per kind of fault, the same for every command, and one line on stderr
naming what could not be reached or read (issue 18 item 8). Real servers on 127.0.0.1: a
folder served over HTTP, and a port nothing listens on."""

from __future__ import annotations

import socket

import numpy as np
import pytest
from faulty_http import FaultyServer, serve

from napari_n5zarr import export
from napari_n5zarr.cli import EXIT_CODES, ExitCode, main

FAST = {
    "N5ZARR_RETRIES": "0",
    "N5ZARR_READ_TIMEOUT": "5",
    "N5ZARR_CONNECT_TIMEOUT": "5",
    "N5ZARR_RETRY_BACKOFF": "0.01",
}


def commands(src: str, tmp) -> list[list[str]]:
    """Every command that reads ``src``."""
    return [
        ["tree", src],
        ["info", src],
        ["convert", src, str(tmp / "out.n5")],
        ["add-zarr-metadata", src],
        ["view", src],
    ]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


WAITING = "n5zarr: waiting for "
"""``n5zarr tree`` names what it waits for on stderr when a request takes over a second or two
(retries of a failing server on a loaded machine): a progress line, not a fault."""


def fault_lines(err: str) -> list[str]:
    """The lines of ``err`` that report a fault (progress lines dropped)."""
    return [line for line in err.strip().splitlines() if not line.startswith(WAITING)]


@pytest.fixture
def fast(monkeypatch):
    for name, value in FAST.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def served(tmp_path):
    """A pyramid ``c.n5`` served over HTTP on 127.0.0.1 -> (server, base URL)."""
    root = tmp_path / "served"
    export(np.arange(64, dtype="uint8").reshape(8, 8), root / "c.n5", chunks=8)
    for server in serve(FaultyServer(root=root)):
        yield server, server.url


@pytest.fixture
def dead_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_server_that_is_down_is_unreachable_for_every_command(dead_port, fast, tmp_path, capsys):
    url = f"http://127.0.0.1:{dead_port}/c.n5"
    for argv in commands(url, tmp_path):
        code, _, err = run(argv, capsys)
        [line] = fault_lines(err)
        assert code == ExitCode.UNREACHABLE == 4, (argv, err)
        assert line.startswith("n5zarr: error: "), (argv, line)
        assert f"127.0.0.1:{dead_port}" in line, (argv, line)
        assert "ssl:default" not in line, (argv, line)
        assert "connection refused" in line, (argv, line)
        assert not ("zarr.json" in line and "attributes.json" in line), (
            argv,
            line,
        )  # one file named, not two
        assert "Traceback" not in err


def test_a_missing_path_is_not_found_over_http_and_locally(served, tmp_path, capsys):
    _, base = served
    for src in (f"{base}/nothere.n5", str(tmp_path / "nothere.n5")):
        for argv in commands(src, tmp_path):
            code, out, err = run(argv, capsys)
            [line] = fault_lines(err)
            assert code == ExitCode.NOT_FOUND == 3, (argv, out, err)
            assert line.startswith("n5zarr: error: "), (argv, line)
            assert "nothere.n5" in line, (argv, line)


def test_a_server_error_on_the_root_is_unreachable(served, fast, tmp_path, capsys):
    server, base = served
    server.faults["/c.n5/attributes.json"] = "500"
    server.faults["/c.n5/zarr.json"] = "500"
    for argv in commands(f"{base}/c.n5", tmp_path):
        code, _, err = run(argv, capsys)
        [line] = fault_lines(err)
        assert code == ExitCode.UNREACHABLE, (argv, err)
        assert f"{base}/c.n5/" in line, (argv, line)
        assert "HTTP 500" in line, (argv, line)


def test_invalid_metadata_is_invalid_data(tmp_path, capsys):
    bad = tmp_path / "bad.n5"
    bad.mkdir()
    (bad / "attributes.json").write_text("this is not JSON")
    for argv in commands(
        str(bad), tmp_path
    ):  # add-zarr-metadata too: the root's own document (issue 27)
        code, _, err = run(argv, capsys)
        [line] = fault_lines(err)
        assert code == ExitCode.INVALID_DATA == 5, (argv, err)
        assert str(bad / "attributes.json") in line, (argv, line)
        assert "not valid JSON" in line, (argv, line)


def test_bad_arguments_are_usage_errors(tmp_path, capsys):
    src = tmp_path / "a.n5"
    export(np.zeros((16, 16), "uint8"), src, chunks=8)
    export(np.zeros((16, 16), "uint8"), tmp_path / "exists.n5", chunks=8)
    for argv in (
        ["convert", str(src), str(tmp_path / "exists.n5")],
        ["convert", str(src), str(src / "inside.n5")],
    ):
        code, _, err = run(argv, capsys)
        assert code == ExitCode.USAGE == 2, (argv, err)
        assert len(err.strip().splitlines()) == 1


def test_exit_codes_are_documented_in_help():
    for code in ExitCode:
        assert f"  {int(code)}  " in EXIT_CODES
    for name in ("not found", "unreachable", "invalid data", "usage"):
        assert name in EXIT_CODES
