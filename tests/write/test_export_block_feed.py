"""Pyramid levels downsampled block by block from the stored values of the blocks just
written (N5Blocks.keep_stored / last_stored, levels._write_blocks with a feed): every level
equals the independent numpy reference, for in-region levels (depth >= 1) and the coarse
levels kept in memory, every dtype and method, odd shapes and both boundary modes."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from zarr.storage import MemoryStore

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.n5.codec import stored_values
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export import blocks
from napari_n5zarr.write.export import levels as levels
from napari_n5zarr.write.export.blocks import N5Blocks
from napari_n5zarr.write.pyramid import plan, spatial_axes


def n5_blocks(shape, block, dtype="uint16", boundary="truncate") -> N5Blocks:
    meta = N5DatasetMetadata(dimensions=shape[::-1], block_size=block[::-1], data_type=dtype)
    return N5Blocks(MemoryStore(), "s0/", shape, block, np.dtype(dtype), meta.codec(), boundary)


@pytest.mark.parametrize("boundary", ["truncate", "pad"])
def test_last_stored_is_the_block_written_by_this_thread_once(boundary):
    a = np.asfortranarray(np.arange(7 * 6 * 5, dtype="uint16").reshape(7, 6, 5))
    target = n5_blocks(a.shape, (4, 4, 4), boundary=boundary)
    target.keep_stored = True
    target[4:7, 0:4, 4:5] = a[4:7, 0:4, 4:5]
    got = {}

    def other() -> None:  # another thread's block does not replace this thread's
        target[0:4, 0:4, 0:4] = a[0:4, 0:4, 0:4]
        got["other"] = target.last_stored()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    mine = target.last_stored()
    edge = a[4:7, 0:4, 4:5]
    expected = np.pad(edge, [(0, 1), (0, 0), (0, 3)]) if boundary == "pad" else edge
    np.testing.assert_array_equal(mine, expected)
    assert mine.dtype == np.dtype(">u2")
    assert mine.flags.c_contiguous
    np.testing.assert_array_equal(mine, stored_values(expected.T))
    np.testing.assert_array_equal(got["other"], a[0:4, 0:4, 0:4])
    with pytest.raises(KeyError):  # handed out once
        target.last_stored()
    np.testing.assert_array_equal(target[4:7, 0:4, 4:5], edge)  # both blocks written too
    np.testing.assert_array_equal(target[0:4, 0:4, 0:4], a[0:4, 0:4, 0:4])


def test_blocks_keep_nothing_unless_asked():
    target = n5_blocks((8, 8), (4, 4))
    target[0:4, 0:4] = np.ones((4, 4), "uint16")
    with pytest.raises(KeyError):
        target.last_stored()


def test_write_blocks_feeds_each_blocks_downsampled_piece():
    """Each block's piece, at its offset, tiles the downsampled region exactly (odd edge)."""
    rng = np.random.default_rng(4)
    value = np.asfortranarray(rng.integers(0, 4000, (12, 9, 16), dtype="uint16"))
    target = n5_blocks((20, 9, 16), (4, 4, 8))
    out = np.full((6, 5, 8), 65535, "uint16")
    seen = []

    def feed(offset, piece):
        seen.append(offset)
        out[tuple(slice(o, o + n) for o, n in zip(offset, piece.shape, strict=True))] = piece

    levels._write_blocks(target, (8, 0, 0), value, (2, 2, 2), "mean", feed)
    assert len(seen) == len(set(seen)) == 3 * 3 * 2
    np.testing.assert_array_equal(out, pyramid.numpy_pyramid(value, [(2, 2, 2)])[1])
    np.testing.assert_array_equal(target[8:20, 0:9, 0:16], value)


def read_levels(dest):
    root = napari_n5zarr.open(dest)
    names = sorted(root.array_keys(), key=lambda n: int(n[1:]))
    return [np.asarray(root[n][...]).T for n in names]


@pytest.mark.parametrize("boundary", ["truncate", "pad"])
@pytest.mark.parametrize(
    ("dtype", "high", "method"),
    [
        ("uint16", 4096, "mean"),  # 12-bit data: sums in 16 bits
        ("uint16", 65536, "mean"),  # full range: 32-bit sums
        ("uint8", 256, "mean"),
        ("int8", 128, "mean"),
        ("int16", 30000, "mean"),
        ("float32", 1000, "mean"),
        ("uint32", 9, "mode"),
        ("uint16", 60000, "nearest"),
    ],
)
def test_every_level_from_the_stored_blocks_is_the_numpy_pyramid(
    tmp_path, monkeypatch, dtype, high, method, boundary
):
    """Regions of several blocks computing a level inside them (depth 1) and the coarse
    levels in memory, both fed from the stored block values."""
    monkeypatch.setattr(levels, "REGION_BYTES", 64 << 10)
    fed = []
    real = N5Blocks.last_stored

    def counting(self):
        fed.append(self.prefix)
        return real(self)

    monkeypatch.setattr(blocks.N5Blocks, "last_stored", counting)
    depths = []
    real_depth = levels.region_depth

    def spy_depth(*args, **kwargs):
        depths.append(real_depth(*args, **kwargs))
        return depths[-1]

    monkeypatch.setattr(levels, "region_depth", spy_depth)
    shape, chunks = (37, 70, 61), (8, 8, 16)
    rng = np.random.default_rng(7)
    low = -high if np.dtype(dtype).kind == "i" else 0
    data = rng.integers(low, high, shape).astype(dtype)
    if dtype == "float32":
        data = data / np.float32(7)
    export(
        np.asfortranarray(data),
        tmp_path / "o.n5",
        chunks=chunks,
        compression="zstd",
        downsample=method,
        boundary=boundary,
    )
    expected = pyramid.numpy_pyramid(data, plan(shape, chunks, spatial_axes(3)), method)
    got = read_levels(tmp_path / "o.n5")
    assert len(got) == len(expected) >= 4
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_array_equal(g, e, err_msg=f"s{k}")
    assert depths == [1]  # s1 inside the regions, s2 and coarser kept in memory
    assert {"s0/", "s1/"} == set(fed)
