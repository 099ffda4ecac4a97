"""Building layers costs metadata only, whatever the declared size; many datasets do not
hang; a corrupt block leaves a usable layer."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari import layers, reader
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.read import levels as lv

METADATA = {"attributes.json", "zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"}


@pytest.fixture
def count_reads(monkeypatch):
    """Paths of every file read through zarr's LocalStore (relative to nothing: full paths)."""
    import zarr.storage._local as local

    reads: list[str] = []
    original = local._get

    def counting(p, *args, **kwargs):
        reads.append(Path(p).as_posix())
        return original(p, *args, **kwargs)

    monkeypatch.setattr(local, "_get", counting)
    import napari_n5zarr.storage.files as safe  # SafeLocalStore and the zarr-free reader read files themselves

    original_safe = safe.read_regular_file

    def counting_safe(p, *args, **kwargs):
        reads.append(Path(p).as_posix())
        return original_safe(p, *args, **kwargs)

    monkeypatch.setattr(safe, "read_regular_file", counting_safe)
    return reads


def data_reads(reads: list[str]) -> list[str]:
    return [r for r in reads if r.rsplit("/", 1)[-1] not in METADATA]


def graph_size(level) -> int:
    return len(level.__dask_graph__()) if hasattr(level, "__dask_graph__") else 0


