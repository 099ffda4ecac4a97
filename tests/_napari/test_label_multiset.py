"""Paintera label multisets (issue 21): read lazily as uint64 labels at every level, through
the store chain; the Paintera group opens as one
labels layer (segments: fragments through the fragment-segment assignment) beside the raw image;
``n5zarr convert`` turns the multiset pyramid into a plain uint64 labels pyramid;
``add-zarr-metadata`` keeps skipping multiset datasets with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from paintera_multiset import IDS, expected_s0, expected_s1, segments, write_paintera_container

import napari_n5zarr
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.cli import main
from napari_n5zarr.read.multiscale import find_multiscales, levels_for


@pytest.fixture(scope="module", params=["gzip", "raw"])
def paintera(tmp_path_factory, request) -> Path:
    return write_paintera_container(
        tmp_path_factory.mktemp("paintera") / "c.n5", request.param, assignment=True
    )


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    """No fragment-segment assignment: the labels are the fragments."""
    return write_paintera_container(tmp_path_factory.mktemp("paintera") / "c.n5", "gzip")


def _multiset(node):
    found = find_multiscales(node)
    return next(ms for ms in found.multiscales if ms.label_multiset)


def test_every_level_reads_the_labels_the_fixture_encodes(plain):
    node = napari_n5zarr.open(plain)
    ms = _multiset(node)
    assert ms.dtype == "uint64"
    assert ms.is_labels
    assert not ms.unreadable
    assert ms.paths == ("labels/fragments/data/s0", "labels/fragments/data/s1")
    s0, s1 = levels_for(node, ms)
    assert s0.dtype == np.uint64
    assert s0.shape == IDS.shape[::-1]
    np.testing.assert_array_equal(np.asarray(s0[...]), expected_s0().T)  # missing block: background
    np.testing.assert_array_equal(
        np.asarray(s1[...]), expected_s1().T
    )  # computed argMax, edge headers
    np.testing.assert_array_equal(
        np.asarray(s0[2, 3:11, ::3]), expected_s0().T[2, 3:11, ::3]
    )  # strided, no zarr
    copy = levels_for(node, ms, strict=True)
    np.testing.assert_array_equal(copy[1].compute(), expected_s1().T)


def test_segments_by_default_fragments_on_request(paintera, monkeypatch):
    node = napari_n5zarr.open(paintera)
    s0, s1 = levels_for(node, _multiset(node))
    np.testing.assert_array_equal(np.asarray(s0[...]), segments(expected_s0()).T)
    np.testing.assert_array_equal(np.asarray(s1[1]), segments(expected_s1()).T[1])
    monkeypatch.setenv("N5ZARR_PAINTERA_FRAGMENTS", "1")
    s0, _ = levels_for(node, _multiset(node))
    np.testing.assert_array_equal(np.asarray(s0[...]), expected_s0().T)


def test_reader_opens_raw_and_one_labels_layer(paintera):
    notes: list[tuple[str, str]] = []
    layers = read_path(paintera, notify=lambda level, message: notes.append((level, message)))
    assert sorted((layer[1]["name"], layer[2]) for layer in layers) == [
        ("labels/fragments", "labels"),
        ("labels/fragments (raw fragments)", "labels"),
        ("raw", "image"),
    ]
    assert notes == []
    by_name = {layer[1]["name"]: layer for layer in layers}
    labels, fragments = by_name["labels/fragments"], by_name["labels/fragments (raw fragments)"]
    assert tuple(labels[1]["scale"]) == (40.0, 4.0, 4.0)
    assert labels[1].get("visible", True)
    np.testing.assert_array_equal(np.asarray(labels[0][1][...]), segments(expected_s1()).T)
    # the raw fragments: a second labels layer, hidden, at every level (the switch a person ticks)
    assert fragments[1]["visible"] is False
    assert tuple(fragments[1]["scale"]) == (40.0, 4.0, 4.0)
    np.testing.assert_array_equal(np.asarray(fragments[0][0][...]), expected_s0().T)
    np.testing.assert_array_equal(np.asarray(fragments[0][1][...]), expected_s1().T)
    np.testing.assert_array_equal(
        np.asarray(labels[0][0][...]), segments(expected_s0()).T
    )  # untouched


def test_a_level_opened_directly_is_labels(paintera):
    layers = read_path(paintera / "labels/fragments/data/s0")
    assert [layer[2] for layer in layers] == ["labels"]
    data = layers[0][0][0] if isinstance(layers[0][0], list) else layers[0][0]
    np.testing.assert_array_equal(np.asarray(data[...]), expected_s0().T)  # no group: fragments


def test_tree_marks_the_multiset_lines(paintera, capsys):
    assert main(["tree", str(paintera)]) == 0
    lines: dict[str, str] = {}
    for line in capsys.readouterr().out.splitlines()[1:]:
        lines.setdefault(line.split("── ")[-1].split()[0], line)  # the first s0 is data/s0
    assert "cannot open" not in lines["s0"]
    assert (
        "[Paintera lookup table" in lines["unique-labels/"]
    )  # its kind says what it is (issue 26)
    assert "cannot open" not in lines["unique-labels/"]


def test_tree_shows_a_paintera_group_as_one_row_and_never_its_bookkeeping(paintera, capsys):
    assert main(["tree", str(paintera)]) == 0
    lines = {
        line.split("── ")[-1].split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]
    }
    row = lines["fragments/"]
    assert "[Paintera labels, 2 levels, label multisets]" in row
    assert "uint64" in row
    assert "40 × 4 × 4" in row
    assert "cannot open" not in row
    for table in ("fragment-segment-assignment", "unique-labels/"):
        assert "[Paintera lookup table" in lines[table]  # what it is, no fault marker (issue 26)
        assert "cannot open" not in lines[table]
    main(["tree", "--json", str(paintera)])
    nodes = {n["path"]: n for n in map(json.loads, capsys.readouterr().out.splitlines())}
    group = nodes["labels/fragments"]
    assert group["openable"]
    assert group["convention"] == "paintera-label"
    assert group["encoding"] == "label multisets"
    assert group["facts"] == {
        "maxId": "39",
        "bookkeeping": "unique-labels, fragment-segment-assignment (not layers)",
    }
    assert nodes["labels/fragments/data/s0"]["dtype"] == "uint64"  # what it opens as
    assert not nodes["labels/fragments/unique-labels/s0"]["openable"]  # a level of a lookup table
    assert not nodes["labels/fragments/fragment-segment-assignment"]["openable"]


def test_info_lists_maxid_and_the_bookkeeping(paintera, capsys):
    assert main(["info", str(paintera / "labels/fragments")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith(
        "labels/fragments: Paintera labels, 2 levels, label multisets, N5"
    )
    assert "  maxId       39" in out
    assert "bookkeeping unique-labels, fragment-segment-assignment" in out


@pytest.mark.napari
def test_browser_row_details_and_open(make_napari_viewer, qtbot, paintera, monkeypatch, tmp_path):
    from napari_n5zarr._napari.browser import GREY, BrowserWidget

    monkeypatch.setenv("NAPARI_N5ZARR_CONFIG", str(tmp_path / "config"))
    viewer = make_napari_viewer()
    browser = BrowserWidget(viewer)
    viewer.window.add_dock_widget(browser, name="N5 browser", area="right")
    browser.load(str(paintera))
    qtbot.waitUntil(
        lambda: browser.tree_model is not None and not browser.busy and not browser._loading,
        timeout=60_000,
    )
    browser.expand_all()
    qtbot.waitUntil(
        lambda: "labels/fragments/unique-labels/s0" in browser._items and not browser.busy,
        timeout=60_000,
    )
    row = browser._items["labels/fragments"]
    assert row.text(3) == "Paintera labels, 2 levels, label multisets"
    assert row.text(2) == "uint64"
    for table in (
        "labels/fragments/fragment-segment-assignment",
        "labels/fragments/unique-labels",
        "labels/fragments/unique-labels/s0",
    ):
        assert browser._items[table].foreground(0).color() == GREY
    browser.tree.setCurrentItem(row)
    qtbot.waitUntil(
        lambda: (
            "blocks on disk" in browser.details.toPlainText()
            and "counting" not in browser.details.toPlainText()
        ),
        timeout=30_000,
    )
    text = browser.details.toPlainText()
    assert "maxId" in text
    assert "39" in text
    assert "unique-labels, fragment-segment-assignment (not layers)" in text
    assert browser.open_button.isEnabled()
    browser.open_selected()
    qtbot.waitUntil(lambda: len(viewer.layers) >= 1 and not browser.busy, timeout=30_000)
    names = [(type(layer).__name__, layer.name) for layer in viewer.layers]
    assert names == [
        ("Labels", "fragments (raw fragments)"),
        ("Labels", "fragments"),
    ]  # segments on top


def test_info_describes_the_multiset_as_uint64_labels(paintera, capsys):
    main(["info", str(paintera)])
    out = capsys.readouterr().out
    block = out.split("labels/fragments: ", 1)[1].split("\nraw:", 1)[0]
    assert block.startswith("labels uint64, 2 level(s)")
    assert "cannot open" not in block


def test_convert_writes_a_uint64_labels_pyramid(paintera, tmp_path):
    from napari_n5zarr.write.convert.convert import convert

    report = convert(paintera, tmp_path / "out.n5")
    assert sorted(image.name for image in report.images) == ["labels/fragments", "raw"]
    assert report.skipped == []
    out = tmp_path / "out.n5/labels_fragments"
    s0 = napari_n5zarr.open(out / "s0")
    assert s0.dtype == np.uint64
    np.testing.assert_array_equal(s0[...], segments(expected_s0()))
    attrs = json.loads((out / "s0/attributes.json").read_text())
    assert "isLabelMultiset" not in attrs
    assert attrs["dataType"] == "uint64"
    import zarr

    as_zarr = zarr.open_array(
        zarr.storage.LocalStore(out / "s0"), mode="r"
    )  # Zarr v3 of the same files
    np.testing.assert_array_equal(
        np.asarray(as_zarr[...]).T if as_zarr.shape != IDS.shape else as_zarr[...],
        segments(expected_s0()),
    )


def test_add_zarr_metadata_keeps_skipping_multisets(paintera, tmp_path, capsys):
    import shutil

    copy = tmp_path / "c.n5"
    shutil.copytree(paintera, copy)
    main(["add-zarr-metadata", str(copy)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "labels/fragments/data/s0" in text
    assert "varlength mode" in text
    assert not (copy / "labels/fragments/data/s0/zarr.json").exists()
    assert (copy / "raw/zarr.json").exists()


@pytest.mark.napari
def test_viewer_shows_raw_and_segmentation_with_the_right_scale(make_napari_viewer, paintera):
    viewer = make_napari_viewer()
    layers = viewer.open(str(paintera), plugin="napari-n5zarr")
    kinds = sorted((type(layer).__name__, layer.name, layer.visible) for layer in layers)
    assert kinds == [
        ("Image", "raw", True),
        ("Labels", "labels/fragments", True),
        ("Labels", "labels/fragments (raw fragments)", False),
    ]
    labels = next(layer for layer in layers if layer.name == "labels/fragments")
    assert viewer.layers[-1] is labels
    assert viewer.layers.selection.active is labels  # what a stroke paints
    assert tuple(labels.scale) == (40.0, 4.0, 4.0)
    assert labels.multiscale
    assert labels.data[0].dtype == np.uint64
    assert labels.data[0].shape == IDS.shape[::-1]
    viewer.dims.set_point(0, 2 * 40.0)
    np.testing.assert_array_equal(np.asarray(labels.data[0][2]), segments(expected_s0()).T[2])
