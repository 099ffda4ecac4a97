"""Public cloud data without configuration (issue 29, item 1): ``s3://`` read anonymously
where there are no credentials, a one-line hint (exit 4) when a bucket refuses, the endpoint
from ``AWS_ENDPOINT_URL``; ``gs://`` likewise (``token="anon"``); every ``pip install`` hint
names an extra that ``pyproject.toml`` declares.

The S3 servers are moto's, each in its own process (fixtures ``public_s3`` and ``guarded_s3``
in conftest.py)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.storage import cloud_credentials
from napari_n5zarr.storage.remote import RemoteSettings, RemoteStore, storage_options_with_defaults

ROOT = Path(__file__).parents[2]
CORPUS = ROOT / "tests/data/corpus"
JAVA = CORPUS / "zarr_implementations/data/n5-java.n5"
EXPECTED = np.load(CORPUS / "expected_derived/zarr_implementations_reference_image.npy").T


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "napari_n5zarr.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_public_bucket_reads_without_credentials(
    public_s3, no_credentials, monkeypatch, caplog
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", public_s3)  # the standard variable: no storage_options
    with caplog.at_level(logging.INFO, logger="napari_n5zarr.storage.cloud_credentials"):
        arr = napari_n5zarr.open("s3://pub/java.n5/gzip")
        np.testing.assert_array_equal(arr[...], EXPECTED)
        napari_n5zarr.open("s3://pub/java.n5/raw")
    said = [r.getMessage() for r in caplog.records if "anonymously" in r.getMessage()]
    assert said == ["no AWS credentials found: reading anonymously (public data only)"]  # once


def test_credentials_are_used_when_present(public_s3, no_credentials, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "admin")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "admin")
    options = storage_options_with_defaults("s3://pub/java.n5", None, RemoteSettings.from_env())
    assert "anon" not in options
    assert not cloud_credentials.is_anonymous(
        RemoteStore.open_url("s3://pub/java.n5", {"endpoint_url": public_s3}).fs
    )


def test_users_choice_is_kept(no_credentials) -> None:
    settings = RemoteSettings.from_env()
    assert storage_options_with_defaults("s3://b/c.n5", {"anon": False}, settings)["anon"] is False
    assert (
        storage_options_with_defaults("s3://b/c.n5", {"profile": "lab"}, settings).get("anon")
        is None
    )
    assert storage_options_with_defaults("s3://b/c.n5", None, settings)["anon"] is True
    assert "anon" not in storage_options_with_defaults("https://h/c.n5", None, settings)


@pytest.mark.parametrize(
    "command", [["tree"], ["info"], ["convert", "{dest}"], ["add-zarr-metadata", "--dry-run"]]
)
def test_every_cli_command_reads_a_public_bucket(
    public_s3, no_credentials, tmp_path, command
) -> None:
    env = {**no_credentials, "AWS_ENDPOINT_URL": public_s3}
    args = [a.format(dest=tmp_path / "copy.n5") for a in command]
    done = _cli(args[0], "s3://pub/java.n5", *args[1:], env=env)
    assert done.returncode == 0, done.stderr
    assert "Credentials" not in done.stderr
    if command[0] == "convert":
        np.testing.assert_array_equal(
            napari_n5zarr.open(tmp_path / "copy.n5/gzip/s0")[...], EXPECTED
        )
    else:
        assert done.stdout


def test_refused_credentials_exit_4_with_a_hint(guarded_s3, no_credentials) -> None:
    env = {
        **no_credentials,
        "AWS_ENDPOINT_URL": guarded_s3,
        "AWS_ACCESS_KEY_ID": "wrong",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    done = _cli("info", "s3://pub/java.n5/gzip", env=env)
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "HTTP 403" in lines[0]
    assert "refused your AWS credentials" in lines[0]
    assert "--storage-options '{\"anon\": true}'" in lines[0]


def test_private_bucket_read_anonymously_says_so(public_s3, no_credentials) -> None:
    done = _cli(
        "info", "s3://private/java.n5/gzip", env={**no_credentials, "AWS_ENDPOINT_URL": public_s3}
    )
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "the bucket is not public" in lines[0]
    assert "AWS_PROFILE" in lines[0]


def test_gcs_without_credentials_is_anonymous(no_credentials) -> None:
    pytest.importorskip("gcsfs")
    options = storage_options_with_defaults("gs://bucket/c.n5", None, RemoteSettings.from_env())
    assert options["token"] == "anon"
    store = RemoteStore.open_url("gs://bucket/c.n5")  # a real gcsfs filesystem, nothing sent yet
    assert cloud_credentials.is_anonymous(store.fs)
    assert "not public" in cloud_credentials.refused_hint("gs://bucket/c.n5", store.fs)


def test_every_pip_hint_names_a_declared_extra() -> None:
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )
    named: set[str] = set()
    for path in (ROOT / "src").rglob("*.py"):
        named.update(re.findall(r"pip install 'napari-n5zarr\[([a-z]\w*)\]'", path.read_text()))
    from napari_n5zarr.extras import EXTRAS

    named.update(EXTRAS.values())
    assert "gcs" in named
    assert named <= extras, f"hints name extras that pyproject.toml lacks: {sorted(named - extras)}"