@pytest.mark.parametrize(
    ("shape", "blocks", "dtype"),
    [
        ((100000, 100000), (1, 1), "uint8"),
        ((2**32 - 1, 2**32 - 1), (1, 1), "uint8"),
        ((2**32 - 1, 2**32 - 1), (512, 512), "uint16"),
        ((2**63 - 1, 2**63 - 1), (512, 512), "uint16"),  # N5 dimensions are Java longs (issue 27)
        ((100000, 100000, 20000), (64, 64, 64), "uint8"),  # N5 order: x, y, z
    ],
)
def test_huge_sparse_dataset_opens_with_metadata_and_a_bounded_sample(
    tmp_path, count_reads, shape, blocks, dtype
):
    root = napari_n5zarr.open(tmp_path / "h.n5", mode="w")
    array = napari_n5zarr.create_dataset(root, "big", shape=shape, dtype=dtype, chunks=blocks)
    centre = tuple(s // 2 for s in shape)  # 4 x 4 pixels of data at the centre
    array[
        tuple(slice(c, c + 4) for c in centre[:2]) + tuple(slice(c, c + 1) for c in centre[2:])
    ] = 7
    count_reads.clear()
    (layer,) = read_path(tmp_path / "h.n5" / "big", notify=pytest.fail)
    data, kwargs, _ = layer
    levels = data if kwargs["multiscale"] else [data]
    assert tuple(levels[0].shape) == shape[::-1]
    assert len(data_reads(count_reads)) <= lv.SAMPLE_BLOCKS  # the contrast sample only
    assert all(graph_size(level) <= lv.MAX_TASKS for level in levels)
    assert max(levels[-1].shape[-2:]) <= lv.PREVIEW_EDGE  # napari can show the coarsest whole
    assert kwargs["contrast_limits"] in (
        (0.0, 1.0),
        (0.0, 7.0),
    )  # a sparse sample: fill value, maybe the data
    # a tile at the centre reads the blocks it shows, and holds the data
    count_reads.clear()
    c = tuple(s // 2 for s in shape[::-1])
    tile = np.asarray(levels[0][(*c[:-2], slice(c[-2], c[-2] + 4), slice(c[-1], c[-1] + 4))])
    assert (tile == 7).all()
    per_axis = [math.ceil(4 / b) + 1 for b in blocks[:2]]
    assert len(data_reads(count_reads)) <= math.prod(per_axis)


def test_ordinary_levels_have_dask_views_with_whole_blocks(tmp_path):
    import dask.array as da

    root = napari_n5zarr.open(tmp_path / "n.n5", mode="w")
    napari_n5zarr.create_dataset(
        root, "a", shape=(1000, 800, 60), dtype="uint16", chunks=(64, 64, 16)
    )
    (layer,) = read_path(tmp_path / "n.n5" / "a", notify=pytest.fail)
    view = layer[0].to_dask()  # napari gets the reader; dask users its dask view
    assert isinstance(view, da.Array)
    assert all(
        c % b == 0 or c == s
        for c, b, s in zip(view.chunksize, (16, 64, 64), (60, 800, 1000), strict=True)
    )


def test_thousands_of_datasets_open_nothing_and_say_so(tmp_path, count_reads):
    root = napari_n5zarr.open(tmp_path / "many.n5", mode="w")
    for i in range(layers.MAX_CHILDREN + 10):
        napari_n5zarr.create_dataset(root, f"d{i}", shape=(8, 8), dtype="uint8", chunks=(8, 8))
    count_reads.clear()
    notes = []
    assert read_path(tmp_path / "many.n5", notify=lambda level, msg: notes.append(msg)) == []
    assert len(notes) == 1
    assert "N5 browser" in notes[0]
    assert "no layers" in notes[0]
    assert len(count_reads) <= 6  # the root's metadata files: not one read per dataset


def test_more_pyramids_than_max_layers_open_nothing(tmp_path):
    root = napari_n5zarr.open(tmp_path / "some.n5", mode="w")
    for i in range(layers.MAX_LAYERS + 1):
        napari_n5zarr.create_dataset(root, f"d{i}", shape=(8, 8), dtype="uint8", chunks=(8, 8))
    notes = []
    assert read_path(tmp_path / "some.n5", notify=lambda level, msg: notes.append(msg)) == []
    assert len(notes) == 1
    assert f"more than {layers.MAX_LAYERS} images" in notes[0]
    few = napari_n5zarr.open(tmp_path / "few.n5", mode="w")
    for i in range(3):
        napari_n5zarr.create_dataset(few, f"d{i}", shape=(8, 8), dtype="uint8", chunks=(8, 8))
    assert len(read_path(tmp_path / "few.n5", notify=pytest.fail)) == 3


@pytest.mark.napari
def test_dropping_thousands_of_datasets_opens_the_browser(make_napari_viewer, tmp_path):
    root = napari_n5zarr.open(tmp_path / "many.n5", mode="w")
    for i in range(layers.MAX_CHILDREN + 1):
        napari_n5zarr.create_dataset(root, f"d{i}", shape=(8, 8), dtype="uint8", chunks=(8, 8))
    viewer = make_napari_viewer()
    viewer.open(str(tmp_path / "many.n5"), plugin="napari-n5zarr")
    assert len(viewer.layers) == 0
    assert "N5 browser" in viewer.window.dock_widgets


def _corrupt(tmp_path) -> tuple[Path, np.ndarray]:
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    data = (np.arange(64 * 64).reshape(64, 64) % 200 + 20).astype("uint8")  # napari order y, x
    napari_n5zarr.create_dataset(
        root, "img", shape=(64, 64), dtype="uint8", chunks=(32, 32), compression={"type": "gzip"}
    )[...] = data.T
    block = tmp_path / "c.n5" / "img" / "1" / "0"  # N5 block x=1, y=0: napari [0:32, 32:64]
    raw = block.read_bytes()
    block.write_bytes(raw[:16] + b"\x00garbage, not gzip" * 4)
    return tmp_path / "c.n5" / "img", data


def test_corrupt_block_reads_as_fill_value_with_one_notice(tmp_path):
    path, data = _corrupt(tmp_path)
    notes = []
    (layer,) = read_path(path, notify=lambda level, msg: notes.append((level, msg)))
    expected = data.copy()
    expected[0:32, 32:64] = 0
    for _ in range(2):  # read twice: one notice only
        np.testing.assert_array_equal(np.asarray(layer[0]), expected)
    assert len(notes) == 1, notes
    assert notes[0][0] == "warning"
    assert "fill value" in notes[0][1]


@pytest.mark.napari
def test_corrupt_block_in_first_slice_leaves_a_drawn_layer(
    make_napari_viewer, tmp_path, monkeypatch
):
    path, _data = _corrupt(tmp_path)
    notes = []
    monkeypatch.setattr(reader, "_notify", lambda level, msg: notes.append(msg))
    viewer = make_napari_viewer(show=True)
    viewer.open(str(path), plugin="napari-n5zarr")
    assert len(viewer.layers) == 1
    shot = viewer.screenshot(canvas_only=True, flash=False)
    grey = shot[..., :3].reshape(-1, 3)
    assert len(np.unique(grey, axis=0)) > 10  # the data is drawn, not the welcome screen
    assert any("fill value" in n for n in notes), notes


@pytest.mark.napari
def test_huge_single_level_is_shown_through_preview_levels(make_napari_viewer, tmp_path):
    root = napari_n5zarr.open(tmp_path / "h.n5", mode="w")
    array = napari_n5zarr.create_dataset(
        root,
        "big",
        shape=(100000, 100000),
        dtype="uint8",
        chunks=(1024, 1024),
        compression={"type": "gzip"},
    )
    array[45056:55296, 45056:55296] = 200  # a bright square in the middle (N5 order x, y)
    viewer = make_napari_viewer(show=True)
    viewer.open(str(tmp_path / "h.n5" / "big"), plugin="napari-n5zarr")
    (layer,) = viewer.layers
    assert layer.multiscale
    assert isinstance(layer.data[0], lv.LevelReader)
    layer.contrast_limits = (0, 200)
    shot = viewer.screenshot(canvas_only=True, flash=False)[..., :3].mean(axis=-1)
    h, w = shot.shape
    assert shot[h // 2, w // 2] > 150  # the square is drawn at the centre
    assert shot[h // 2, 2] < 50 or shot[2, w // 2] < 50  # on a dark background
