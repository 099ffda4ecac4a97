"""export(): every level read exactly by independent readers; metadata; boundary modes;
labels; memory; safety (overwrite, kill, cancel)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from format_cases import COMPRESSION_TYPES

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.write.export.exporter import (
    INCOMPLETE_MARKER,
    ExportCancelled,
    parse_compression,
)
from napari_n5zarr.write.pyramid import plan

pytestmark = pytest.mark.filterwarnings(
    "ignore:Object at .* is not recognized:UserWarning"
)  # plain zarr listing a dual group

SHAPE = (13, 37, 50)  # napari order z, y, x: odd extents, edge blocks everywhere
BLOCK = 16
JAVA_ONLY = {"lz4"}  # lz4-java framing: neither tensorstore nor z5py read it


def image(shape=SHAPE, dtype="uint16") -> np.ndarray:
    rng = np.random.default_rng(42)
    return rng.integers(0, 4000, size=shape).astype(dtype)


def reference_mean(a: np.ndarray, factors) -> np.ndarray:
    """Independent 2x mean: np.add.reduceat over windows (partial edge windows averaged
    over the pixels that exist), rounded half to even."""
    sums, counts = a.astype(np.float64), np.ones(a.shape)
    for axis, f in enumerate(factors):
        if f == 1:
            continue
        idx = np.arange(0, a.shape[axis], f)
        sums = np.add.reduceat(sums, idx, axis=axis)
        counts = np.add.reduceat(counts, idx, axis=axis)
    out = sums / counts
    return np.rint(out).astype(a.dtype) if a.dtype.kind in "iu" else out.astype(a.dtype)


def reference_pyramid(a: np.ndarray, n: int) -> list[np.ndarray]:
    levels = [a]
    for _ in range(n - 1):
        levels.append(reference_mean(levels[-1], (2,) * a.ndim))
    return levels


def n5_only_copy(src: Path, dest: Path) -> Path:
    """z5py 3 refuses folders holding both attributes.json and zarr.json."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("zarr.json"))
    return dest


def read_with_zarr_subprocess(paths: list[Path], out: Path) -> list[np.ndarray]:
    """zarr-python in a fresh interpreter that never imports napari_n5zarr itself
    (n5_default comes from the zarr.codecs entry point)."""
    script = textwrap.dedent(
        f"""
        import numpy as np, zarr
        arrays = [zarr.open_array(p, mode="r")[...] for p in {[str(p) for p in paths]!r}]
        np.savez({str(out)!r}, *arrays)
        """
    )
    subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=60
    )
    with np.load(out) as npz:
        return [npz[f"arr_{i}"] for i in range(len(paths))]


def tensorstore_read(path: Path) -> np.ndarray:
    import tensorstore as ts

    return (
        ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}, read=True)
        .result()
        .read()
        .result()
    )


def attrs(path: Path) -> dict:
    return json.loads((path / "attributes.json").read_text())


def headers(dataset: Path) -> dict[str, tuple[int, ...]]:
    """Block path -> header shape (N5 order) of every block on disk."""
    out = {}
    for f in dataset.rglob("*"):
        if f.is_file() and f.name[0].isdigit():
            raw = f.read_bytes()
            mode, ndim = struct.unpack(">HH", raw[:4])
            assert mode == 0
            out[str(f.relative_to(dataset))] = struct.unpack(f">{ndim}I", raw[4 : 4 + 4 * ndim])
    return out


