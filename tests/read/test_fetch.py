"""Remote planes: every block request of a plane is in flight at once, and the plane reads
exactly what zarr reads (absent blocks as the fill value, a failing block named)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
from format_cases import COMPRESSIONS

import napari_n5zarr
from napari_n5zarr.read import block_cache as bc
from napari_n5zarr.read import levels as lv

BLOCK = (8, 8, 4)  # N5 order (x, y, z)
SHAPE = (40, 24, 12)  # a plane is 5 x 3 = 15 blocks; dask splits it into several tasks


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(bc, "_cache", bc.BlockCache(bc.default_cache_bytes()))
    monkeypatch.setenv("N5ZARR_RETRY_BACKOFF", "0.01")
    monkeypatch.setenv("N5ZARR_RETRIES", "1")
    monkeypatch.setattr(lv, "REMOTE_TASK_BYTES", 8 * 8 * 4 * 2)  # one block per dask task


@pytest.fixture
def server(tmp_path, counting_http):
    """HTTP on 127.0.0.1 over ``tmp_path``, 200 ms per GET (see ``counting_http``): long
    enough that a plane's requests, issued together, are all in flight at once even on a
    loaded machine; one after another (or one per dask thread) they would not be."""
    return counting_http(tmp_path, latency=0.2)


def make(tmp_path: Path, skip=(), compression=COMPRESSIONS["gzip"]) -> tuple[np.ndarray, str]:
    rng = np.random.default_rng(1)
    data = rng.integers(1, 60000, size=SHAPE, dtype=np.uint16)  # N5 order; no zeros: fill shows
    arr = napari_n5zarr.create_dataset(napari_n5zarr.open(tmp_path / "a.n5", mode="a"), "d", shape=SHAPE,
                                       dtype="uint16", chunks=BLOCK, compression=compression)  # fmt: skip
    arr[...] = data
    for cell in skip:
        (tmp_path / "a.n5" / "d" / "/".join(map(str, cell))).unlink()
    return data, "a.n5/d"


def plane_blocks(z: int) -> list[str]:
    return [f"/a.n5/d/{i}/{j}/{z // BLOCK[2]}" for i in range(5) for j in range(3)]


def test_a_remote_plane_requests_all_its_blocks_at_once_and_each_once(tmp_path, server):
    url, state = server
    _data, path = make(tmp_path)
    level = lv.dask_level(napari_n5zarr.open(f"{url}/{path}"), report=pytest.fail)
    assert level.numblocks[1] * level.numblocks[2] >= 6  # the plane is split into many dask tasks
    expected = np.asarray(napari_n5zarr.open(tmp_path / path)[...]).T  # zarr's own read
    state["peak"] = 0
    state["gets"].clear()
    got = level[5].compute()
    assert np.array_equal(got, expected[5])
    assert state["peak"] >= 15, state["peak"]  # every block of the plane in flight together
    assert sorted(state["gets"]) == sorted(plane_blocks(5))  # no other slab, ...
    assert set(state["gets"].values()) == {1}  # ... and no block twice
    assert np.array_equal(level.compute(), expected)  # every plane, every task


def test_absent_blocks_of_a_remote_plane_read_as_fill_value(tmp_path, server):
    url, state = server
    _data, path = make(tmp_path, skip={(1, 1, 2), (4, 2, 2)})
    level = lv.dask_level(napari_n5zarr.open(f"{url}/{path}"), report=pytest.fail)
    expected = np.asarray(napari_n5zarr.open(tmp_path / path)[...]).T
    assert (expected[9, 8:16, 8:16] == 0).all()  # zarr reads them as the fill value too
    state["peak"] = 0
    assert np.array_equal(level[9].compute(), expected[9])
    assert state["peak"] >= 15


def test_a_failing_block_is_named_once_and_only_it_reads_as_fill(tmp_path, server):
    url, state = server
    data, path = make(tmp_path)
    state["fail"].add("/a.n5/d/2/1/0")
    reports: list[str] = []
    level = lv.dask_level(napari_n5zarr.open(f"{url}/{path}"), report=reports.append)
    got = level[1].compute()
    expected = data.T[1].copy()
    expected[8:16, 16:24] = 0  # block x=2, y=1 (napari y rows 8:16, x columns 16:24)
    assert np.array_equal(got, expected)
    assert len(reports) == 1, reports
    assert "a.n5/d/2/1/0" in reports[0], reports
    assert "500" in reports[0], reports
    assert state["gets"]["/a.n5/d/2/1/0"] == 2  # retried once (N5ZARR_RETRIES=1), per request
    state["fail"].clear()
    assert np.array_equal(level[1].compute(), data.T[1])  # not cached: read again once it works


@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_every_compression_reads_over_http_exactly_as_zarr_reads_it_locally(
    tmp_path, counting_http, name
):
    url, state = counting_http(tmp_path, latency=0.0)
    data, path = make(tmp_path, compression=COMPRESSIONS[name])
    level = lv.dask_level(napari_n5zarr.open(f"{url}/{path}"), report=pytest.fail)
    expected = np.asarray(napari_n5zarr.open(tmp_path / path)[...]).T  # zarr's own read, local
    assert np.array_equal(expected, data.T)
    for z in (0, 5, 11):  # first, inner and last plane (a truncated edge block slab: 12 = 4+4+4)
        got = level[z].compute()
        assert got.dtype == expected.dtype, (name, z)
        assert np.array_equal(got, expected[z]), (name, z)
    blocks = {k: v for k, v in state["gets"].items() if k.rsplit("/", 1)[-1].isdigit()}
    assert len(blocks) == 5 * 3 * 3, blocks
    assert set(blocks.values()) == {1}, blocks  # every block, once


def test_a_corrupt_block_over_http_is_named_and_only_it_reads_as_fill(tmp_path, server):
    """Blocks are decoded on the pool after the loop hands them over: a block that does not
    decode is still reported by its name, and the rest of the plane is still read."""
    url, state = server
    data, path = make(tmp_path)
    block = tmp_path / "a.n5" / "d" / "3" / "2" / "0"
    raw = bytearray(block.read_bytes())
    raw[-12:-8] = bytes(4)  # the gzip CRC-32 of the payload (its trailer: CRC-32, ISIZE)
    block.write_bytes(bytes(raw))
    reports: list[str] = []
    level = lv.dask_level(napari_n5zarr.open(f"{url}/{path}"), report=reports.append)
    got = level[2].compute()
    expected = data.T[2].copy()
    expected[16:24, 24:32] = 0  # block x=3, y=2 (napari y rows 16:24, x columns 24:32)
    assert np.array_equal(got, expected)
    assert len(reports) == 1, reports
    assert f"N5 block 3/2/0 in {url}/a.n5/d" in reports[0], reports
    assert "corrupt gzip" in reports[0], reports
    assert state["peak"] >= 15  # the plane's requests still all in flight together


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="per-thread priority: Linux")
def test_prefetch_runs_at_the_lowest_priority_and_leaves_the_caller_alone():
    """Background prefetch must yield the cores to the plane a person waits for and to the
    drawing; the reading threads themselves keep their priority."""
    from napari_n5zarr.read import fetch

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    prefetch = fetch._prefetch_pool().submit(
        lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    )
    decode = fetch.decode_pool().submit(
        lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    )
    assert prefetch.result() == 19
    assert decode.result() == before
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
