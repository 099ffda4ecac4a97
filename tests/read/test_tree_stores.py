"""The tree lists through the store chain (ImplicitGroupStore(N5DefaultStore(base))): local
folders, zips and URLs give the same rows; the local chain answers without zarr's event
loop; over HTTP each attributes.json is requested once."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from faulty_http import FaultyServer, serve
from format_cases import METADATA_ONLY_ATTRS, write_container
from zarr.buffer import default_buffer_prototype

import napari_n5zarr
from napari_n5zarr.access import base_store, wrap
from napari_n5zarr.n5.stores import get_many, list_names
from napari_n5zarr.read.tree import open_tree

SRC = Path(napari_n5zarr.__file__).resolve().parents[1]


def mixed_container(root: Path) -> Path:
    """Implicit groups, datasets, a Zarr-only group, a dual folder, bad JSON, a stray file."""
    write_container(root, ["g/a", "g/h/b", "s0", "s1"])
    (root / "z").mkdir()
    (root / "z/zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": {"k": 1}}'
    )
    (root / "bad").mkdir()
    (root / "bad/attributes.json").write_text("{not json")
    (root / "g/notes.txt").write_text("not a node")
    zarr_view = napari_n5zarr.open(root / "g/a").metadata.to_dict()
    (root / "g/a/zarr.json").write_text(
        json.dumps({**zarr_view, "shape": [1, 2, 3]})
    )  # a dual folder that disagrees
    return root


def rows(location: Path | str) -> list[tuple]:
    tree = open_tree(location)
    return [(depth, n.path, n.kind, n.shape, n.dtype, n.blocks, n.n5, n.zarr, n.warning is not None, n.error is not None)
            for depth, n in tree.walk()]  # fmt: skip


def test_local_folder_and_zip_list_the_same_rows(tmp_path: Path) -> None:
    root = mixed_container(tmp_path / "c.n5")
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in sorted(root.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(root).as_posix())
    local = rows(root)
    assert local == rows(archive)
    by_path = {r[1]: r for r in local}
    assert by_path["g"][2] == "group"
    assert not by_path["g"][6]
    assert "g/notes.txt" not in by_path  # a stray file is not a node
    assert by_path["g/a"][7]
    assert by_path["g/a"][8]
    assert by_path["z"][2] == "group"
    assert by_path["z"][7]
    assert not by_path["z"][6]
    assert by_path["bad"][2] == "error"


def test_the_local_chain_lists_and_answers_in_the_calling_thread(tmp_path: Path) -> None:
    root = write_container(tmp_path / "c.n5", ["g/a"])
    store = wrap(base_store(root))
    assert sorted(store.list_dir_sync("")) == [
        "g",
        "zarr.json",
    ]  # attributes.json shows as zarr.json
    assert store.list_dir_sync("g") == ["a"]
    implicit = store.get_sync("g/zarr.json", prototype=default_buffer_prototype())
    assert (
        json.loads(implicit.to_bytes())["node_type"] == "group"
    )  # the store decides implicit groups
    assert list_names(store, "g") == ["a"]
    got = get_many(store, ["g/a/zarr.json", "g/a/attributes.json", "g/nothing/zarr.json"])
    assert json.loads(got[0])["node_type"] == "array"
    assert got[1] == METADATA_ONLY_ATTRS.encode()
    assert got[2] is None


def test_a_rewritten_attributes_json_is_translated_again(tmp_path: Path) -> None:
    root = write_container(tmp_path / "c.n5", ["a"])
    store = wrap(base_store(root))
    first = json.loads(get_many(store, ["a/zarr.json"])[0])
    attrs = json.loads(METADATA_ONLY_ATTRS)
    (root / "a/attributes.json").write_text(json.dumps({**attrs, "dimensions": [7, 7, 7]}))
    second = json.loads(get_many(store, ["a/zarr.json"])[0])
    assert (
        second["shape"] == [7, 7, 7] != first["shape"]
    )  # kept translations are found by content, not by key


@pytest.fixture
def served(tmp_path: Path):
    mixed_container(tmp_path / "c.n5")
    yield from serve(FaultyServer(root=tmp_path))


def test_over_http_the_same_rows_and_each_attributes_json_requested_once(
    served: FaultyServer, tmp_path: Path
) -> None:
    local = rows(tmp_path / "c.n5")
    served.hits.clear()
    assert rows(f"{served.url}/c.n5") == local
    datasets = {
        f"/c.n5/{p}/attributes.json": served.hits[f"/c.n5/{p}/attributes.json"]
        for p in ("s0", "s1", "g/a", "g/h/b")
    }
    assert all(n == 1 for n in datasets.values()), (
        datasets
    )  # the store translates the copy just read


def test_a_404_page_is_read_before_its_connection_is_closed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A connection closed with a 404 page unread is reset: the server then prints a
    traceback (the HTTP tests' server did, into the next command's stderr)."""
    for server in serve(FaultyServer(root=tmp_path)):
        store = base_store(f"{server.url}/c.n5")
        for _ in range(
            3
        ):  # many at once, as a listing asks: the reset is a race, lost now and then
            assert (
                get_many(store, [f"nothing{i}/attributes.json" for i in range(40)]) == [None] * 40
            )
        del store
        gc.collect()
        time.sleep(0.5)
    assert "ConnectionResetError" not in capfd.readouterr().err


def test_building_the_cli_parser_imports_no_writer() -> None:
    """``n5zarr tree`` builds the whole parser: it must not import the writer (dask)."""
    code = "import sys; from napari_n5zarr.cli import build_parser; build_parser(); print('napari_n5zarr.write.export.plan' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_pickled_array_still_refuses_an_impossible_block_header(tmp_path: Path) -> None:
    """Block grids are worked out at the first block (not at every translation): an array
    sent to a dask worker still checks headers against its position."""
    import pickle
    import struct

    import numpy as np

    from napari_n5zarr.errors import N5BlockError

    arr = napari_n5zarr.create_dataset(
        napari_n5zarr.open(tmp_path / "c.n5", mode="w"),
        "a",
        shape=(8, 8),
        dtype="uint8",
        chunks=(4, 4),
    )
    arr[...] = np.arange(64, dtype="uint8").reshape(8, 8)
    copy = pickle.loads(pickle.dumps(napari_n5zarr.open(tmp_path / "c.n5/a")))
    # an interior-sized block 0/0 whose header says 2x2: impossible at a full-block position
    (tmp_path / "c.n5/a/0/0").write_bytes(struct.pack(">HHII", 0, 2, 2, 2) + bytes(4))
    with pytest.raises(N5BlockError):
        copy[...]
