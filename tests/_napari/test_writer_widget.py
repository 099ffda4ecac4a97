"""The npe2 writers (File > Save Layers...) and the export dock widget, in a real viewer."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr._napari.writer import layer_export_kwargs, write_image
from napari_n5zarr.read.pyramid_walk import detect

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")


def attrs(path: Path) -> dict:
    return json.loads((path / "attributes.json").read_text())


def volume(shape=(10, 24, 40), dtype="uint16") -> np.ndarray:
    return (np.arange(np.prod(shape)).reshape(shape) % 1009).astype(dtype)


# -- writer functions (no viewer needed) ---------------------------------------------------


def test_rgb_layer_keeps_its_colour_axis(tmp_path):
    from napari.layers import Image

    rgb = np.random.default_rng(0).integers(0, 255, (300, 400, 3), dtype=np.uint8)
    layer = Image(rgb, rgb=True, scale=(2.0, 0.5))
    kwargs = layer_export_kwargs(*layer.as_layer_data_tuple()[:2])
    assert kwargs["scale"] == [2.0, 0.5, 1.0]
    assert kwargs["axis_labels"][-1] == "rgb"
    [written] = write_image(str(tmp_path / "rgb.n5"), *layer.as_layer_data_tuple()[:2])
    root = attrs(Path(written))
    assert root["axes"] == ["rgb", "x", "y"]
    assert root["resolution"] == [1.0, 0.5, 2.0]
    # colours are never averaged; y (2.0) is coarser than x (0.5), so x is halved first
    assert attrs(Path(written) / "s1")["downsamplingFactors"] == [1, 2, 1]
    np.testing.assert_array_equal(napari_n5zarr.open(written)["s0"][...], rgb.T)


def test_affine_is_reported_as_lost(tmp_path):
    from napari.layers import Image

    layer = Image(volume((4, 4)), rotate=30)
    with pytest.warns(UserWarning, match="rotate"):
        write_image(str(tmp_path / "r.n5"), *layer.as_layer_data_tuple()[:2])


# -- File > Save Layers... -----------------------------------------------------------------


@pytest.mark.napari
def test_save_image_layer(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    data = volume()
    viewer.add_image(
        data, name="raw", scale=(3.0, 0.5, 0.5), translate=(10.0, 0.0, -4.0), units=("micrometer",) * 3,
        axis_labels=("z", "y", "x"),
    )  # fmt: skip
    [written] = viewer.layers.save(str(tmp_path / "raw.n5"), plugin="napari-n5zarr")
    assert Path(written) == tmp_path / "raw.n5"
    root = attrs(tmp_path / "raw.n5")
    assert root["resolution"] == [0.5, 0.5, 3.0]
    assert root["offset"] == [-4.0, 0.0, 10.0]
    assert root["units"] == ["um"] * 3
    [(layer_data, kwargs, kind)] = read_path(tmp_path / "raw.n5")
    assert kind == "image"
    assert not kwargs.get("multiscale")  # one level: fits a 64^3 block
    np.testing.assert_array_equal(np.asarray(layer_data), data)
    assert kwargs["scale"] == pytest.approx((3.0, 0.5, 0.5))
    assert kwargs["translate"] == pytest.approx((10.0, 0.0, -4.0))
    assert tuple(kwargs["axis_labels"]) == ("z", "y", "x")


@pytest.mark.napari
def test_save_labels_layer(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    seg = np.zeros((8, 64, 64), dtype=np.int32)
    seg[:, 10:40, 10:30] = 7
    seg[2:5, 30:60, 20:50] = 300
    viewer.add_labels(seg, name="cells")
    viewer.layers.save(str(tmp_path / "cells.n5"), plugin="napari-n5zarr")
    assert attrs(tmp_path / "cells.n5")["image-label"] == {}
    root = napari_n5zarr.open(tmp_path / "cells.n5")
    for name in root.array_keys():
        assert set(np.unique(root[name][...])) <= {0, 7, 300}
    [(_, _, kind)] = read_path(tmp_path / "cells.n5")
    assert kind == "labels"


@pytest.mark.napari
def test_save_one_layer_reopens_with_the_layer_name(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    viewer.add_image(volume(), name="nuclei stain", scale=(2.0, 1.0, 1.0))
    viewer.add_labels(np.ones((10, 24, 40), np.uint8), name="cells")
    viewer.layers.selection = {viewer.layers["nuclei stain"]}
    viewer.layers.save(str(tmp_path / "one.n5"), selected=True, plugin="napari-n5zarr")
    viewer.layers.selection = {viewer.layers["cells"]}
    viewer.layers.save(str(tmp_path / "two.n5"), selected=True, plugin="napari-n5zarr")
    viewer.layers.clear()
    [image] = viewer.open(str(tmp_path / "one.n5"), plugin="napari-n5zarr")
    [labels] = viewer.open(str(tmp_path / "two.n5"), plugin="napari-n5zarr")
    assert image.name == "nuclei stain"
    assert labels.name == "cells"  # not "one.n5" / "two.n5"
    np.testing.assert_allclose(image.scale, (2.0, 1.0, 1.0))


@pytest.mark.napari
def test_save_multiscale_layer_as_is(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    base = volume((16, 64, 64))
    levels = [
        da.from_array(base, chunks=16),
        base[::2, ::2, ::2] + 1,
        base[::4, ::4, ::4] + 2,
    ]  # not our pyramid
    viewer.add_image(levels, multiscale=True, name="pyr", scale=(2.0, 1.0, 1.0))
    viewer.layers.save(str(tmp_path / "pyr.n5"), plugin="napari-n5zarr")
    root = napari_n5zarr.open(tmp_path / "pyr.n5")
    assert sorted(root.array_keys()) == ["s0", "s1", "s2"]
    for k, level in enumerate(levels):
        np.testing.assert_array_equal(root[f"s{k}"][...], np.asarray(level).T)
    assert attrs(tmp_path / "pyr.n5" / "s2")["downsamplingFactors"] == [4, 4, 4]


@pytest.mark.napari
def test_save_several_layers_into_one_container(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    viewer.add_image(volume(), name="raw data")
    viewer.add_labels(np.ones((10, 24, 40), np.uint8), name="seg")
    viewer.layers.selection = set(viewer.layers)
    written = viewer.layers.save(str(tmp_path / "both.n5"), selected=True, plugin="napari-n5zarr")
    assert sorted(Path(p).name for p in written) == ["raw_data", "seg"]
    assert attrs(tmp_path / "both.n5") == {"n5": "4.0.0"}
    assert attrs(tmp_path / "both.n5" / "seg")["image-label"] == {}
    names = sorted(ms.name for ms in detect(napari_n5zarr.open(tmp_path / "both.n5")))
    assert names == ["raw_data", "seg"]


@pytest.mark.napari
def test_save_refuses_an_existing_destination(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    viewer.add_image(volume(), name="raw")
    viewer.layers.save(str(tmp_path / "raw.n5"), plugin="napari-n5zarr")
    before = (tmp_path / "raw.n5" / "s0" / "0" / "0" / "0").read_bytes()
    with pytest.raises(FileExistsError):
        viewer.layers.save(str(tmp_path / "raw.n5"), plugin="napari-n5zarr")
    assert (tmp_path / "raw.n5" / "s0" / "0" / "0" / "0").read_bytes() == before


# -- the dock widget -----------------------------------------------------------------------


@pytest.fixture
def widget(make_napari_viewer):
    viewer = make_napari_viewer()
    _dock, w = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Export as N5 + Zarr v3")
    return viewer, w


def slow_volume(delay: float = 0.02) -> da.Array:
    def slow(block):
        time.sleep(delay)
        return block + 1

    return da.zeros((32, 128, 128), dtype="uint16", chunks=16).map_blocks(slow, dtype="uint16")


@pytest.mark.napari
def test_widget_exports_in_a_worker(widget, qtbot, tmp_path):
    viewer, w = widget
    viewer.add_image(volume(), name="raw", scale=(2.0, 1.0, 1.0))
    seg = viewer.add_labels(np.ones((10, 24, 40), np.uint8), name="seg")
    assert [name for name, _ in w._layer_choices()] == ["raw", "seg"]
    assert Path(w.destination.value).name == "raw.n5"
    w.layer.value = seg
    assert Path(w.destination.value).name == "seg.n5"  # follows the layer until the user types one
    w.destination.value = tmp_path / "seg.n5"
    w.compression.value = "zstd"
    w.block_size.value = 8
    w.levels.value = 2
    worker = w.start()
    assert worker is not None
    assert not w.export_button.enabled
    assert w.cancel_button.enabled
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)
    assert w.status.value == f"saved {tmp_path / 'seg.n5'}"
    assert w.export_button.enabled
    assert not w.cancel_button.enabled
    assert attrs(tmp_path / "seg.n5" / "s0")["compression"] == {"type": "zstd", "level": 3}
    assert attrs(tmp_path / "seg.n5" / "s0")["blockSize"] == [8, 8, 8]
    assert sorted(p.name for p in (tmp_path / "seg.n5").iterdir() if p.is_dir()) == ["s0", "s1"]
    assert attrs(tmp_path / "seg.n5")["image-label"] == {}


@pytest.mark.napari
def test_widget_stays_responsive_and_cancels(widget, qtbot, tmp_path):
    """Every block is computed off the GUI thread, and the event loop runs while the export
    waits: a gate lets blocks through only as the test allows, so start() cannot have
    returned after the work, timers fire while nothing can have been written, and Cancel
    comes before the end."""
    import threading

    from qtpy.QtCore import QTimer

    viewer, w = widget
    gate, armed, on_gui_thread = threading.Semaphore(0), threading.Event(), []

    def gated(block):
        if armed.is_set():  # napari's own slicing for the canvas (before start) passes
            on_gui_thread.append(threading.current_thread() is threading.main_thread())
            gate.acquire(timeout=60)
        return block + 1

    viewer.add_image(
        da.zeros((32, 128, 128), dtype="uint16", chunks=16).map_blocks(gated, dtype="uint16"),
        name="slow",
    )
    w.destination.value = tmp_path / "slow.n5"
    w.block_size.value = 16
    armed.set()
    try:
        assert w.start() is not None  # returned while every block is held at the gate
        ticks = []
        timer = QTimer()
        timer.timeout.connect(lambda: ticks.append(1))
        timer.start(10)
        qtbot.waitUntil(
            lambda: len(ticks) >= 5 and bool(on_gui_thread), timeout=20000
        )  # the GUI thread runs timers
        timer.stop()
        assert w.worker is not None
        assert w.progress.value == 0  # still exporting, nothing written
        assert not w.progress.native.isHidden()
        assert w.progress.max == 2 * 8 * 8 + 4 * 4 + 2 * 2 + 1  # blocks of s0..s3, known up front
        qtbot.waitUntil(
            lambda: gate.release() or w.progress.value > 0, timeout=20000
        )  # a block at a time
        w.cancel_button.clicked.emit()
    finally:
        gate.release(1000)
    assert not any(on_gui_thread)  # no block was computed on the GUI thread
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)
    assert w.status.value == "cancelled"
    assert not (tmp_path / "slow.n5").exists()  # no empty folder left behind


@pytest.mark.napari
def test_widget_reports_errors(widget, qtbot, tmp_path, monkeypatch):
    from napari.utils.notifications import notification_manager

    viewer, w = widget
    viewer.add_image(volume(), name="raw")
    (tmp_path / "taken.n5").mkdir()
    (tmp_path / "taken.n5" / "notes.txt").write_text("keep")
    w.destination.value = tmp_path / "taken.n5"
    w.overwrite.value = True
    tracebacks, shown = [], []
    monkeypatch.setattr(
        notification_manager, "receive_error", lambda *exc: tracebacks.append(exc[1])
    )
    monkeypatch.setattr("napari.utils.notifications.show_error", shown.append)
    w.start()
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)
    assert w.status.value.startswith("failed: ")
    assert tracebacks == []
    assert len(shown) == 1
    assert shown[0].startswith("Export failed: ")  # no traceback
    assert "overwrite=True" not in w.status.value
    assert (tmp_path / "taken.n5" / "notes.txt").read_text() == "keep"


@pytest.mark.napari
def test_widget_refuses_absurd_block_sizes_with_the_reason(widget, tmp_path, monkeypatch):
    viewer, w = widget
    viewer.add_image(
        da.zeros((2048, 2048, 2048), dtype="uint16", chunks=256), name="vol", contrast_limits=(0, 1)
    )
    w.destination.value = tmp_path / "vol.n5"
    shown = []
    monkeypatch.setattr("napari.utils.notifications.show_warning", shown.append)
    for size, reason in (
        (1, "too small"),
        (4, "too small"),
        (16, "blocks (at most 250,000)"),
        (2048, "MiB"),
    ):
        w.block_size.value = size
        assert w.start() is None
        assert w.worker is None
        assert reason in w.status.value, w.status.value
        assert w.status.value == shown[-1], w.status.value
    assert not (tmp_path / "vol.n5").exists()
    w.block_size.value = 0
    for spin in (w.block_size.native, w.levels.native):  # 0 is shown as "auto"
        assert spin.value() == spin.minimum() == 0
        assert spin.text() == "auto"  # what a person sees in the field


@pytest.mark.napari
def test_widget_levels_disabled_for_multiscale_layers(widget):
    viewer, w = widget
    viewer.add_image(
        [np.zeros((64, 64), "uint8"), np.zeros((32, 32), "uint8")], name="pyr", multiscale=True
    )
    viewer.add_image(np.zeros((64, 64), "uint8"), name="flat")
    w.layer.value = viewer.layers["pyr"]
    assert not w.levels.enabled
    assert "its own 2 levels" in w.levels.tooltip
    w.layer.value = viewer.layers["flat"]
    assert w.levels.enabled


@pytest.mark.napari
def test_widget_message_says_tick_overwrite(widget, qtbot, tmp_path):
    viewer, w = widget
    viewer.add_image(volume(), name="raw")
    napari_n5zarr.export(volume(), tmp_path / "raw.n5")
    w.destination.value = tmp_path / "raw.n5"
    w.start()
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)
    assert 'tick "overwrite"' in w.status.value or (
        "overwrite" in w.status.value and "=True" not in w.status.value
    )


@pytest.mark.napari
def test_widget_refuses_an_empty_destination(widget, tmp_path, monkeypatch):
    viewer, w = widget
    monkeypatch.chdir(tmp_path)  # napari's working directory: an empty field used to export here
    viewer.add_image(volume(), name="raw")
    shown = []
    monkeypatch.setattr("napari.utils.notifications.show_warning", shown.append)
    for text in ("", "   ", "."):
        w.destination.line_edit.value = text
        assert w.start() is None
        assert w.worker is None
        assert w.status.value.startswith("Choose a destination")
        assert shown[-1] == w.status.value
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere


def _shown_whole(label) -> bool:
    """The label's full text is on screen: as tall as its wrapped text, nothing clipped."""
    visible = label.visibleRegion().boundingRect()
    return label.height() >= label.heightForWidth(label.width()) and visible.size() == label.size()


