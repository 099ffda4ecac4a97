"""Fault injection on real servers on 127.0.0.1: HTTP (a file server) and S3 (moto's server
behind the same faulting front). A 404 is a missing block (fill value) or a missing node;
403/500/503/reset/truncated/HTML/empty/slow end in a clear error naming the URL, never in
fill values, never in a hang beyond the timeout.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr
from faulty_http import FaultyServer, serve

import napari_n5zarr
from napari_n5zarr.errors import N5FormatError, N5MetadataError, N5StoreError

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
JAVA = CORPUS / "zarr_implementations/data/n5-java.n5"
EXPECTED = np.load(
    CORPUS / "expected_derived/zarr_implementations_reference_image.npy"
).T  # N5 order
BLOCK = (slice(0, 1), slice(0, 100), slice(0, 100))  # block 0/0/0 of every dataset ([1, 100, 100])
HANG_GUARD = 120  # s: a read still running after this is a hang (the timeout under test is 1 s)


@pytest.fixture(autouse=True)
def fast_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """1 s timeouts, 2 retries, short backoff: faults resolve in seconds."""
    monkeypatch.setenv("N5ZARR_READ_TIMEOUT", "1")
    monkeypatch.setenv("N5ZARR_CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("N5ZARR_RETRIES", "2")
    monkeypatch.setenv("N5ZARR_RETRY_BACKOFF", "0.05")


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyServer]:
    root = tmp_path_factory.mktemp("served")
    shutil.copytree(JAVA, root / "java.n5")
    yield from serve(FaultyServer(root=root))


@pytest.fixture(scope="module")
def s3_server(s3_bucket: dict) -> Iterator[tuple[FaultyServer, dict]]:
    server = FaultyServer(upstream=s3_bucket["endpoint_url"], s3=True)
    for item in serve(server):
        yield item, {**s3_bucket, "endpoint_url": item.url}


@pytest.fixture(params=["http", "s3"])
def remote(request: pytest.FixtureRequest) -> Iterator[tuple[FaultyServer, str, dict | None]]:
    """(server, container URL, storage options) for each protocol, with no faults set."""
    if request.param == "http":
        server = request.getfixturevalue("http_server")
        out = (server, f"{server.url}/java.n5", None)
    else:
        server, options = request.getfixturevalue("s3_server")
        out = (server, "s3://n5-data/java.n5", options)
    server.faults.clear()
    server.hits.clear()
    yield out
    server.faults.clear()


def guarded(call):
    """Run ``call`` in a thread; fail (instead of hanging the suite) if it is still running
    after HANG_GUARD seconds. Returns its result or raises its exception."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD)
    assert not thread.is_alive(), f"still running after {HANG_GUARD} s: the read hangs"
    if "error" in box:
        raise box["error"]
    return box["value"]


# -- control: no faults -------------------------------------------------------------------------
def test_no_fault_reads_exactly(remote) -> None:
    _server, url, options = remote
    for name in ("raw", "gzip"):
        np.testing.assert_array_equal(
            napari_n5zarr.open(f"{url}/{name}", storage_options=options)[...], EXPECTED
        )


# -- blocks --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ["raw", "gzip"])
def test_block_404_is_the_fill_value(remote, dataset: str) -> None:
    server, url, options = remote
    server.faults[f"/{dataset}/0/0/0"] = "404"
    data = napari_n5zarr.open(f"{url}/{dataset}", storage_options=options)[...]
    assert not data[BLOCK].any()
    expected = EXPECTED.copy()
    expected[BLOCK] = 0
    np.testing.assert_array_equal(data, expected)


@pytest.mark.parametrize("fault", ["403", "500", "503", "reset", "truncated", "slow"])
def test_block_transport_fault_is_an_error_naming_the_url(remote, fault: str) -> None:
    server, url, options = remote
    arr = napari_n5zarr.open(f"{url}/gzip", storage_options=options)
    server.faults["/gzip/0/0/0"] = fault
    with pytest.raises(N5StoreError, match=r"cannot read \S*java.n5/gzip/0/0/0") as info:
        guarded(lambda: arr[BLOCK])
    assert not isinstance(info.value, FileNotFoundError)
    reason = {"403": "403", "500": "500", "503": "503", "slow": "timed out"}.get(fault)
    if reason:
        assert reason in str(info.value)
    hits = sum(n for p, n in server.hits.items() if p.endswith("/gzip/0/0/0"))
    if fault == "403":
        assert hits == 1, "a 403 is not retried"
    elif fault == "reset":  # aiohttp itself resends once when a reused keep-alive connection resets
        assert 3 <= hits <= 6, f"{hits} GETs for 1 + 2 retries"
    else:
        assert hits == 3, f"{fault}: {hits} GETs (1 + 2 retries expected for transient faults)"
    server.faults.clear()
    np.testing.assert_array_equal(arr[BLOCK], EXPECTED[BLOCK])  # the store still works afterwards


