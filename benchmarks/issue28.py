"""Issue 28's read-speed rows in one run: ours against tensorstore and napari alone.

    PYTHONPATH=src python benchmarks/issue28.py [--repeat 5] [--rows read,multiset,scroll]
                                               [--size 512 --depth 256] [--plane 512] [--workdir DIR]

Rows (each figure the MEDIAN of ``--repeat`` runs; within a repeat the contenders run in
turn, so drift on a shared machine hits both alike):

* ``read <compression>``: the whole array ``napari_n5zarr.open(path)[...]`` against
  tensorstore's n5 driver reading the same files (written by tensorstore), 128 MiB uint16,
  64^3 blocks, warm OS cache, for every N5 compression tensorstore reads. Goal: >= 1.2x.
* ``multiset plane``: one 512x512 z-plane of a Paintera label-multiset dataset (64^3 gzip
  varlength blocks, as Paintera writes s0) against the same labels stored as uint64, each
  from a cold block cache (``benchmarks/paintera.py``'s data). Goal: <= 3x the uint64 plane.
* ``scroll``: scrolling 64 consecutive z-planes in a real napari window under Xvfb
  (``napari_window.py``, a fresh process per run): our reader against the same pyramid read
  into memory before the clock (napari alone). Goal: <= napari alone + 2 ms per plane.
* ``open``: in the same windows (and tensorstore's layers), open + first frame drawn, from
  ``viewer.open`` (or ``add_image``) until the frame showing the data. Goal: <= napari alone
  + 0.2 s, and ahead of tensorstore.

``--workdir`` keeps the written data for the next run (written only when missing), so a
whole-process timer can compare two versions of the package on the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import paintera  # noqa: E402
import read_throughput  # noqa: E402

TS_COMPRESSIONS = ["raw", "gzip", "zstd", "blosc", "zlib", "bzip2", "xz"]
ROWS = ("read", "multiset", "scroll", "open")


def medians(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Median seconds of each function (after one run of each not counted), the functions
    run in turn within each repeat."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def ts_spec(path: Path) -> dict[str, Any]:
    return {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}


def write_reads(workdir: Path, size: int, depth: int) -> dict[str, Path]:
    """One tensorstore-written dataset per compression (kept when already there)."""
    import tensorstore as ts

    paths = {name: workdir / f"read-{size}-{depth}-{name}.n5" for name in TS_COMPRESSIONS}
    if all((p / "attributes.json").is_file() for p in paths.values()):
        return paths
    data = read_throughput.sample(size, depth)
    for name, path in paths.items():
        comp = read_throughput.COMPRESSIONS[name]
        meta = {
            "dimensions": list(data.shape),
            "blockSize": [64] * 3,
            "dataType": "uint16",
            "compression": comp,
        }
        ts.open(
            {**ts_spec(path), "create": True, "delete_existing": True, "metadata": meta}
        ).result()[...] = data
    return paths


def rows_read(
    workdir: Path, size: int, depth: int, repeat: int
) -> list[tuple[str, float, float, str]]:
    import tensorstore as ts

    import napari_n5zarr

    rows = []
    for name, path in write_reads(workdir, size, depth).items():
        t = medians(
            {
                "ts": lambda p=path: ts.open(ts_spec(p)).result().read().result(),
                "ours": lambda p=path: napari_n5zarr.open(p)[...],
            },
            repeat,
        )
        ours = napari_n5zarr.open(path)[...]
        np.testing.assert_array_equal(ours, ts.open(ts_spec(path)).result().read().result())
        mib = ours.nbytes / 2**20
        note = f"{t['ts'] / t['ours']:.2f}x tensorstore (goal >= 1.2x); {mib / t['ours']:.0f} vs {mib / t['ts']:.0f} MiB/s"
        rows.append((f"read {name} | tensorstore", t["ours"], t["ts"], note))
    return rows


def row_multiset(workdir: Path, edge: int, repeat: int) -> tuple[str, float, float, str]:
    root = workdir / f"paintera-{edge}-64.n5"
    ids = paintera.labels(edge, 64)
    if not (root / "multiset" / "attributes.json").is_file():
        paintera.write(root, ids)
    z = 32
    times: dict[str, list[float]] = {"plain": [], "multiset": []}
    for _ in range(repeat):
        for name in times:
            seconds, got = paintera.plane_time(root, name, z, 1)  # one read, cold block cache
            assert (got == ids[:, :, z].T).all(), name
            times[name].append(seconds)
    ms, plain = statistics.median(times["multiset"]), statistics.median(times["plain"])
    return (
        "multiset plane | uint64 plane",
        ms,
        plain,
        f"{ms / plain:.2f}x the uint64 plane (goal <= 3x)",
    )


def window(impl: str, pyramid: Path, levels: int, workdir: Path) -> dict[str, Any]:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "xcb",
        "NAPARI_CONFIG": str(workdir / "napari-settings.yaml"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    cmd = ["xvfb-run", "-a", "-s", "-screen 0 1280x1024x24", sys.executable, str(HERE / "napari_window.py"),
           "--impl", impl, "--path", str(pyramid), "--levels", str(levels)]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"napari window ({impl}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    return json.loads(lines[-1])


def window_runs(workdir: Path, repeat: int, impls: list[str]) -> dict[str, list[dict[str, Any]]]:
    """``repeat`` napari windows of each of ``impls``, in turn (fresh processes)."""
    import speed

    pyramid = workdir / "pyramid-512.n5"
    marker = workdir / "pyramid-512.levels"
    if not marker.is_file():
        marker.write_text(str(speed.write_pyramid(pyramid, 512)))
    levels = int(marker.read_text())
    window("ours", pyramid, levels, workdir)  # fills the bytecode cache
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    for _ in range(repeat):
        for impl in impls:
            runs[impl].append(window(impl, pyramid, levels, workdir))
    return runs


def row_scroll(runs: dict[str, list[dict[str, Any]]]) -> tuple[str, float, float, str]:
    ours, alone = (
        statistics.median(r["scroll_s_per_plane"] for r in runs[k]) for k in ("ours", "numpy")
    )
    note = f"{(ours - alone) * 1000:+.1f} ms/plane over napari alone (goal <= +2 ms)"
    return ("scroll per plane | napari alone", ours, alone, note)


def rows_open(runs: dict[str, list[dict[str, Any]]]) -> list[tuple[str, float, float, str]]:
    """Open + first frame (``viewer.open`` until the frame showing the data is drawn):
    against napari alone (goal: at most 0.2 s more) and tensorstore's layers (goal: ahead)."""
    ours = statistics.median(r["open_s"] for r in runs["ours"])
    alone = statistics.median(r["open_s"] for r in runs["numpy"])
    rows = [("open + first frame | napari alone", ours, alone,
             f"{ours - alone:+.2f} s over napari alone (goal <= +0.2 s)")]  # fmt: skip
    if "tensorstore" in runs:
        ts = statistics.median(r["open_s"] for r in runs["tensorstore"])
        rows.append(("open + first frame | tensorstore", ours, ts,
                     f"{ts / ours:.2f}x tensorstore's layers (goal > 1)"))  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> list[tuple[str, float, float, str]]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    ap.add_argument("--size", type=int, default=512, help="x and y of the whole-array reads")
    ap.add_argument("--depth", type=int, default=256, help="z of the whole-array reads")
    ap.add_argument("--plane", type=int, default=512, help="x and y of the multiset plane")
    ap.add_argument("--workdir", type=Path, help="keep the data here (default: a temporary folder)")
    args = ap.parse_args(argv)
    import tempfile

    import napari_n5zarr

    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        chosen = args.rows.split(",")
        rows = []
        if "read" in chosen:
            rows += rows_read(workdir, args.size, args.depth, args.repeat)
        if "multiset" in chosen:
            rows.append(row_multiset(workdir, args.plane, args.repeat))
        if "scroll" in chosen or "open" in chosen:
            impls = ["ours", "numpy"] + (["tensorstore"] if "open" in chosen else [])
            runs = window_runs(workdir, args.repeat, impls)
            if "scroll" in chosen:
                rows.append(row_scroll(runs))
            if "open" in chosen:
                rows += rows_open(runs)
    print(
        f"napari_n5zarr from {Path(napari_n5zarr.__file__).parent}; medians of {args.repeat} interleaved runs"
    )
    print(f"{'row: ours | other':36s} {'ours':>10s} {'other':>10s}  result")
    for what, ours, other, note in rows:
        print(f"{what:36s} {ours * 1000:8.1f}ms {other * 1000:8.1f}ms  {note}")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
