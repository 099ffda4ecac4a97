"""The export's fast path: in-memory sources on a plain thread pool, coarse levels written
while level 0 is, blocks copied in cache-line strips. Every level equals an independent
numpy reference, exactly, for every compression, memory layout and boundary mode."""

from __future__ import annotations

import threading
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from format_cases import COMPRESSION_TYPES

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.errors import ExportCancelled
from napari_n5zarr.n5.codec import stored_values
from napari_n5zarr.write.export import blocks, coarse
from napari_n5zarr.write.export import levels as levels
from napari_n5zarr.write.export.workers import Workers
from napari_n5zarr.write.pyramid import plan, spatial_axes


def reference_mean(a: np.ndarray, factors) -> np.ndarray:
    """2x mean by np.add.reduceat (edge windows: mean of the pixels that exist), half to even."""
    sums, counts = a.astype(np.float64), np.ones(a.shape)
    for axis, f in enumerate(factors):
        if f > 1:
            idx = np.arange(0, a.shape[axis], f)
            sums = np.add.reduceat(sums, idx, axis=axis)
            counts = np.add.reduceat(counts, idx, axis=axis)
    return np.rint(sums / counts).astype(a.dtype)


def reference_levels(a: np.ndarray, chunks) -> list[np.ndarray]:
    block = [chunks] * a.ndim if isinstance(chunks, int) else list(chunks)
    out = [a]
    for step in plan(a.shape, block, spatial_axes(a.ndim)):
        out.append(reference_mean(out[-1], step))
    return out


def read_levels(dest: Path) -> list[np.ndarray]:
    root = napari_n5zarr.open(dest)
    names = sorted(root.array_keys(), key=lambda n: int(n[1:]))
    return [np.asarray(root[n][...]).T for n in names]


