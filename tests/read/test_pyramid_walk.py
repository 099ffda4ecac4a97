"""The walk (read/pyramid_walk.py): detect() on zarr v3 groups and N5 containers, metadata only."""

from __future__ import annotations

import warnings

import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import MemoryStore, WrapperStore

from napari_n5zarr.errors import SkippedNodeWarning
from napari_n5zarr.read.multiscale import n5_ordered
from napari_n5zarr.read.pyramid_walk import detect


class CountingStore(WrapperStore):
    """Records every key read."""

    def __init__(self, store, keys: list[str] | None = None):
        super().__init__(store)
        self.keys: list[str] = [] if keys is None else keys  # shared with read-only copies

    async def get(self, key, prototype, byte_range=None):
        self.keys.append(key)
        return await self._store.get(key, prototype, byte_range)

    async def get_partial_values(self, prototype, key_ranges):
        key_ranges = list(key_ranges)
        self.keys.extend(k for k, _ in key_ranges)
        return await self._store.get_partial_values(prototype, key_ranges)

    async def _get_many(self, requests):
        for key, prototype, byte_range in requests:
            yield key, await self.get(key, prototype, byte_range)

    def _supports_sync_io(self) -> bool:
        return False  # every read goes through get()

    def _with_store(self, store):
        return type(self)(store, self.keys)


def _container() -> zarr.Group:
    """N5 Viewer channels, a labels dataset, a BDV hierarchy, a COSEM dataset; chunks written."""
    root = zarr.open_group(MemoryStore(), mode="w")
    root.attrs["pixelResolution"] = {"unit": "nm", "dimensions": [4, 4, 40]}
    for c in range(2):
        g = root.create_group(f"c{c}")
        for k in range(3):
            a = g.create_array(
                f"s{k}", shape=(64 >> k, 32 >> k, 16 >> k), dtype="uint16", chunks=(8, 8, 8)
            )
            a[...] = k + 1
            a.attrs["downsamplingFactors"] = [2**k] * 3
    lab = root.create_array("labels", shape=(64, 32, 16), dtype="uint64", chunks=(16, 16, 16))
    lab[...] = 7
    bdv = root.create_group("bdv")
    setup = bdv.create_group("setup0")
    setup.attrs.update({"downsamplingFactors": [[1, 1, 1], [2, 2, 1]], "dataType": "uint8"})
    for t in range(2):
        tp = setup.create_group(f"timepoint{t}")
        tp.create_array("s0", shape=(20, 20, 5), dtype="uint8", chunks=(10, 10, 5))[...] = 1
        tp.create_array("s1", shape=(10, 10, 5), dtype="uint8", chunks=(10, 10, 5))[...] = 1
    em = root.create_array("em", shape=(10, 10, 10), dtype="uint8", chunks=(5, 5, 5))
    em.attrs["transform"] = {
        "axes": ["z", "y", "x"],
        "scale": [8, 4, 2],
        "translate": [0, 0, 1],
        "units": ["nm"] * 3,
    }
    return root


def test_detect_container():
    found = {m.name: m for m in detect(_container(), "root")}
    assert sorted(found) == ["bdv/setup0", "c0", "c1", "em", "labels"]
    c1 = found["c1"]
    assert c1.paths == ("c1/s0", "c1/s1", "c1/s2")
    assert c1.scale == (4.0, 4.0, 40.0)  # group pixelResolution inherited from the root
    assert c1.downsampling[2] == (4.0, 4.0, 4.0)
    assert not c1.is_labels
    assert found["labels"].is_labels
    assert found["labels"].paths == ("labels",)
    assert found["em"].scale == (2.0, 4.0, 8.0)
    assert found["em"].translate == (1.0, 0.0, 0.0)
    bdv = found["bdv/setup0"]
    assert bdv.time_paths[1] == ("bdv/setup0/timepoint1/s0", "bdv/setup0/timepoint1/s1")
    assert bdv.ndim == 4


def test_detect_pyramid_group_and_array_node():
    root = _container()
    (ms,) = detect(root["c0"], "c0 pyramid")
    assert ms.name == "c0 pyramid"
    assert ms.paths == ("s0", "s1", "s2")
    (one,) = detect(root["c0/s1"])  # inherits the root's pixelResolution, factor from attrs
    assert one.paths == ("",)
    assert one.scale == (8.0, 8.0, 80.0)
    assert one.translate == (2.0, 2.0, 20.0)
    (setup,) = detect(root["bdv/setup0"])
    assert setup.paths == ("timepoint0/s0", "timepoint0/s1")


