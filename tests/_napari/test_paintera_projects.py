"""Paintera projects as Paintera keeps them (issue 27): ``label-to-block-mapping/sN`` with
``dimensions: [Long.MAX_VALUE]`` list as lookup tables with exit 0 (also without ``data/``),
never as layers; ``resolution`` is in nanometres unless ``unit`` says otherwise; hostile
attributes (a resolution of 0 or below, a fragment listed twice, an assignment declaring
more pairs than it stores) take Paintera's rule or a fallback with a one-line notice."""

from __future__ import annotations

import json
import shutil
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from paintera_multiset import LONG_MAX, expected_s0, segments, write_paintera_container

import napari_n5zarr
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.cli import main
from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.label_multiset import assignment_table
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.read.images import open_images
from napari_n5zarr.read.tree import open_tree

TABLES = ("label-to-block-mapping", "unique-labels", "fragment-segment-assignment")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A Paintera project with every bookkeeping dataset Paintera's libraries write."""
    return write_paintera_container(
        tmp_path_factory.mktemp("paintera") / "p.n5", assignment=True, block_lookup=True
    )


def _copy(project: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(project, tmp_path / "p.n5"))


def _fragments_attrs(root: Path, rel: str, **changes) -> None:
    path = root / "labels/fragments" / rel / "attributes.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _tree_lines(capsys) -> dict[str, str]:
    lines = {}
    for line in capsys.readouterr().out.splitlines()[1:]:
        lines.setdefault(line.split("── ")[-1].split()[0], line)
    return lines


def _layers(path: Path) -> tuple[dict[str, tuple], list[str]]:
    notes: list[str] = []
    layers = read_path(path, notify=lambda level, message: notes.append(message))
    return {layer[1]["name"]: layer for layer in layers}, notes


# -- listing ---------------------------------------------------------------------------


def test_tree_lists_the_block_lookup_as_a_lookup_table_with_exit_0(project, capsys):
    assert main(["tree", str(project)]) == 0
    out = capsys.readouterr().out
    assert "unreadable" not in out
    rows = [
        line
        for line in out.splitlines()
        if "label-to-block-mapping" in line or line.rstrip().endswith(("s0", "s1", "s2"))
    ]
    mapping = [line for line in out.splitlines() if "9223372036854775807" in line]
    assert len(mapping) == 4, rows  # the group and its s0, s1, s2
    assert all(
        "[Paintera lookup table" in line and "!" not in line and "PiB" not in line
        for line in mapping
    ), mapping
    assert main(["tree", "--json", str(project)]) == 0
    nodes = {n["path"]: n for n in map(json.loads, capsys.readouterr().out.splitlines())}
    level = nodes["labels/fragments/label-to-block-mapping/s0"]
    assert level["kind"] == "array"
    assert not level["openable"]
    assert level["shape"] == [LONG_MAX]
    assert "label-to-block-mapping" in nodes["labels/fragments"]["facts"]["bookkeeping"]


@pytest.mark.parametrize(
    "rel",
    [
        "",
        "labels/fragments",
        "labels/fragments/label-to-block-mapping",
        "labels/fragments/label-to-block-mapping/s0",
    ],
)
def test_info_answers_every_node_of_the_project_with_exit_0(project, capsys, rel):
    assert main(["info", str(project / rel)]) == 0
    out = capsys.readouterr()
    assert "must be in" not in out.out + out.err


def test_the_reader_never_opens_the_bookkeeping(project):
    found = open_images(project)
    assert found.problems == []
    assert sorted(image.multiscale.name for image in found.images) == ["labels/fragments", "raw"]


@pytest.mark.parametrize(
    "rel",
    [
        "unique-labels",
        "unique-labels/s0",
        "fragment-segment-assignment",
        "label-to-block-mapping",
        "label-to-block-mapping/s1",
    ],
)
def test_a_lookup_table_opened_on_its_own_is_no_layer(project, capsys, rel):
    layers, notes = _layers(project / "labels/fragments" / rel)
    assert layers == {}
    assert len(notes) == 1
    assert f"Paintera lookup table ({rel.split('/')[0]}), not an image" in notes[0]
    assert main(["info", str(project / "labels/fragments" / rel)]) == 0
    assert "cannot open: Paintera lookup table" in capsys.readouterr().out


def test_a_paintera_group_without_data_lists_and_opens_no_bookkeeping(project, tmp_path, capsys):
    root = _copy(project, tmp_path)
    shutil.rmtree(root / "labels/fragments/data")
    assert main(["tree", str(root)]) == 0
    lines = _tree_lines(capsys)
    for table in ("fragment-segment-assignment", "unique-labels/", "label-to-block-mapping/"):
        assert "Paintera lookup table" in lines[table]
    assert main(["info", str(root)]) == 0
    found = open_images(root)
    assert [image.multiscale.name for image in found.images] == ["raw"]
    assert found.problems == []
    layers, notes = _layers(root)
    assert list(layers) == ["raw"]
    assert notes == []


# -- 64-bit dimensions -----------------------------------------------------------------


