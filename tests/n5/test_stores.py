"""N5DefaultStore and ImplicitGroupStore over the zarr stores: views, writes, listings."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore, ZipStore

import napari_n5zarr
from napari_n5zarr import ImplicitGroupStore, N5DefaultStore

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
JAVA = CORPUS / "zarr_implementations/data/n5-java.n5"
EXPECTED = np.load(CORPUS / "expected_derived/zarr_implementations_reference_image.npy").T


async def _collect(it) -> list[str]:
    return [k async for k in it]


def memory_copy(folder: Path) -> MemoryStore:
    store = MemoryStore()
    for f in folder.rglob("*"):
        if f.is_file():
            sync(
                store.set(
                    f.relative_to(folder).as_posix(),
                    default_buffer_prototype().buffer.from_bytes(f.read_bytes()),
                )
            )
    return store


def test_zarr_json_answered_from_attributes_json() -> None:
    store = N5DefaultStore(LocalStore(JAVA, read_only=True))
    doc = json.loads(sync(store.get("gzip/zarr.json", default_buffer_prototype())).to_bytes())
    assert doc["node_type"] == "array"
    assert doc["shape"] == [3, 512, 512]
    assert doc["codecs"][0]["configuration"]["codecs"][2] == {
        "name": "gzip",
        "configuration": {"level": 6},
    }
    assert sync(store.exists("gzip/zarr.json"))
    assert sync(store.get("nothing/zarr.json", default_buffer_prototype())) is None


def test_listings_show_zarr_json_never_attributes_json() -> None:
    store = ImplicitGroupStore(N5DefaultStore(LocalStore(JAVA, read_only=True)))
    assert set(sync(_collect(store.list_dir("")))) == {
        "zarr.json",
        "raw",
        "gzip",
        "bzip2",
        "xz",
        "lz4",
    }
    keys = sync(_collect(store.list_prefix("raw/")))
    assert "raw/zarr.json" in keys
    assert not any(k.endswith("attributes.json") for k in keys)
    assert not any(k.endswith("attributes.json") for k in sync(_collect(store.list())))


def test_listing_names_come_without_a_trailing_slash() -> None:
    """zarr < 3.4.1's FsspecStore (HTTP, S3) lists child folders as ``name/``: the N5 view
    names them as every other store does, once each, or a pyramid's levels go unseen."""
    from zarr.storage import WrapperStore

    class SlashedFolders(WrapperStore):  # an inner store that lists as old FsspecStores did
        async def list_dir(self, prefix):
            async for key in self._store.list_dir(prefix):
                yield key if "." in key else key + "/"
            yield "raw/"  # and a folder twice, as a listing page may

    store = ImplicitGroupStore(N5DefaultStore(SlashedFolders(LocalStore(JAVA, read_only=True))))
    names = sync(_collect(store.list_dir("")))
    assert sorted(names) == sorted({"zarr.json", "raw", "gzip", "bzip2", "xz", "lz4"})
    group = zarr.open_group(store, mode="r")
    assert sorted(group.array_keys()) == ["bzip2", "gzip", "lz4", "raw", "xz"]


@pytest.mark.parametrize("kind", ["memory", "zip", "local"])
def test_reads_over_every_store(tmp_path: Path, kind: str) -> None:
    if kind == "memory":
        base = memory_copy(JAVA)
    elif kind == "zip":
        archive = tmp_path / "java.n5.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for f in JAVA.rglob("*"):
                if f.is_file():
                    zf.write(f, f.relative_to(JAVA).as_posix())
        base = ZipStore(archive, mode="r", read_only=True)
    else:
        base = LocalStore(JAVA, read_only=True)
    root = zarr.open_group(ImplicitGroupStore(N5DefaultStore(base)), mode="r")
    assert sorted(root.array_keys()) == ["bzip2", "gzip", "lz4", "raw", "xz"]
    for name in ("lz4", "xz"):
        np.testing.assert_array_equal(root[name][...], EXPECTED)


def test_open_zip_path(tmp_path: Path) -> None:
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in JAVA.rglob("*"):
            if f.is_file():
                zf.write(f, f.relative_to(JAVA).as_posix())
    np.testing.assert_array_equal(napari_n5zarr.open(archive)["bzip2"][...], EXPECTED)


