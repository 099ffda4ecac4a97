"""The N5 browser dock widget in a real viewer (Xvfb): lazy, never blocking, opens through
the reader."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from format_cases import METADATA_ONLY_ATTRS, write_container

from napari_n5zarr import export

ATTRS = METADATA_ONLY_ATTRS


@pytest.fixture(scope="session")
def flat_10k(tmp_path_factory) -> Path:
    """10,000 datasets in the container's root group (one huge group)."""
    return write_container(
        tmp_path_factory.mktemp("flat") / "flat.n5", [f"d{i:05d}" for i in range(10_000)]
    )


@pytest.fixture(scope="session")
def nested_50k(tmp_path_factory) -> Path:
    """50,000 datasets in 100 groups of 500."""
    names = [f"g{i // 500:03d}/d{i % 500:03d}" for i in range(50_000)]
    return write_container(tmp_path_factory.mktemp("nested") / "nested.n5", names)


@pytest.fixture(autouse=True)
def private_recent(tmp_path, monkeypatch):
    monkeypatch.setenv("NAPARI_N5ZARR_CONFIG", str(tmp_path / "config"))


@pytest.fixture
def browser(make_napari_viewer, qtbot):
    from napari_n5zarr._napari.browser import BrowserWidget

    viewer = make_napari_viewer()
    widget = BrowserWidget(viewer)
    viewer.window.add_dock_widget(widget, name="N5 browser", area="right")
    qtbot.wait(50)
    return widget


class GuiThreadIO:
    """Storage reads (``open``, ``os.listdir``, ``os.scandir``) of paths under ``root`` made
    on the GUI thread, seen through an audit hook (``sys.addaudithook``: fires on the
    thread that calls, for every opened file and listed folder)."""

    _watching: ClassVar[list[GuiThreadIO]] = []
    _installed = False

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.reads: list[tuple[str, str]] = []

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        if event not in ("open", "os.listdir", "os.scandir") or not GuiThreadIO._watching:
            return
        if threading.current_thread() is not threading.main_thread() or not args:
            return
        path = args[0]
        if isinstance(path, (str, bytes, os.PathLike)):
            text = os.fsdecode(path)
            for watch in GuiThreadIO._watching:
                if text.startswith(watch.root):
                    watch.reads.append((event, text))

    def __enter__(self) -> GuiThreadIO:
        if (
            not GuiThreadIO._installed
        ):  # an audit hook cannot be removed: one, switched by _watching
            sys.addaudithook(GuiThreadIO._hook)
            GuiThreadIO._installed = True
        GuiThreadIO._watching.append(self)
        return self

    def __exit__(self, *exc) -> None:
        GuiThreadIO._watching.remove(self)


class RowProbe:
    """A 0 ms QTimer: runs at each turn of the event loop that is free for other work and
    records how many rows the browser has then. Rows that arrive in many batches with the
    event loop running between them show up as many different counts."""

    def __init__(self, widget) -> None:
        from qtpy.QtCore import QTimer

        self.widget = widget
        self.counts: list[int] = []
        self.timer = QTimer(interval=0)
        self.timer.timeout.connect(lambda: self.counts.append(len(widget._items)))

    def between(self, low: int, high: int) -> int:
        """Distinct row counts seen strictly between ``low`` and ``high``."""
        return len({n for n in self.counts if low < n < high})

    def __enter__(self) -> RowProbe:
        self.timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.timer.stop()


def item(widget, path: str):
    return widget._items.get(path)


def child_names(it) -> list[str]:
    return [it.child(i).text(0) for i in range(it.childCount())]


def wait_listed(qtbot, widget, timeout=60_000) -> None:
    qtbot.waitUntil(
        lambda: widget.tree_model is not None and not widget.busy and not widget._loading,
        timeout=timeout,
    )


def test_lazy_expansion_with_loading_row(browser, qtbot, tmp_path: Path) -> None:
    root = write_container(tmp_path / "c.n5", ["g/a", "g/b", "h"])
    browser.load(str(root))
    wait_listed(qtbot, browser)
    top = browser.tree.topLevelItem(0)
    assert child_names(top) == ["g", "h"]
    assert "g/a" not in browser.tree_model._nodes  # nothing below g was read
    g = item(browser, "g")
    assert g.childCount() == 0
    g.setExpanded(True)
    assert child_names(g) == ["loading…"]  # shown at once, listing runs in the background
    wait_listed(qtbot, browser)
    assert child_names(g) == ["a", "b"]
    assert g.child(0).text(1) == "8×64×64 zyx"
    assert g.child(0).text(2) == "uint16"


