"""A Paintera label-multiset dataset (written by hand, as Paintera writes one) is never a layer
of zeros: the reader says once what it is and why it is not shown, and adds no layer for it
(its siblings open); the browser, ``n5zarr tree`` and ``n5zarr info`` mark it (issue 18 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paintera_multiset import IDS, write_paintera_container

from napari_n5zarr import spatial
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.cli import main

MESSAGE = "napari-n5zarr: labels/fragments: Paintera label multiset (isLabelMultiset): not readable yet; not shown"


@pytest.fixture(scope="module", params=["gzip", "raw"])
def paintera(tmp_path_factory, request) -> Path:
    return write_paintera_container(tmp_path_factory.mktemp("paintera") / "c.n5", request.param)


def test_reader_shows_siblings_and_says_once_why_the_multiset_is_not_shown(paintera):
    notes: list[tuple[str, str]] = []
    layers = read_path(paintera, notify=lambda level, message: notes.append((level, message)))
    assert [(layer[1]["name"], layer[2]) for layer in layers] == [("raw", "image")]  # no zeros, no lookup tables
    assert notes == [("warning", MESSAGE)]


def test_multiset_opened_directly_is_not_shown_either(paintera):
    for path, name in ((paintera / "labels/fragments", "fragments"), (paintera / "labels/fragments/data/s0", "s0")):
        notes: list[tuple[str, str]] = []
        assert read_path(path, notify=lambda level, message, notes=notes: notes.append((level, message))) == []
        assert notes == [("warning", f"napari-n5zarr: {name}: {spatial.LABEL_MULTISET}; not shown")]


def test_detection_marks_multisets_from_metadata():
    multiset = spatial.ArrayInfo({"isLabelMultiset": True}, (20, 12, 6), "uint8")
    ms = spatial.n5viewer_pyramid({}, {"s0": multiset})
    assert ms is not None and ms.unreadable == spatial.LABEL_MULTISET
    on_group = spatial.n5viewer_pyramid({"isLabelMultiset": True}, {"s0": multiset._replace(attrs={})})
    assert on_group is not None and on_group.unreadable
    plain = spatial.n5viewer_pyramid({}, {"s0": multiset._replace(attrs={})})
    assert plain is not None and not plain.unreadable


def test_tree_marks_the_multiset_lines(paintera, capsys):
    assert main(["tree", str(paintera)]) == 0
    lines: dict[str, str] = {}
    for line in capsys.readouterr().out.splitlines()[1:]:
        lines.setdefault(line.split("── ")[-1].split()[0], line)  # the first s0 is data/s0
    assert "label multiset" in lines["data/"] and spatial.LABEL_MULTISET in lines["data/"]
    assert "label multiset" in lines["s0"] and spatial.LABEL_MULTISET in lines["s0"]
    assert "cannot open" in lines["unique-labels/"]
    assert "cannot open" not in lines["raw"]


def test_tree_json_marks_the_multiset(paintera, capsys):
    main(["tree", "--json", str(paintera)])
    nodes = {n["path"]: n for n in map(json.loads, capsys.readouterr().out.splitlines())}
    data = nodes["labels/fragments/data"]
    assert data["encoding"] == "label multiset" and not data["openable"] and data["reason"] == spatial.LABEL_MULTISET
    assert nodes["raw"]["openable"]


def test_info_says_the_multiset_cannot_be_opened(paintera, capsys):
    main(["info", str(paintera)])
    out = capsys.readouterr().out
    block = out.split("labels/fragments: ", 1)[1].split("\nraw:", 1)[0]
    assert block.startswith("labels uint8, 2 level(s)")
    assert f"cannot open: {spatial.LABEL_MULTISET}" in block
    main(["info", str(paintera / "labels/fragments/data/s0")])
    out = capsys.readouterr().out
    assert "dataset, label multiset" in out.splitlines()[0]
    assert f"cannot open: {spatial.LABEL_MULTISET}" in out


def test_convert_skips_the_multiset_with_its_reason_and_converts_the_rest(paintera, tmp_path, capsys):
    import numpy as np

    from napari_n5zarr import open as n5open
    from napari_n5zarr.write.convert import convert

    report = convert(paintera, tmp_path / "out.n5")
    assert [image.name for image in report.images] == ["raw"]
    assert f"labels/fragments: {spatial.LABEL_MULTISET}" in report.skipped
    raw = n5open(paintera / "raw")
    np.testing.assert_array_equal(n5open(tmp_path / "out.n5/raw/s0")[...], raw[...])
    assert not (tmp_path / "out.n5/labels_fragments").exists()


@pytest.mark.napari
def test_viewer_open_adds_the_siblings_and_one_notification(make_napari_viewer, paintera, monkeypatch):
    shown: list[str] = []
    monkeypatch.setattr("napari.utils.notifications.show_warning", shown.append)
    viewer = make_napari_viewer()
    layers = viewer.open(str(paintera), plugin="napari-n5zarr")
    assert [(type(layer).__name__, layer.name) for layer in layers] == [("Image", "raw")]
    assert shown == [MESSAGE]
    assert IDS.shape[::-1] == layers[0].data.shape


@pytest.mark.napari
def test_browser_row_tooltip_and_details(make_napari_viewer, qtbot, paintera, monkeypatch, tmp_path):
    from napari_n5zarr._napari.browser import GREY, NODE_ROLE, BrowserWidget, tooltip

    monkeypatch.setenv("NAPARI_N5ZARR_CONFIG", str(tmp_path / "config"))
    viewer = make_napari_viewer()
    browser = BrowserWidget(viewer)
    viewer.window.add_dock_widget(browser, name="N5 browser", area="right")
    browser.load(str(paintera))

    def listed(path: str):
        qtbot.waitUntil(lambda: path in browser._items and not browser.busy and not browser._loading, timeout=30_000)
        return browser._items[path]

    for group in ("labels", "labels/fragments"):
        listed(group).setExpanded(True)
    row = listed("labels/fragments/data")
    node = row.data(0, NODE_ROLE)
    assert row.text(3) == "N5 Viewer, 2 levels, label multiset"
    assert row.foreground(0).color() == GREY
    assert "label multiset" in tooltip(node) and spatial.LABEL_MULTISET in tooltip(node)
    browser.tree.setCurrentItem(row)
    assert not browser.open_button.isEnabled()
    qtbot.waitUntil(lambda: spatial.LABEL_MULTISET in browser.details.toPlainText(), timeout=10_000)
    assert "Cannot be opened" in browser.details.toPlainText()