def test_detect_without_metadata_is_unit_scale():
    root = zarr.open_group(MemoryStore(), mode="w")
    root.create_array("a", shape=(3, 4), dtype="float32")
    (ms,) = detect(root)
    assert (ms.scale, ms.translate, ms.units, ms.axes) == (
        (1.0, 1.0),
        (0.0, 0.0),
        (None, None),
        ("x", "y"),
    )


def test_detect_reads_metadata_only():
    counting = CountingStore(_container().store)
    root = zarr.open_group(counting, mode="r")
    assert len(detect(root)) == 5
    assert counting.keys
    metadata = {"zarr.json", "attributes.json", ".zgroup", ".zattrs", ".zarray", ".zmetadata"}
    chunks = [k for k in counting.keys if k.rsplit("/", 1)[-1] not in metadata]
    assert chunks == []
    assert "c1/s2/zarr.json" in counting.keys


def test_detect_reports_a_broken_child_and_keeps_siblings():
    root = _container()
    buf = default_buffer_prototype().buffer.from_bytes(b"{ not json")
    sync(root.store.set("broken/zarr.json", buf))
    errors = []
    found = detect(root, on_error=lambda path, exc: errors.append(path))
    assert errors == ["broken"]
    assert len(found) == 5
    with pytest.warns(SkippedNodeWarning, match="broken"):
        detect(root)


def test_detect_logs_each_skipped_node(caplog: pytest.LogCaptureFixture):
    root = _container()
    sync(
        root.store.set(
            "broken/zarr.json", default_buffer_prototype().buffer.from_bytes(b"{ not json")
        )
    )
    with caplog.at_level("INFO", logger="napari_n5zarr.read.pyramid_walk"):
        detect(root, on_error=lambda path, exc: None)
    assert [
        r.getMessage()[:14] for r in caplog.records if r.name == "napari_n5zarr.read.pyramid_walk"
    ] == ["skipped broken"]


def test_detect_ignores_objects_that_are_not_nodes():
    root = _container()
    sync(root.store.set("README.txt", default_buffer_prototype().buffer.from_bytes(b"hello")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(detect(root)) == 5


# --- store inheritance, colour axis, C order, limit -------------------------------------------


def test_detect_inherits_from_groups_above_the_store_root(tmp_path):
    import napari_n5zarr

    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    g = root.create_group(
        "g", attributes={"pixelResolution": {"unit": "um", "dimensions": [0.5, 0.5, 3.0]}}
    )
    napari_n5zarr.create_dataset(g, "s0", shape=(8, 8, 4), dtype="uint8", chunks=(4, 4, 4))
    (ms,) = detect(napari_n5zarr.open(tmp_path / "c.n5" / "g" / "s0"))  # the store starts at s0
    assert ms.scale == (0.5, 0.5, 3.0)
    assert ms.units == ("um",) * 3
    (tmp_path / "c.n5" / "g" / "attributes.json").write_text("{}")  # nothing to inherit any more
    (ms,) = detect(napari_n5zarr.open(tmp_path / "c.n5" / "g" / "s0"))
    assert ms.scale == (1.0, 1.0, 1.0)


def test_uncalibrated_c_order_rgb_gets_a_colour_axis(tmp_path):
    import napari_n5zarr

    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    napari_n5zarr.create_dataset(root, "rgb", shape=(3, 40, 30), dtype="uint8", chunks=(3, 16, 16))
    napari_n5zarr.create_dataset(root, "rgba", shape=(4, 40, 30), dtype="uint8", chunks=(4, 16, 16))
    napari_n5zarr.create_dataset(
        root, "stack", shape=(3, 40, 30), dtype="uint16", chunks=(3, 16, 16)
    )
    found = {ms.name: ms for ms in detect(napari_n5zarr.open(tmp_path / "c.n5"))}
    assert found["rgb"].axes == ("rgb", "x", "y")
    assert found["rgba"].axes == ("rgba", "x", "y")
    assert found["stack"].axes == ("x", "y", "z")  # not uint8: a z stack, not colour


def test_plain_zarr_arrays_are_described_in_n5_order(tmp_path):
    import zarr

    import napari_n5zarr

    zarr.create_array(tmp_path / "p.zarr", shape=(5, 7, 9), dtype="uint8")
    array = napari_n5zarr.open(tmp_path / "p.zarr")
    assert not n5_ordered(array)
    (ms,) = detect(array)
    assert ms.shapes == ((9, 7, 5),)


def test_detect_stops_above_the_limit(tmp_path):
    import napari_n5zarr

    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    for i in range(10):
        napari_n5zarr.create_dataset(root, f"d{i}", shape=(4, 4), dtype="uint8", chunks=(4, 4))
    assert len(detect(root, limit=3)) == 4  # one more than the limit: "too many"
    assert len(detect(root)) == 10