# -- every level, every reader -----------------------------------------------------------


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_levels_read_exactly_by_independent_readers(tmp_path, compression):
    a = image()
    dest = tmp_path / "out.n5"
    export(da.from_array(a, chunks=(5, 20, 20)), dest, compression=compression, chunks=BLOCK)
    names = sorted((p.name for p in dest.iterdir() if p.is_dir()), key=lambda n: int(n[1:]))
    assert names == ["s0", "s1", "s2"]  # (50, 37, 13) -> (25, 19, 7) -> (13, 10, 4): one 16^3 block
    expected = reference_pyramid(a, len(names))

    # ours
    root = napari_n5zarr.open(dest)
    for name, exp in zip(names, expected, strict=True):
        np.testing.assert_array_equal(root[name][...], exp.T)
    # zarr-python alone (Zarr v3 side)
    for got, exp in zip(
        read_with_zarr_subprocess([dest / n for n in names], tmp_path / "z.npz"),
        expected,
        strict=True,
    ):
        assert got.dtype == exp.dtype
        np.testing.assert_array_equal(got, exp.T)
    if compression in JAVA_ONLY:
        return
    # tensorstore's n5 driver (N5 side, N5 order)
    for name, exp in zip(names, expected, strict=True):
        np.testing.assert_array_equal(tensorstore_read(dest / name), exp.T)
    # z5py (C order) on an N5-only copy of the same blocks
    import z5py

    f = z5py.File(str(n5_only_copy(dest, tmp_path / "copy.n5")), "r")
    for name, exp in zip(names, expected, strict=True):
        np.testing.assert_array_equal(f[name][:], exp)


def test_every_node_is_n5_and_zarr(tmp_path):
    dest = tmp_path / "out.n5"
    export(image(), dest, chunks=BLOCK, compression="zstd:5")
    root = attrs(dest)
    assert root["n5"] == "4.0.0"
    assert json.loads((dest / "zarr.json").read_text())["node_type"] == "group"
    for level in ("s0", "s1", "s2"):
        z = json.loads((dest / level / "zarr.json").read_text())
        n5 = attrs(dest / level)
        assert n5["compression"] == {"type": "zstd", "level": 5}
        assert z["codecs"][0]["name"] == "n5_default"
        assert z["shape"] == n5["dimensions"]
        assert z["chunk_grid"]["configuration"]["chunk_shape"] == n5["blockSize"]
    assert attrs(dest / "s0")["dimensions"] == [50, 37, 13]  # N5 order: reverse of napari's
    assert not (dest / INCOMPLETE_MARKER).exists()


def test_n5_only_export_reads_with_z5py(tmp_path):
    import z5py

    a = image()
    dest = tmp_path / "n5only.n5"
    export(a, dest, chunks=BLOCK, zarr_json=False, levels=2)
    assert not list(dest.rglob("zarr.json"))
    f = z5py.File(str(dest), "r")
    np.testing.assert_array_equal(f["s0"][:], a)
    np.testing.assert_array_equal(f["s1"][:], reference_mean(a, (2, 2, 2)))


# -- metadata ----------------------------------------------------------------------------


def test_spatial_metadata_in_n5_order_and_round_trip(tmp_path):
    from napari_n5zarr._napari.reader import read_path

    dest = tmp_path / "cal.n5"
    scale, translate = (4.0, 0.5, 0.25), (100.0, -2.0, 3.5)
    export(
        image(), dest, chunks=BLOCK, levels=3, scale=scale, translate=translate,
        units=("micrometer", "micrometer", "nanometer"), axis_labels=("z", "y", "x"),
    )  # fmt: skip
    root = attrs(dest)
    # mixed units (um, um, nm) are written in the finest one: pixelResolution has one unit
    assert root["pixelResolution"] == {"unit": "nm", "dimensions": [0.25, 500.0, 4000.0]}
    assert root["resolution"] == [0.25, 500.0, 4000.0]
    assert root["units"] == ["nm", "nm", "nm"]
    assert root["axes"] == ["x", "y", "z"]
    assert root["offset"] == [3.5, -2000.0, 100000.0]
    # anisotropic: z (4) is coarser than x (0.25) and y (0.5): only x, then x and y, halve first
    assert [attrs(dest / f"s{k}")["downsamplingFactors"] for k in range(3)] == [
        [1, 1, 1],
        [2, 1, 1],
        [4, 2, 1],
    ]
    assert attrs(dest / "s2")["resolution"] == [1.0, 1000.0, 4000.0]

    import tensorstore as ts

    t = ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(dest / "s2")}}).result()
    assert t.domain.labels == ("x", "y", "z")
    assert [u.multiplier for u in t.dimension_units] == [1.0, 1000.0, 4000.0]
    assert [u.base_unit for u in t.dimension_units] == ["nm", "nm", "nm"]

    [(levels, kwargs, kind)] = read_path(dest)
    assert kind == "image"
    assert kwargs["multiscale"]
    assert len(levels) == 3
    # the same physical calibration, in nanometers throughout
    assert kwargs["scale"] == pytest.approx((4000.0, 500.0, 0.25))
    assert kwargs["translate"] == pytest.approx((100000.0, -2000.0, 3.5))
    assert tuple(kwargs["axis_labels"]) == ("z", "y", "x")
    assert tuple(kwargs["units"]) == ("nanometer",) * 3