@pytest.mark.parametrize("fault", ["html", "empty"])
@pytest.mark.parametrize("dataset", ["raw", "gzip"])
def test_block_with_a_bogus_body_is_an_error_not_fill(remote, fault: str, dataset: str) -> None:
    """A 200 carrying an HTML error page or nothing: a corrupt block, never zeros."""
    server, url, options = remote
    arr = napari_n5zarr.open(f"{url}/{dataset}", storage_options=options)
    server.faults[f"/{dataset}/0/0/0"] = fault
    with pytest.raises(N5FormatError):
        guarded(lambda: arr[BLOCK])


def test_transient_503s_are_retried_with_backoff_then_succeed(remote) -> None:
    server, url, options = remote
    arr = napari_n5zarr.open(f"{url}/gzip", storage_options=options)
    server.faults["/gzip/0/0/0"] = "flaky:2"
    np.testing.assert_array_equal(guarded(lambda: arr[BLOCK]), EXPECTED[BLOCK])
    assert sum(n for p, n in server.hits.items() if p.endswith("/gzip/0/0/0")) == 3


def test_retries_are_logged_naming_the_url(remote, caplog: pytest.LogCaptureFixture) -> None:
    server, url, options = remote
    arr = napari_n5zarr.open(f"{url}/gzip", storage_options=options)
    server.faults["/gzip/0/0/0"] = "flaky:1"
    with caplog.at_level("INFO", logger="napari_n5zarr.storage.remote"):
        guarded(lambda: arr[BLOCK])
    retries = [r.getMessage() for r in caplog.records if r.name == "napari_n5zarr.storage.remote"]
    assert len(retries) == 1, retries
    assert "gzip/0/0/0" in retries[0], retries
    assert "attempt 2 of 3" in retries[0], retries


def test_one_more_503_than_the_budget_is_an_error(remote, monkeypatch: pytest.MonkeyPatch) -> None:
    server, url, options = remote
    monkeypatch.setenv("N5ZARR_RETRIES", "1")
    arr = napari_n5zarr.open(f"{url}/gzip", storage_options=options)
    server.faults["/gzip/0/0/0"] = "flaky:2"
    with pytest.raises(N5StoreError, match=r"503.*after 2 attempts"):
        guarded(lambda: arr[BLOCK])


# -- metadata ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["403", "500", "503", "reset", "truncated", "slow"])
def test_metadata_transport_fault_is_not_reported_as_not_found(remote, fault: str) -> None:
    server, url, options = remote
    server.faults["/gzip/attributes.json"] = fault
    with pytest.raises(N5StoreError, match=r"cannot read \S*java.n5/gzip/attributes.json") as info:
        guarded(lambda: napari_n5zarr.open(f"{url}/gzip", storage_options=options))
    assert not isinstance(info.value, FileNotFoundError)


@pytest.mark.parametrize(
    ("fault", "match"), [("html", "not valid JSON"), ("empty", "not valid JSON")]
)
def test_metadata_with_a_bogus_body_names_the_file(remote, fault: str, match: str) -> None:
    server, url, options = remote
    server.faults["/gzip/attributes.json"] = fault
    with pytest.raises(N5MetadataError, match=rf"java.n5/gzip/attributes.json: {match}"):
        guarded(lambda: napari_n5zarr.open(f"{url}/gzip", storage_options=options))


def test_metadata_404_is_a_missing_node(remote) -> None:
    server, url, options = remote
    with pytest.raises(FileNotFoundError):
        napari_n5zarr.open(f"{url}/no-such-dataset", storage_options=options)
    server.faults["/gzip/attributes.json"] = "404"
    root = napari_n5zarr.open(url, storage_options=options)
    assert isinstance(root, zarr.Group)
    assert "gzip" not in root.array_keys()
    assert "raw" in root.array_keys()


def test_child_metadata_fault_in_a_listing_is_an_error(remote) -> None:
    """A 500 on one child's attributes.json must not make that child silently vanish."""
    server, url, options = remote
    root = napari_n5zarr.open(url, storage_options=options)
    server.faults["/xz/attributes.json"] = "500"
    with pytest.raises(N5StoreError, match=r"java.n5/xz/attributes.json"):
        guarded(lambda: dict(root.members()))


