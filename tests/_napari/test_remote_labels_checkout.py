"""A remote labels layer is read-only; its notice names the check-out command with the region
in view filled in (issue 29, item 4), and that command gives an editable copy of the view."""

from __future__ import annotations

import functools
import http.server
import re
import shlex
import threading
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.write.convert.convert import convert
from napari_n5zarr.write.edit.editable import editable_reason


@pytest.fixture
def served_labels(tmp_path: Path):
    labels = (np.arange(40 * 96 * 128).reshape(40, 96, 128) // 7 % 50).astype("uint32")
    napari_n5zarr.export(
        labels,
        tmp_path / "c.n5",
        path="seg",
        chunks=16,
        levels=2,
        labels=True,
        scale=(2.0, 1.0, 1.0),
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/c.n5", labels
    server.shutdown()
    server.server_close()


def test_notice_names_the_region_in_view_and_the_command_checks_it_out(make_napari_viewer, qtbot, served_labels,
                                                                        monkeypatch, tmp_path: Path) -> None:  # fmt: skip
    url, labels = served_labels
    told: list[str] = []
    monkeypatch.setattr("napari.utils.notifications.show_warning", told.append)
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(900, 700)
    (layer,) = viewer.open(url, plugin="napari-n5zarr")
    viewer.dims.set_point(0, 2.0 * 20)  # world z: plane 20
    viewer.camera.center = (40.0, 48.0, 64.0)
    viewer.camera.zoom = 8
    qtbot.wait(300)
    assert layer.multiscale  # napari disables painting; the paint keys still tell
    layer.keymap[next(k for k in layer.keymap if str(k) == "2")](layer)
    (message,) = told
    assert "read-only (not a local folder)" in message
    command = re.search(r"`(n5zarr convert [^`]+)`", message)
    assert command, message
    args = shlex.split(command.group(1))
    assert args[2] == f"{url}/seg"
    region = args[args.index("--region") + 1]
    (z0, z1), (y0, y1), (x0, x1) = [tuple(int(v) for v in b.split(":")) for b in region.split(",")]
    assert (z0, z1) == (20 - 32 if 20 > 32 else 0, 40)  # the plane +- 32, clipped
    assert 0 < y0 < 48 < y1 < 96  # zoomed in: part of the plane, around the centre
    assert 0 < x0 < 64 < x1 < 128
    convert(args[2], tmp_path / "copy.n5", region=region)
    np.testing.assert_array_equal(
        napari_n5zarr.open(tmp_path / "copy.n5/s0")[...].T, labels[z0:z1, y0:y1, x0:x1]
    )
    assert editable_reason(tmp_path / "copy.n5") is None


def test_copy_view_from_the_layer_context_menu(
    make_napari_viewer, qtbot, served_labels, monkeypatch, tmp_path: Path
) -> None:
    from napari._app_model import get_app_model

    from napari_n5zarr._napari import check_out

    url, labels = served_labels
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(900, 700)
    (layer,) = viewer.open(url, plugin="napari-n5zarr")
    viewer.dims.set_point(0, 2.0 * 10)
    viewer.camera.center = (20.0, 30.0, 80.0)
    viewer.camera.zoom = 12
    qtbot.wait(300)
    app = get_app_model()
    entries = [
        getattr(getattr(item, "command", None), "id", None)
        for item in app.menus.get_menu("napari/layers/context")
    ]
    assert check_out.CONTEXT_ACTION in entries
    monkeypatch.setattr(check_out, "ask_destination", lambda layer: tmp_path / "view.n5")
    viewer.layers.selection.active = layer
    app.commands.execute_command(check_out.CONTEXT_ACTION).result()
    qtbot.waitUntil(lambda: len(viewer.layers) == 2, timeout=60_000)
    copy = viewer.layers[1]
    record = napari_n5zarr.open(tmp_path / "view.n5").attrs["n5zarr:checked-out"]
    (z0, z1), (y0, y1), (x0, x1) = record["region"]
    assert (z0, z1) == (0, 40)
    assert 0 < x0 < 80 < x1 < 128
    np.testing.assert_array_equal(np.asarray(copy.data), labels[z0:z1, y0:y1, x0:x1])
    np.testing.assert_allclose(
        copy.data_to_world((0, 0, 0)), layer.data_to_world((z0, y0, x0))
    )  # over the source
    assert editable_reason(tmp_path / "view.n5") is None


def test_copy_view_from_the_browser(
    make_napari_viewer, qtbot, served_labels, tmp_path: Path
) -> None:
    from qtpy.QtCore import Qt

    from napari_n5zarr._napari.browser import BrowserWidget

    url, labels = served_labels
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(900, 700)
    browser = BrowserWidget(viewer)
    viewer.window.add_dock_widget(browser, name="N5 browser", area="right")
    browser.location.setText(url)
    qtbot.keyClick(browser.location, Qt.Key.Key_Return)
    qtbot.waitUntil(
        lambda: browser.tree_model is not None and not browser.busy and not browser._loading,
        timeout=60_000,
    )
    browser.tree.setCurrentItem(browser._items.get("seg"))
    assert browser.copy_view(str(tmp_path / "early.n5")) is None  # not open yet: nothing to copy
    browser.open_selected()
    qtbot.waitUntil(lambda: len(viewer.layers) == 1, timeout=30_000)
    viewer.dims.set_point(0, 2.0 * 30)
    viewer.camera.center = (60.0, 50.0, 60.0)
    viewer.camera.zoom = 12
    qtbot.wait(300)
    worker = browser.copy_view(str(tmp_path / "view.n5"))
    worker.join(60)
    qtbot.waitUntil(lambda: len(viewer.layers) == 2, timeout=60_000)
    record = napari_n5zarr.open(tmp_path / "view.n5").attrs["n5zarr:checked-out"]
    (z0, z1), (y0, y1), (x0, x1) = record["region"]
    assert (z0, z1) == (0, 40)  # plane 30 +- 32, clipped
    assert 0 < y0 < 50 < y1 < 96
    np.testing.assert_array_equal(np.asarray(viewer.layers[1].data), labels[z0:z1, y0:y1, x0:x1])
    assert not (tmp_path / "early.n5").exists()
