"""The fast block path and the decoded-block cache read exactly what zarr reads."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import zarr
from format_cases import COMPRESSIONS, DTYPES, sample, write_blockwise
from zarr.storage import LocalStore

import napari_n5zarr
from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.read import block_cache as bc
from napari_n5zarr.read import fetch
from napari_n5zarr.read import levels as lv
from napari_n5zarr.read.fetch import BlockSource


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    """Every test gets its own shared cache (default size)."""
    cache = bc.BlockCache(bc.default_cache_bytes())
    monkeypatch.setattr(bc, "_cache", cache)
    return cache


def write_n5(
    root: Path, path: str, data: np.ndarray, block, compression, boundary="truncate", skip=()
):
    """``data`` (N5 order) as an N5 dataset written block by block (see :func:`write_blockwise`)."""
    return write_blockwise(root, path, data, block, compression, boundary=boundary, skip=skip)


SELECTIONS = [
    (slice(None),),
    (0,),
    (-1,),
    (slice(2, 9), slice(3, 17), slice(1, 12)),
    (slice(None), 5),
    (Ellipsis, 4),
    (slice(3, 3),),
    (slice(None), slice(None), slice(None, None, 2)),  # strided: zarr's path
]


LAZY_COMPOSITIONS = [
    ((slice(None), slice(2, 15), slice(1, 9)), (5,)),
    ((slice(None), slice(2, 15), slice(1, 9)), (slice(4, 6), slice(None), slice(3, 8))),
    ((slice(1, 12, 2), slice(None), slice(None, None, 3)), (Ellipsis, 2)),
    ((slice(None),), (slice(None), slice(None, None, 2))),
]


def assert_reads_like_zarr(arr: zarr.Array, expect_fast: bool = True) -> None:
    expected = np.asarray(arr[...]).T  # napari order
    reader = lv.LevelReader(arr, n5_order=True, report=pytest.fail)
    assert (reader.source is not None) == expect_fast
    for index in SELECTIONS:
        got = reader[index]
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected[index], equal_nan=True), index
    lazy = lv.LazyLevel(arr, n5_order=True, report=pytest.fail)  # what napari gets
    for index in SELECTIONS:
        assert np.array_equal(np.asarray(lazy[index]), expected[index], equal_nan=True), index
    for outer, inner in LAZY_COMPOSITIONS:  # napari: level[tile][plane]
        view = lazy[outer]
        assert isinstance(view, lv.RegionView)
        assert view.shape == expected[outer].shape
        got = view[inner]
        assert np.array_equal(np.asarray(got), expected[outer][inner], equal_nan=True), (
            outer,
            inner,
        )
    level = lv.dask_level(arr, report=pytest.fail)
    assert np.array_equal(np.asarray(level), expected, equal_nan=True)
    assert np.array_equal(np.asarray(level[5]), expected[5], equal_nan=True)


@pytest.mark.parametrize("boundary", ["pad", "truncate", "mixed"])
@pytest.mark.parametrize("name", COMPRESSIONS)
def test_every_compression_and_boundary_reads_like_zarr(tmp_path, name, boundary):
    data = sample((13, 18, 11), "uint16")
    arr = write_n5(
        tmp_path, "d", data, (4, 8, 3), COMPRESSIONS[name], boundary, skip={(1, 0, 0), (3, 2, 3)}
    )
    assert_reads_like_zarr(arr)
    whole = lv.LevelReader(arr, n5_order=True)[...]
    assert np.all(whole[0:3, 0:8, 4:8] == 0)  # the missing block reads as fill value


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_reads_like_zarr(tmp_path, dtype):
    data = sample((9, 10, 7), dtype)
    arr = write_n5(tmp_path, "d", data, (4, 4, 4), COMPRESSIONS["zstd"], "mixed", skip={(0, 1, 1)})
    assert_reads_like_zarr(arr)


def test_zarr_written_array_with_nonzero_fill_reads_like_zarr(tmp_path):
    """A Zarr v3 array using ``n5_default`` in a plain store (no N5 wrapper), NaN fill."""
    arr = zarr.create_array(
        LocalStore(tmp_path / "z.zarr"), shape=(20, 9, 6), dtype="float32", chunks=(8, 4, 4), fill_value=np.nan,
        serializer=N5DefaultCodec.from_dict(
            {"name": "n5_default", "configuration": {"codecs": [
                {"name": "transpose", "configuration": {"order": [2, 1, 0]}},
                {"name": "bytes", "configuration": {"endian": "big"}},
                {"name": "gzip", "configuration": {"level": 1}}]}}),
        compressors=None, chunk_key_encoding={"name": "v2", "separator": "/"},
    )  # fmt: skip
    arr[:10, :5, :] = sample((10, 5, 6), "float32")
    assert_reads_like_zarr(arr)
    assert np.isnan(lv.LevelReader(arr, n5_order=True)[0, 0, 19])


@pytest.mark.parametrize("endian", ["big", "little"])
def test_plain_zarr_c_order_arrays_fall_back_to_zarr(tmp_path, endian):
    data = sample((12, 10, 9), "int32")
    arr = zarr.create_array(
        LocalStore(tmp_path / "p.zarr"), shape=data.shape, dtype=data.dtype, chunks=(5, 4, 4),
        serializer={"name": "bytes", "configuration": {"endian": endian}}, compressors=[{"name": "gzip", "configuration": {"level": 1}}],
    )  # fmt: skip
    arr[...] = data
    reader = lv.LevelReader(arr, n5_order=False, report=pytest.fail)
    assert reader.source is None
    assert BlockSource.for_array(arr) is None
    assert np.array_equal(reader[...], data)
    assert np.array_equal(np.asarray(lv.dask_level(arr, n5_order=False)[3]), data[3])


def test_time_stacked_bdv_reads_like_zarr(tmp_path):
    from napari_n5zarr._napari.reader import read_path

    root = napari_n5zarr.open(tmp_path / "b.n5", mode="w")
    setup = root.create_group(
        "setup0", attributes={"downsamplingFactors": [[1, 1, 1], [2, 2, 2]], "dataType": "uint16"}
    )
    arrays = []
    for t in range(3):
        tp = setup.create_group(
            f"timepoint{t}", attributes={"multiScale": True, "resolution": [1.0, 1.0, 1.0]}
        )
        for k in range(2):
            shape = (21 >> k, 17 >> k, 9 >> k)
            a = napari_n5zarr.create_dataset(tp, f"s{k}", shape=shape, dtype="uint16", chunks=(8, 8, 4),
                                             compression={"type": "gzip"}, attributes={"downsamplingFactors": [2**k] * 3})  # fmt: skip
            a[...] = sample(shape, "uint16", seed=10 * t + k)
            arrays.append(napari_n5zarr.open(tmp_path / "b.n5" / f"setup0/timepoint{t}/s{k}"))
    (layer,) = read_path(tmp_path / "b.n5", notify=pytest.fail)
    for k, level in enumerate(layer[0]):
        expected = np.stack([np.asarray(arrays[2 * t + k][...]).T for t in range(3)])
        assert np.array_equal(np.asarray(level), expected)
        assert np.array_equal(np.asarray(level[1, 2]), expected[1, 2])


@pytest.fixture
def decodes(monkeypatch):
    """Number of blocks decoded so far (every call of the codec's block decoder)."""
    count = [0]
    original = N5DefaultCodec.decode_block

    def counting(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(N5DefaultCodec, "decode_block", counting)
    return count


def test_scrolling_within_a_block_slab_decodes_nothing_again(
    tmp_path, decodes, fresh_cache, monkeypatch
):
    monkeypatch.setenv(fetch.PREFETCH_ENV, "0")  # counted exactly: no background decoding
    data = sample((40, 36, 20), "uint16")  # N5 order: 3 x 3 x 2 blocks of 16^2 x 10
    arr = write_n5(tmp_path, "d", data, (16, 16, 10), COMPRESSIONS["gzip"])
    expected = data.T
    level = lv.dask_level(arr, report=pytest.fail)
    np.testing.assert_array_equal(np.asarray(level[0]), expected[0])
    assert decodes[0] == 9  # one plane: the 3 x 3 blocks of the first slab
    for z in range(1, 10):
        np.testing.assert_array_equal(np.asarray(level[z]), expected[z])
    assert decodes[0] == 9  # the other 9 planes of the slab: all from the cache
    hits = fresh_cache.stats().hits
    assert hits >= 9 * 9
    np.testing.assert_array_equal(np.asarray(level[10]), expected[10])
    assert decodes[0] == 18  # the next slab
    # another layer over the same opened array shares the cache
    np.testing.assert_array_equal(lv.LevelReader(arr, n5_order=True)[15], expected[15])
    assert decodes[0] == 18


def test_scrolling_prefetches_the_next_slab_in_the_direction_of_travel(tmp_path, decodes):
    data = sample((20, 20, 30), "uint16")  # N5 order: 2 x 2 x 3 blocks of 10^3
    arr = write_n5(tmp_path, "d", data, (10, 10, 10), COMPRESSIONS["zstd"])
    reader = lv.LevelReader(arr, n5_order=True, report=pytest.fail)

    def settled() -> None:  # the prefetch thread has finished what it was given
        fetch._prefetch_pool().submit(lambda: None).result()

    assert np.array_equal(reader[12], data.T[12])
    settled()
    assert decodes[0] == 4  # one slab; no direction yet
    assert np.array_equal(reader[13], data.T[13])
    settled()
    assert decodes[0] == 8  # moving up in z: slab 2 decoded in the background
    assert np.array_equal(reader[25], data.T[25])
    assert np.array_equal(reader[29], data.T[29])
    settled()
    assert decodes[0] == 8  # served from the cache, and nothing beyond the last slab
    assert np.array_equal(reader[5], data.T[5])  # down again: slab 0 read in the foreground
    settled()
    assert decodes[0] == 12


def test_a_jump_prefetches_nothing_until_the_next_step(tmp_path, decodes):
    """A far jump of the z slider waits for its own frame only; the first scroll step after
    it starts the prefetch of the next slab."""
    data = sample((20, 20, 50), "uint16")  # N5 order: 2 x 2 x 5 blocks of 10^3
    arr = write_n5(tmp_path, "d", data, (10, 10, 10), COMPRESSIONS["zstd"])
    reader = lv.LevelReader(arr, n5_order=True, report=pytest.fail)

    def settled() -> None:
        fetch._prefetch_pool().submit(lambda: None).result()

    assert np.array_equal(reader[12], data.T[12])
    assert np.array_equal(reader[13], data.T[13])
    settled()
    assert decodes[0] == 8  # slab 1, and slab 2 prefetched
    assert np.array_equal(reader[35], data.T[35])  # a jump up to slab 3
    settled()
    assert decodes[0] == 12  # slab 3 only: slab 4 is not prefetched on a jump
    assert np.array_equal(reader[36], data.T[36])  # one step up: scrolling again
    settled()
    assert decodes[0] == 16  # slab 4 prefetched
    assert np.array_equal(reader[45], data.T[45])
    settled()
    assert decodes[0] == 16  # from the cache


def test_a_container_opened_again_does_not_see_old_blocks(tmp_path, decodes):
    data = sample((8, 8, 4), "uint8")
    arr = write_n5(tmp_path, "d", data, (8, 8, 4), COMPRESSIONS["raw"])
    assert np.array_equal(lv.LevelReader(arr, n5_order=True)[...], data.T)
    (tmp_path / "d" / "0" / "0" / "0").write_bytes(
        arr.metadata.codecs[0].encode_block(data[::-1])
    )  # rewritten
    changed = napari_n5zarr.open(tmp_path / "d")
    assert np.array_equal(lv.LevelReader(changed, n5_order=True)[...], data[::-1].T)
    assert decodes[0] == 2


def test_cache_is_bounded_and_least_recently_used_goes_first(tmp_path, monkeypatch):
    blocks = {k: np.zeros(100, np.uint8) for k in "abcdefghijklmn"}
    unit = bc.entry_cost("a", blocks["a"])  # 100 bytes of data, the entry's objects and bookkeeping
    cache = bc.BlockCache(10 * unit)
    for k in "abcdefghij":
        cache.put(k, blocks[k])
    assert cache.get("a") is blocks["a"]  # a is now the most recent
    for k in "klmn":
        cache.put(k, blocks[k])
    stats = cache.stats()
    assert stats.nbytes <= 10 * unit
    assert stats.entries == 10
    assert cache.get("b") is None
    assert cache.get("e") is None
    assert cache.get("a") is blocks["a"]
    cache.put("huge", np.zeros(3 * unit, np.uint8))  # more than a quarter: not kept
    assert "huge" not in cache
    cache.resize(3 * unit)
    assert cache.stats().nbytes <= 3 * unit
    assert "l" not in cache
    assert "a" in cache
    assert "n" in cache  # a: read last
    monkeypatch.setenv(bc.ENV_VAR, "12345")
    assert bc.default_cache_bytes() == 12345
    monkeypatch.setenv(bc.ENV_VAR, "lots")
    with pytest.raises(ValueError, match=bc.ENV_VAR):
        bc.default_cache_bytes()


def test_reading_more_than_the_cache_holds_stays_within_its_bound(tmp_path, fresh_cache):
    data = sample((32, 32, 32), "uint16")
    arr = write_n5(tmp_path, "d", data, (8, 8, 8), COMPRESSIONS["zstd"])  # 64 blocks of 1 KiB
    bc.set_cache_bytes(16 * 1024)
    reader = lv.LevelReader(arr, n5_order=True, report=pytest.fail)
    for z in range(0, 32, 3):
        assert np.array_equal(reader[z], data.T[z])
        stats = bc.cache_stats()
        assert 0 < stats.nbytes <= 16 * 1024
        assert stats.entries <= 16
    bc.set_cache_bytes(0)  # off: still reads right
    assert np.array_equal(reader[...], data.T)
    assert bc.cache_stats().entries == 0


def test_corrupt_block_reads_as_fill_value_with_one_report_naming_it(tmp_path):
    data = sample((16, 16, 8), "uint16") | 1
    arr = write_n5(tmp_path, "d", data, (8, 8, 8), COMPRESSIONS["gzip"])
    block = tmp_path / "d" / "1" / "0" / "0"
    block.write_bytes(block.read_bytes()[:16] + b"\x00garbage, not gzip" * 4)
    reports: list[str] = []
    reader = lv.LevelReader(arr, n5_order=True, report=reports.append)
    expected = data.T.copy()
    expected[:, 0:8, 8:16] = 0
    for _ in range(2):  # read twice: reported once
        assert np.array_equal(reader[...], expected)
        assert np.array_equal(reader[3], expected[3])
    assert len(reports) == 1, reports  # the store is rooted at the dataset: key 1/0/0
    assert reports[0].startswith(f"N5 block 1/0/0 in {tmp_path / 'd'}: ")
    assert "fill value" in reports[0]
    level_reports: list[str] = []
    level = lv.dask_level(arr, report=level_reports.append)
    assert np.array_equal(np.asarray(level), expected)
    assert np.array_equal(np.asarray(level[5]), expected[5])
    assert level_reports == reports


def test_block_with_impossible_header_is_refused_as_zarr_refuses_it(tmp_path):
    data = sample((12, 8), "int16")
    arr = write_n5(tmp_path, "d", data, (8, 8), COMPRESSIONS["raw"])
    codec: N5DefaultCodec = arr.metadata.codecs[0]
    (tmp_path / "d" / "0" / "0").write_bytes(
        codec.encode_block(data[:5, :8])
    )  # interior block, truncated
    reports: list[str] = []
    got = lv.LevelReader(arr, n5_order=True, report=reports.append)[...]
    expected = data.T.copy()
    expected[:, :8] = 0
    assert np.array_equal(got, expected)
    assert len(reports) == 1, reports
    assert "N5 block 0/0 in" in reports[0], reports
    assert "interior" in reports[0], reports


@pytest.fixture
def served(tmp_path, counting_http):
    """A local HTTP server over ``tmp_path`` (127.0.0.1) -> (base URL, state with the peak
    requests in flight); 20 ms per GET, so requests overlap if issued together."""
    return counting_http(tmp_path, latency=0.02)


def test_remote_blocks_read_like_local_ones_and_concurrently(tmp_path, served):
    url, state = served
    data = sample((30, 20, 6), "uint16")
    local = write_n5(
        tmp_path, "r.n5", data, (8, 8, 6), COMPRESSIONS["gzip"], "mixed", skip={(1, 1, 0)}
    )
    remote = napari_n5zarr.open(f"{url}/r.n5")
    reader = lv.LevelReader(remote, n5_order=True, report=pytest.fail)
    assert reader.source is not None
    assert not reader.source.synchronous
    assert lv._task_bytes(reader) > lv._task_bytes(
        lv.LevelReader(local, n5_order=True)
    )  # larger remote tasks
    state["peak"] = 0
    plane = reader[2]  # one plane: 4 x 3 blocks, 1 absent
    assert state["peak"] >= 2  # requests of one plane are in flight together
    assert np.array_equal(plane, np.asarray(local[...]).T[2])
    assert np.array_equal(reader[...], lv.LevelReader(local, n5_order=True)[...])
    assert np.array_equal(
        np.asarray(lv.dask_level(remote)[:, 3:17]), np.asarray(local[...]).T[:, 3:17]
    )


def test_a_block_being_prefetched_is_awaited_not_decoded_again(tmp_path, decodes):
    from concurrent.futures import Future

    data = sample((8, 8, 8), "uint16")
    arr = write_n5(tmp_path, "d", data, (8, 8, 4), COMPRESSIONS["gzip"])
    source = BlockSource.for_array(arr)
    assert source is not None
    key = (
        source.cache_token(),
        source.prefix,
        (1, 0, 0),
    )  # a local dataset: its folder version too
    future: Future = Future()
    fetch._inflight[key] = future
    prefetched = np.asarray(arr[:, :, 4:8]).T.copy()
    threading.Timer(0.05, lambda: (fetch._inflight.pop(key), future.set_result(prefetched))).start()
    try:
        got = source.read((slice(0, 8), slice(0, 8), slice(0, 8)), pytest.fail)
    finally:
        fetch._inflight.pop(key, None)
    assert np.array_equal(got, data.T)
    assert decodes[0] == 1  # block (0, 0, 0) only


def test_regions_above_the_block_limit_are_read_in_pieces(tmp_path, monkeypatch):
    data = sample((13, 18, 11), "uint16")
    arr = write_n5(tmp_path, "d", data, (4, 8, 3), COMPRESSIONS["gzip"], "mixed", skip={(1, 0, 0)})
    monkeypatch.setattr(lv, "MAX_REGION_BLOCKS", 5)  # every read below is split
    monkeypatch.setattr(lv, "SPLIT_BLOCK_BYTES", 1)
    reads = []
    source = lv.LevelReader(arr, n5_order=True).source
    original = type(source).read

    def counting(self, selection, on_error):
        reads.append(len(self.cells(selection)))
        return original(self, selection, on_error)

    monkeypatch.setattr(type(source), "read", counting)
    reader = lv.LevelReader(arr, n5_order=True, report=pytest.fail)
    expected = np.asarray(arr[...]).T
    for index in [(slice(None),), (slice(1, 10), slice(2, 17), slice(0, 11)), (5,)]:
        reads.clear()
        assert np.array_equal(reader[index], expected[index]), index
        assert reads, reads
        assert max(reads) <= 5, reads
        assert len(reads) > 1, reads


def test_levels_pickle_and_read_the_same_after(tmp_path):
    """A level (held by a napari layer) pickles, as a dask.distributed task needs: the copy
    reopens the store (no lock or cache crosses) and reads what the original reads."""
    import pickle

    from napari_n5zarr.read.multiscale import levels_for
    from napari_n5zarr.read.pyramid_walk import detect

    a = (np.arange(9 * 20 * 30).reshape(9, 20, 30) % 251).astype("uint8")
    napari_n5zarr.export(a, tmp_path / "p.n5", chunks=8)
    node = napari_n5zarr.open(tmp_path / "p.n5")
    (ms,) = detect(node)
    levels = levels_for(node, ms, report=lambda message: None)  # a closure: never pickled
    assert type(levels[0]) is lv.LazyLevel
    assert levels[0].source is not None
    for level in levels:
        copy = pickle.loads(pickle.dumps(level))
        assert type(copy) is type(level)
        assert copy.shape == level.shape
        assert copy.dtype == level.dtype
        np.testing.assert_array_equal(np.asarray(copy), np.asarray(level))
        np.testing.assert_array_equal(np.asarray(copy[2, 3:17]), np.asarray(level[2, 3:17]))
    np.testing.assert_array_equal(np.asarray(levels[0]), a)  # napari order


def test_a_pickled_level_raises_on_a_block_it_cannot_read(tmp_path):
    """A copy on a worker has nobody to show a fill-value block to: it fails, naming the block."""
    import pickle

    data = sample((16, 16, 8), "uint16") | 1
    write_n5(tmp_path, "d", data, (8, 8, 8), COMPRESSIONS["gzip"])
    block = tmp_path / "d" / "1" / "0" / "0"
    block.write_bytes(block.read_bytes()[:16] + b"\x00garbage, not gzip" * 4)
    reports: list[str] = []
    level = lv.LazyLevel(napari_n5zarr.open(tmp_path / "d"), n5_order=True, report=reports.append)
    assert np.asarray(level)[:, 0:8, 8:16].max() == 0
    assert len(reports) == 1
    copy = pickle.loads(pickle.dumps(level))
    with pytest.raises(napari_n5zarr.errors.N5BlockError, match="N5 block 1/0/0 in "):
        np.asarray(copy)