def test_default_labels_and_units(tmp_path):
    dest = tmp_path / "d.n5"
    export(np.ones((2, 3, 5, 7), "uint8"), dest, axis_labels=("-4", "-3", "-2", "-1"), levels=1)
    root = attrs(dest)
    assert root["axes"] == ["x", "y", "z", "t"]
    assert root["units"] == ["", "", "", ""]
    assert root["pixelResolution"]["unit"] == "pixel"
    assert "offset" not in root
    assert attrs(dest / "s0")["blockSize"] == [7, 5, 3, 1]  # non-spatial t gets blocks of 1


def test_existing_pyramid_written_as_given(tmp_path):
    a = image()
    levels = [a, a[::2, ::2, ::2].copy(), da.from_array(a[::4, ::4, ::4].copy(), chunks=3)]
    dest = tmp_path / "given.n5"
    export(levels, dest, chunks=BLOCK, levels=7)  # levels is ignored for a given pyramid
    assert sorted(p.name for p in dest.iterdir() if p.is_dir()) == ["s0", "s1", "s2"]
    assert attrs(dest / "s2")["downsamplingFactors"] == [4, 4, 4]
    root = napari_n5zarr.open(dest)
    for k, level in enumerate(levels):
        np.testing.assert_array_equal(root[f"s{k}"][...], np.asarray(level).T)


def test_pyramid_inside_a_container(tmp_path):
    dest = tmp_path / "container.n5"
    export(image(), dest, path="raw", chunks=BLOCK, levels=2)
    export(image(dtype="uint32"), dest, path="seg", chunks=BLOCK, levels=2, labels=True)
    assert attrs(dest) == {"n5": "4.0.0"}
    assert "n5" not in attrs(dest / "raw")
    assert attrs(dest / "seg")["image-label"] == {}
    group = zarr.open_group(dest, mode="r")  # plain zarr: every node has zarr.json
    assert sorted(group.group_keys()) == ["raw", "seg"]
    assert group["seg/s1"].dtype == np.uint32
    with pytest.raises(FileExistsError):
        export(image(), dest, path="raw")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("gzip", {"type": "gzip", "level": 6, "useZlib": False}),
        ("zstd:7", {"type": "zstd", "level": 7}),
        ("xz:2", {"type": "xz", "preset": 2}),
        (
            {"type": "blosc", "cname": "zstd", "shuffle": 2},
            {"type": "blosc", "cname": "zstd", "clevel": 6, "shuffle": 2, "blocksize": 0},
        ),
        ('{"type": "bzip2", "blockSize": 5}', {"type": "bzip2", "blockSize": 5}),
        (None, {"type": "raw"}),
    ],
)
def test_parse_compression(given, expected):
    assert parse_compression(given) == expected


@pytest.mark.parametrize("bad", ["snappy", "lz4:3", {"level": 3}])
def test_parse_compression_refuses(bad):
    with pytest.raises((ValueError, KeyError)):
        parse_compression(bad)


