"""3D never loads a whole level (issue 31, item 3): an editable labels layer bigger than
N5ZARR_3D_MAX_BYTES shows a coarser level in 3D, read-only, and its level 0 (edits kept) in 2D."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari.view_3d import editable_of
from napari_n5zarr.write.edit.editable import EditableLevel, ReadOnlyLevel


@pytest.fixture
def big_labels(tmp_path: Path, monkeypatch) -> Path:
    labels = np.zeros((32, 128, 128), "uint32")  # 2 MiB: "big" under a 300 KB bound
    labels[:, 40:80, 40:80] = 3
    napari_n5zarr.export(
        labels, tmp_path / "seg.n5", chunks=16, levels=3, labels=True, scale=(2.0, 1.0, 1.0)
    )
    monkeypatch.setenv("N5ZARR_3D_MAX_BYTES", "300000")
    return tmp_path / "seg.n5"


def test_3d_shows_a_level_that_fits_and_2d_edits_level_0_again(
    make_napari_viewer, big_labels, monkeypatch
) -> None:
    asked: list[int] = []
    original = EditableLevel.__getitem__

    def spy(self, key):
        out = original(self, key)
        asked.append(int(np.asarray(out).nbytes))
        return out

    monkeypatch.setattr(EditableLevel, "__getitem__", spy)
    told: list[str] = []
    monkeypatch.setattr("napari.utils.notifications.show_info", told.append)
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(big_labels), plugin="napari-n5zarr")
    level0 = layer.data
    assert isinstance(level0, EditableLevel)
    level0[5, 50:60, 50:60] = 7  # an unsaved edit
    scale, translate = tuple(layer.scale), tuple(layer.translate)
    asked.clear()
    viewer.dims.ndisplay = 3
    assert isinstance(layer.data, ReadOnlyLevel)
    assert layer.data.stands_for is level0
    assert np.prod(layer.data.shape) * 4 <= 300_000  # level 2: 32 x 32 x 32 (z halved once)
    assert not asked or max(asked) <= 300_000  # level 0 was never read whole
    assert any("3D shows seg.n5 from pyramid level" in t for t in told)
    np.testing.assert_allclose(
        layer.extent.world, [[-1.0, -0.5, -0.5], [63.0, 127.5, 127.5]], atol=2.0
    )  # where level 0 lies
    assert editable_of(layer) is level0
    assert level0.unsaved_blocks == 1  # still known as unsaved in 3D (the marker, Save)
    viewer.dims.ndisplay = 2
    assert layer.data is level0
    assert tuple(layer.scale) == scale
    assert tuple(layer.translate) == translate
    assert int(layer.data[5, 55, 55]) == 7  # nothing lost
    layer.data[20, 100:102, 100:102] = 8  # editing resumes at level 0 (another block)
    assert level0.unsaved_blocks == 2


def test_save_in_3d_saves_level_0(make_napari_viewer, big_labels) -> None:
    from napari_n5zarr._napari.proofread import save_all

    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(big_labels), plugin="napari-n5zarr")
    layer.data[5, 50:60, 50:60] = 7
    viewer.dims.ndisplay = 3
    assert "saved" in save_all(viewer)
    assert int(napari_n5zarr.open(big_labels / "s0")[55, 55, 5]) == 7


def test_small_labels_stay_editable_in_3d(make_napari_viewer, tmp_path: Path) -> None:
    napari_n5zarr.export(
        np.zeros((8, 16, 16), "uint8"), tmp_path / "small.n5", chunks=8, labels=True
    )
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(tmp_path / "small.n5"), plugin="napari-n5zarr")
    viewer.dims.ndisplay = 3
    assert isinstance(layer.data, EditableLevel)