@pytest.mark.napari
def test_widget_status_uses_the_full_width_in_words(widget, qtbot, tmp_path):
    from qtpy.QtWidgets import QApplication

    viewer, w = widget
    viewer.window._qt_window.resize(1280, 720)
    viewer.window._qt_window.show()
    viewer.add_image(volume(), name="raw")
    (tmp_path / "a file.n5").write_text("not a folder")  # an export cannot create it: Errno 17
    w.destination.value = tmp_path / "a file.n5"
    w.start()
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)
    QApplication.processEvents()
    label = w.status.native
    assert "[Errno" not in w.status.value, w.status.value
    assert "is a file, not a folder" in w.status.value, w.status.value
    assert label.width() >= w.native.width() - 30, (
        label.width(),
        w.native.width(),
    )  # not a narrow column
    assert label.wordWrap(), (label.size(), label.heightForWidth(label.width()))
    assert _shown_whole(label), (label.size(), label.heightForWidth(label.width()))


def test_os_errors_are_said_in_words():
    import errno
    import os

    from napari_n5zarr._napari.export_widget import gui_wording

    def said(code: int) -> str:
        return gui_wording(OSError(code, os.strerror(code), "/data/out.n5"))

    assert (
        said(errno.EEXIST)
        == '/data/out.n5 already exists: choose another name, or tick "overwrite" to replace an N5/Zarr container'
    )
    assert (
        said(errno.EROFS)
        == "/data/out.n5 is on a read-only location: choose a folder you can write to"
    )
    assert said(errno.EACCES).startswith(
        "/data/out.n5 cannot be written here (permission denied): choose a folder you can write to"
    )
    assert said(errno.ENOSPC).startswith("no space left on the disk")
    for code in (errno.EEXIST, errno.EROFS, errno.EACCES, errno.ENOSPC, errno.ENOENT, errno.EIO):
        assert "[Errno" not in said(code)


