"""The tree model behind the browser, ``n5zarr tree`` and ``n5zarr info``: lazy, metadata
only, errors in place, pyramids as one node, napari-order rows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr.cli import main
from napari_n5zarr.read.tree import Tree, open_tree
from napari_n5zarr.storage.location import join


def dataset(path: Path, dims=(64, 32, 8), block=(16, 16, 8), dtype="uint16", **extra) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    attrs = {"dimensions": list(dims), "blockSize": list(block), "dataType": dtype,
             "compression": {"type": "zstd", "level": 5}, **extra}  # fmt: skip
    (path / "attributes.json").write_text(json.dumps(attrs))
    return path


def test_rows_of_a_real_container(corpus_dir: Path) -> None:
    tree = open_tree(corpus_dir / "zarr_implementations/data/n5-java.n5")
    assert tree.root.kind == "group"
    kids = tree.children(tree.root)
    assert [c.name for c in kids] == ["bzip2", "gzip", "lz4", "raw", "xz"]
    lz4 = kids[2]
    # N5 dimensions [3, 512, 512] (x, y, z) -> napari order (z, y, x)
    assert (lz4.kind, lz4.shape, lz4.axes, lz4.dtype, lz4.blocks) == (
        "array",
        (512, 512, 3),
        ("z", "y", "x"),
        "uint8",
        (100, 100, 1),
    )
    row = lz4.row()
    assert row["shape"] == "512×512×3 zyx"
    assert row["size"] == "768.0 KiB"
    assert [c.row()["compression"] for c in kids] == ["bzip2 9", "gzip", "lz4", "raw", "xz 6"]
    assert all(c.openable for c in kids)


def test_compression_names_are_n5_names_with_levels(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    for name, comp in {"a": {"type": "gzip", "level": 4}, "b": {"type": "zstd", "level": 7},
                       "c": {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}, "d": {"type": "gzip", "useZlib": True, "level": 2}}.items():  # fmt: skip
        dataset(root / name, compression=comp)
    tree = open_tree(root)
    assert [c.compression for c in tree.children(tree.root)] == [
        "gzip 4",
        "zstd 7",
        "blosc lz4 5",
        "gzip (zlib) 2",
    ]


def test_broken_node_in_place_siblings_listed(tmp_path: Path) -> None:
    """issue 7: one child with zstd level 1e9 must not fail the whole tree."""
    root = tmp_path / "c.n5"
    dataset(root / "g/a")
    dataset(root / "g/bad", compression={"type": "zstd", "level": 10**9})
    dataset(root / "g/c")
    dataset(root / "g/str", dtype="string")
    (root / "g/json").mkdir()
    (root / "g/json/attributes.json").write_text("{not json")
    (root / "g/deep").mkdir()
    (root / "g/deep/attributes.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (root / "g/huge").mkdir()
    with open(root / "g/huge/attributes.json", "wb") as f:
        f.truncate(17 * 2**20)  # sparse: over the metadata limit without writing it
    (root / "stray.txt").write_text("not a node")
    tree = open_tree(root)
    assert [c.name for c in tree.children(tree.root)] == ["g"]  # a stray file is not a node
    kids = tree.children(tree.children(tree.root)[0])
    assert [(c.name, c.kind) for c in kids] == [("a", "array"), ("bad", "error"), ("c", "array"), ("deep", "error"),
                                                ("huge", "error"), ("json", "error"), ("str", "error")]  # fmt: skip
    bad = kids[1]
    assert str(root / "g/bad/attributes.json") in bad.error
    assert "22" in bad.error
    assert "JSON nested deeper than 100 levels" in kids[3].error
    assert str(root / "g/huge/attributes.json") in kids[4].error
    assert "over the size limit" in kids[4].error
    assert str(root / "g/json/attributes.json") in kids[5].error
    assert "not valid JSON" in kids[5].error
    assert "'string'" in kids[6].error
    assert not bad.openable
    assert bad.problem == bad.error


def test_fifo_metadata_is_an_error_not_a_hang(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    dataset(root / "a")
    (root / "f").mkdir()
    import os

    os.mkfifo(root / "f/attributes.json")
    tree = open_tree(root)
    kids = tree.children(tree.root)
    assert [(c.name, c.kind) for c in kids] == [("a", "array"), ("f", "error")]
    assert "not a regular file" in kids[1].error


def test_listing_is_lazy_and_paged(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    for i in range(1234):
        dataset(root / "big" / f"d{i}")
    dataset(root / "other/x")
    tree = open_tree(root)
    groups = tree.children(tree.root)
    assert [g.name for g in groups] == ["big", "other"]
    assert "big" not in [
        p.split("/")[0] for p in tree._nodes if "/" in p
    ]  # nothing read below "big" yet
    pages = list(tree.iter_children(groups[0], page_size=500))
    assert [len(p) for p in pages] == [100, 500, 500, 134]  # first page small, no cap
    names = [c.name for p in pages for c in p]
    assert names[:3] == ["d0", "d1", "d2"]
    assert names[9:11] == ["d9", "d10"]
    assert len(set(names)) == 1234


def test_pyramids_are_one_node(tmp_path: Path, conventions_dir: Path) -> None:
    a = (np.arange(9 * 20 * 30).reshape(9, 20, 30) % 251).astype("uint8")
    export(a, tmp_path / "pyr.n5", chunks=8, scale=(3.0, 1.0, 1.0), units="micrometer")
    tree = open_tree(tmp_path / "pyr.n5")
    assert tree.root.kind == "pyramid"
    assert tree.root.kind_text.endswith("3 levels")
    assert tree.root.shape == (9, 20, 30)
    assert tree.root.scale == (3.0, 1.0, 1.0)
    assert tree.root.row()["voxel"] == "3 × 1 × 1 µm"
    assert tree.root.levels == ("s0", "s1", "s2")
    assert [c.name for c in tree.children(tree.root)] == ["s0", "s1", "s2"]

    tree = open_tree(conventions_dir / "n5-ij/test.n5")
    kinds = {c.name: c.kind_text for c in tree.children(tree.root)}
    assert kinds["cosem_ms"] == "COSEM, 3 levels"
    assert kinds["c0"] == "COSEM, 2 levels"
    assert kinds["cosem"] == "dataset"
    assert kinds["others"] == "group"


def test_n5viewer_pyramid_inherits_resolution(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    (root / "img").mkdir(parents=True)
    (root / "img/attributes.json").write_text(
        json.dumps({"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}})
    )
    dataset(root / "img/s0", dims=(64, 64, 8))
    dataset(root / "img/s1", dims=(32, 32, 8), downsamplingFactors=[2, 2, 1])
    tree = open_tree(root)
    img = tree.children(tree.root)[0]
    assert (img.kind, img.convention, img.levels) == ("pyramid", "n5viewer", ("img/s0", "img/s1"))
    assert img.row()["voxel"] == "40 × 4 × 4 nm"
    s1 = tree.children(img)[1]
    assert s1.scale == (40.0, 8.0, 8.0)


def test_one_dimensional_data_is_greyed_with_reason(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    dataset(root / "line", dims=(100,), block=(10,))
    tree = open_tree(root)
    line = tree.children(tree.root)[0]
    assert line.kind == "array"
    assert not line.openable
    assert line.reason == "1-D data cannot be shown as an image"


def test_walk_streams_depth_first(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    dataset(root / "a/x")
    dataset(root / "b")
    tree = open_tree(root)
    assert [(d, n.path) for d, n in tree.walk()] == [(0, ""), (1, "a"), (2, "a/x"), (1, "b")]
    assert tree.find("a/x").kind == "array"
    with pytest.raises(KeyError):
        tree.find("nope")


def test_block_count_and_thumbnail(tmp_path: Path) -> None:
    a = np.zeros((4, 40, 30), "uint16")
    a[2, 10:20, 5:15] = 1000
    export(a, tmp_path / "pyr.n5", chunks=8, levels=1)
    tree = open_tree(tmp_path / "pyr.n5")
    node = tree.root if tree.root.kind != "group" else tree.children(tree.root)[0]
    on_disk, expected, partial = tree.block_count(node)
    assert expected == 1 * 5 * 4
    assert on_disk <= expected
    assert not partial
    thumb = tree.thumbnail(node)
    assert thumb.dtype == np.uint8
    assert thumb.shape == (40, 30)
    assert thumb[15, 10] == 255
    assert thumb[0, 0] == 0
    with pytest.raises(ValueError, match="would decode"):
        tree.thumbnail(node, max_decode=1000)


def test_zip_and_bdv_xml(tmp_path: Path, corpus_dir: Path) -> None:
    src = corpus_dir / "zarr_implementations/data/n5-java.n5"
    shutil.make_archive(str(tmp_path / "j"), "zip", src)
    tree = open_tree(tmp_path / "j.zip")
    assert [c.name for c in tree.children(tree.root)] == ["bzip2", "gzip", "lz4", "raw", "xz"]
    with pytest.raises(FileNotFoundError):
        open_tree(tmp_path / "missing.n5")


def test_join() -> None:
    assert join("s3://b/c.n5/", "g/a") == "s3://b/c.n5/g/a"
    assert join("/x/c.n5", "") == "/x/c.n5"


def test_tree_is_a_tree(tmp_path: Path) -> None:
    assert isinstance(open_tree(tmp_path), Tree)


# -- the CLI faces -----------------------------------------------------------------------


def test_cli_tree_rows_and_errors_in_place(tmp_path: Path, capsys) -> None:
    root = tmp_path / "c.n5"
    dataset(root / "a", dims=(30, 20, 9), block=(8, 8, 8))
    dataset(root / "bad", compression={"type": "zstd", "level": 10**9})
    dataset(root / "c")
    assert main(["tree", str(root)]) == 1  # a broken node is reported, its siblings listed
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "├── a  9×20×30 zyx  uint16  blocks 8×8×8  zstd 5  10.5 KiB  (N5 only)"
    assert out[2].startswith("├── bad  ! unreadable: " + str(root / "bad/attributes.json"))
    assert out[3].startswith("└── c  8×32×64 zyx")


def test_cli_tree_json_lines(tmp_path: Path, capsys) -> None:
    root = tmp_path / "c.n5"
    dataset(root / "g/a", dims=(30, 20, 9))
    assert main(["tree", "--json", str(root)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["depth"], r["path"], r["kind"]) for r in rows] == [
        (0, "", "group"),
        (1, "g", "group"),
        (2, "g/a", "array"),
    ]
    assert rows[2]["shape"] == [9, 20, 30]
    assert rows[2]["axes"] == ["z", "y", "x"]
    assert rows[2]["compression"] == "zstd 5"


def test_cli_tree_streams_before_the_walk_ends(tmp_path: Path) -> None:
    """The first rows are printed while later groups are still unread: a group made
    unreadable after the first line appears must still be reported in place."""
    root = tmp_path / "c.n5"
    for g in range(30):
        for d in range(50):
            dataset(root / f"g{g:02d}" / f"d{d:02d}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "napari_n5zarr.cli", "tree", str(root)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    first = [proc.stdout.readline() for _ in range(3)]
    (root / "g29/d49/attributes.json").write_text("{broken")  # not read yet
    rest = proc.stdout.read()
    proc.wait(timeout=60)
    assert first[1].startswith("├── g00/")
    assert "d49  ! unreadable" in rest.splitlines()[-1]


def test_cli_info_one_node_in_full(tmp_path: Path, capsys) -> None:
    a = (np.arange(9 * 20 * 30).reshape(9, 20, 30) % 251).astype("uint8")
    dest = tmp_path / "pyr.n5"
    export(a, dest, chunks=8, scale=(3.0, 1.0, 1.0), units="micrometer")
    assert main(["info", str(dest / "s0")]) == 0
    out = capsys.readouterr().out
    assert "shape       9×20×30 zyx" in out
    assert "on disk     24 of 24 blocks" in out
    assert main(["info", "--json", str(dest)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "pyramid"
    assert doc["levels"] == ["s0", "s1", "s2"]
    ms = doc["multiscales"][0]
    assert ms["scale"] == [3.0, 1.0, 1.0]
    assert ms["axes"] == ["z", "y", "x"]
    assert ms["levels"][0] == {"path": "s0", "shape": [9, 20, 30]}


BDV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<SpimData version="0.2">
  <BasePath type="relative">.</BasePath>
  <SequenceDescription>
    <ImageLoader format="bdv.n5" version="1.0"><n5 type="relative">c.n5</n5></ImageLoader>
    <ViewSetups>
      <ViewSetup><id>0</id><name>0</name><size>20 12 6</size>
        <voxelSize><unit>µm</unit><size>0.1 0.2 1.5</size></voxelSize></ViewSetup>
    </ViewSetups>
    <Timepoints type="range"><first>0</first><last>2</last></Timepoints>
  </SequenceDescription>
</SpimData>
"""