def test_n5_dimensions_are_java_longs():
    meta = N5DatasetMetadata.from_json(
        {"dimensions": [LONG_MAX], "blockSize": [10000], "dataType": "int8"}
    )
    assert meta.to_zarr_json()["shape"] == [LONG_MAX]
    with pytest.raises(N5MetadataError, match=r"\[0, 2\*\*63\)"):
        N5DatasetMetadata.from_json(
            {"dimensions": [LONG_MAX + 1], "blockSize": [10000], "dataType": "int8"}
        )
    with pytest.raises(
        N5MetadataError, match=r"\[1, 2\*\*32\)"
    ):  # block sizes stay u32 (every block header)
        N5DatasetMetadata.from_json({"dimensions": [5], "blockSize": [2**32], "dataType": "int8"})


def test_a_long_max_dataset_reads_where_it_is_addressable(project):
    level = napari_n5zarr.open(project / "labels/fragments/label-to-block-mapping/s1", mode="r")
    assert level.shape == (LONG_MAX,)
    np.testing.assert_array_equal(
        level[LONG_MAX - 3 :], np.zeros(3, "int8")
    )  # a block never written
    np.testing.assert_array_equal(level[20000:20005], np.zeros(5, "int8"))


def test_copying_a_long_max_dataset_is_refused_in_one_line(tmp_path, capsys):
    """Not a MemoryError (exit 7) from dask's list of blocks: the copy cannot address it."""
    root = napari_n5zarr.open(tmp_path / "h.n5", mode="w")
    napari_n5zarr.create_dataset(root, "big", shape=(LONG_MAX, 8), dtype="uint8", chunks=(64, 8))
    source = tmp_path / "h.n5/big"
    assert main(["convert", str(source), str(tmp_path / "out.zarr")]) == 5
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(source) in err
    assert "blocks along axis 0" in err


# -- units and resolution --------------------------------------------------------------


def test_paintera_resolution_is_in_nanometres(project, capsys):
    layers, notes = _layers(project)
    assert notes == []
    labels = layers["labels/fragments"][1]
    assert tuple(labels["scale"]) == (40.0, 4.0, 4.0)
    assert tuple(labels["units"]) == ("nanometer",) * 3
    assert "nanometer" not in (layers["raw"][1].get("units") or ())  # not a Paintera group: no unit
    assert main(["tree", str(project)]) == 0
    assert "40 × 4 × 4 nm" in _tree_lines(capsys)["fragments/"]


@pytest.mark.parametrize(
    ("unit", "expected"), [("um", "micrometer"), ("pixel", "nanometer"), ("nm", "nanometer")]
)
def test_paintera_unit_attribute_says_otherwise(project, tmp_path, unit, expected):
    """Paintera writes ``unit`` on each ``data/sN`` (``"pixel"`` when it knows none)."""
    root = _copy(project, tmp_path)
    for level in ("s0", "s1"):
        _fragments_attrs(root, f"data/{level}", unit=unit)
    layers, notes = _layers(root)
    assert tuple(layers["labels/fragments"][1]["units"]) == (expected,) * 3
    assert notes == []


@pytest.mark.parametrize(
    ("resolution", "scale"),
    [([0.0, 4.0, 40.0], (40.0, 4.0, 1.0)), ([4.0, -4.0, 40.0], (40.0, 1.0, 4.0))],
)
def test_a_resolution_of_zero_or_below_falls_back_to_1_with_one_notice(
    project, tmp_path, capsys, resolution, scale
):
    root = _copy(project, tmp_path)
    _fragments_attrs(root, "data", resolution=resolution)
    layers, notes = _layers(root)
    assert (
        tuple(layers["labels/fragments"][1]["scale"]) == scale
    )  # napari order; the pyramid's factors kept
    assert [n for n in notes if "not positive" in n] == notes
    assert len(notes) == 1
    assert "labels/fragments" in notes[0]
    level1 = layers["labels/fragments"][0][1]
    assert level1.shape == (6, 6, 10)
    assert main(["info", str(root / "labels/fragments")]) == 0
    out = capsys.readouterr().out
    assert sum("note: resolution" in line for line in out.splitlines()) == 1


def test_a_scale_of_zero_in_any_convention_falls_back_with_a_notice(tmp_path):
    root = napari_n5zarr.open(tmp_path / "z.n5", mode="w")
    napari_n5zarr.create_dataset(root, "img", shape=(8, 8, 4), dtype="uint8", chunks=(8, 8, 4))
    doc = tmp_path / "z.n5/img/attributes.json"
    doc.write_text(
        json.dumps(
            {
                **json.loads(doc.read_text()),
                "pixelResolution": {"unit": "um", "dimensions": [0.5, 0.5, 0]},
            }
        )
    )
    layers, notes = _layers(tmp_path / "z.n5")
    assert tuple(layers["img"][1]["scale"]) == (1.0, 0.5, 0.5)
    assert len(notes) == 1
    assert "not positive on z" in notes[0]


# -- the fragment-segment assignment ---------------------------------------------------