def test_first_level_of_10k_group_never_blocks(browser, qtbot, flat_10k: Path) -> None:
    """The GUI thread reads nothing: the listing runs in a worker and the rows go in page by
    page, with the event loop free between batches (the stall in ms: benchmarks/browser_stalls.py)."""
    with GuiThreadIO(flat_10k) as io, RowProbe(browser) as probe:
        browser.load(str(flat_10k))
        assert browser.busy
        assert browser.tree.topLevelItemCount() == 0  # load() returned before reading
        wait_listed(qtbot, browser, timeout=300_000)
    top = browser.tree.topLevelItem(0)
    assert top.childCount() == 10_000  # no cap
    assert top.child(9_999).text(0) == "d09999"
    assert io.reads == [], io.reads[:5]
    # 21 pages (100, then 500 each): the event loop turned while they went in
    assert probe.between(1, 10_001) >= 5, sorted(set(probe.counts))


def test_whole_50k_tree_expands_without_blocking(browser, qtbot, nested_50k: Path) -> None:
    browser.load(str(nested_50k))
    wait_listed(qtbot, browser)
    with GuiThreadIO(nested_50k) as io, RowProbe(browser) as probe:
        browser.expand_all()
        assert len(browser._items) == 101
        assert browser.busy  # expand_all() returned before reading
        qtbot.waitUntil(
            lambda: len(browser._items) == 50_101 and not browser.busy and not browser._loading,
            timeout=600_000,
        )
    assert item(browser, "g099/d499").parent() is item(browser, "g099")
    assert all(item(browser, f"g{i:03d}").isExpanded() for i in range(100))
    assert io.reads == [], io.reads[:5]
    # 200 pages (two per group): the event loop turned between them
    assert probe.between(101, 50_101) >= 20, sorted(set(probe.counts))


def test_filter_matches_at_any_depth(browser, qtbot, tmp_path: Path) -> None:
    root = write_container(tmp_path / "c.n5", ["a/b/c/needle", "a/b/hay", "z/hay"])
    browser.load(str(root))
    wait_listed(qtbot, browser)
    browser.filter.setText("NEED")
    qtbot.waitUntil(
        lambda: item(browser, "a/b/c/needle") is not None and not browser.busy, timeout=30_000
    )
    assert not item(browser, "a/b/c/needle").isHidden()
    assert all(not item(browser, p).isHidden() for p in ("a", "a/b", "a/b/c"))
    assert item(browser, "a/b/hay").isHidden()
    assert item(browser, "z").isHidden()
    browser.filter.setText("")
    qtbot.waitUntil(lambda: not browser.busy)
    assert not item(browser, "z").isHidden()
    assert not item(browser, "a/b/hay").isHidden()


@pytest.fixture
def pyramid(tmp_path: Path) -> Path:
    a = (np.arange(9 * 20 * 30).reshape(9, 20, 30) % 251).astype("uint8")
    export(a, tmp_path / "c.n5", path="img", chunks=8, scale=(3.0, 1.0, 1.0), units="micrometer")
    return tmp_path / "c.n5"