def test_oversized_remote_metadata_is_refused(remote, monkeypatch: pytest.MonkeyPatch) -> None:
    _server, url, options = remote
    size = len((JAVA / "gzip/attributes.json").read_bytes())
    monkeypatch.setenv("N5ZARR_MAX_METADATA_BYTES", str(size - 1))
    with pytest.raises(
        N5MetadataError,
        match=r"java.n5/gzip/attributes.json: .*size limit.*N5ZARR_MAX_METADATA_BYTES",
    ):
        napari_n5zarr.open(f"{url}/gzip", storage_options=options)
    monkeypatch.setenv("N5ZARR_MAX_METADATA_BYTES", str(size))
    assert napari_n5zarr.open(f"{url}/gzip", storage_options=options).shape == (3, 512, 512)


def test_user_timeouts_take_precedence(http_server: FaultyServer) -> None:
    """An aiohttp timeout given in storage_options wins over ours; ours follow the env."""
    aiohttp = pytest.importorskip("aiohttp")
    from napari_n5zarr.access import base_store

    store = base_store(
        f"{http_server.url}/java.n5",
        storage_options={"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=7)}},
    )
    assert store.fs.client_kwargs["timeout"].total == 7
    default = base_store(f"{http_server.url}/java.n5")
    timeout = default.fs.client_kwargs["timeout"]
    assert (timeout.sock_read, timeout.sock_connect, timeout.total) == (1.0, 2.0, None)
    assert default.settings.retries == 2


def test_listing_fault_is_an_error_naming_the_url_not_an_empty_group(remote) -> None:
    """A 500 on the listing (HTTP: the folder's index page; S3: ListObjectsV2 on the bucket)
    must not read as a group without children."""
    server, url, options = remote
    from napari_n5zarr.access import base_store

    root = napari_n5zarr.open(url, storage_options=options)
    base_store(
        url, storage_options=options
    ).fs.invalidate_cache()  # s3fs caches listings (same fs instance)
    server.faults["/java.n5/" if url.startswith("http") else "/n5-data"] = "500"
    with pytest.raises(N5StoreError, match=r"cannot read the listing of \S*java.n5.*500"):
        guarded(lambda: list(root.array_keys()))
    server.faults.clear()
    assert sorted(root.array_keys()) == ["bzip2", "gzip", "lz4", "raw", "xz"]


def test_remote_arrays_pickle_with_their_settings(
    http_server: FaultyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dask.distributed ships arrays to workers by pickle: the retry settings go along."""
    import pickle

    monkeypatch.setenv("N5ZARR_RETRIES", "5")
    arr = napari_n5zarr.open(f"{http_server.url}/java.n5/raw")
    blob = pickle.dumps(arr)
    monkeypatch.setenv("N5ZARR_RETRIES", "0")  # the worker's environment differs
    again = pickle.loads(blob)
    np.testing.assert_array_equal(again[BLOCK], EXPECTED[BLOCK])
    store = again.store_path.store
    while not hasattr(store, "settings"):
        store = store._store
    assert store.settings.retries == 5


def test_opening_for_napari_reads_each_listing_and_level_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a network every repeated read is a round trip: the reader's size check,
    detection and layers share one listing per group and one metadata read per level."""
    from napari_n5zarr import export
    from napari_n5zarr._napari.reader import read_path

    monkeypatch.setenv(
        "N5ZARR_READ_TIMEOUT", "60"
    )  # no retry on a busy machine: it would count twice

    a = (np.arange(8 * 24 * 32).reshape(8, 24, 32) % 251).astype("uint16")
    export(a, tmp_path / "c.n5", path="em/raw", chunks=8, scale=(2.0, 1.0, 1.0), units="nanometer")
    export(
        a[:, :8, :8], tmp_path / "c.n5", path="em/mask", chunks=8
    )  # beside raw in the same group
    notes: list[tuple[str, str]] = []
    for server in serve(FaultyServer(root=tmp_path)):
        layers = read_path(f"{server.url}/c.n5", notify=lambda *n: notes.append(n))
        hits = dict(server.hits)
    assert not notes
    by_name = {kwargs["name"]: data for data, kwargs, _ in layers}
    assert sorted(by_name) == ["em/mask", "em/raw"]
    assert len(by_name["em/raw"]) > 1  # a pyramid
    np.testing.assert_array_equal(np.asarray(by_name["em/raw"][0]), a)
    np.testing.assert_array_equal(
        np.asarray(by_name["em/mask"]), a[:, :8, :8]
    )  # one level: no list
    listings = [p for p in hits if p.endswith("/")]
    levels = [p for p in hits if "/em/raw/s" in p and p.endswith("/attributes.json")]
    assert len(listings) == 4, hits  # c.n5/, em/, em/raw/, em/mask/
    assert len(levels) == 3, hits  # s0-s2
    assert all(n == 1 for n in hits.values()), {p: n for p, n in hits.items() if n > 1}
    assert not [
        p for p in hits if p.rsplit("/", 1)[-1] in (".zgroup", ".zattrs", ".zarray", ".zmetadata")
    ], hits
