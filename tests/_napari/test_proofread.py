"""Proofreading in a real napari viewer: a local N5 labels pyramid opens editable (level 0,
single-scale); paint, fill, erase, undo/redo with the layer's own API; save_edits and the
Save labels widget write every level as export would; read-only labels say why once."""

from __future__ import annotations

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export, save_edits
from napari_n5zarr._napari import proofread
from napari_n5zarr.write.editable import EditableLevel, ReadOnlyLevel
from napari_n5zarr.write.edits import NotEditableError

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (12, 40, 50)


def labels() -> np.ndarray:
    data = np.zeros(SHAPE, dtype="uint64")
    data[:, 5:20, 5:30] = 3
    data[2:9, 22:35, 10:45] = 8
    return data


def levels_of(dest):
    names = sorted((p.name for p in dest.iterdir() if p.name.startswith("s")), key=lambda n: int(n[1:]))
    return [np.asarray(napari_n5zarr.open(dest / n)[...]).T for n in names]


@pytest.fixture
def pyramid(tmp_path):
    dest = tmp_path / "seg.n5"
    export(labels(), dest, labels=True, chunks=8)
    return dest


def open_layer(viewer, path):
    (layer,) = viewer.open(str(path), plugin="napari-n5zarr")
    return layer


def test_paint_fill_erase_undo_then_save_gives_every_level_of_export(make_napari_viewer, pyramid, tmp_path):
    viewer = make_napari_viewer()
    layer = open_layer(viewer, pyramid)
    assert isinstance(layer.data, EditableLevel)
    assert not layer.multiscale
    assert layer.metadata["napari_n5zarr"]["editable"]
    viewer.dims.set_point(0, 4)
    want = labels()
    layer.brush_size = 5
    layer.paint((4, 30, 30), 5)
    assert layer.data[4, 30, 30] == 5
    assert layer.data.modified
    layer.undo()
    assert layer.data[4, 30, 30] == want[4, 30, 30]
    layer.redo()
    assert layer.data[4, 30, 30] == 5
    layer.fill((4, 10, 10), 11)  # the label-3 region of this plane (contiguous, 2D fill)
    layer.paint((4, 0, 0), 0)  # erase: paint background
    assert layer.data[4, 10, 10] == 11
    edited = np.asarray(layer.data[...])
    assert (edited != want).sum() > 0
    result = save_edits(layer)
    assert result.total_blocks > 0
    assert not layer.data.modified
    export(edited, tmp_path / "ref.n5", labels=True, chunks=8)
    for got, ref in zip(levels_of(pyramid), levels_of(tmp_path / "ref.n5"), strict=True):
        np.testing.assert_array_equal(got, ref)
    # reopened in a new layer: the edits are there
    again = open_layer(viewer, pyramid)
    np.testing.assert_array_equal(np.asarray(again.data[...]), edited)


def test_save_widget_and_status(make_napari_viewer, pyramid, tmp_path):
    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    assert widget.save() == "nothing to save"
    viewer.dims.set_point(0, 6)
    layer.brush_size = 9
    layer.paint((6, 20, 20), 42)
    text = widget.save()
    assert text.startswith("saved seg")
    assert "blocks" in text
    assert widget.status.value == text
    assert (levels_of(pyramid)[0][6] == 42).any()
    assert (levels_of(pyramid)[1][3] == 42).any()
    viewer.screenshot(str(tmp_path / "shot.png"), canvas_only=False)


def test_closing_with_unsaved_edits_asks_first(make_napari_viewer, pyramid, monkeypatch):
    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    asked = []
    monkeypatch.setattr(proofread.CloseGuard, "confirm", lambda self, names: asked.append(names) or False)
    layer.paint((0, 1, 1), 9)
    viewer.window._qt_window.close()
    assert asked == [["seg.n5"]]
    assert viewer.window._qt_window.isVisible()
    save_edits(layer)
    assert proofread.edited_layers(viewer) == []  # a close now would not ask (napari's own teardown closes it)


def test_read_only_labels_say_why_once(make_napari_viewer, pyramid, tmp_path, monkeypatch):
    import zipfile

    zpath = tmp_path / "seg.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        for p in sorted(pyramid.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(pyramid))
    told = []
    monkeypatch.setattr("napari_n5zarr._napari.layers.notify_napari", lambda level, msg: told.append(msg))
    viewer = make_napari_viewer()
    layer = open_layer(viewer, zpath)
    assert "read_only" in layer.metadata["napari_n5zarr"]
    assert layer.multiscale
    assert not layer.editable  # napari disables the paint tools; their keys tell why, once
    for key in proofread.PAINT_KEYS:
        layer.keymap[next(k for k in layer.keymap if str(k) == key)](layer)
    assert len(told) == 1
    assert "n5zarr convert" in told[0]
    assert "not a local folder" in told[0]
    with pytest.raises(NotEditableError, match="n5zarr convert"):
        save_edits(layer)


def test_single_level_read_only_drops_writes_with_one_notice(tmp_path):
    told = []
    level = ReadOnlyLevel(np.zeros((4, 4), dtype="uint8"), "a zip", told.append)
    level[0, 0] = 3
    level[1, 1] = 3
    assert told == ["a zip"]
    assert level[0, 0] == 0
