"""Prefetch along the scroll axis over HTTP (issue 29, item 3): while a person scrolls
through z, the next block slab's blocks are requested in the background, never more than
one slab ahead, and a prefetch still queued when the person jumps far away is given up
(its blocks are requested by whoever needs them, not by the prefetch)."""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from format_cases import COMPRESSIONS, sample, write_blockwise

import napari_n5zarr
from napari_n5zarr.read import block_cache as bc
from napari_n5zarr.read import fetch
from napari_n5zarr.read import levels as lv

BLOCK = 10
SLABS = 5


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(bc, "_cache", bc.BlockCache(bc.default_cache_bytes()))
    monkeypatch.setenv(fetch.PREFETCH_ENV, "1")


@pytest.fixture
def remote(tmp_path, counting_http):
    """A 20 x 20 x 50 (N5 order) zstd dataset of 10^3 blocks (2 x 2 blocks a z slab, 5
    slabs) over HTTP -> (napari-order reader, the data in napari order, server state)."""
    data = sample((20, 20, BLOCK * SLABS), "uint16")
    write_blockwise(tmp_path, "d", data, (BLOCK,) * 3, COMPRESSIONS["zstd"])
    url, state = counting_http(tmp_path, latency=0.02)
    reader = lv.LevelReader(napari_n5zarr.open(f"{url}/d"), n5_order=True, report=pytest.fail)
    assert reader.source is not None
    assert not reader.source.synchronous
    return reader, data.T, state


def settled() -> None:
    """The prefetch thread has done what it was given."""
    fetch._prefetch_pool().submit(lambda: None).result()


def slabs_requested(state) -> list[int]:
    """Block GETs per z slab (N5 block paths end in /z)."""
    counts = [0] * SLABS
    for path, n in state["gets"].items():
        if m := re.fullmatch(r"/d/\d+/\d+/(\d+)", path):
            counts[int(m.group(1))] += n
    return counts


def test_scrolling_requests_the_next_slab_and_never_more(remote):
    reader, expected, state = remote
    np.testing.assert_array_equal(reader[12], expected[12])
    settled()
    assert slabs_requested(state) == [0, 4, 0, 0, 0]  # a first read: its own slab only
    for z in range(13, 50):
        np.testing.assert_array_equal(reader[z], expected[z])
        settled()
        counts = slabs_requested(state)
        ahead = min(z // BLOCK + 1, SLABS - 1)  # the slab after this one
        assert counts[: ahead + 1] == [0] + [4] * ahead, (z, counts)  # each block once
        assert not any(counts[ahead + 1 :]), (z, counts)  # nothing beyond the next slab


def test_a_prefetch_queued_before_a_far_jump_is_given_up(remote):
    reader, expected, state = remote
    gate = threading.Event()
    fetch._prefetch_pool().submit(gate.wait, 30)  # the prefetch thread is busy meanwhile
    try:
        np.testing.assert_array_equal(reader[12], expected[12])
        np.testing.assert_array_equal(reader[13], expected[13])  # scrolling up: slab 2 queued
        np.testing.assert_array_equal(reader[45], expected[45])  # a far jump to slab 4
        # Another region's read needs a block of slab 2 and waits for the queued prefetch.
        got: list[np.ndarray] = []
        waiter = threading.Thread(target=lambda: got.append(reader[25, :10, :10]))
        waiter.start()
        waiter.join(0.3)
        assert waiter.is_alive()  # waiting for the prefetch, not requesting the block again
    finally:
        gate.set()
    waiter.join(30)
    settled()
    np.testing.assert_array_equal(got[0], expected[25, :10, :10])
    counts = slabs_requested(state)
    assert counts == [0, 4, 1, 0, 4], counts  # of slab 2 only the block the waiter needed