def test_bigdataviewer_xml_setup_is_one_pyramid(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    (root / "setup0").mkdir(parents=True)
    (root / "setup0/attributes.json").write_text(
        json.dumps({"downsamplingFactors": [[1, 1, 1], [2, 2, 2]], "dataType": "uint16"})
    )
    for t in range(3):
        dataset(root / f"setup0/timepoint{t}/s0", dims=(20, 12, 6), block=(8, 8, 6))
        dataset(
            root / f"setup0/timepoint{t}/s1",
            dims=(10, 6, 3),
            block=(8, 8, 3),
            downsamplingFactors=[2, 2, 2],
        )
    (tmp_path / "dataset.xml").write_text(BDV_XML)
    tree = open_tree(tmp_path / "dataset.xml")
    assert tree.n5_location == str(root)
    (setup,) = tree.children(tree.root)
    assert (setup.kind, setup.convention, setup.timepoints) == (
        "pyramid",
        "bdv-xml",
        3,
    )  # voxel size from the XML
    assert setup.kind_text == "BigDataViewer, 2 levels, 3 timepoints"
    assert setup.row()["voxel"].endswith("1.5 × 0.2 × 0.1 µm")  # the XML's voxel size (t first)
    assert [c.name for c in tree.children(setup)] == ["timepoint0", "timepoint1", "timepoint2"]


def test_listing_over_http(tmp_path: Path, corpus_dir: Path) -> None:
    """A URL lists through fsspec (the served folder's index pages) like a folder."""
    import functools
    import http.server
    import threading

    shutil.copytree(corpus_dir / "zarr_implementations/data/n5-java.n5", tmp_path / "j.n5")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tree = open_tree(f"http://127.0.0.1:{server.server_port}/j.n5")
        kids = tree.children(tree.root)
        assert [c.name for c in kids] == ["bzip2", "gzip", "lz4", "raw", "xz"]
        assert kids[0].shape == (512, 512, 3)
        assert kids[0].compression == "bzip2 9"
    finally:
        server.shutdown()


def test_a_row_shows_what_the_reader_opens(tmp_path: Path) -> None:
    """One walk: a row's shape, blocks and voxel size are the reader's, here for a plain
    (C-order) Zarr v3 array, which rows once showed reversed, and a pyramid whose scale of 0
    the reader replaces by 1."""
    import zarr

    from napari_n5zarr.read.images import open_images

    group = zarr.open_group(tmp_path / "p.zarr", mode="w")
    group.create_array("img", shape=(10, 20, 30), chunks=(5, 10, 30), dtype="uint8")
    pyr = zarr.open_group(
        tmp_path / "p.zarr" / "pyr", mode="w", attributes={"resolution": [0, 2, 3]}
    )
    for k in range(2):
        pyr.create_array(f"s{k}", shape=(8 >> k, 6, 4), chunks=(4, 6, 4), dtype="uint16")
    tree = open_tree(tmp_path / "p.zarr")
    rows = {n.name: n for n in tree.children(tree.root)}
    opened = {image.multiscale.name: image for image in open_images(tmp_path / "p.zarr").images}
    assert set(rows) == set(opened) == {"img", "pyr"}
    for name, row in rows.items():
        image = opened[name]
        assert row.shape == image.levels[0].shape
        assert row.scale == image.multiscale.scale[::-1]
    assert rows["img"].shape == (10, 20, 30)
    assert rows["img"].blocks == (5, 10, 30)
    assert rows["pyr"].scale[-1] == 1.0  # as the reader shows it
