"""First screens in a real viewer (Xvfb; issue 27): physical size at first sight, whole names in
the browser, the export's suggested name, the read-only notice in napari's notification, the
reader dialog with napari-ome-zarr beside this plugin, "remember" for groups in .n5 folders."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr

PLUGIN = "napari-n5zarr"


@pytest.fixture(autouse=True)
def private_recent(tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_N5ZARR_CONFIG", str(tmp_path / "config"))


def _pyramids(path: Path, names: list[str], unit: str = "nanometer") -> Path:
    data = (np.arange(16 * 64 * 64) % 251).astype("uint16").reshape(16, 64, 64)
    for name in names:
        napari_n5zarr.export(
            data,
            path,
            path=name,
            scale=(8.0, 4.0, 4.0),
            units=unit,
            axis_labels=("z", "y", "x"),
            levels=2,
        )
    return path


def _settled(qtbot, browser) -> None:
    qtbot.waitUntil(
        lambda: browser.tree_model is not None and not browser.busy and not browser._loading,
        timeout=60_000,
    )


def test_view_first_screen_shows_physical_size(make_napari_viewer, qtbot, tmp_path: Path) -> None:
    """``n5zarr view`` on a folder whose pyramids sit in groups: napari's scale bar in the
    data's unit, and the browser's details on the first pyramid that opened (its voxel size
    and the reader's scale table), not the root's ``{"n5": "4.0.0"}``."""
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.viewer_launch import first_screen, scale_bar

    path = _pyramids(tmp_path / "nested.n5", ["em/raw", "em/mito"])
    viewer = make_napari_viewer()
    viewer.window._qt_window.resize(1280, 720)
    browser = first_screen(viewer, str(path))
    qtbot.waitUntil(
        lambda: [n.path for n in browser.selected_nodes()] == ["em/mito"], timeout=60_000
    )
    qtbot.waitUntil(lambda: "The reader will use" in browser.details.toPlainText(), timeout=30_000)
    details = browser.details.toPlainText()
    assert "voxel size\t8 × 4 × 4 nm" in details or "voxel size 8 × 4 × 4 nm" in " ".join(
        details.split()
    ), details
    assert "N5 Viewer, 2 level(s)" in details
    bar = scale_bar(viewer)
    assert bar.visible
    QApplication.processEvents()
    canvas = viewer.window._qt_viewer.canvas
    visuals = getattr(canvas, "_viewer_overlay_to_visual", None) or canvas._overlay_to_visual
    text = (
        visuals[bar][0].node.text.text
        if isinstance(visuals[bar], list)
        else visuals[bar].node.text.text
    )
    assert text.endswith("nm"), text


DEEP = ["volumes/raw/em_fibsem_mid", "volumes/labels/em_cells_mid", "volumes/raw/em_low"]


@pytest.mark.parametrize("layout", ["view", "plugins menu"])
def test_browser_names_are_whole_with_both_docks(
    make_napari_viewer, qtbot, tmp_path: Path, layout: str
) -> None:
    """1280×720, the browser and the exporter docked (as ``n5zarr view`` does, or both opened
    from the Plugins menu), a filter matching names four levels deep: every name is whole
    (its column as wide as its text), no horizontal scrollbar."""
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.viewer_launch import add_widgets, fit_after_layout

    path = _pyramids(tmp_path / "deep.n5", DEEP)
    viewer = make_napari_viewer()
    viewer.window._qt_window.resize(1280, 720)
    if layout == "view":
        browser, _ = add_widgets(viewer, str(path))
    else:
        _, browser = viewer.window.add_plugin_dock_widget(PLUGIN, "N5 browser")
        viewer.window.add_plugin_dock_widget(PLUGIN, "Export as N5 + Zarr v3")
        browser.load(str(path))
    fit_after_layout(viewer)
    _settled(qtbot, browser)
    browser.filter.setText("mid")
    qtbot.waitUntil(
        lambda: browser._walked and not browser.busy and browser.match_count.text() == "2 matches",
        timeout=60_000,
    )
    qtbot.wait(50)
    QApplication.processEvents()
    tree = browser.tree
    rows = [it for path, it in browser._items.items() if "mid" in path.rsplit("/", 1)[-1]]
    assert len(rows) == 2
    assert all(not it.isHidden() for it in rows)
    need = tree.sizeHintForColumn(0)  # the rows on screen, indentation included
    assert tree.columnWidth(0) >= need, (tree.columnWidth(0), need)
    for it in rows:
        rect = tree.visualItemRect(it)
        text = tree.fontMetrics().horizontalAdvance(it.text(0))
        assert rect.left() + text <= tree.columnWidth(0), (
            it.text(0),
            rect.left(),
            text,
            tree.columnWidth(0),
        )
    assert not tree.horizontalScrollBar().isVisible()
    assert not tree.isColumnHidden(1)  # shape and dtype still shown
    assert not tree.isColumnHidden(2)


def test_export_suggests_the_layer_name_without_a_second_suffix(
    make_napari_viewer, tmp_path: Path, monkeypatch
) -> None:
    from napari_n5zarr._napari.export_widget import ExportWidget

    monkeypatch.chdir(tmp_path)
    viewer = make_napari_viewer()
    viewer.add_image(np.zeros((8, 8), "uint8"), name="vol.n5")
    widget = ExportWidget(viewer)
    assert Path(str(widget.destination.value)) == tmp_path / "vol.n5"
    viewer.layers.clear()
    (tmp_path / "scan.n5").mkdir()  # where the layer came from: never suggested to write over
    viewer.add_image(np.zeros((8, 8), "uint8"), name="scan.n5")
    second = ExportWidget(viewer)
    assert Path(str(second.destination.value)) == tmp_path / "scan-copy.n5"


def _reasons(tmp_path: Path) -> dict[str, str]:
    """The reasons labels open read-only, as the reader finds them."""
    import zipfile

    from napari_n5zarr.write.edit.editable import pyramid_root

    folder = _pyramids(tmp_path / "seg.n5", ["seg"])
    zpath = tmp_path / "seg.zip"
    with zipfile.ZipFile(zpath, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder))
    zip_reason = pyramid_root(str(zpath), ["seg/s0", "seg/s1"])[1]
    assert zip_reason
    return {
        "zip": zip_reason,
        "label multisets": "label multisets",
        "other": "it cannot be edited in place",
    }


def test_read_only_notice_is_a_short_sentence_that_fits(make_napari_viewer, tmp_path: Path) -> None:
    """napari shows a notification's first line (~300 px) until it is expanded: that line is
    one whole, grammatical sentence naming the layer and why; the expanded text says how to edit a copy."""
    from napari._qt.dialogs.qt_notification import NapariQtNotification
    from napari.utils.notifications import NotificationSeverity
    from superqt import QElidingLabel

    from napari_n5zarr._napari.notices import refused_message

    viewer = make_napari_viewer(show=True)
    for kind, reason in _reasons(tmp_path).items():
        message = refused_message("seg", reason)
        note = NapariQtNotification(
            message, NotificationSeverity.WARNING, parent=viewer.window._qt_viewer._welcome_widget
        )
        note.show()
        label = note.message
        first = message.split("\n")[0]
        assert QElidingLabel.wrapText(first, label.width(), label.font()) == [first], (
            kind,
            first,
            label.width(),
        )
        assert first.startswith("seg is read-only ("), first
        assert first.endswith(")."), first
        assert "n5zarr convert" in message
        note.close()
    assert refused_message("volumes/labels/em_cells_mid", "label multisets").startswith(
        "em_cells_mid is read-only (Paintera label multisets)."
    )


OME_ZARR = {
    "name": "napari-ome-zarr",  # its napari.yaml (0.6): no display_name, folders accepted
    "contributions": {
        "commands": [
            {
                "id": "napari-ome-zarr.get_reader",
                "title": "Get Reader",
                "python_name": "napari_ome_zarr._reader:napari_get_reader",
            }
        ],
        "readers": [
            {
                "command": "napari-ome-zarr.get_reader",
                "filename_patterns": ["*.zarr", "*.zarr*"],
                "accepts_directories": True,
            }
        ],
    },
}


def test_ome_zarr_drop_does_not_preselect_this_plugin(make_napari_viewer, tmp_path: Path) -> None:
    """napari's "Choose reader" dialog checks the first reader by display name; npe2 offers a
    folder to every reader that accepts folders (whatever the patterns). With napari-ome-zarr
    installed, an .ome.zarr drop must not come preselected for this plugin."""
    from napari._qt.dialogs.qt_reader_dialog import QtReaderDialog
    from napari.plugins import _npe2
    from npe2 import PluginManager, PluginManifest

    pm = PluginManager.instance()
    registered = "napari-ome-zarr" not in {m.name for m in pm.iter_manifests()}
    if registered:  # npe2's reader index only: napari's own command registry is not involved
        with pm.events.plugins_registered.blocked():
            pm.register(PluginManifest(**OME_ZARR))
    try:
        make_napari_viewer()
        folder = tmp_path / "image.ome.zarr"
        folder.mkdir()
        (folder / "zarr.json").write_text(
            '{"zarr_format": 3, "node_type": "group", "attributes": {"ome": {}}}'
        )
        readers = _npe2.get_readers(str(folder))
        assert {PLUGIN, "napari-ome-zarr"} <= set(readers), readers
        dialog = QtReaderDialog(pth=str(folder), readers=readers)  # what a drop shows
        assert dialog._get_plugin_choice() != readers[PLUGIN], (
            dialog._get_plugin_choice(),
            readers,
        )
    finally:
        if registered:
            with pm.events.blocked():
                pm.unregister("napari-ome-zarr")


def test_remember_on_a_group_in_an_n5_folder_opens_the_next_group_without_asking(
    make_napari_viewer, tmp_path: Path, monkeypatch
) -> None:
    """A group dropped from inside an .n5 folder: "Choose reader", this plugin, "remember";
    then a group in another .n5 folder (and that folder itself) open without the dialog."""
    from napari._qt.dialogs import qt_reader_dialog
    from napari.plugins import _npe2
    from napari.settings import get_settings

    first = _pyramids(tmp_path / "first.n5", ["em/raw"])
    second = _pyramids(tmp_path / "second.n5", ["em/raw", "lm/raw"], unit="micrometer")
    viewer = make_napari_viewer()
    asked: list[str] = []

    def choose(dialog):  # what the person does
        asked.append(dialog._current_file)
        buttons = {b.text(): b for b in dialog.reader_btn_group.buttons()}
        buttons[_npe2.get_readers(dialog._current_file)[PLUGIN]].setChecked(
            True
        )  # by its display name
        dialog.persist_checkbox.setChecked(True)
        return dialog._get_plugin_choice(), dialog._get_persist_choice()

    monkeypatch.setattr(qt_reader_dialog.QtReaderDialog, "get_user_choices", choose)
    settings = get_settings().plugins
    before = dict(settings.extension2reader)
    try:
        viewer.window._qt_viewer._qt_open([str(first / "em")], stack=False)
        assert asked == [str(first / "em")]
        viewer.window._qt_viewer._qt_open([str(second / "lm")], stack=False)
        viewer.window._qt_viewer._qt_open([str(second)], stack=False)
        assert asked == [str(first / "em")]  # no second dialog
        assert [layer.name for layer in viewer.layers] == ["raw", "raw [1]", "em/raw", "lm/raw"]
        assert settings.extension2reader.get(f"*.n5{os.sep}*") == PLUGIN
    finally:
        settings.extension2reader = before
