"""The publish step alone: Destination (lock, refusal, staging, marker, cleanup) and the
metadata documents of a plan, written without any block."""

import json

import numpy as np
import pytest
import zarr

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.access import ensure_codecs_registered
from napari_n5zarr.write.export.plan import make_plan
from napari_n5zarr.write.export.publish import (
    INCOMPLETE_MARKER,
    Destination,
    publish_metadata,
    publish_parents,
)


@pytest.fixture(autouse=True)
def codecs():
    ensure_codecs_registered()


def small_plan(**kwargs):
    return make_plan([np.zeros((20, 30), "uint16")], given_levels=False, chunks=16, **kwargs)


def files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_publish_metadata_writes_every_node(tmp_path):
    from zarr.storage import LocalStore

    plan = small_plan(compression="gzip")
    publish_metadata(LocalStore(tmp_path), "", plan)
    assert files(tmp_path) == [
        "attributes.json", "s0/attributes.json", "s0/zarr.json", "s1/attributes.json", "s1/zarr.json", "zarr.json",
    ]  # fmt: skip
    s1 = json.loads((tmp_path / "s1/attributes.json").read_text())
    assert s1["dimensions"] == [15, 10]
    assert s1["blockSize"] == [15, 10]
    assert s1["dataType"] == "uint16"
    assert s1["compression"]["type"] == "gzip"
    assert s1["downsamplingFactors"] == [2, 2]
    assert json.loads((tmp_path / "attributes.json").read_text())["n5"].startswith("4.")
    group = zarr.open_group(tmp_path, mode="r")
    assert group["s0"].shape == (30, 20)  # N5 order


def test_publish_n5_only_and_parents(tmp_path):
    from zarr.storage import LocalStore

    store = LocalStore(tmp_path)
    plan = small_plan(zarr_json=False, path="a/b")
    publish_metadata(store, plan.prefix, plan)
    publish_parents(store, plan.prefix, plan.zarr_json)
    assert files(tmp_path) == [
        "a/attributes.json", "a/b/attributes.json", "a/b/s0/attributes.json", "a/b/s1/attributes.json", "attributes.json",
    ]  # fmt: skip


def test_destination_marks_incomplete_until_published(tmp_path):
    dest = tmp_path / "out.n5"
    plan = small_plan()
    with Destination(dest, plan.prefix, overwrite=False, storage_options=None) as d:
        _, prefix = d.open()
        assert prefix == ""
        assert (dest / INCOMPLETE_MARKER).is_file()
        assert json.loads((dest / INCOMPLETE_MARKER).read_text())["pid"] > 0
        d.publish(plan)
    assert not (dest / INCOMPLETE_MARKER).exists()
    assert napari_n5zarr.open(dest)["s1"].shape == (15, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.n5"]  # no lock file left


def test_destination_removes_a_failed_export(tmp_path):
    dest = tmp_path / "out.n5"

    def fail_after_a_partial_write() -> None:
        with Destination(dest, "", overwrite=False, storage_options=None) as d:
            d.open()
            (dest / "s0").mkdir()
            (dest / "s0" / "0").write_bytes(b"partial")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_after_a_partial_write()
    assert list(tmp_path.iterdir()) == []


def test_destination_refuses_an_existing_node_and_deletes_nothing(tmp_path):
    dest = tmp_path / "out.n5"
    export(np.ones((8, 8), "uint8"), dest, chunks=4)
    before = files(dest)
    with (
        pytest.raises(FileExistsError, match="already exists"),
        Destination(dest, "", overwrite=False, storage_options=None) as d,
    ):
        d.open()
    assert files(dest) == before


def test_overwrite_writes_beside_and_swaps_only_on_publish(tmp_path):
    dest = tmp_path / "out.n5"
    export(np.ones((8, 8), "uint8"), dest, chunks=4)
    before = files(dest)
    plan = small_plan()

    def fail_while_staging() -> None:
        with Destination(dest, "", overwrite=True, storage_options=None) as d:
            store, _ = d.open()
            assert str(store.root) != str(dest)  # a staging folder beside it
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail_while_staging()
    assert files(dest) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.n5"]
    with Destination(dest, "", overwrite=True, storage_options=None) as d:
        d.open()
        assert files(dest) == before  # the old node stays whole until the swap
        d.publish(plan)
    assert napari_n5zarr.open(dest)["s0"].shape == (30, 20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.n5"]
