"""Real protocols: S3 (moto's server on 127.0.0.1) and HTTP (a local http.server)."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zarr

import napari_n5zarr

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
JAVA = CORPUS / "zarr_implementations/data/n5-java.n5"
EXPECTED = np.load(CORPUS / "expected_derived/zarr_implementations_reference_image.npy").T


@pytest.fixture(scope="module")
def http_root() -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(CORPUS))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_http_dataset(http_root: str) -> None:
    arr = napari_n5zarr.open(f"{http_root}/zarr_implementations/data/n5-java.n5/lz4")
    np.testing.assert_array_equal(arr[...], EXPECTED)


def test_http_container_lists_children(http_root: str) -> None:
    root = napari_n5zarr.open(f"{http_root}/zarr_implementations/data/n5-java.n5")
    assert isinstance(root, zarr.Group)
    assert sorted(root.array_keys()) == ["bzip2", "gzip", "lz4", "raw", "xz"]


def test_http_missing_is_an_error(http_root: str) -> None:
    with pytest.raises(FileNotFoundError):
        napari_n5zarr.open(f"{http_root}/does-not-exist.n5")


def test_s3_container_and_dataset(s3_bucket: dict) -> None:
    root = napari_n5zarr.open("s3://n5-data/java.n5", storage_options=s3_bucket)
    assert sorted(root.array_keys()) == ["bzip2", "gzip", "lz4", "raw", "xz"]
    np.testing.assert_array_equal(root["gzip"][...], EXPECTED)
    arr = napari_n5zarr.open("s3://n5-data/java.n5/xz", storage_options=s3_bucket)
    np.testing.assert_array_equal(arr[:, 100:200, 50:450], EXPECTED[:, 100:200, 50:450])


def test_s3_write_then_read(s3_bucket: dict) -> None:
    root = napari_n5zarr.open("s3://n5-data/new.n5", mode="w", storage_options=s3_bucket)
    data = np.arange(60, dtype="int16").reshape(10, 6)
    arr = napari_n5zarr.create_dataset(
        root,
        "d",
        shape=data.shape,
        dtype=data.dtype,
        chunks=(4, 4),
        compression={"type": "zstd", "level": 1},
    )
    arr[...] = data
    np.testing.assert_array_equal(
        napari_n5zarr.open("s3://n5-data/new.n5/d", storage_options=s3_bucket)[...], data
    )
    s3fs = pytest.importorskip("s3fs")
    fs = s3fs.S3FileSystem(**s3_bucket)
    fs.invalidate_cache()
    assert fs.cat("n5-data/new.n5/attributes.json") == b'{\n  "n5": "4.0.0"\n}'
    assert fs.exists("n5-data/new.n5/d/attributes.json")
    assert fs.exists("n5-data/new.n5/d/zarr.json")


def test_s3_missing_is_an_error(s3_bucket: dict) -> None:
    with pytest.raises(FileNotFoundError):
        napari_n5zarr.open("s3://n5-data/nothing.n5", storage_options=s3_bucket)


def test_s3_plane_requests_all_its_blocks_at_once(tmp_path: Path, counting_http) -> None:
    """botocore keeps 10 connections per client unless told otherwise: a plane of 15 blocks
    would then wait for two round trips. The S3 endpoint here is a file server on 127.0.0.1
    (an S3 GET of ``bucket/key`` is a GET of that path) adding 200 ms to each GET."""
    pytest.importorskip("s3fs")
    from napari_n5zarr.read import levels as lv

    data = np.random.default_rng(3).integers(
        1, 60000, size=(40, 24, 12), dtype=np.uint16
    )  # N5 order
    root = napari_n5zarr.open(tmp_path / "bkt" / "a.n5", mode="a")
    napari_n5zarr.create_dataset(root, "d", shape=data.shape, dtype="uint16", chunks=(8, 8, 4),
                                 compression={"type": "gzip", "level": -1})[...] = data  # fmt: skip
    url, state = counting_http(tmp_path, latency=0.2)
    opts = {
        "endpoint_url": url,
        "key": "k",
        "secret": "s",
        "client_kwargs": {"region_name": "us-east-1"},
    }
    level = lv.dask_level(
        napari_n5zarr.open("s3://bkt/a.n5/d", storage_options=opts), report=pytest.fail
    )
    state["peak"] = 0
    state["gets"].clear()
    assert np.array_equal(level[5].compute(), data.T[5])
    assert len(state["gets"]) == 5 * 3  # the plane's blocks
    assert state["peak"] == 15, state["peak"]  # every one in flight together
