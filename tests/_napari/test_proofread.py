"""Proofreading in a real napari viewer: a local N5 labels pyramid opens editable (level 0,
single-scale); paint, fill, erase, undo/redo with the layer's own API; save_edits and the
Save labels widget write every level as export would; read-only labels say why once."""

from __future__ import annotations

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export, save_edits
from napari_n5zarr._napari import proofread
from napari_n5zarr.write.edit.editable import EditableLevel, ReadOnlyLevel
from napari_n5zarr.write.edit.save import NotEditableError

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (12, 40, 50)


def labels() -> np.ndarray:
    data = np.zeros(SHAPE, dtype="uint64")
    data[:, 5:20, 5:30] = 3
    data[2:9, 22:35, 10:45] = 8
    return data


def levels_of(dest):
    names = sorted(
        (p.name for p in dest.iterdir() if p.name.startswith("s")), key=lambda n: int(n[1:])
    )
    return [np.asarray(napari_n5zarr.open(dest / n)[...]).T for n in names]


@pytest.fixture
def pyramid(tmp_path):
    dest = tmp_path / "seg.n5"
    export(labels(), dest, labels=True, chunks=8)
    return dest


def open_layer(viewer, path):
    (layer,) = viewer.open(str(path), plugin="napari-n5zarr")
    return layer


def test_paint_fill_erase_undo_then_save_gives_every_level_of_export(
    make_napari_viewer, pyramid, tmp_path
):
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
    assert widget.save() == "no changes"
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
    monkeypatch.setattr(
        proofread.CloseGuard, "ask", lambda self, names: asked.append(names) or "cancel"
    )
    layer.paint((0, 1, 1), 9)
    viewer.window._qt_window.close()
    assert asked == [["seg.n5"]]
    assert viewer.window._qt_window.isVisible()
    save_edits(layer)
    assert (
        proofread.edited_layers(viewer) == []
    )  # a close now would not ask (napari's own teardown closes it)


def test_read_only_labels_say_why_once(make_napari_viewer, pyramid, tmp_path, monkeypatch):
    import zipfile

    zpath = tmp_path / "seg.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        for p in sorted(pyramid.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(pyramid))
    told = []
    monkeypatch.setattr(
        "napari_n5zarr._napari.notices.notify_napari", lambda level, msg: told.append(msg)
    )
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


# --- every route into a viewer: the save shortcut, the close guard, the unsaved marker -------------


def _keymap_action(keymap, name):
    return next((action for key, action in keymap.items() if str(key) == name), None)


def _paint_and_check_route(viewer, layer):
    """``viewer`` is watched: Ctrl+Alt+S bound, the close guard installed; painting marks
    the layer's name; the shortcut saves and the mark goes."""
    assert viewer in proofread._watched
    assert hasattr(viewer.window._qt_window, "_n5zarr_close_guard")
    shortcut = _keymap_action(viewer.keymap, "Ctrl+Alt+S")
    assert shortcut is not None
    name = layer.name
    assert not name.endswith(" *")
    z = layer.data.shape[0] // 2
    viewer.dims.set_point(0, z)
    layer.brush_size = 5
    layer.paint((z, 20, 20), 77)
    assert layer.data.modified
    assert layer.name == name + " *"
    assert proofread.edited_layers(viewer) == [layer]
    shortcut(viewer)
    assert not layer.data.modified
    assert layer.name == name
    assert (np.asarray(layer.data[z]) == 77).any()


def test_route_viewer_open_and_drop(make_napari_viewer, pyramid):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_viewer._qt_open(
        [str(pyramid)], stack=False, plugin="napari-n5zarr"
    )  # what a drop does
    (layer,) = viewer.layers
    _paint_and_check_route(viewer, layer)