def smooth(shape, dtype="uint16", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    grid = np.indices(shape).sum(axis=0)
    return (grid * 7 + rng.integers(0, 50, shape)).astype(dtype)


def layouts(a: np.ndarray) -> dict[str, np.ndarray]:
    """The same values in C order, F order (napari order of an N5-ordered array) and a strided view."""
    padded = np.zeros(tuple(n + 6 for n in a.shape), a.dtype)
    padded[3:-3, 3:-3, 3:-3] = a
    return {"C": a, "F": np.asfortranarray(a), "view": padded[3:-3, 3:-3, 3:-3]}


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_every_level_exact_for_every_compression_and_layout(tmp_path, compression):
    """Blocks of 32^3 (copied in strips), edge blocks on every axis, three levels."""
    a = smooth((45, 70, 83))
    expected = reference_levels(a, 32)
    assert len(expected) == 3
    files = {}
    for name, source in layouts(a).items():
        dest = tmp_path / f"{name}.n5"
        export(source, dest, chunks=32, compression=compression)
        for k, (got, exp) in enumerate(zip(read_levels(dest), expected, strict=True)):
            np.testing.assert_array_equal(got, exp, err_msg=f"{name} s{k}")
        files[name] = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert files["C"] == files["F"] == files["view"]  # the same bytes, whatever the layout


@pytest.mark.parametrize("boundary", ["truncate", "pad"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "float32", "float64"])
def test_dtypes_boundaries_and_dask_agree(tmp_path, boundary, dtype):
    a = smooth((33, 40, 70), dtype=dtype)
    if dtype.startswith("float"):
        a = a / 3
    a[:16, :16, :32] = 0  # an empty block: skipped in every run
    out = {}
    for name, source in {
        "numpy": np.asfortranarray(a),
        "dask": da.from_array(a, chunks=(11, 20, 35)),
    }.items():
        dest = tmp_path / f"{name}.n5"
        export(source, dest, chunks=(16, 16, 32), compression="zstd", boundary=boundary)
        out[name] = {p.relative_to(dest): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
        np.testing.assert_array_equal(read_levels(dest)[0], a)
    assert out["numpy"] == out["dask"]
    assert Path("s0/0/0/0") not in out["numpy"]


def test_odd_blocks_take_the_whole_level_path(tmp_path):
    """Blocks of odd size on halved axes cannot be downsampled one by one: the next level
    comes from the whole level, still exact."""
    a = smooth((40, 47, 61))
    assert not coarse.blockwise((40, 47, 61), (5, 7, 9), (2, 2, 2))
    export(np.asfortranarray(a), tmp_path / "o.n5", chunks=(5, 7, 9), compression="raw")
    for got, exp in zip(
        read_levels(tmp_path / "o.n5"), reference_levels(a, (5, 7, 9)), strict=True
    ):
        np.testing.assert_array_equal(got, exp)


def test_given_levels_from_numpy(tmp_path):
    a = smooth((20, 30, 40))
    given = [a, reference_mean(a, (2, 2, 2))]
    export(given, tmp_path / "g.n5", chunks=8, compression="gzip")
    for got, exp in zip(read_levels(tmp_path / "g.n5"), given, strict=True):
        np.testing.assert_array_equal(got, exp)


def test_coarse_blocks_are_written_while_level_0_is(tmp_path, monkeypatch):
    """The pyramid is not written level after level: the first coarse blocks land before
    the last level-0 block."""
    order = []
    real = blocks.store_set

    def recording(store, key, value):
        order.append(key.split("/")[0])
        return real(store, key, value)

    monkeypatch.setattr(blocks, "store_set", recording)
    monkeypatch.setattr(levels, "REGION_BYTES", 64 << 10)
    export(smooth((64, 128, 128)), tmp_path / "p.n5", chunks=32, compression="raw")
    s0 = [i for i, name in enumerate(order) if name == "s0"]
    s1 = [i for i, name in enumerate(order) if name == "s1"]
    assert len(s0) == 2 * 4 * 4
    assert len(s1) == 2 * 2
    assert min(s1) < max(s0)


def test_coarse_levels_fill_in_any_order():
    """Pieces of the first level in random order: every block of every level is handed
    out once, when complete, with the values of the whole-level reference."""
    a = smooth((20, 26, 34))
    written: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    class Target:
        def __init__(self, name, shape, block):
            self.prefix, self.shape, self.block, self.dtype = name, shape, block, a.dtype
            self.ndim = len(shape)
            self.grid = tuple(-(-n // b) for n, b in zip(shape, block, strict=True))
            self.nblocks = int(np.prod(self.grid))

        def __setitem__(self, key, value):
            index = tuple(k.start // b for k, b in zip(key, self.block, strict=True))
            assert (self.prefix, index) not in written
            written[self.prefix, index] = value.copy()

    ref = [a, reference_mean(a, (2, 2, 2))]
    ref.append(reference_mean(ref[1], (2, 2, 2)))
    targets = [Target(f"s{k}", r.shape, (4, 6, 8)) for k, r in enumerate(ref)]
    jobs = []
    levels_ = coarse.CoarseLevels(
        targets, [(2, 2, 2)] * 2, "mean", lambda fn, *args: jobs.append((fn, args))
    )
    rng = np.random.default_rng(3)
    pieces = [
        (z, y, x) for z in range(0, 20, 5) for y in range(0, 26, 13) for x in range(0, 34, 17)
    ]
    for i in rng.permutation(len(pieces)):
        start = pieces[i]
        levels_.add(
            start, a[start[0] : start[0] + 5, start[1] : start[1] + 13, start[2] : start[2] + 17]
        )
        while jobs:  # run handed-out blocks in a shuffled order too
            fn, args = jobs.pop(int(rng.integers(len(jobs))))
            fn(*args)
    assert levels_.done()
    for t, r in zip(targets, ref, strict=True):
        assert sum(1 for p, _ in written if p == t.prefix) == t.nblocks
        for (prefix, index), value in written.items():
            if prefix == t.prefix:
                region = tuple(
                    slice(i * b, i * b + n)
                    for i, b, n in zip(index, t.block, value.shape, strict=True)
                )
                np.testing.assert_array_equal(value, r[region])


@pytest.mark.parametrize("dtype", ["uint8", "uint16", ">u2", "int32", "float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 64, 64), (40, 64, 33), (3, 256, 256), (1000,), (7, 9, 5)])
def test_stored_values_is_the_transposed_big_endian_copy(dtype, shape):
    base = (
        np.arange(int(np.prod(shape)) * 3, dtype=np.int64).reshape((*shape[:-1], shape[-1] * 3))
        % 251
    )
    for arr in (
        base[..., ::3],
        np.asfortranarray(base[..., : shape[-1]]),
        base[..., : shape[-1]].T.copy().T,
    ):
        arr = arr.astype(dtype)
        n5_order = arr.T  # a block in N5 order, as export hands it over
        got = stored_values(n5_order)
        be = np.dtype(dtype).newbyteorder(">") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)
        assert got.dtype == be
        assert got.flags.c_contiguous
        np.testing.assert_array_equal(got, arr)
        assert got.tobytes() == np.ascontiguousarray(arr, dtype=be).tobytes()


def test_workers_wait_for_nested_jobs_and_raise_the_first_error():
    done = []
    with Workers(2) as w:

        def job(i):
            if i < 3:
                w.submit(lambda: done.append(("nested", i)))
            done.append(i)

        w.run(job, range(10), window=3)
    assert sorted(d for d in done if isinstance(d, int)) == list(range(10))
    assert sorted(d for d in done if isinstance(d, tuple)) == [("nested", i) for i in range(3)]

    def fails(i):
        if i == 4:
            raise ValueError("job 4 failed")

    with pytest.raises(ValueError, match="job 4 failed"), Workers(2) as w:
        w.run(fails, range(50), window=2)


def test_workers_cancel_does_not_wait_for_a_running_job():
    cancel, release, started = threading.Event(), threading.Event(), []

    def hangs(i):
        started.append(i)
        cancel.set()
        release.wait(60)

    w = Workers(2, cancel.is_set)
    try:
        with pytest.raises(ExportCancelled):
            w.run(hangs, range(100), window=2)
        assert len(started) <= 2  # nothing started after cancel
    finally:
        release.set()
