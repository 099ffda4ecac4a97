"""The label-multiset block decoder (issue 21 item 1): argMax stored or computed as Paintera
computes it, cells from the grid, every bad size a clean error naming the block."""

from __future__ import annotations

import gzip
import itertools
import math
import struct
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from paintera_multiset import (
    BLOCK,
    MISSING,
    argmax,
    expected_s0,
    expected_s1,
    multiset_payload,
    varlength_block,
    write_paintera_container,
)

from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.n5.block_format import n5_decompress, raw_payload
from napari_n5zarr.n5.label_multiset import (
    INVALID,
    apply_assignment,
    assignment_table,
    cell_shape,
    decode_multiset_block,
)

WHERE = "N5 block s0/0/0 in memory"


def _block(
    lists: list[Counter],
    shape: tuple[int, ...],
    store_argmax: bool = False,
    compression: str = "raw",
) -> bytes:
    payload = multiset_payload(lists, store_argmax)
    return varlength_block(shape, payload, len(payload), compression)


@pytest.mark.parametrize("compression", ["raw", "gzip"])
def test_fixture_blocks_decode_to_the_labels_they_encode(tmp_path, compression):
    root = write_paintera_container(tmp_path / "c.n5", compression)
    gz = n5_decompress({"type": "gzip"} if compression == "gzip" else {"type": "raw"})
    for level, expected in (("s0", expected_s0()), ("s1", expected_s1())):
        folder = root / "labels/fragments/data" / level
        grid = [range(math.ceil(s / b)) for s, b in zip(expected.shape, BLOCK, strict=True)]
        for index in itertools.product(*grid):
            path = folder.joinpath(*map(str, index))
            if level == "s0" and index == MISSING:
                assert not path.exists()
                continue
            cell = cell_shape(index, expected.shape, BLOCK)
            got = decode_multiset_block(path.read_bytes(), cell, WHERE, gz)
            want = expected[
                tuple(slice(i * b, i * b + c) for i, b, c in zip(index, BLOCK, cell, strict=True))
            ]
            assert got.dtype == np.uint64
            assert got.shape == cell
            np.testing.assert_array_equal(got, want)
            assert got.T.flags.c_contiguous


def test_ties_go_to_the_smaller_signed_id_and_empty_lists_are_invalid():
    lists = [
        Counter({3: 2, -5: 2}),
        Counter({7: 1, 4: 1}),
        Counter(),
        Counter({9: 1, 2: 5, 11: 5}),
        Counter({3: 2, -5: 2}),
    ]
    got = decode_multiset_block(_block(lists, (5,)), (5,), WHERE, raw_payload)
    assert got.tolist() == [2**64 - 5, 4, INVALID, 2, 2**64 - 5]


def test_runs_of_voxels_on_one_list_decode_as_voxel_by_voxel():
    # voxels pointing at the same list one after another are looked up once per run
    kinds = [
        Counter({3: 2, -5: 2}),
        Counter(),
        Counter({7: 1, 4: 1}),
        Counter({9: 4}),
        Counter({2: 1, 11: 3}),
    ]
    lengths = np.random.default_rng(3).integers(1, 40, size=60)
    lists = [kinds[(i * 7) % len(kinds)] for i, n in enumerate(lengths) for _ in range(n)]
    got = decode_multiset_block(_block(lists, (len(lists),)), (len(lists),), WHERE, raw_payload)
    assert got.tolist() == [argmax(c) % 2**64 for c in lists]


def test_a_run_pointing_outside_the_lists_is_a_clean_error():
    lists = [Counter({1: 1})] * 30 + [Counter({2: 1})] * 30
    payload = bytearray(multiset_payload(lists))
    struct.pack_into(">30i", payload, 4 + 4 * 30, *[10_000] * 30)
    block = varlength_block((60,), bytes(payload), len(payload), "raw")
    with pytest.raises(N5BlockError, match="list offset 10000 is outside") as info:
        decode_multiset_block(block, (60,), WHERE, raw_payload)
    assert str(info.value).startswith(WHERE + ": ")