def _write_pairs(folder: Path, pairs: list[tuple[int, int]], declared: int | None = None) -> None:
    """As ``N5FragmentSegmentAssignmentPersister``, the pairs in order (a fragment may repeat);
    ``declared``: the pair count attributes.json claims (and the block size it gives)."""
    n = len(pairs)
    count = n if declared is None else declared
    doc = {
        "dataType": "uint64",
        "dimensions": [count, 2],
        "blockSize": [max(count, 1), 1],
        "compression": {"type": "raw"},
    }
    (folder / "attributes.json").write_text(json.dumps(doc))
    for column in (0, 1):
        values = [p[column] for p in pairs]
        (folder / "0" / str(column)).write_bytes(
            struct.pack(">HHII", 0, 2, n, 1) + struct.pack(f">{n}Q", *values)
        )


def test_a_fragment_listed_twice_keeps_its_last_segment(project, tmp_path):
    """Paintera's loader: ``new TLongLongHashMap(keys, values)`` puts the pairs in order."""
    keys, values = assignment_table(np.array([[5, 1, 5, 2], [10, 11, 12, 13]], dtype=np.uint64))
    assert dict(zip(keys.tolist(), values.tolist(), strict=True)) == {1: 11, 2: 13, 5: 12}
    root = _copy(project, tmp_path)
    _write_pairs(
        root / "labels/fragments/fragment-segment-assignment",
        [(1, 1000), (2, 1000), (1, 2000), (5, 1001)],
    )
    layers, notes = _layers(root)
    assert notes == []
    s0 = np.asarray(layers["labels/fragments"][0][0][...])
    fragments = expected_s0().T
    assert (s0[fragments == 1] == 2000).all()
    assert (s0[fragments == 2] == 1000).all()
    assert (s0[fragments == 5] == 1001).all()


def test_an_assignment_declaring_more_than_it_stores_is_never_allocated(project, tmp_path):
    root = _copy(project, tmp_path)
    pairs = [(1, 1000), (2, 1000)]
    _write_pairs(
        root / "labels/fragments/fragment-segment-assignment", pairs, declared=20_000_000
    )  # 320 MB declared
    tracemalloc.start()
    try:
        layers, notes = _layers(root)
        np.asarray(layers["labels/fragments"][0][0][...])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20
    assert len(notes) == 1
    assert "declares 20000000 fragment-segment pairs" in notes[0]
    assert "shown as fragments" in notes[0]
    np.testing.assert_array_equal(
        np.asarray(layers["labels/fragments"][0][0][...]), expected_s0().T
    )  # the fallback


def test_an_honest_assignment_still_reads(project):
    layers, _ = _layers(project)
    np.testing.assert_array_equal(
        np.asarray(layers["labels/fragments"][0][0][...]), segments(expected_s0()).T
    )


# -- the browser -----------------------------------------------------------------------


@pytest.mark.napari
def test_browser_shows_the_lookup_tables_without_red(project):
    from napari_n5zarr._napari.browser import tooltip
    from napari_n5zarr._napari.browser_details import details_html

    tree = open_tree(project)
    for path in ("labels/fragments/label-to-block-mapping", "labels/fragments/label-to-block-mapping/s0",
                 "labels/fragments/unique-labels/s0", "labels/fragments/fragment-segment-assignment"):  # fmt: skip
        node = tree.find(path)
        assert node.error is None
        assert not node.openable
        text = tooltip(node) + "".join(details_html(node, {}))
        assert "Paintera lookup table" in text
        assert "#c33" not in text
        assert "unreadable" not in text.lower()


@pytest.mark.napari
def test_browser_widget_lists_the_project_without_red(
    make_napari_viewer, qtbot, project, monkeypatch, tmp_path
):
    from napari_n5zarr._napari.browser import GREY, BrowserWidget

    monkeypatch.setenv("NAPARI_N5ZARR_CONFIG", str(tmp_path / "config"))
    viewer = make_napari_viewer()
    browser = BrowserWidget(viewer)
    viewer.window.add_dock_widget(browser, name="N5 browser", area="right")
    browser.load(str(project))
    qtbot.waitUntil(
        lambda: browser.tree_model is not None and not browser.busy and not browser._loading,
        timeout=60_000,
    )
    browser.expand_all()
    level = "labels/fragments/label-to-block-mapping/s2"
    qtbot.waitUntil(lambda: level in browser._items and not browser.busy, timeout=60_000)
    assert not any(item.text(3) == "unreadable" for item in browser._items.values())
    row = browser._items[level]
    assert row.foreground(0).color() == GREY
    browser.tree.setCurrentItem(row)
    qtbot.waitUntil(
        lambda: "Paintera lookup table (label-to-block-mapping)" in browser.details.toPlainText(),
        timeout=30_000,
    )
    qtbot.waitUntil(lambda: not browser.busy, timeout=30_000)
    html = browser.details.toHtml().lower()
    assert 'color:#808080;">paintera lookup table' in html  # grey, as the row
    assert "#cc3333" not in html  # the red of faults
    assert not browser.open_button.isEnabled()
