"""The node tree behind the browser widget: metadata only, errors reported in place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import napari_n5zarr
from napari_n5zarr.tree import build_tree, join


def test_tree_of_a_real_container(corpus_dir: Path) -> None:
    top = build_tree(napari_n5zarr.open(corpus_dir / "zarr_implementations/data/n5-java.n5"))
    assert top.kind == "group"
    assert [c.name for c in top.children] == ["bzip2", "gzip", "lz4", "raw", "xz"]
    lz4 = top.children[2]
    assert (lz4.kind, lz4.shape, lz4.dtype, lz4.chunks, lz4.compression) == ("array", (3, 512, 512), "uint8", (1, 100, 100), "n5zarr.lz4block")
    assert lz4.summary == "[3, 512, 512] uint8 blocks [1, 100, 100] n5zarr.lz4block"


def test_unreadable_node_reported_and_siblings_kept(tmp_path: Path, corpus_dir: Path) -> None:
    root = tmp_path / "c.n5"
    shutil.copytree(corpus_dir / "tensorstore/tensorstore/driver/n5/testdata/raw", root / "g/good")
    (root / "g/bad").mkdir(parents=True)
    (root / "g/bad/attributes.json").write_text(json.dumps({"dimensions": [2], "blockSize": [2], "dataType": "string"}))
    (root / "stray.txt").write_text("not a node")
    top = build_tree(napari_n5zarr.open(root))
    g = top.children[0]
    assert [c.name for c in top.children] == ["g"]  # a stray file is not a node
    assert [(c.name, c.kind) for c in g.children] == [("bad", "error"), ("good", "array")]
    assert "dataType 'string'" in g.children[0].error
    assert [n.path for n in top.walk()] == ["", "g", "g/bad", "g/good"]


def test_max_nodes(corpus_dir: Path) -> None:
    top = build_tree(napari_n5zarr.open(corpus_dir / "zarr_implementations/data/n5-java.n5"), max_nodes=2)
    assert [c.name for c in top.children] == ["bzip2", "gzip", "…"]


def test_join() -> None:
    assert join("s3://b/c.n5/", "g/a") == "s3://b/c.n5/g/a"
    assert join("/x/c.n5", "") == "/x/c.n5"