def test_dtypes(tmp_path):
    export(np.array([[True, False], [False, True]]), tmp_path / "b.n5", levels=1)
    assert attrs(tmp_path / "b.n5" / "s0")["dataType"] == "uint8"
    np.testing.assert_array_equal(
        napari_n5zarr.open(tmp_path / "b.n5")["s0"][...], [[1, 0], [0, 1]]
    )
    f = (np.arange(64, dtype=">f8").reshape(8, 8) - 40) / 8  # big-endian input is fine; exact sums
    export(f, tmp_path / "f.n5", levels=2, chunks=4)
    np.testing.assert_array_equal(
        napari_n5zarr.open(tmp_path / "f.n5")["s1"][...], reference_mean(f.astype("f8"), (2, 2)).T
    )
    with pytest.raises(TypeError, match="N5 cannot store"):
        export(np.zeros((2, 2), complex), tmp_path / "c.n5")


def test_plan():
    assert plan((64, 64, 64), (64, 64, 64), (0, 1, 2)) == []
    assert plan((65, 64, 64), (64, 64, 64), (0, 1, 2)) == [(2, 2, 2)]
    assert plan((3, 100, 100), (1, 64, 64), (1, 2)) == [(1, 2, 2)]  # non-spatial axis untouched
    assert plan((10, 10), (1, 1), (0, 1), levels=3) == [(2, 2), (2, 2)]
    assert plan((1, 4), (1, 1), (0, 1)) == [(1, 2), (1, 2)]  # size-1 axes stay
    with pytest.raises(ValueError, match="levels must be 'auto' or an integer >= 1, got 0"):
        plan((4, 4), (2, 2), (0, 1), levels=0)


# -- boundary blocks ---------------------------------------------------------------------


@pytest.mark.parametrize("boundary", ["truncate", "pad"])
def test_boundary_blocks_on_disk(tmp_path, boundary):
    a = image((5, 9, 20), dtype="int16") - 2000  # N5 dims [20, 9, 5], blocks [8, 4, 4]
    dest = tmp_path / f"{boundary}.n5"
    export(
        a,
        dest,
        chunks=(4, 4, 8),
        boundary=boundary,
        compression="raw",
        levels=1,
        write_empty_blocks=True,
    )
    got = headers(dest / "s0")
    assert len(got) == 3 * 3 * 2
    if boundary == "truncate":  # clipped like n5-java
        assert got["2/2/1"] == (4, 1, 1)
        assert got["0/0/0"] == (8, 4, 4)
        assert got["1/2/0"] == (8, 1, 4)
        assert (dest / "s0/2/2/1").stat().st_size == 16 + 4 * 1 * 1 * 2
    else:  # padded like tensorstore
        assert set(got.values()) == {(8, 4, 4)}
    np.testing.assert_array_equal(napari_n5zarr.open(dest)["s0"][...], a.T)
    np.testing.assert_array_equal(tensorstore_read(dest / "s0"), a.T)
    [z] = read_with_zarr_subprocess([dest / "s0"], tmp_path / "z.npz")
    np.testing.assert_array_equal(z, a.T)


def test_empty_blocks_are_skipped(tmp_path):
    a = np.zeros((32, 32), "uint8")
    a[20:, 20:] = 7
    export(a, tmp_path / "e.n5", chunks=16, levels=1)
    assert sorted(headers(tmp_path / "e.n5" / "s0")) == ["1/1"]
    np.testing.assert_array_equal(tensorstore_read(tmp_path / "e.n5" / "s0"), a.T)


# -- labels ------------------------------------------------------------------------------


def test_labels_mode_downsampling_keeps_label_values(tmp_path):
    rng = np.random.default_rng(1)
    seg = rng.choice(
        np.array([0, 5, 70000, 123456789], dtype="uint32"), size=(9, 31, 40), p=[0.4, 0.3, 0.2, 0.1]
    )
    seg[:4, :8, :8] = 5
    seg[0, 0, 0] = 70000  # 1 vs 7 in the first 2x2x2 window: mode 5, mean would be ~13750
    dest = tmp_path / "labels.n5"
    export(seg, dest, labels=True, chunks=BLOCK)
    root = napari_n5zarr.open(dest)
    values = set(np.unique(seg))
    assert attrs(dest)["image-label"] == {}
    for name in ("s1", "s2"):
        assert set(np.unique(root[name][...])) <= values
    s1 = root["s1"][...].T
    assert s1[0, 0, 0] == 5
    window = seg[2:4, 10:12, 30:32].ravel()
    counts = {v: int((window == v).sum()) for v in window}
    best = max(counts.values())
    assert s1[1, 5, 15] == next(v for v in window if counts[v] == best)  # ties: first in window


