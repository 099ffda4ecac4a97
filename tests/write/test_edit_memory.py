"""Saved blocks leave memory (issue 31, item 2): an editable level holds only its unsaved
blocks, and every reader of the same data sees the saved values, not cached old ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import napari_n5zarr
from napari_n5zarr.read.images import open_images
from napari_n5zarr.write.edit.editable import open_editable


def test_saved_blocks_leave_memory_and_readers_see_them(tmp_path: Path) -> None:
    labels = np.zeros((16, 64, 64), "uint32")
    labels[:, 10:20, 10:20] = 4
    napari_n5zarr.export(labels, tmp_path / "seg.n5", chunks=16, levels=2, labels=True)
    (image,) = open_images(tmp_path / "seg.n5").images
    base = image.levels[0]
    assert base[5, 12, 12] == 4  # decoded into the shared block cache
    level = open_editable(tmp_path / "seg.n5", base=base)
    level[5, 0:40, 0:40] = 9  # touches 9 blocks of 16^3
    assert level.unsaved_blocks == 9
    napari_n5zarr.save_edits(level)
    assert level.unsaved_blocks == 0
    assert level._blocks == {}  # nothing held once saved
    assert level._read_as == {}
    expected = labels[5].copy()
    expected[0:40, 0:40] = 9
    np.testing.assert_array_equal(level[5], expected)  # the layer, read afresh from disk
    np.testing.assert_array_equal(
        np.asarray(base[5]), expected
    )  # the reader's level: no stale cache
    level[5, 0:2, 0:2] = 4  # editing goes on after a save, against the saved values
    assert level.unsaved_blocks == 1
    napari_n5zarr.save_edits(level)
    expected[0:2, 0:2] = 4
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "seg.n5/s0")[...].T[5], expected)


def test_a_uniform_block_as_read_is_not_held_as_a_full_copy(tmp_path: Path) -> None:
    """New labels read as all 0: what a touched block held before the edit costs one value,
    not a block; the save still writes exactly the changed voxels."""
    labels = np.zeros((64, 32, 32), "uint64")
    labels[32:] = np.arange(32, dtype="uint64")  # the second block is not uniform
    napari_n5zarr.export(labels, tmp_path / "seg.n5", chunks=32, labels=True)
    level = open_editable(tmp_path / "seg.n5")
    level[5, 3, 3] = 7  # in the all-0 block (0, 0, 0)
    level[40, 3, 3] = 7  # in block (1, 0, 0), many values
    before = level._read_as
    assert sorted(before) == [(0, 0, 0), (1, 0, 0)]
    assert before[(0, 0, 0)].strides == (0, 0, 0)  # one value, broadcast
    assert before[(1, 0, 0)].strides != (0, 0, 0)
    np.testing.assert_array_equal(before[(0, 0, 0)], labels[:32])
    napari_n5zarr.save_edits(level)
    labels[5, 3, 3] = labels[40, 3, 3] = 7
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "seg.n5/s0")[...].T, labels)