def test_implicit_groups_only_where_something_exists() -> None:
    store = MemoryStore()
    proto = default_buffer_prototype()
    sync(store.set("attributes.json", proto.buffer.from_bytes(b'{"n5": "4.0.0"}')))
    sync(store.set("a/b/attributes.json", proto.buffer.from_bytes(b'{"x": 1}')))
    wrapped = ImplicitGroupStore(N5DefaultStore(store))
    root = zarr.open_group(wrapped, mode="r")
    assert isinstance(root["a"], zarr.Group)  # no attributes.json: implicit
    assert root["a/b"].attrs["x"] == 1
    with pytest.raises(KeyError):
        root["c"]
    assert not sync(wrapped.exists("c/zarr.json"))
    assert sync(wrapped.exists("a/zarr.json"))


def test_user_attributes_survive_both_ways(tmp_path: Path) -> None:
    src = tmp_path / "c.n5"
    shutil.copytree(CORPUS / "tensorstore/tensorstore/driver/n5/testdata/gzip", src / "g")
    (src / "attributes.json").write_text(
        json.dumps({"n5": "4.0.0", "pixelResolution": {"unit": "nm", "dimensions": [4, 4]}})
    )
    attrs = json.loads((src / "g/attributes.json").read_text())
    attrs.update({"nested": {"a": [1, [2, 3]]}, "with space": "ok", "downsamplingFactors": [1, 1]})
    (src / "g/attributes.json").write_text(json.dumps(attrs))
    root = napari_n5zarr.open(src, mode="r+")
    assert root.attrs.asdict() == {"pixelResolution": {"unit": "nm", "dimensions": [4, 4]}}
    arr = root["g"]
    assert arr.attrs["nested"] == {"a": [1, [2, 3]]}
    assert arr.attrs["with space"] == "ok"
    arr.attrs["added"] = True
    root.attrs["extra"] = "x"
    written = json.loads((src / "g/attributes.json").read_text())
    assert written == {**attrs, "added": True}
    assert json.loads((src / "attributes.json").read_text())["n5"] == "4.0.0"
    assert json.loads((src / "attributes.json").read_text())["extra"] == "x"
    # the zarr.json written beside it says the same
    zdoc = json.loads((src / "g/zarr.json").read_text())
    assert zdoc["attributes"]["added"] is True
    assert zdoc["codecs"][0]["name"] == "n5_default"


def test_dataset_at_container_root_with_version_key() -> None:
    arr = napari_n5zarr.open(CORPUS / "zarrs_n5/data/uneven_chunk_truncated.n5")
    assert isinstance(arr, zarr.Array)
    assert "n5" not in arr.attrs


def test_creating_a_container_writes_the_version(tmp_path: Path) -> None:
    root = napari_n5zarr.open(tmp_path / "new.n5", mode="w")
    root.create_group("g/h")
    assert json.loads((tmp_path / "new.n5/attributes.json").read_text()) == {"n5": "4.0.0"}
    assert (tmp_path / "new.n5/zarr.json").exists()
    assert json.loads((tmp_path / "new.n5/g/h/attributes.json").read_text()) == {}
    again = napari_n5zarr.open(tmp_path / "new.n5")
    assert [n for n, _ in again.members(max_depth=None)] == ["g", "g/h"]


def test_read_only_open_does_not_write(tmp_path: Path) -> None:
    shutil.copytree(CORPUS / "tensorstore/tensorstore/driver/n5/testdata", tmp_path / "t")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    root = napari_n5zarr.open(tmp_path / "t")
    dict(root.members())
    root["raw"][...]
    with pytest.raises(ValueError, match="read-only"):
        root["raw"][0, 0] = 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_one_unreadable_child_never_hides_its_siblings(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    shutil.copytree(CORPUS / "tensorstore/tensorstore/driver/n5/testdata/raw", root / "good")
    (root / "bad").mkdir()
    (root / "bad/attributes.json").write_text(
        '{"dimensions": [2], "blockSize": [2], "dataType": "object"}'
    )
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')
    group = napari_n5zarr.open(root)
    with pytest.warns(
        UserWarning, match="c.n5/bad/attributes.json: N5 dataType 'object' is not supported"
    ):
        members = dict(group.members())
    assert list(members) == ["good"]