def test_route_file_open_sample(make_napari_viewer, tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_N5ZARR_CACHE", str(tmp_path / "cache"))
    viewer = make_napari_viewer(show=True)
    viewer.open_sample("napari-n5zarr", "blobs")
    (layer,) = [layer for layer in viewer.layers if isinstance(layer.data, EditableLevel)]
    _paint_and_check_route(viewer, layer)


def test_route_browser_open(make_napari_viewer, qtbot, pyramid):
    from napari_n5zarr._napari.browser import BrowserWidget

    viewer = make_napari_viewer(show=True)
    browser = BrowserWidget(viewer)
    viewer.window.add_dock_widget(browser, name="N5 browser", area="right")
    browser.load(str(pyramid.parent))
    qtbot.waitUntil(
        lambda: browser.tree_model is not None and not browser.busy and "seg.n5" in browser._items,
        timeout=30_000,
    )
    browser.tree.setCurrentItem(browser._items["seg.n5"])
    browser.open_button.click()
    qtbot.waitUntil(lambda: len(viewer.layers) == 1, timeout=30_000)
    _paint_and_check_route(viewer, viewer.layers[0])


def test_route_n5zarr_view(make_napari_viewer, pyramid, monkeypatch):
    from napari_n5zarr._napari import viewer_launch

    def viewer_factory(*args, **kwargs):
        kwargs.pop("title", None)
        return make_napari_viewer(show=True)

    monkeypatch.setattr("napari.Viewer", viewer_factory)
    viewer = viewer_launch.view(str(pyramid), block=False)
    (layer,) = viewer.layers
    _paint_and_check_route(viewer, layer)


def test_any_viewer_showing_an_editable_level_is_guarded_once_painted(make_napari_viewer, pyramid):
    """Layer data made by the reader but added by hand (a script, another plugin): the
    first paint watches the viewer that shows it, not just the current one."""
    from napari_n5zarr._napari.reader import read_path

    mine = make_napari_viewer(show=True)
    make_napari_viewer()  # the current viewer is another one
    ((data, kwargs, _),) = read_path(pyramid)
    layer = mine.add_labels(data, **kwargs)
    assert mine not in proofread._watched
    _paint_and_check_route_after_first_paint(mine, layer)


def _paint_and_check_route_after_first_paint(viewer, layer):
    layer.paint((0, 1, 1), 5)
    assert viewer in proofread._watched
    assert layer.name.endswith(" *")
    _keymap_action(viewer.keymap, "Ctrl+Alt+S")(viewer)
    assert layer.name == "seg.n5"


# --- what the person sees ----------------------------------------------------------------------------


def _dock(widget):
    from qtpy.QtWidgets import QDockWidget

    dock = widget.native.parent()
    while not isinstance(dock, QDockWidget):
        dock = dock.parent()
    return dock


def test_widget_counts_unsaved_blocks_live(make_napari_viewer, pyramid):
    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    assert widget.status.value == "no changes"
    viewer.dims.set_point(0, 4)
    layer.paint((4, 4, 4), 9)  # brush 10 around (4, 4): one 8^3 block... or a few
    n = layer.data.unsaved_blocks
    assert n >= 1
    assert widget.status.value == f"unsaved: seg.n5: {n} block{'s' if n > 1 else ''}"
    layer.paint((4, 36, 45), 9)
    assert layer.data.unsaved_blocks > n
    assert str(layer.data.unsaved_blocks) in widget.status.value
    text = widget.save()
    assert text.startswith("saved seg.n5: ")
    assert layer.name == "seg.n5"


def test_undo_back_to_the_saved_state_is_no_changes(make_napari_viewer, pyramid):
    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    viewer.dims.set_point(0, 4)
    layer.paint((4, 30, 30), 5)
    assert layer.name == "seg.n5 *"
    layer.undo()
    assert not layer.data.modified
    assert layer.name == "seg.n5"
    assert widget.status.value == "no changes"
    assert widget.save() == "no changes"
    layer.redo()
    assert layer.name == "seg.n5 *"
    widget.save()
    layer.undo()  # now the saved state is the painted one: undo is an edit
    assert layer.name == "seg.n5 *"
    layer.redo()
    assert layer.name == "seg.n5"
    assert proofread.save_all(viewer) == "no changes"


def test_renamed_layer_saves_and_exports_under_its_own_name(make_napari_viewer, pyramid, tmp_path):
    from napari_n5zarr._napari.writer import write_labels

    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    meta = dict(layer.metadata["napari_n5zarr"])
    layer.paint((0, 1, 1), 5)
    layer.name = "cells *"  # the person renames it, marker and all
    layer.paint((0, 30, 30), 6)
    assert layer.name == "cells *"
    layer.name = "cells"  # ...or without it: the next paint puts it back
    layer.paint((0, 35, 35), 7)
    assert layer.name == "cells *"
    assert layer.metadata["napari_n5zarr"] == meta
    write_labels(str(tmp_path / "copy.n5"), np.asarray(layer.data[...]), {"name": layer.name})
    assert napari_n5zarr.open(tmp_path / "copy.n5").attrs.get("name") == "cells"
    assert proofread.save_all(viewer).startswith("saved cells: ")
    assert layer.name == "cells"
    assert (levels_of(pyramid)[0][0, 35, 35]) == 7


def test_status_wraps_and_never_widens_the_dock(make_napari_viewer, pyramid, qtbot, tmp_path):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1280, 720)
    layer = open_layer(viewer, pyramid)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    qtbot.wait(50)
    dock = _dock(widget)
    before, canvas = dock.width(), viewer.window._qt_viewer.canvas.native.width()
    layer.paint((0, 20, 20), 5)
    widget.save()
    widget.status.value += (
        " " + "and a long explanation, " * 12 + "/a/very/long/path/without/any/space/" * 3
    )
    assert dock.minimumSizeHint().width() <= before  # the dock is never asked to widen
    qtbot.wait(200)
    assert (dock.width(), viewer.window._qt_viewer.canvas.native.width()) == (before, canvas)
    assert (
        widget.status.native.height() > widget.save_button.native.height()
    )  # wrapped: several lines
    viewer.screenshot(str(tmp_path / "long-status.png"), canvas_only=False)


