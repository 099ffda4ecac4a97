"""block_grid: the one region-to-block helper of the read and write wings."""

from __future__ import annotations

import itertools

import numpy as np

from napari_n5zarr.block_grid import block_ranges, bounds, grid, overlap


def test_block_ranges_reach_exactly_the_blocks_a_region_touches():
    assert block_ranges([0, 5], [8, 17], [8, 8]) == [range(0, 1), range(0, 3)]
    assert block_ranges([7, 16], [9, 17], [8, 8]) == [range(0, 2), range(2, 3)]
    assert block_ranges([3, 0], [3, 8], [8, 8]) == [
        range(0),
        range(0, 1),
    ]  # an empty region reaches no block


def test_overlap_copies_a_region_together_from_blocks():
    """Every pixel of a region, gathered block by block (edge blocks truncated), equals the slice."""
    data = np.arange(21 * 13).reshape(21, 13)
    block, lo, hi = (8, 5), (3, 4), (19, 13)
    out = np.full([e - a for a, e in zip(lo, hi, strict=True)], -1)
    for index in itertools.product(*block_ranges(lo, hi, block)):
        values = data[bounds(index, block, data.shape)]
        src, dst = overlap(index, block, lo, hi)
        out[dst] = values[src]
    np.testing.assert_array_equal(out, data[3:19, 4:13])
    src, dst = overlap([2], [8], [3], [10])  # a block the region does not reach: empty
    assert src[0].stop <= src[0].start


def test_grid_bounds_and_a_truncated_block_held_short():
    assert grid((21, 13), (8, 5)) == (3, 3)
    assert bounds((2, 2), (8, 5), (21, 13)) == (
        slice(16, 21),
        slice(10, 13),
    )  # the edge cell, clipped
    assert bounds((2, 0), (8, 5), (21, 13), held=(3, 5)) == (
        slice(16, 19),
        slice(0, 5),
    )  # a header of 3
    src, dst = overlap(
        (2, 0), (8, 5), (17, 1), (21, 4), held=(3, 5)
    )  # the region reaches past the data
    assert (src, dst) == ((slice(1, 3), slice(1, 4)), (slice(0, 2), slice(0, 3)))