@pytest.mark.napari
def test_save_layers_onto_an_existing_n5_explains(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    viewer.add_image(volume(), name="raw")
    viewer.layers.save(str(tmp_path / "raw.n5"), plugin="napari-n5zarr")
    with pytest.raises(FileExistsError, match="Save Layers never replaces"):
        viewer.layers.save(str(tmp_path / "raw.n5"), plugin="napari-n5zarr")


@pytest.mark.napari
def test_closing_during_an_export_asks_first(widget, qtbot, tmp_path, monkeypatch):
    from napari_n5zarr._napari import export_widget

    viewer, w = widget
    viewer.add_image(slow_volume(), name="slow")
    w.destination.value = tmp_path / "slow.n5"
    w.block_size.value = 16
    asked = []
    monkeypatch.setattr(export_widget._CloseGuard, "confirm", lambda self: asked.append(1) or False)
    viewer.window._qt_window.show()
    w.start()
    viewer.window._qt_window.close()  # the user closes napari: "No" keeps it open
    assert asked == [1]
    assert w.worker is not None
    assert not w._cancel.is_set()
    w.cancel()
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)


def _read_without_this_package(path: Path) -> dict:
    """zarr-python alone (a subprocess that never imports napari_n5zarr): level 0 and the OME block."""
    import subprocess
    import sys

    probe = (
        "import json, sys, zarr\n"
        f"g = zarr.open_group({str(path)!r}, mode='r')\n"
        "a = g['s0']\n"
        "assert 'napari_n5zarr' not in sys.modules\n"
        "print(json.dumps({'shape': a.shape, 'sum': int(a[...].astype('int64').sum()),"
        " 'codecs': [c['name'] for c in a.metadata.to_dict()['codecs']], 'ome': g.attrs['ome']}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.napari
def test_widget_format_choice_ome_zarr(widget, qtbot, tmp_path):
    viewer, w = widget
    data = volume()
    viewer.add_image(data, name="raw", scale=(2.0, 1.0, 1.0))
    assert w.format.value == "dual"
    assert Path(w.destination.value).name == "raw.n5"
    w.format.value = "ome-zarr"
    assert Path(w.destination.value).name == "raw.ome.zarr"  # the suffix follows the format
    assert w.compression.value == "zstd"
    assert "bzip2" not in w.compression.choices  # only codecs every Zarr reader has
    w.destination.value = tmp_path / "raw.ome.zarr"
    w.start()
    qtbot.waitUntil(lambda: w.worker is None, timeout=20000)
    assert w.status.value == f"saved {tmp_path / 'raw.ome.zarr'}"
    seen = _read_without_this_package(tmp_path / "raw.ome.zarr")
    assert seen["shape"] == list(data.shape)
    assert seen["sum"] == int(data.astype("int64").sum())
    assert "zstd" in seen["codecs"]
    assert seen["ome"]["version"] == "0.5"
    w.destination.value = tmp_path / "other.ome.zarr"  # typed: the name is kept, the suffix follows
    w.compression.value = "blosc"  # the user's choice is kept where the format has it
    w.format.value = "dual"
    assert w.compression.value == "blosc"
    assert Path(w.destination.value) == tmp_path / "other.n5"


@pytest.mark.napari
def test_save_layers_as_ome_zarr(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    data = volume()
    viewer.add_labels((data % 7).astype("uint8"), name="seg")
    [written] = viewer.layers.save(str(tmp_path / "seg.ome.zarr"), plugin="napari-n5zarr")
    assert Path(written) == tmp_path / "seg.ome.zarr"
    assert not (
        tmp_path / "seg.ome.zarr" / "attributes.json"
    ).exists()  # a standard OME-Zarr, no N5
    seen = _read_without_this_package(tmp_path / "seg.ome.zarr")
    assert seen["shape"] == list(data.shape)
    assert "image-label" in seen["ome"]


NAPARI_OME_ZARR_LAYERS = """
import json, sys
import numpy as np
from napari_ome_zarr._reader import napari_get_reader
layers = napari_get_reader(sys.argv[1])(sys.argv[1])
assert "napari_n5zarr" not in sys.modules
print(json.dumps([{"kind": kind, "sum": int(np.asarray(data[0]).astype("int64").sum()),
                   "shape": list(data[0].shape)} for data, _, kind in layers]))
"""


@pytest.mark.napari
def test_save_layers_puts_labels_under_their_image_as_ome_ngff_does(make_napari_viewer, tmp_path):
    """One image and its labels saved to *.ome.zarr: the image at the root, the labels at
    labels/NAME and listed there, so napari-ome-zarr (without this package) opens both."""
    import subprocess
    import sys

    import yaozarrs

    viewer = make_napari_viewer()
    data = volume()
    seg = (data % 7).astype("uint8")
    viewer.add_image(data, name="raw")
    viewer.add_labels(seg, name="seg")
    dest = tmp_path / "both.ome.zarr"
    written = viewer.layers.save(str(dest), plugin="napari-n5zarr")
    assert [Path(w) for w in written] == [dest, dest / "labels" / "seg"]
    labels_group = json.loads((dest / "labels" / "zarr.json").read_text())
    assert labels_group["attributes"]["ome"]["labels"] == ["seg"]
    yaozarrs.validate_zarr_store(str(dest))
    out = subprocess.run([sys.executable, "-c", NAPARI_OME_ZARR_LAYERS, str(dest)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert [f["kind"] for f in found] == ["image", "labels"]
    assert found[0]["sum"] == int(data.astype("int64").sum())
    assert found[1]["sum"] == int(seg.astype("int64").sum())
    kinds = sorted(kind for *_, kind in read_path(str(dest)))  # and this reader opens both
    assert kinds == ["image", "labels"]