def test_pyramid_row_and_open_by_double_click(browser, qtbot, pyramid: Path) -> None:
    from qtpy.QtCore import Qt

    browser.load(str(pyramid))
    wait_listed(qtbot, browser)
    img = item(browser, "img")
    assert img.text(0) == "img"
    assert img.text(3).endswith("3 levels")
    assert img.text(1) == "9×20×30 zyx"
    rect = browser.tree.visualItemRect(img)
    qtbot.mouseClick(browser.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(browser.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    viewer = browser.viewer
    qtbot.waitUntil(lambda: len(viewer.layers) == 1, timeout=30_000)
    layer = viewer.layers[0]
    assert layer.multiscale
    assert len(layer.data) == 3
    np.testing.assert_allclose(layer.scale, (3.0, 1.0, 1.0))
    assert [str(u) for u in layer.units] == ["micrometer"] * 3


def test_open_button_enter_and_several_nodes(browser, qtbot, pyramid: Path, tmp_path: Path) -> None:
    from qtpy.QtCore import Qt

    browser.load(str(pyramid))
    wait_listed(qtbot, browser)
    assert not browser.open_button.isEnabled()  # nothing selected
    img = item(browser, "img")
    browser.tree.setCurrentItem(img)
    assert browser.open_button.isEnabled()
    img.setExpanded(True)
    wait_listed(qtbot, browser)
    s2 = item(browser, "img/s2")
    s2.setSelected(True)  # img and img/s2: two layers
    browser.open_button.click()
    qtbot.waitUntil(lambda: len(browser.viewer.layers) == 2, timeout=30_000)
    browser.tree.setCurrentItem(item(browser, "img/s1"))
    qtbot.keyClick(browser.tree, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(browser.viewer.layers) == 3, timeout=30_000)
    np.testing.assert_allclose(
        browser.viewer.layers[2].scale, (3.0, 2.0, 2.0)
    )  # s1 with its calibration


def test_unsupported_node_is_greyed_with_reason(browser, qtbot, tmp_path: Path) -> None:
    from napari_n5zarr._napari.browser import GREY, tooltip

    root = write_container(tmp_path / "c.n5", ["ok"])
    (root / "line").mkdir()
    (root / "line/attributes.json").write_text(
        json.dumps(
            {
                "dimensions": [10],
                "blockSize": [5],
                "dataType": "uint8",
                "compression": {"type": "raw"},
            }
        )
    )
    (root / "bad").mkdir()
    (root / "bad/attributes.json").write_text(
        json.dumps({**json.loads(ATTRS), "compression": {"type": "zstd", "level": 10**9}})
    )
    browser.load(str(root))
    wait_listed(qtbot, browser)
    assert child_names(browser.tree.topLevelItem(0)) == ["bad", "line", "ok"]
    for path, reason in (("bad", "bad/attributes.json"), ("line", "1-D data cannot be shown")):
        it = item(browser, path)
        assert it.foreground(0).color() == GREY
        assert reason in tooltip(it.data(0, 0x0100))
        browser.tree.setCurrentItem(it)
        assert not browser.open_button.isEnabled()
        assert reason in browser.details.toPlainText()
    assert item(browser, "ok").foreground(0).color() != GREY


def test_details_and_thumbnail(browser, qtbot, tmp_path: Path) -> None:
    a = np.zeros((5, 40, 60), "uint16")
    a[2, 10:30, 20:40] = 500
    export(a, tmp_path / "t.n5", chunks=16, levels=1, scale=(40.0, 4.0, 4.0), units="nanometer")
    browser.load(str(tmp_path / "t.n5"))
    wait_listed(qtbot, browser)
    top = browser.tree.topLevelItem(0)
    target = top if top.data(0, 0x0100).openable else top.child(0)
    browser.tree.setCurrentItem(target)
    qtbot.waitUntil(
        lambda: browser.thumbnail.pixmap() is not None and not browser.thumbnail.pixmap().isNull(),
        timeout=30_000,
    )
    qtbot.waitUntil(
        lambda: (
            "blocks on disk" in browser.details.toPlainText()
            and "counting" not in browser.details.toPlainText()
        ),
        timeout=30_000,
    )
    text = browser.details.toPlainText()
    assert "The reader will use" in text
    assert "z 40 0 nm" in text or "z\n40\n0\nnm" in text, text
    assert "of 12" in text  # 1 x 3 x 4 blocks of 16
    key = (browser.tree_model.location, target.data(0, 0x0100).path)
    thumb = browser._thumbs[key]
    assert thumb.shape == (40, 60)
    assert thumb[20, 30] == 255
    assert thumb[0, 0] == 0  # the middle z slice


def test_bad_location_is_a_message_not_a_crash(browser, qtbot, tmp_path: Path) -> None:
    browser.load(str(tmp_path / "missing.n5"))
    qtbot.waitUntil(lambda: "Cannot open" in browser.status.text(), timeout=30_000)
    assert browser.tree.topLevelItemCount() == 0


def test_recent_locations_and_zip(browser, qtbot, corpus_dir: Path, tmp_path: Path) -> None:
    import shutil

    shutil.make_archive(
        str(tmp_path / "j"), "zip", corpus_dir / "zarr_implementations/data/n5-java.n5"
    )
    browser.load(str(tmp_path / "j.zip"))
    wait_listed(qtbot, browser)
    assert child_names(browser.tree.topLevelItem(0)) == ["bzip2", "gzip", "lz4", "raw", "xz"]
    browser.tree.setCurrentItem(item(browser, "gzip"))
    browser.open_selected()
    qtbot.waitUntil(lambda: len(browser.viewer.layers) == 1, timeout=30_000)
    expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
    np.testing.assert_array_equal(np.asarray(browser.viewer.layers[0].data), expected)
    from napari_n5zarr._napari.browser import load_recent

    assert load_recent()[0] == str(tmp_path / "j.zip")
    assert browser.combo.itemText(0) == str(tmp_path / "j.zip")


def test_widget_is_declared_in_the_manifest() -> None:
    import yaml

    manifest = yaml.safe_load(
        (Path(__file__).parents[2] / "src/napari_n5zarr/napari.yaml").read_text()
    )
    commands = {c["id"]: c for c in manifest["contributions"]["commands"]}
    widgets = {w["display_name"]: w["command"] for w in manifest["contributions"]["widgets"]}
    assert (
        commands[widgets["N5 browser"]]["python_name"]
        == "napari_n5zarr._napari.browser:BrowserWidget"
    )


def test_view_docks_the_browser_with_path_loaded(make_napari_viewer, qtbot, pyramid: Path) -> None:
    from napari_n5zarr._napari.viewer_launch import add_widgets

    viewer = make_napari_viewer()
    browser = add_widgets(viewer, str(pyramid))[0]
    wait_listed(qtbot, browser)
    assert browser.location.text() == str(pyramid)
    assert child_names(browser.tree.topLevelItem(0)) == ["img"]


def test_loading_another_location_drops_the_first(browser, qtbot, tmp_path: Path) -> None:
    big = write_container(tmp_path / "big.n5", [f"d{i:04d}" for i in range(3000)])
    small = write_container(tmp_path / "small.n5", ["only"])
    browser.load(str(big))
    browser.load(str(small))  # while the first is still being read
    wait_listed(qtbot, browser)
    qtbot.wait(200)
    assert browser.tree.topLevelItemCount() == 1
    assert child_names(browser.tree.topLevelItem(0)) == ["only"]
    assert browser.tree_model.location == str(small)
    assert not browser.busy


def test_url_location_lists_and_opens(browser, qtbot, tmp_path: Path, corpus_dir: Path) -> None:
    import functools
    import http.server
    import shutil
    import threading

    from qtpy.QtCore import Qt

    shutil.copytree(corpus_dir / "zarr_implementations/data/n5-java.n5", tmp_path / "j.n5")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        browser.location.setText(f"http://127.0.0.1:{server.server_port}/j.n5")
        qtbot.keyClick(browser.location, Qt.Key.Key_Return)
        wait_listed(qtbot, browser)
        assert child_names(browser.tree.topLevelItem(0)) == ["bzip2", "gzip", "lz4", "raw", "xz"]
        browser.tree.setCurrentItem(item(browser, "raw"))
        browser.open_selected()
        qtbot.waitUntil(lambda: len(browser.viewer.layers) == 1, timeout=30_000)
        expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
        np.testing.assert_array_equal(np.asarray(browser.viewer.layers[0].data), expected)
    finally:
        server.shutdown()


def _unclipped(widget) -> bool:
    """``widget`` is drawn whole: no part of it is cut off by its parents."""
    return widget.isVisible() and widget.visibleRegion().boundingRect().size() == widget.size()


def test_view_first_screen_shows_what_the_readme_says(
    make_napari_viewer, qtbot, pyramid: Path, tmp_path: Path
) -> None:
    """``n5zarr view``'s window at 1280×720: name, shape and dtype fit without a horizontal
    scrollbar, a details pane of many lines, no clipped button, the destination's start."""
    from qtpy.QtWidgets import QApplication, QDockWidget

    from napari_n5zarr._napari.viewer_launch import add_to_viewer, add_widgets, fit_after_layout

    viewer = make_napari_viewer()  # not shown yet, as in ``view``: fit_after_layout shows it
    viewer.window._qt_window.resize(1280, 720)
    add_to_viewer(viewer, str(pyramid))
    browser, exporter = add_widgets(viewer, str(pyramid))
    fit_after_layout(viewer)
    wait_listed(qtbot, browser)
    browser.tree.setCurrentItem(item(browser, "img"))
    qtbot.waitUntil(
        lambda: (
            "blocks on disk" in browser.details.toPlainText()
            and "counting" not in browser.details.toPlainText()
        ),
        timeout=30_000,
    )
    qtbot.wait(100)
    QApplication.processEvents()
    viewer.screenshot(str(tmp_path / "view.png"), canvas_only=False)
    print("screenshot:", tmp_path / "view.png")

    tree = browser.tree
    for i, name in enumerate(("name", "shape", "dtype")):
        assert not tree.isColumnHidden(i), name
        need = max(tree.sizeHintForColumn(i), tree.header().sectionSizeHint(i))
        assert tree.columnWidth(i) >= need, (name, tree.columnWidth(i), need)
    shown = [i for i in range(tree.columnCount()) if not tree.isColumnHidden(i)]
    assert sum(tree.columnWidth(i) for i in shown) <= tree.viewport().width()
    assert not tree.horizontalScrollBar().isVisible()
    lines = browser.details.height() // browser.details.fontMetrics().lineSpacing()
    assert lines >= 12, f"details pane shows {lines} lines"
    assert not browser.visibleRegion().isEmpty()
    assert exporter.native.visibleRegion().isEmpty()  # browser in front

    def whole(button) -> None:
        assert button.width() >= button.sizeHint().width(), (
            button.text(),
            button.width(),
            button.sizeHint().width(),
        )
        assert _unclipped(button), (button.text(), button.width(), button.sizeHint().width())

    whole(browser.browse_button)
    whole(browser.open_button)
    dock = exporter.native.parent()
    while not isinstance(dock, QDockWidget):
        dock = dock.parent()
    dock.raise_()  # the export tab
    qtbot.waitUntil(lambda: not exporter.native.visibleRegion().isEmpty(), timeout=5000)
    viewer.screenshot(str(tmp_path / "export.png"), canvas_only=False)
    whole(exporter.export_button.native)
    whole(exporter.destination.choose_btn.native)
    dest = exporter.destination.line_edit.native
    fits = dest.fontMetrics().horizontalAdvance(dest.text()) <= dest.contentsRect().width()
    assert fits or dest.cursorPosition() == 0, (
        dest.text(),
        dest.cursorPosition(),
    )  # its start, or all of it
    assert dest.toolTip() == dest.text()  # the full path on hover


DEEP = [
    f"g{a}/h{b}/i{c}/d{d}" for a in range(2) for b in range(3) for c in range(2) for d in range(3)
]
"""1 + 2 + 6 + 12 groups and 36 datasets: 57 nodes, four levels deep."""


def wait_walked(qtbot, widget, timeout=60_000) -> None:
    qtbot.waitUntil(
        lambda: widget._walked and not widget.busy and not widget._loading, timeout=timeout
    )


def test_filter_shows_the_match_count(browser, qtbot, tmp_path: Path) -> None:
    """The count covers every depth, groups listed before the filter and groups listed for it."""
    root = write_container(
        tmp_path / "c.n5", [*DEEP, "g0/h1/needle", "g1/h2/i1/needle2", "needle3"]
    )
    browser.load(str(root))
    wait_listed(qtbot, browser)
    assert browser.match_count.isHidden()  # no filter, no count
    item(browser, "g0").setExpanded(True)  # listed before the filter
    wait_listed(qtbot, browser)
    browser.filter.setText("Needle")
    wait_walked(qtbot, browser)
    assert browser.match_count.text() == "3 matches"
    assert not browser.match_count.isHidden()
    shown = [p for p, it in browser._items.items() if p and not it.isHidden()]
    assert sorted(shown) == [
        "g0",
        "g0/h1",
        "g0/h1/needle",
        "g1",
        "g1/h2",
        "g1/h2/i1",
        "g1/h2/i1/needle2",
        "needle3",
    ]
    browser.filter.setText("d2")  # the tree is listed: counted at once
    qtbot.waitUntil(lambda: not browser.busy)
    assert browser.match_count.text() == "12 matches"
    browser.filter.setText("needle2")
    qtbot.waitUntil(lambda: not browser.busy)
    assert browser.match_count.text() == "1 match"
    browser.filter.setText("")
    qtbot.waitUntil(lambda: not browser.busy)
    assert browser.match_count.isHidden()
    assert not item(browser, "g1/h0/i0/d0").isHidden()


def test_filter_before_the_root_is_listed(browser, qtbot, tmp_path: Path) -> None:
    """Text typed before a location loads filters it once it is there."""
    root = write_container(tmp_path / "c.n5", [*DEEP, "g1/h2/i1/needle"])
    browser.filter.setText("needle")
    browser.load(str(root))
    wait_walked(qtbot, browser)
    assert browser.match_count.text() == "1 match"
    assert all(
        not item(browser, p).isHidden() and item(browser, p).isExpanded()
        for p in ("g1", "g1/h2", "g1/h2/i1")
    )
    assert item(browser, "g0").isHidden()


def test_expand_all_lists_and_expands_every_group(browser, qtbot, tmp_path: Path) -> None:
    root = write_container(tmp_path / "c.n5", DEEP)
    browser.load(str(root))
    wait_listed(qtbot, browser)
    item(browser, "g1").setExpanded(True)  # one group listed and shown before
    wait_listed(qtbot, browser)
    with GuiThreadIO(root) as io:
        browser.expand_all()
        wait_walked(qtbot, browser)
    assert len(browser._items) == 1 + len(DEEP) + 20
    groups = [p for p, it in browser._items.items() if it.data(0, 0x0100).kind == "group"]
    assert len(groups) == 21
    assert all(browser._items[p].isExpanded() for p in groups)
    assert child_names(item(browser, "g1/h2/i1")) == ["d0", "d1", "d2"]  # each row once
    assert io.reads == [], io.reads[:5]


def test_expanding_a_group_while_the_tree_is_walked(browser, qtbot, tmp_path: Path) -> None:
    """A group the user opens during the walk is listed once, its rows in order."""
    root = write_container(
        tmp_path / "c.n5", [f"g{i:02d}/d{j:02d}" for i in range(30) for j in range(40)]
    )
    browser.load(str(root))
    wait_listed(qtbot, browser)
    browser.filter.setText("d39")
    item(browser, "g29").setExpanded(True)
    wait_walked(qtbot, browser)
    assert child_names(item(browser, "g29")) == [f"d{j:02d}" for j in range(40)]
    assert browser.match_count.text() == "30 matches"


def test_closing_the_viewer_with_jobs_in_flight(make_napari_viewer, qtbot, tmp_path: Path) -> None:
    """Closing napari while the browser lists, walks and reads details: no error, every
    worker ends (none waits for a GUI that is gone)."""
    from napari_n5zarr._napari.browser import dock_browser

    root = write_container(
        tmp_path / "c.n5", [f"g{i:02d}/d{j:03d}" for i in range(20) for j in range(150)]
    )
    viewer = make_napari_viewer()
    browser = dock_browser(viewer)
    browser.load(str(root))
    qtbot.waitUntil(lambda: browser.tree_model is not None, timeout=30_000)
    browser.expand_all()
    browser.filter.setText("d1")
    jobs = browser.jobs
    assert jobs.running
    viewer.close()
    qtbot.waitUntil(lambda: not jobs._workers, timeout=60_000)


def test_process_exits_when_closed_mid_walk(tmp_path: Path) -> None:
    """A script that closes napari while the browser walks a big tree exits cleanly (the
    timeout only detects a hang)."""
    import subprocess
    import textwrap

    root = write_container(
        tmp_path / "c.n5", [f"g{i:02d}/d{j:03d}" for i in range(20) for j in range(200)]
    )
    script = textwrap.dedent(f"""
        import time, napari
        from qtpy.QtWidgets import QApplication
        from napari_n5zarr._napari.browser import dock_browser
        viewer = napari.Viewer(show=False)
        browser = dock_browser(viewer)
        browser.load({str(root)!r})
        end = time.monotonic() + 60
        while browser.tree_model is None and time.monotonic() < end:
            QApplication.processEvents()
        browser.expand_all()
        for _ in range(20):
            QApplication.processEvents()
        assert browser.busy
        viewer.close()
        print("closed")
    """)
    env = {
        **os.environ,
        "NAPARI_N5ZARR_CONFIG": str(tmp_path / "cfg"),
        "NAPARI_CONFIG": str(tmp_path / "napari.yaml"),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "closed" in done.stdout, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_public_s3_location_lists_and_opens_without_credentials(browser, qtbot, public_s3, no_credentials, monkeypatch,
                                                                 corpus_dir: Path) -> None:  # fmt: skip
    from qtpy.QtCore import Qt

    monkeypatch.setenv("AWS_ENDPOINT_URL", public_s3)
    browser.location.setText("s3://pub/java.n5")
    qtbot.keyClick(browser.location, Qt.Key.Key_Return)
    wait_listed(qtbot, browser)
    assert child_names(browser.tree.topLevelItem(0)) == ["bzip2", "gzip", "lz4", "raw", "xz"]
    browser.tree.setCurrentItem(item(browser, "xz"))
    browser.open_selected()
    qtbot.waitUntil(lambda: len(browser.viewer.layers) == 1, timeout=30_000)
    expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
    np.testing.assert_array_equal(np.asarray(browser.viewer.layers[0].data), expected)
