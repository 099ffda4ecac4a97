"""Shared test fixtures (generic: paths to test data, a private napari config)."""

from __future__ import annotations

import atexit
import collections
import copy
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# napari reads its settings at import: keep tests away from the user's config.
if "NAPARI_CONFIG" not in os.environ:
    _config_dir = tempfile.mkdtemp(prefix="napari-cfg-")
    atexit.register(shutil.rmtree, _config_dir, ignore_errors=True)
    os.environ["NAPARI_CONFIG"] = os.path.join(_config_dir, "settings.yaml")

DATA = Path(__file__).parent / "data"

# Fixtures that start a Qt application or a napari viewer: tests using them (directly or
# through another fixture) need a display, so they get the ``napari`` marker and
# ``pytest -m "not napari"`` is a true headless run without per-file markers.
_DISPLAY_FIXTURES = frozenset({"make_napari_viewer", "make_napari_viewer_proxy", "qtbot", "qapp"})
# Tests that need a display without using such a fixture (a viewer in a subprocess).
_DISPLAY_TESTS = frozenset({"tests/test_cli.py::test_view_command_headless_screenshot"})
# Independent tools some interop tests read or write with; without them those tests skip.
_OPTIONAL_TOOLS = frozenset({"tensorstore", "z5py"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if (
            _DISPLAY_FIXTURES.intersection(getattr(item, "fixturenames", ()))
            or item.nodeid in _DISPLAY_TESTS
        ):
            item.add_marker(pytest.mark.napari)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A test that fails only because tensorstore or z5py is not installed is skipped, with
    that reason (as ``pytest.importorskip`` would do inside the test)."""
    report = yield
    error = call.excinfo
    if (
        report.failed
        and error is not None
        and error.errisinstance(ModuleNotFoundError)
        and error.value.name in _OPTIONAL_TOOLS
    ):
        report.outcome = "skipped"
        report.longrepr = (
            str(item.path),
            item.location[1] or 0,
            f"Skipped: {error.value.name} is not installed",
        )
    return report


@pytest.fixture(scope="session")
def _zarr_config_baseline() -> dict:
    """zarr's config as the session starts, with this package's codecs registered first (so
    the ``codecs.n5_default`` pin, set when another package also registers the name, is in it)."""
    import zarr

    from napari_n5zarr.n5.codec import ensure_codecs_registered

    ensure_codecs_registered()
    return copy.deepcopy(zarr.config.config)


@pytest.fixture(autouse=True)
def _zarr_config_restored(_zarr_config_baseline: dict):
    """Whatever a test sets in zarr's config (``zarr.config.set`` without a ``with``, ...) is
    undone after it: every test starts from the baseline."""
    import zarr

    yield
    if zarr.config.config != _zarr_config_baseline:
        with zarr.config.config_lock:
            zarr.config.config.clear()
            zarr.config.config.update(copy.deepcopy(_zarr_config_baseline))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``."""
    return DATA


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """``tests/data/corpus``: real N5 written by other software (same layout as the shared corpus)."""
    path = DATA / "corpus"
    if not path.is_dir():
        pytest.skip("tests/data/corpus is missing")
    return path


@pytest.fixture(scope="session")
def conventions_dir() -> Path:
    """``tests/data/conventions``: metadata-only examples of each metadata convention."""
    return DATA / "conventions"


@pytest.fixture
def read_json():
    """Load a JSON file."""

    def load(path: str | os.PathLike[str]) -> dict:
        return json.loads(Path(path).read_text())

    return load


@pytest.fixture(scope="session")
def write_n5():
    """``write_n5(group, name, data, chunks=..., attributes=..., compression=...)``: an N5
    dataset (data in N5 order) written through the library's ``n5_default`` codec."""
    from napari_n5zarr import create_dataset

    def write(group, name, data, *, chunks, attributes=None, compression=None):
        array = create_dataset(
            group, name, shape=data.shape, dtype=data.dtype, chunks=chunks,
            compression=compression or {"type": "gzip", "level": -1}, attributes=attributes,
        )  # fmt: skip
        array[...] = data
        return array

    return write


@pytest.fixture(scope="session")
def s3_bucket() -> dict:
    """A real S3 endpoint (moto's server on 127.0.0.1) with bucket ``n5-data`` holding
    ``java.n5`` (the corpus n5-java container); yields s3fs storage options."""
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    creds = {
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "region_name": "us-east-1",
    }
    s3 = boto3.client("s3", endpoint_url=endpoint, **creds)
    s3.create_bucket(Bucket="n5-data")
    java = DATA / "corpus/zarr_implementations/data/n5-java.n5"
    for f in java.rglob("*"):
        if f.is_file():
            s3.put_object(
                Bucket="n5-data",
                Key="java.n5/" + f.relative_to(java).as_posix(),
                Body=f.read_bytes(),
            )
    yield {
        "endpoint_url": endpoint,
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    server.stop()


@pytest.fixture
def counting_http() -> Iterator[Callable[..., tuple[str, dict[str, Any]]]]:
    """Starts HTTP servers on 127.0.0.1: ``counting_http(root, latency=0.05)`` serves ``root``
    with ``latency`` seconds added to each GET and returns ``(base URL, state)``. ``state``:
    ``peak`` (most GETs in flight at once), ``now``, ``gets`` (a Counter of GETs per path)
    and ``fail`` (a set of paths answered with 500). Stopped after the test."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(root: Path, latency: float = 0.05) -> tuple[str, dict[str, Any]]:
        state: dict[str, Any] = {"now": 0, "peak": 0, "gets": collections.Counter(), "fail": set()}
        lock = threading.Lock()

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self) -> None:
                with lock:
                    state["now"] += 1
                    state["peak"] = max(state["peak"], state["now"])
                    state["gets"][self.path] += 1
                try:
                    threading.Event().wait(latency)  # requests overlap only if issued together
                    if self.path in state["fail"]:
                        self.send_error(500, "broken on purpose")
                    else:
                        super().do_GET()
                finally:
                    with lock:
                        state["now"] -= 1

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128  # the default backlog (5) would hold back concurrent connects

        httpd = Server(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        servers.append(httpd)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{httpd.server_address[1]}", state

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def calibrated_pyramid(tmp_path: Path) -> tuple[Path, Any]:
    """A small exported pyramid with scale, units and translation -> (folder, level-0 array)."""
    import numpy as np

    from napari_n5zarr import export

    a = (np.arange(9 * 20 * 30).reshape(9, 20, 30) % 251).astype("uint8")
    dest = tmp_path / "pyr.n5"
    export(a, dest, chunks=8, scale=(3.0, 1.0, 1.0), units="micrometer", translate=(1.0, 2.0, 3.0))
    return dest, a


@pytest.fixture(autouse=True)
def _n5_pattern_offer_forgotten():
    """Each test starts as a new napari session would: the one-time ``*.n5/*`` offer
    (recorded per process by the preferences module) not made yet."""
    yield
    prefs = sys.modules.get("napari_n5zarr._napari.preferences")
    if prefs is not None:
        prefs._offered_here.clear()
        state = Path(os.environ["NAPARI_CONFIG"]).parent / prefs.STATE_FILE
        state.unlink(missing_ok=True)


# -- public cloud without credentials: moto's S3 server in its own process ----------


_JAVA = DATA / "corpus/zarr_implementations/data/n5-java.n5"
_ADMIN = {
    "aws_access_key_id": "admin",
    "aws_secret_access_key": "admin",
    "region_name": "us-east-1",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _moto(env_extra: dict[str, str]) -> Iterator[str]:
    """moto's S3 server in its own process, with ``java.n5`` in bucket ``pub`` (readable by
    anyone, as public datasets are) and in bucket ``private``."""
    pytest.importorskip("moto.server")
    port = _free_port()
    env = {
        **os.environ,
        **env_extra,
        "AWS_ACCESS_KEY_ID": "admin",
        "AWS_SECRET_ACCESS_KEY": "admin",
    }
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        s3 = pytest.importorskip("boto3").client("s3", endpoint_url=endpoint, **_ADMIN)
        for bucket, acl in (("pub", "public-read"), ("private", "private")):
            s3.create_bucket(Bucket=bucket, ACL=acl)
            for f in _JAVA.rglob("*"):
                if f.is_file():
                    key = "java.n5/" + f.relative_to(_JAVA).as_posix()
                    s3.put_object(Bucket=bucket, Key=key, Body=f.read_bytes(), ACL=acl)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def public_s3() -> Iterator[str]:
    yield from _moto({})


@pytest.fixture(scope="session")
def guarded_s3() -> Iterator[str]:
    # every request after the first ones (bucket, objects) must be signed by a key moto knows
    setup = 2 * (1 + sum(f.is_file() for f in _JAVA.rglob("*")))  # two buckets and their objects
    yield from _moto({"INITIAL_NO_AUTH_ACTION_COUNT": str(setup)})


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An environment without any cloud credentials (as on a fresh laptop); returns it."""
    for key in list(os.environ):
        if key.startswith(("AWS_", "FSSPEC_", "GOOGLE_", "CLOUDSDK_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws, no ~/.config/gcloud
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata probe here
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    import fsspec.config

    from napari_n5zarr.storage import cloud_credentials as _cloud_credentials

    monkeypatch.setattr(fsspec.config, "conf", {})
    for cached in (_cloud_credentials._aws_credentials_found, _cloud_credentials._gcs_credentials_found,
                   _cloud_credentials._say_anonymous):  # fmt: skip
        cached.cache_clear()
    yield dict(os.environ)
    for cached in (_cloud_credentials._aws_credentials_found, _cloud_credentials._gcs_credentials_found,
                   _cloud_credentials._say_anonymous):  # fmt: skip
        cached.cache_clear()