def test_nearest_downsampling(tmp_path):
    seg = np.arange(36, dtype="uint16").reshape(6, 6)
    export(seg, tmp_path / "n.n5", labels=True, downsample="nearest", chunks=2, levels=2)
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "n.n5")["s1"][...], seg[::2, ::2].T)


# -- bounded memory ----------------------------------------------------------------------

MEMORY_SCRIPT = """
import re, sys, numpy as np, dask.array as da
from napari_n5zarr import export
z = da.arange(512, dtype=np.uint16, chunks=64)[:, None, None]
y = da.arange(1024, dtype=np.uint16, chunks=256)[None, :, None]
x = da.arange(1024, dtype=np.uint16, chunks=256)[None, None, :]
data = (x + 3 * y + 7 * z) % 4093  # 1 GiB, computed lazily
export(data, sys.argv[1], compression="zstd", chunks=64)
# VmHWM: this process's peak RSS (ru_maxrss would include the forking parent's, here pytest's)
peak_kib = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))
print(data.nbytes, peak_kib * 1024)
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_larger_than_memory_dask_array(tmp_path):
    dest = tmp_path / "big.n5"
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(dest)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    nbytes, peak = map(int, out.stdout.split())
    seconds = time.perf_counter() - t0
    print(f"exported {nbytes / 2**20:.0f} MiB in {seconds:.1f} s, peak RSS {peak / 2**20:.0f} MiB")
    assert nbytes == 2**30
    assert peak < 256 * 2**20  # a quarter of the data (1 GiB), imports included; ~170 MiB seen
    root = napari_n5zarr.open(dest)
    assert [root[f"s{k}"].shape for k in range(5)] == [
        (1024 >> k, 1024 >> k, 512 >> k) for k in range(5)
    ]
    zz, yy, xx = np.ogrid[100:228, 300:428, 600:728]
    region = ((xx + 3 * yy + 7 * zz) % 4093).astype(np.uint16)  # napari order
    np.testing.assert_array_equal(root["s0"][600:728, 300:428, 100:228], region.T)
    np.testing.assert_array_equal(
        root["s1"][300:364, 150:214, 50:114], reference_mean(region, (2, 2, 2)).T
    )


# -- safety ------------------------------------------------------------------------------


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def test_existing_destination_is_refused(tmp_path):
    dest = tmp_path / "keep.n5"
    export(image(), dest, chunks=BLOCK, levels=2)
    before = snapshot(dest)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export(np.zeros((4, 4), "uint8"), dest)
    assert snapshot(dest) == before
    export(np.full((4, 4), 3, "uint8"), dest, overwrite=True, levels=1)
    assert sorted(p.name for p in dest.iterdir()) == ["attributes.json", "s0", "zarr.json"]
    np.testing.assert_array_equal(napari_n5zarr.open(dest)["s0"][...], np.full((4, 4), 3))


def test_overwrite_refuses_a_folder_that_is_not_n5(tmp_path):
    dest = tmp_path / "documents"
    dest.mkdir()
    (dest / "thesis.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="no N5/Zarr node"):
        export(np.zeros((4, 4), "uint8"), dest, overwrite=True)
    assert (dest / "thesis.txt").read_text() == "precious"


def test_empty_existing_folder_is_used(tmp_path):
    dest = tmp_path / "empty.n5"
    dest.mkdir()
    export(np.ones((4, 4), "uint8"), dest, levels=1)
    assert (dest / "s0" / "attributes.json").is_file()


KILL_SCRIPT = """
import sys, time, numpy as np, dask.array as da
from napari_n5zarr import export
def slow(block):
    time.sleep(0.02)
    return block + 1
