"""Drag and drop: which files napari offers to this plugin, and what a person sees.

npe2 decides from napari.yaml before any of our code runs: a folder goes to every reader
that accepts folders; a file or URL to the readers whose patterns match (the file's name,
or the whole URL). ``PluginManager.iter_compatible_readers`` is exactly that decision.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari import preferences, reader

PLUGIN = "napari-n5zarr"
DOCS = Path(__file__).parents[2] / "docs"
"""README screenshots are refreshed only with N5ZARR_DOCS_SCREENSHOTS=1 (tests never write
into the source tree otherwise)."""


def offered(path) -> set[str]:
    npe2 = pytest.importorskip("npe2")
    pm = npe2.PluginManager.instance()
    pm.discover()
    return {r.plugin_name for r in pm.iter_compatible_readers([os.fspath(path)])}


def test_our_manifest_is_the_one_npe2_uses():
    npe2 = pytest.importorskip("npe2")
    pm = npe2.PluginManager.instance()
    pm.discover()
    patterns = pm.get_manifest(PLUGIN).contributions.readers[0].filename_patterns
    assert "*" not in patterns


@pytest.mark.parametrize(
    "name",
    [
        "photo.png",
        "scan.tif",
        "scan.tiff",
        "notes.txt",
        "table.csv",
        "image.jpg",
        "movie.mp4",
        "data.h5",
        "settings.json",
        "stack.npy",
    ],
)
def test_foreign_files_are_never_offered_to_this_plugin(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"not n5")
    assert PLUGIN not in offered(path)


@pytest.mark.parametrize(
    "name",
    ["attributes.json", "zarr.json", "dataset.xml", "export.xml", "data.n5.zip", "container.zip"],
)
def test_n5_files_are_offered(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"{}")
    assert PLUGIN in offered(path)


def test_folders_are_offered(tmp_path):
    for name in ("data.n5", "DATA.N5", "plain_named_container"):
        (tmp_path / name).mkdir()
        assert PLUGIN in offered(tmp_path / name), name


@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/data.n5",
        "https://example.org/data.n5/",
        "https://example.org/data.n5/raw/s0",
        "s3://bucket/volumes/em.n5",
        "https://example.org/any/attributes.json",
        "http://127.0.0.1:8000/c/zarr.json",
    ],
)
def test_n5_urls_are_offered(url):
    assert PLUGIN in offered(url)


@pytest.mark.parametrize(
    "url",
    ["https://example.org/photo.png", "https://example.org/readme.txt", "s3://bucket/table.csv"],
)
def test_foreign_urls_are_not_offered(url):
    assert PLUGIN not in offered(url)


def test_claimed_file_without_n5_is_declined_with_a_notice(tmp_path, monkeypatch):
    notes = []
    monkeypatch.setattr(reader, "_notify", lambda level, message: notes.append((level, message)))
    for name, content in (
        ("other.xml", b"<not-spimdata/>"),
        ("photos.zip", b"PK\x05\x06" + bytes(18)),
    ):
        path = tmp_path / name
        path.write_bytes(content)
        hook = reader.get_reader(str(path))
        assert hook is reader._decline
        assert hook(str(path)) == [(None,)]  # napari's "claimed, nothing to add": no error dialog
    assert [level for level, _ in notes] == ["info", "info"]
    assert "other.xml holds no N5" in notes[0][1]


def test_generalize_a_remembered_n5_folder():
    sep = os.sep
    one = {f"{sep}data{sep}a.n5{sep}": PLUGIN}
    assert preferences.generalize(one) == {**one, f"*.n5{sep}*": PLUGIN}
    group = {
        f"{sep}data{sep}a.n5{sep}em{sep}": PLUGIN
    }  # "remember" on a group dropped from inside one
    assert preferences.generalize(group) == {**group, f"*.n5{sep}*": PLUGIN}
    assert (
        preferences.generalize({f"{sep}data{sep}tiffs{sep}": PLUGIN}) is None
    )  # not an .n5 folder
    assert (
        preferences.generalize({f"{sep}data{sep}a.n5{sep}": "napari"}) is None
    )  # another reader chosen
    assert (
        preferences.generalize({**one, f"*.n5{sep}*": "napari"}) is None
    )  # the user's own pattern wins


# --- in a real viewer (Xvfb) ----------------------------------------------------------------------


def _container(path: Path, value: int) -> Path:
    root = napari_n5zarr.open(path, mode="w")
    group = root.create_group(
        "raw", attributes={"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 4]}}
    )
    data = (np.add.outer(np.arange(64), np.arange(64)) * value // 126).astype("uint8")
    napari_n5zarr.create_dataset(group, "s0", shape=data.shape, dtype="uint8", chunks=(32, 32))[
        ...
    ] = data
    return path


def _not_welcome(image: np.ndarray) -> bool:
    """A drawn canvas shows the data (two grey levels), not a uniform/welcome screen."""
    rgb = image[..., :3].reshape(-1, 3)
    return len(np.unique(rgb, axis=0)) >= 2


@pytest.mark.napari
def test_drop_a_png_opens_it_without_this_plugin(make_napari_viewer, tmp_path):
    from PIL import Image

    png = tmp_path / "photo.png"
    Image.fromarray(np.full((8, 8), 200, "uint8")).save(png)
    viewer = make_napari_viewer()
    viewer.window._qt_viewer._qt_open([str(png)], stack=False)  # what a drop does
    assert [layer.name for layer in viewer.layers] == ["photo"]


@pytest.mark.napari
def test_drop_a_txt_error_does_not_name_this_plugin(make_napari_viewer, tmp_path):
    txt = tmp_path / "notes.txt"
    txt.write_text("hello")
    viewer = make_napari_viewer()
    with pytest.raises(Exception) as caught:  # noqa: PT011 (napari's own "no reader" error)
        viewer.window._qt_viewer._qt_open([str(txt)], stack=False)
    assert PLUGIN not in str(caught.value)
    assert "n5" not in str(caught.value).lower()


@pytest.mark.napari
def test_drop_n5_folders_first_time_and_afterwards(
    make_napari_viewer, tmp_path, monkeypatch, qtbot
):
    """First .n5 folder: napari's "Choose reader" (its own reader also takes folders);
    "remember" then applies to every .n5 folder: the second one opens without a dialog."""
    from napari._qt.dialogs import qt_reader_dialog
    from napari.settings import get_settings

    shots = DOCS if os.environ.get("N5ZARR_DOCS_SCREENSHOTS") == "1" else tmp_path
    first, second = _container(tmp_path / "first.n5", 120), _container(tmp_path / "second.n5", 250)
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(900, 600)
    shown = []

    def choose(dialog):  # what the person does: pick napari-n5zarr, keep "remember" ticked
        dialog.show()
        qtbot.waitExposed(dialog)
        shots.mkdir(exist_ok=True)
        buttons = {b.text(): b for b in dialog.reader_btn_group.buttons()}
        shown.append((sorted(buttons), dialog.persist_checkbox.text()))
        buttons["napari-n5zarr"].setChecked(True)
        dialog.persist_checkbox.setChecked(True)
        qtbot.wait(50)
        dialog.grab().save(str(shots / "drag-drop-first-time.png"))
        dialog.hide()
        return dialog._get_plugin_choice(), dialog._get_persist_choice()

    monkeypatch.setattr(qt_reader_dialog.QtReaderDialog, "get_user_choices", choose)
    settings = get_settings().plugins
    before = dict(settings.extension2reader)
    try:
        viewer.window._qt_viewer._qt_open([str(first)], stack=False)
        assert len(shown) == 1
        readers, remember = shown[0]
        assert "napari-n5zarr" in readers
        assert "first.n5" in remember
        assert settings.extension2reader.get(f"*.n5{os.sep}*") == PLUGIN

        viewer.window._qt_viewer._qt_open([str(second)], stack=False)
        assert len(shown) == 1  # no second dialog
        assert [layer.name for layer in viewer.layers] == ["raw", "raw [1]"]
        viewer.reset_view()
        qtbot.wait(100)
        viewer.window._qt_window.grab().save(str(shots / "drag-drop-afterwards.png"))
        assert (shots / "drag-drop-first-time.png").stat().st_size > 1000
        assert _not_welcome(viewer.screenshot(canvas_only=True, flash=False))
    finally:
        settings.extension2reader = before
