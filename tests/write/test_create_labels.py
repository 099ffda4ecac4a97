"""``napari_n5zarr.create_labels``: empty labels for an image, metadata only (issue 31, item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.errors import InvalidArgumentError
from napari_n5zarr.read.images import open_images
from napari_n5zarr.write.edit.editable import editable_reason, open_editable


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _only(location: Path):
    found = open_images(location)
    assert found.error is None, found.error
    (image,) = found.images
    return image


@pytest.fixture
def image(tmp_path: Path) -> Path:
    a = (np.arange(20 * 48 * 64).reshape(20, 48, 64) % 200).astype("uint8")
    napari_n5zarr.export(a, tmp_path / "em.n5", chunks=16, scale=(4.0, 2.0, 2.0), translate=(100.0, 50.0, 10.0),
                         units="nanometer")  # fmt: skip
    return tmp_path / "em.n5"


def test_like_a_path_overlays_the_image_and_writes_no_block(image: Path, tmp_path: Path) -> None:
    out = napari_n5zarr.create_labels(tmp_path / "seg.n5", like=image)
    assert out == str(tmp_path / "seg.n5")
    assert all(f.endswith(("attributes.json", "zarr.json")) for f in _files(tmp_path / "seg.n5"))
    em, seg = _only(image).multiscale, _only(tmp_path / "seg.n5").multiscale
    assert seg.is_labels
    assert seg.shapes[0] == em.shapes[0]
    np.testing.assert_allclose(seg.scale, em.scale)
    np.testing.assert_allclose(seg.translate, em.translate)
    assert list(seg.units) == list(em.units)
    assert editable_reason(tmp_path / "seg.n5") is None
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "seg.n5/s0")[...], 0)
    ome = json.loads((tmp_path / "seg.n5/zarr.json").read_text())["attributes"][
        "ome"
    ]  # OME-NGFF labels, as export
    assert ome["version"] == "0.5"
    assert "image-label" in ome


def test_painted_blocks_are_the_only_blocks(image: Path, tmp_path: Path) -> None:
    napari_n5zarr.create_labels(tmp_path / "seg.n5", like=image, dtype="uint16")
    level = open_editable(tmp_path / "seg.n5")
    level[3, 5:9, 5:9] = 7
    napari_n5zarr.save_edits(level)
    blocks = [f for f in _files(tmp_path / "seg.n5") if not f.endswith(".json")]
    assert "s0/0/0/0" in blocks
    assert all(
        b.split("/")[1:] == ["0", "0", "0"] for b in blocks
    )  # the one block, at each level it reaches
    back = napari_n5zarr.open(tmp_path / "seg.n5/s0")[...].T
    expected = np.zeros((20, 48, 64), "uint16")
    expected[3, 5:9, 5:9] = 7
    np.testing.assert_array_equal(back, expected)


def test_a_terabyte_of_labels_is_metadata(tmp_path: Path) -> None:
    out = Path(
        napari_n5zarr.create_labels(
            tmp_path / "big.n5", shape=(8192, 4096, 4096), dtype="uint64", chunks=64
        )
    )
    assert all(f.endswith(".json") for f in _files(out))
    s0 = napari_n5zarr.open(out / "s0")
    assert s0.shape == (4096, 4096, 8192)  # N5 order
    assert s0.dtype == np.uint64
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        f"s{i}" for i in range(8)
    ]  # to one block
    assert s0[1000:1002, 7, 5000].tolist() == [0, 0]


def test_like_a_layer(tmp_path: Path) -> None:
    layers = pytest.importorskip("napari.layers")
    layer = layers.Image(
        np.zeros((6, 30, 40), "float32"), scale=(3.0, 1.5, 1.5), translate=(9.0, 0.0, 4.5)
    )
    napari_n5zarr.create_labels(tmp_path / "l.n5", like=layer, chunks=8)
    ms = _only(tmp_path / "l.n5").multiscale
    assert tuple(ms.shapes[0][::-1]) == (6, 30, 40)
    np.testing.assert_allclose(ms.scale[::-1], (3.0, 1.5, 1.5))
    np.testing.assert_allclose(ms.translate[::-1], (9.0, 0.0, 4.5))


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({}, "needs like="),
        ({"shape": (4, 0, 4)}, "positive on every axis"),
        ({"shape": (4, 4), "dtype": "float32"}, "integer type"),
        ({"shape": (4, 4), "format": "tiff"}, "format 'tiff'"),
        ({"like": 3}, "like= must be an image layer or a path"),
        ({"like": "/no/such/place.n5"}, "like='/no/such/place.n5'"),
    ],
)
def test_bad_arguments_are_refused_and_write_nothing(tmp_path: Path, kwargs, says) -> None:
    with pytest.raises(InvalidArgumentError, match=None) as caught:
        napari_n5zarr.create_labels(tmp_path / "x.n5", **kwargs)
    assert says in str(caught.value)
    assert not (tmp_path / "x.n5").exists()


def test_existing_labels_are_not_replaced_silently(image: Path, tmp_path: Path) -> None:
    napari_n5zarr.create_labels(tmp_path / "seg.n5", like=image)
    with pytest.raises(FileExistsError):
        napari_n5zarr.create_labels(tmp_path / "seg.n5", like=image)
    napari_n5zarr.create_labels(tmp_path / "seg.n5", like=image, overwrite=True)


def test_ome_zarr_labels_are_metadata_read_by_zarr_alone(image: Path, tmp_path: Path) -> None:
    """format="ome-zarr": a standard OME-Zarr labels pyramid, no chunk written; zarr-python
    without this package reads zeros of the image's shape, and the OME labels metadata."""
    import subprocess
    import sys

    out = Path(
        napari_n5zarr.create_labels(tmp_path / "seg.ome.zarr", like=image, format="ome-zarr")
    )
    assert all(f.endswith("zarr.json") for f in _files(out))
    probe = (
        "import json, sys, zarr\n"
        f"g = zarr.open_group({str(out)!r}, mode='r')\n"
        "a = g['s0']\n"
        "assert 'napari_n5zarr' not in sys.modules\n"
        "print(json.dumps({'shape': a.shape, 'max': int(a[...].max()), 'dtype': str(a.dtype),"
        " 'labels': 'image-label' in g.attrs['ome']}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "shape": [20, 48, 64],
        "max": 0,
        "dtype": "uint32",
        "labels": True,
    }
