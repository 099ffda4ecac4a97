"""One calibration whatever the route (local, HTTP, S3, the info walk), inherited from
parent groups through the store; plain Zarr v3 arrays in their own C order."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

import napari_n5zarr
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.read.pyramid_walk import detect

CORPUS_N5 = Path(__file__).parent / "data/corpus/neuroglancer/testdata/datasource/n5"


def calibration(path_or_url, **kwargs) -> tuple:
    notes = []
    (layer,) = read_path(path_or_url, notify=lambda level, msg: notes.append(msg), **kwargs)
    assert notes == []
    kw = layer[1]
    return kw["scale"], kw["translate"], kw["units"], kw["axis_labels"]


def info_calibration(path_or_url) -> tuple:
    """What ``n5zarr info`` and the browser see: the walk's detect on the opened node."""
    (ms,) = detect(napari_n5zarr.open(path_or_url))
    return ms.scale, ms.translate, ms.units


@pytest.fixture
def served():
    """``served(folder)`` -> base URL of a plain HTTP server (no folder listings) on 127.0.0.1."""
    servers = []

    class NoListing(http.server.SimpleHTTPRequestHandler):
        def list_directory(self, path):
            self.send_error(404)

        def log_message(self, *args):
            pass

    def serve(folder: Path) -> str:
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(NoListing, directory=str(folder))
        )
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def pyramid(tmp_path) -> Path:
    """c.n5/raw: N5 Viewer pyramid, resolution on the group only (s0, s1 inherit it)."""
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    raw = root.create_group(
        "raw", attributes={"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}
    )
    for k in range(2):
        data = np.arange(6 * 12 * 20 // 8**k, dtype="uint16").reshape(
            20 // 2**k, 12 // 2**k, 6 // 2**k
        )
        napari_n5zarr.create_dataset(
            raw,
            f"s{k}",
            shape=data.shape,
            dtype="uint16",
            chunks=(8, 8, 4),
            attributes={"downsamplingFactors": [2**k] * 3},
        )[...] = data
    return tmp_path / "c.n5"


def test_level_opened_alone_inherits_the_group_resolution_locally_and_over_http(pyramid, served):
    base = served(pyramid.parent)
    for level, scale, translate in (
        ("s0", (40.0, 4.0, 4.0), (0.0, 0.0, 0.0)),
        ("s1", (80.0, 8.0, 8.0), (20.0, 2.0, 2.0)),
    ):
        local = calibration(pyramid / "raw" / level)
        assert local == (scale, translate, ("nanometer",) * 3, ("z", "y", "x"))
        assert calibration(f"{base}/c.n5/raw/{level}") == local
        assert calibration(f"file://{pyramid}/raw/{level}") == local
        assert info_calibration(f"{base}/c.n5/raw/{level}") == info_calibration(
            pyramid / "raw" / level
        )


def test_corpus_n5viewer_modern_s0_same_everywhere(served):
    if not CORPUS_N5.is_dir():
        pytest.skip("corpus missing")
    base = served(CORPUS_N5)
    local = calibration(CORPUS_N5 / "n5_viewer_multiscale_modern" / "s0")
    assert local[0] == (20.0, 10.0)
    assert local[2] == ("second", "nanometer")  # from the parent group
    assert calibration(f"{base}/n5_viewer_multiscale_modern/s0") == local
    assert info_calibration(f"{base}/n5_viewer_multiscale_modern/s0")[0] == (10.0, 20.0)


def test_level_opened_alone_over_s3(pyramid, s3_bucket):
    boto3 = pytest.importorskip("boto3")
    s3 = boto3.client(
        "s3",
        endpoint_url=s3_bucket["endpoint_url"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    for f in pyramid.rglob("*"):
        if f.is_file():
            s3.put_object(
                Bucket="n5-data",
                Key="cal/c.n5/" + f.relative_to(pyramid).as_posix(),
                Body=f.read_bytes(),
            )
    import fsspec

    with (
        fsspec.config.set(
            {
                "s3": {
                    "endpoint_url": s3_bucket["endpoint_url"],
                    "key": "testing",
                    "secret": "testing",
                }
            }
        )
        if hasattr(fsspec.config, "set")
        else _s3_conf(s3_bucket)
    ):
        remote = calibration("s3://n5-data/cal/c.n5/raw/s0")
    assert remote == calibration(pyramid / "raw" / "s0")


class _s3_conf:  # a context manager
    def __init__(self, bucket):
        self.bucket = bucket

    def __enter__(self):
        import fsspec.config

        self.saved = dict(fsspec.config.conf)
        fsspec.config.conf["s3"] = {
            "endpoint_url": self.bucket["endpoint_url"],
            "key": "testing",
            "secret": "testing",
        }

    def __exit__(self, *exc):
        import fsspec.config

        fsspec.config.conf.clear()
        fsspec.config.conf.update(self.saved)


def test_plain_zarr_v3_array_is_shown_in_its_own_c_order(tmp_path):
    data = np.arange(5 * 7 * 9, dtype="uint16").reshape(5, 7, 9)
    array = zarr.create_array(
        tmp_path / "plain.zarr", shape=data.shape, dtype=data.dtype, chunks=(2, 4, 4)
    )
    array[...] = data
    (layer,) = read_path(tmp_path / "plain.zarr", notify=pytest.fail)
    assert layer[0].shape == (5, 7, 9)
    np.testing.assert_array_equal(np.asarray(layer[0]), data)
    (ms,) = detect(napari_n5zarr.open(tmp_path / "plain.zarr"))
    assert ms.shapes[0] == (9, 7, 5)  # described in N5 order like every array


def test_plain_zarr_v3_group_with_ngff(tmp_path):
    data = np.arange(4 * 6 * 8, dtype="uint8").reshape(4, 6, 8)
    ome = {"multiscales": [{"version": "0.4", "axes": [{"name": "z", "type": "space", "unit": "micrometer"}, {"name": "y", "type": "space", "unit": "micrometer"}, {"name": "x", "type": "space", "unit": "micrometer"}],
           "datasets": [{"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [3.0, 1.0, 0.5]}]}]}]}  # fmt: skip
    group = zarr.open_group(tmp_path / "ngff.zarr", mode="w", attributes=ome)
    group.create_array("0", shape=data.shape, dtype=data.dtype, chunks=(2, 3, 4))[...] = data
    (layer,) = read_path(tmp_path / "ngff.zarr", notify=pytest.fail)
    np.testing.assert_array_equal(np.asarray(layer[0]), data)
    assert layer[1]["scale"] == (3.0, 1.0, 0.5)


@pytest.mark.napari
def test_plain_zarr_v3_in_n5zarr_view(make_napari_viewer, tmp_path):
    from napari_n5zarr._napari.viewer_launch import add_to_viewer

    data = np.zeros((40, 90), "uint8")
    data[:, :30] = 255  # a wide array: left third bright
    zarr.create_array(tmp_path / "wide.zarr", shape=data.shape, dtype=data.dtype, chunks=(16, 16))[
        ...
    ] = data
    viewer = make_napari_viewer()
    (layer,) = add_to_viewer(viewer, str(tmp_path / "wide.zarr"))
    assert layer.data.shape == (40, 90)
    np.testing.assert_array_equal(np.asarray(layer.data), data)