# --- closing: Save / Discard / Cancel ------------------------------------------------------------------


def _close_event(viewer):
    """A close request through the guard (what the window's close button sends): True if it may close."""
    from qtpy.QtGui import QCloseEvent

    window = viewer.window._qt_window
    event = QCloseEvent()
    stopped = window._n5zarr_close_guard.filter.eventFilter(window, event)
    return not stopped


def test_close_question_offers_save_discard_cancel(make_napari_viewer, pyramid, qtbot):
    from qtpy.QtCore import QTimer
    from qtpy.QtWidgets import QApplication, QMessageBox

    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    layer.paint((0, 1, 1), 9)
    seen = []

    def answer(button):
        def click():
            box = QApplication.activeModalWidget()
            if not isinstance(box, QMessageBox):
                QTimer.singleShot(20, click)
                return
            seen.append((box.text(), sorted(b.text().replace("&", "") for b in box.buttons())))
            (
                box.button(button) or box.buttons()[0]
            ).click()  # a box without that button: any, not a hang

        QTimer.singleShot(0, click)

    answer(QMessageBox.StandardButton.Cancel)
    assert not _close_event(viewer)
    assert layer.data.modified
    assert seen[0][1] == ["Cancel", "Discard", "Save"]
    assert "seg.n5" in seen[0][0]
    assert "seg.n5 *" not in seen[0][0]
    answer(QMessageBox.StandardButton.Save)
    assert _close_event(viewer)
    assert not layer.data.modified
    assert levels_of(pyramid)[0][0, 1, 1] == 9
    layer.paint((0, 1, 1), 10)
    answer(QMessageBox.StandardButton.Discard)
    assert _close_event(viewer)
    assert layer.data.modified  # not saved
    assert levels_of(pyramid)[0][0, 1, 1] == 9


def test_close_with_a_failing_save_stays_open_with_the_error(
    make_napari_viewer, pyramid, monkeypatch
):
    import shutil

    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    layer.paint((0, 1, 1), 9)
    errors = []
    monkeypatch.setattr("napari.utils.notifications.show_error", errors.append)
    monkeypatch.setattr(proofread.CloseGuard, "ask", lambda self, names: "save")
    shutil.rmtree(pyramid / "s0")  # the dataset is gone: the save cannot succeed
    (pyramid / "s0").write_text("not a folder")
    assert not _close_event(viewer)
    assert layer.data.modified
    assert errors
    assert "seg.n5 not saved" in errors[0]
    assert "seg.n5 not saved" in widget.status.value
    assert layer.name == "seg.n5 *"


# --- the sample can be reset ---------------------------------------------------------------------------


def test_reset_sample_rebuilds_edited_labels(tmp_path, monkeypatch):
    from napari_n5zarr._napari import sample
    from napari_n5zarr.cli import main

    monkeypatch.setenv("NAPARI_N5ZARR_CACHE", str(tmp_path / "cache"))
    path = sample.make_sample()
    level = EditableLevel(path / "labels")
    level[0, 0, 0] = 12345
    level.save()
    assert EditableLevel(path / "labels")[0, 0, 0] == 12345
    assert sample.make_sample() == path  # kept as edited
    assert EditableLevel(path / "labels")[0, 0, 0] == 12345
    from napari_n5zarr._napari import viewer_launch

    opened = []
    monkeypatch.setattr(
        viewer_launch, "view", lambda path, screenshot=None, **_: opened.append(path)
    )
    assert main(["view", "--reset-sample"]) == 0
    assert opened == [None]  # the sample
    np.testing.assert_array_equal(
        np.asarray(EditableLevel(path / "labels")[...]), sample.blobs()[1]
    )
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [
        sample.SAMPLE_NAME
    ]  # nothing left beside it
    assert main(["view", str(path), "--reset-sample"]) == 2


def test_a_save_from_another_thread_updates_the_window_on_its_thread(
    make_napari_viewer, pyramid, qtbot
):
    """The library reports a save from the saving thread: the marker and the widget change on
    napari's thread (Qt widgets are never touched from another)."""
    import threading

    viewer = make_napari_viewer(show=True)
    layer = open_layer(viewer, pyramid)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    layer.paint((0, 1, 1), 9)
    assert layer.name == "seg.n5 *"
    renamed_on = []
    layer.events.name.connect(lambda event: renamed_on.append(threading.current_thread()))
    saver = threading.Thread(target=save_edits, args=(layer,))
    saver.start()
    saver.join()
    qtbot.waitUntil(lambda: layer.name == "seg.n5", timeout=5000)
    assert renamed_on == [threading.main_thread()]
    assert widget.status.value == "no changes"
