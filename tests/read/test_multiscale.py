"""node -> Multiscale -> levels (read/multiscale.py), without napari: the builder the reader
and ``n5zarr convert`` share."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.read import levels as lv
from napari_n5zarr.read.locate import resolve
from napari_n5zarr.read.multiscale import (
    find_multiscales,
    is_rgb,
    levels_for,
    storage_blocks,
)
from napari_n5zarr.read.tree import tree_of

BDV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<SpimData version="0.2"><BasePath type="relative">.</BasePath><SequenceDescription>
<ImageLoader format="bdv.n5" version="1.0"><n5 type="relative">bdv.n5</n5></ImageLoader>
<ViewSetups><ViewSetup><id>0</id><name>0</name><size>6 5 4</size>
<voxelSize><unit>nm</unit><size>4 4 40</size></voxelSize></ViewSetup></ViewSetups>
</SequenceDescription></SpimData>
"""


def _pyramid(tmp_path, write_n5):
    """N5 Viewer pyramid ``raw`` (s0 6x5x4 N5 order, s1 3x3x2), a 1-D dataset, a broken one."""
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    raw = root.create_group(
        "raw", attributes={"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}
    )
    s0 = np.arange(6 * 5 * 4, dtype="uint16").reshape(6, 5, 4)  # N5 order (x, y, z)
    write_n5(raw, "s0", s0, chunks=(4, 4, 2))
    write_n5(
        raw,
        "s1",
        s0[::2, ::2, ::2].copy(),
        chunks=(4, 4, 2),
        attributes={"downsamplingFactors": [2, 2, 2]},
    )
    write_n5(root, "line", np.arange(5, dtype="uint8"), chunks=(5,))
    (tmp_path / "c.n5" / "broken").mkdir()
    (tmp_path / "c.n5" / "broken" / "attributes.json").write_text("{not json")
    return root, s0


def test_find_multiscales_reports_problems_and_keeps_siblings(tmp_path, write_n5):
    root, _ = _pyramid(tmp_path, write_n5)
    found = find_multiscales(root, "c.n5")
    names = sorted(ms.name for ms in found.multiscales)
    assert names == ["line", "raw"]
    assert len(found.problems) == 1
    assert found.problems[0].startswith("broken")
    assert not found.too_many
    raw = next(ms for ms in found.multiscales if ms.name == "raw")
    assert raw.paths == ("raw/s0", "raw/s1")
    assert raw.scale == (4.0, 4.0, 40.0)
    assert raw.units == ("nm",) * 3
    assert find_multiscales(root, "c.n5", limit=1) == type(found)([], found.problems, too_many=True)


@pytest.mark.parametrize("strict", [False, True])
def test_levels_for_napari_order_exact_values(tmp_path, write_n5, strict):
    root, s0 = _pyramid(tmp_path, write_n5)
    raw = next(ms for ms in find_multiscales(root).multiscales if ms.name == "raw")
    levels = levels_for(root, raw, strict=strict)
    assert [tuple(level.shape) for level in levels] == [(4, 5, 6), (2, 3, 3)]
    np.testing.assert_array_equal(np.asarray(levels[0]), s0.T)
    np.testing.assert_array_equal(np.asarray(levels[1]), s0[::2, ::2, ::2].T)
    assert storage_blocks(root, raw) == (2, 4, 4)
    if strict:  # convert: one dask chunk per storage block, the source's blocks
        assert all(isinstance(level, da.Array) for level in levels)
        assert levels[0].chunksize == (2, 4, 4)


def test_opening_reads_each_metadata_document_once(tmp_path, write_n5, monkeypatch):
    """Without the store's reuse of a just-read attributes.json: the reader's tree reads each
    document once, and no zarr.json where an attributes.json is (it would not be used)."""
    from napari_n5zarr.read.images import open_images
    from napari_n5zarr.storage.local import SafeLocalStore

    _pyramid(tmp_path, write_n5)
    reads: list[str] = []
    get_sync, get = SafeLocalStore.get_sync, SafeLocalStore.get

    def counting_sync(self, key, *args, **kwargs):
        reads.append(f"{self.root}/{key}")
        return get_sync(self, key, *args, **kwargs)

    async def counting(self, key, *args, **kwargs):
        reads.append(f"{self.root}/{key}")
        return await get(self, key, *args, **kwargs)

    monkeypatch.setattr(SafeLocalStore, "get_sync", counting_sync)
    monkeypatch.setattr(SafeLocalStore, "get", counting)
    found = open_images(tmp_path / "c.n5")
    assert [image.multiscale.name for image in found.images] == [
        "raw"
    ]  # (line: 1-D, broken: a problem)
    documents = [r for r in reads if r.endswith(".json")]
    assert sorted({r for r in documents if documents.count(r) > 1}) == []
    assert f"{tmp_path / 'c.n5'}/raw/s0/attributes.json" in documents
    assert not [
        r
        for r in documents
        if r.endswith("zarr.json") and r.startswith(str(tmp_path / "c.n5" / "raw"))
    ]


def test_strict_levels_raise_on_a_corrupt_block_viewing_levels_fill_and_report(tmp_path, write_n5):
    root, _ = _pyramid(tmp_path, write_n5)
    (tmp_path / "c.n5" / "raw" / "s0" / "0" / "0" / "0").write_bytes(b"\x00\x00\x00\x03garbage")
    raw = next(ms for ms in find_multiscales(root).multiscales if ms.name == "raw")
    with pytest.raises(Exception, match="0/0/0"):
        np.asarray(levels_for(root, raw, strict=True)[0])
    reports: list[str] = []
    shown = np.asarray(levels_for(root, raw, reports.append)[0])
    assert (shown[:2, :4, :4] == 0).all()
    assert len(reports) == 1
    assert "fill value" in reports[0]


def test_bdv_time_points_stack_and_xml_voxel_sizes_apply(tmp_path, write_n5):
    root = napari_n5zarr.open(tmp_path / "bdv.n5", mode="w")
    setup = root.create_group(
        "setup0", attributes={"downsamplingFactors": [[1, 1, 1]], "dataType": "uint8"}
    )
    for t in range(3):
        write_n5(
            setup.create_group(f"timepoint{t}"),
            "s0",
            np.full((6, 5, 4), t, "uint8"),
            chunks=(3, 3, 2),
        )
    (tmp_path / "dataset.xml").write_text(BDV_XML)
    source = resolve(tmp_path / "dataset.xml")
    tree = tree_of(source)
    node = (tree, tree.root)
    (ms,) = find_multiscales(node, source.name).multiscales
    assert ms.convention == "bdv-xml"
    assert ms.scale[:3] == (4.0, 4.0, 40.0)
    for strict in (False, True):
        (level,) = levels_for(node, ms, strict=strict)
        assert level.shape == (3, 4, 5, 6)
        assert [int(np.asarray(level[t]).max()) for t in range(3)] == [0, 1, 2]
    assert storage_blocks(node, ms) == (1, 2, 3, 3)


def test_a_huge_single_level_gets_preview_levels_unless_strict(tmp_path):
    root = napari_n5zarr.open(tmp_path / "h.n5", mode="w")
    edge = lv.HUGE_EDGE * 2
    napari_n5zarr.create_dataset(
        root, "big", shape=(edge, edge), dtype="uint8", chunks=(1024, 1024)
    )
    (ms,) = find_multiscales(root).multiscales
    viewing = levels_for(root, ms)
    assert len(viewing) > 1
    assert max(viewing[-1].shape) <= lv.PREVIEW_EDGE
    (copying,) = levels_for(root, ms, strict=True)
    assert copying.shape == (edge, edge)
    assert copying.chunksize == (1024, 1024)


def test_is_rgb(tmp_path, write_n5):
    root = napari_n5zarr.open(tmp_path / "rgb.n5", mode="w")
    write_n5(
        root,
        "photo",
        np.zeros((3, 8, 6), "uint8"),
        chunks=(3, 8, 6),
        attributes={"axes": ["rgb", "x", "y"]},
    )
    write_n5(
        root,
        "stack",
        np.zeros((3, 8, 6), "uint8"),
        chunks=(3, 8, 6),
        attributes={"axes": ["x", "y", "z"]},
    )
    by_name = {ms.name: ms for ms in find_multiscales(root).multiscales}
    assert is_rgb(by_name["photo"])
    assert not is_rgb(by_name["stack"])