def test_stored_argmax_is_what_paintera_shows():
    lists = [Counter({3: 1, 4: 1})] * 4
    payload = bytearray(multiset_payload(lists, store_argmax=True))
    struct.pack_into(">q", payload, 4 + 8, 42)  # a writer may store another argMax: it is shown
    got = decode_multiset_block(
        varlength_block((4,), bytes(payload), len(payload), "raw"), (4,), WHERE, raw_payload
    )
    assert got.tolist() == [3, 42, 3, 3]


def test_the_cell_comes_from_the_grid_not_the_header():
    lists = [Counter({i: 1}) for i in range(6)]
    block = _block(lists, (8, 8))  # an edge block whose header says the full block size
    got = decode_multiset_block(block, (3, 2), WHERE, raw_payload)
    np.testing.assert_array_equal(got, np.arange(6).reshape(2, 3).T)


def test_mode_0_block_of_the_voxel_count_is_read():
    payload = bytes(4)
    with pytest.raises(N5BlockError, match="at least"):  # its payload can never hold the offsets
        decode_multiset_block(struct.pack(">HHI", 0, 1, 4) + payload, (4,), WHERE, raw_payload)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p[:-1], "raw payload holds"),
        (lambda p: struct.pack(">i", 3) + p[4:], "argMaxSize 3"),
        (lambda p: p[:4] + struct.pack(">i", 10_000) + p[8:], "list offset 10000 is outside"),
        (lambda p: p[:4] + struct.pack(">i", -4) + p[8:], "list offset -4 is outside"),
        (lambda p: p[:20] + struct.pack("<i", 1000) + p[24:], "runs past"),
        (lambda p: p[:20] + struct.pack("<i", -1) + p[24:], "-1 entries"),
    ],
)
def test_bad_payloads_are_clean_errors_naming_the_block(mutate, message):
    lists = [Counter({1: 1}), Counter({2: 3, 3: 1}), Counter({1: 1}), Counter({2: 3, 3: 1})]
    payload = multiset_payload(lists)  # 4 + 16 bytes of offsets, then the lists
    bad = mutate(payload)
    block = varlength_block((4,), bad, len(payload), "raw")
    with pytest.raises(N5BlockError, match=message) as info:
        decode_multiset_block(block, (4,), WHERE, raw_payload)
    assert str(info.value).startswith(WHERE + ": ")


def test_forged_sizes_are_refused_before_allocating():
    with pytest.raises(N5BlockError, match="over the"):
        decode_multiset_block(
            struct.pack(">HHII", 1, 1, 4, 2**32 - 1) + gzip.compress(b"x"),
            (4,),
            WHERE,
            n5_decompress({"type": "gzip"}),
        )
    with pytest.raises(N5BlockError, match="dimensions"):
        decode_multiset_block(_block([Counter({1: 1})] * 4, (4,)), (2, 2), WHERE, raw_payload)
    with pytest.raises(N5BlockError, match="varlength"):
        decode_multiset_block(struct.pack(">HI", 2, 0), (4,), WHERE, raw_payload)


def test_overlapping_lists_are_refused():
    lists = [Counter({1: 1, 2: 1})] * 2
    payload = bytearray(multiset_payload(lists))
    struct.pack_into(">i", payload, 8, 4)  # voxel 1's list starts inside voxel 0's (a forged table)
    payload += bytes(8)
    with pytest.raises(N5BlockError, match="add up to more"):
        decode_multiset_block(
            varlength_block((2,), bytes(payload), len(payload), "raw"), (2,), WHERE, raw_payload
        )


def test_assignment_maps_fragments_and_leaves_the_rest():
    table = assignment_table(np.array([[5, 1, 9], [100, 100, 7]], np.uint64))
    labels = np.array([[0, 1, 2], [5, 9, 2**64 - 2]], np.uint64)
    assert apply_assignment(labels, table).tolist() == [[0, 100, 2], [100, 7, 2**64 - 2]]
    assert apply_assignment(labels, None) is labels