data = da.zeros((64, 256, 256), dtype="uint16", chunks=16).map_blocks(slow, dtype="uint16")
export(data, sys.argv[1], chunks=16, compression="raw")
"""


def test_killed_export_never_looks_complete(tmp_path):
    import tensorstore as ts

    from napari_n5zarr.cli import main
    from napari_n5zarr.read.pyramid_walk import detect

    dest = tmp_path / "killed.n5"
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, str(dest)])
    try:
        deadline = time.monotonic() + 60
        while len(list((dest / "s0").rglob("*"))) < 40:  # well into the block writes
            assert proc.poll() is None, "export ended before it was killed"
            assert time.monotonic() < deadline, "export ended before it was killed"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert (dest / INCOMPLETE_MARKER).is_file()
    assert not list(dest.rglob("attributes.json"))
    assert not list(dest.rglob("zarr.json"))
    node = napari_n5zarr.open(dest)  # at most an implicit group: no array, no metadata
    assert isinstance(node, zarr.Group)
    assert dict(node.attrs) == {}
    assert not list(node.arrays())
    assert detect(node, on_error=lambda *a: None) == []
    with pytest.raises(FileNotFoundError):  # zarr's ArrayNotFoundError
        zarr.open_array(dest / "s0", mode="r")
    with pytest.raises(ValueError, match=r"attributes\.json"):
        ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(dest / "s0")}}).result()
    with pytest.raises(FileExistsError):
        export(np.ones((4, 4), "uint8"), dest)
    assert main(["info", str(dest)]) == 0
    export(
        np.ones((4, 4), "uint8"), dest, overwrite=True, levels=1
    )  # an unfinished export may be replaced
    assert not (dest / INCOMPLETE_MARKER).exists()


def test_cancel_removes_partial_output(tmp_path):
    dest = tmp_path / "cancelled.n5"
    cancel = threading.Event()
    seen = []

    def progress(done, total):
        seen.append(done)
        cancel.set()

    data = da.from_array(image((32, 64, 64)), chunks=8)
    with pytest.raises(ExportCancelled):
        export(data, dest, chunks=8, progress=progress, cancel=cancel, compression="raw")
    assert not dest.exists() or not any(dest.iterdir())
    assert seen
    assert max(seen) < 32 * 64 * 64 // 8**3  # stopped within s0


def test_failure_removes_partial_output(tmp_path):
    def boom(block, block_info=None):
        if block_info[None]["chunk-location"] == (1, 1):
            raise RuntimeError("source failed")
        return block

    data = da.ones((32, 32), dtype="uint8", chunks=8).map_blocks(boom, dtype="uint8")
    with pytest.raises(RuntimeError, match="source failed"):
        export(data, tmp_path / "f.n5", chunks=8)
    assert not (tmp_path / "f.n5").exists() or not any((tmp_path / "f.n5").iterdir())


def test_progress_counts_every_block(tmp_path):
    calls = []
    export(image(), tmp_path / "p.n5", chunks=BLOCK, progress=lambda d, t: calls.append((d, t)))
    # s0 4x3x1 blocks, s1 2x2x1, s2 1x1x1 (N5 order)
    total = 4 * 3 * 1 + 2 * 2 * 1 + 1
    assert calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_levels_by_number(tmp_path):
    export(image(), tmp_path / "l.n5", chunks=BLOCK, levels=2)
    assert sorted(p.name for p in (tmp_path / "l.n5").iterdir() if p.is_dir()) == ["s0", "s1"]
    assert math.prod(napari_n5zarr.open(tmp_path / "l.n5")["s1"].shape) == 25 * 19 * 7


def test_numpy_and_dask_inputs_agree(tmp_path):
    a = image()
    export(a, tmp_path / "np.n5", chunks=BLOCK)
    export(da.from_array(a, chunks=7), tmp_path / "da.n5", chunks=BLOCK)
    assert snapshot(tmp_path / "np.n5") == snapshot(tmp_path / "da.n5")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="posix")
def test_env_has_no_napari_import(tmp_path):
    code = (
        "import sys, numpy as np; from napari_n5zarr import export; export(np.ones((4, 4), 'uint8'), sys.argv[1]); "
        "print(any(m.split('.')[0] in ('napari', 'qtpy', 'PyQt6') for m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "x.n5")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("where", ["zip", "memory"])
def test_other_stores(tmp_path, where):
    a = image((6, 20, 30), dtype="uint8")
    dest = str(tmp_path / "out.n5.zip") if where == "zip" else f"memory://{tmp_path.name}.n5"
    export(a, dest, chunks=8)
    root = napari_n5zarr.open(dest)
    assert sorted(root.array_keys()) == ["s0", "s1", "s2"]
    np.testing.assert_array_equal(root["s1"][...], reference_mean(a, (2, 2, 2)).T)
    if where == "zip":  # no deletes in a zip: no marker, and no overwrite
        with pytest.raises(FileExistsError, match="cannot delete"):
            export(a, dest, overwrite=True)


def test_reading_back_a_corrupt_block_names_it(tmp_path: Path) -> None:
    """Pyramid levels are computed from the blocks just written (N5Blocks): a block that
    cannot be decoded there is named with its key and container, as on every read path."""
    from napari_n5zarr.access import base_store
    from napari_n5zarr.errors import N5BlockError
    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.write.export.blocks import N5Blocks

    dest = tmp_path / "x.n5"
    export(np.arange(64 * 64, dtype="uint16").reshape(64, 64), dest, chunks=32, levels=1)
    (dest / "s0/1/1").write_bytes((dest / "s0/1/1").read_bytes()[:-5])
    doc = json.loads((dest / "s0/zarr.json").read_text())
    codec = N5DefaultCodec.from_dict(doc["codecs"][0])
    blocks = N5Blocks(
        base_store(dest, "r"),
        "s0/",
        (64, 64),
        (32, 32),
        np.dtype("uint16"),
        codec,
        "truncate",
        False,
    )
    with pytest.raises(N5BlockError, match=rf"^N5 block s0/1/1 in {dest}: truncated gzip payload"):
        blocks[0:64, 0:64]


@pytest.mark.parametrize("accum_bytes", [64 << 20, 0], ids=["coarse-in-memory", "coarse-read-back"])
@pytest.mark.parametrize(
    ("shape", "chunks", "method"),
    [
        ((75, 130, 97), 16, "mean"),  # odd extents: edge windows replicated
        ((40, 70, 66), (8, 10, 6), "mode"),  # blocks of different sizes
        ((3, 50, 77), (1, 8, 8), "nearest"),  # a non-spatial leading axis
    ],
)
def test_every_level_equals_the_numpy_pyramid(
    tmp_path, monkeypatch, shape, chunks, method, accum_bytes
):
    from napari_n5zarr.write import pyramid
    from napari_n5zarr.write.export import levels as levels

    monkeypatch.setattr(levels, "REGION_BYTES", 64 << 10)  # several regions, depth >= 1
    monkeypatch.setattr(levels, "ACCUM_BYTES", accum_bytes)
    rng = np.random.default_rng(1)
    data = rng.integers(0, 7 if method == "mode" else 60000, size=shape, dtype=np.uint16)
    for source in (data, da.from_array(data, chunks=(9, 31, 17))):
        out = tmp_path / f"{type(source).__name__}.n5"
        export(source, out, chunks=chunks, downsample=method, compression="zstd")
        nlevels = len([p for p in out.iterdir() if p.name.startswith("s")])
        steps = plan(
            shape,
            [chunks] * 3 if isinstance(chunks, int) else chunks,
            pyramid.spatial_axes(len(shape)),
        )
        expected = pyramid.numpy_pyramid(data, steps, method)
        assert nlevels == len(expected) > 2
        for k, level in enumerate(expected):
            np.testing.assert_array_equal(napari_n5zarr.open(out / f"s{k}")[...].T, level)
