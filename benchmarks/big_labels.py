"""Proofreading big labels: ``create_labels`` time for large shapes, and the peak memory of
a long 2D session on a sparse terabyte labels pyramid. Reported, never asserted.

    python benchmarks/big_labels.py [--planes 1000] [--shape 8192,4096,4096] [--workdir DIR]

* ``create_labels`` (metadata only) for 256x2048x2048 uint32 and 8192x4096x4096 uint64
  (1 TiB), against ``export`` of zeros for the small one (the route before create_labels);
* a session on the 1 TiB uint64 labels, in a hidden napari viewer: every plane of
  ``--planes`` z-planes is shown (napari reads the whole 4096x4096 plane), every 10th gets a
  brush stroke (``Labels.paint``), every 100th a fill of a small closed region, then one
  save; the process's peak resident memory (``ru_maxrss``) is printed with the blocks saved.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np


def _mib(kib: int) -> float:
    return kib / 1024


def create_times(workdir: Path) -> None:
    import napari_n5zarr

    napari_n5zarr.create_labels(
        workdir / "warm.n5", shape=(8, 8), overwrite=True
    )  # imports not timed
    for shape, dtype in (((256, 2048, 2048), "uint32"), ((8192, 4096, 4096), "uint64")):
        target = workdir / f"new-{'x'.join(map(str, shape))}.n5"
        t = time.perf_counter()
        napari_n5zarr.create_labels(target, shape=shape, dtype=dtype, chunks=64, overwrite=True)
        print(f"create_labels {shape} {dtype}: {1000 * (time.perf_counter() - t):.0f} ms")
    zeros = np.broadcast_to(np.zeros((), "uint32"), (256, 2048, 2048))
    t = time.perf_counter()
    napari_n5zarr.export(zeros, workdir / "zeros.n5", chunks=64, labels=True, overwrite=True)
    print(
        f"export of zeros (256, 2048, 2048) uint32 (the old route): {time.perf_counter() - t:.1f} s"
    )


def session(workdir: Path, shape: tuple[int, ...], planes: int) -> None:
    import napari

    import napari_n5zarr
    from napari_n5zarr._napari.proofread import save_all

    target = workdir / "session.n5"
    napari_n5zarr.create_labels(target, shape=shape, dtype="uint64", chunks=64, overwrite=True)
    viewer = napari.Viewer(show=False)
    (layer,) = viewer.open(str(target), plugin="napari-n5zarr")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    step = max(1, shape[0] // planes)
    for i in range(planes):
        z = (i * step) % shape[0]
        viewer.dims.set_point(0, z)
        if i % 10 == 0:
            layer.selected_label = 1 + i % 250
            y, x = 64 + (i * 37) % (shape[1] - 128), 64 + (i * 53) % (shape[2] - 128)
            layer.paint((z, y, x), layer.selected_label)
        if i % 100 == 0:
            y, x = 200 + i % 1000, 200
            layer.data[z, y : y + 20, x] = 9  # a closed box, then a fill inside it
            layer.data[z, y : y + 20, x + 20] = 9
            layer.data[z, y, x : x + 21] = 9
            layer.data[z, y + 19, x : x + 21] = 9
            layer.fill((z, y + 5, x + 5), 10)
    scrolled = time.perf_counter() - t
    text = save_all(viewer)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"session: {planes} planes of {shape} uint64 in {scrolled:.1f} s ({1000 * scrolled / planes:.0f} ms/plane)"
    )
    print(f"  {text}")
    print(
        f"  peak resident memory: {_mib(peak):.0f} MiB (after opening: {_mib(before):.0f} MiB); goal < 2048 MiB"
    )
    viewer.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planes", type=int, default=1000)
    parser.add_argument("--shape", default="8192,4096,4096")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--skip-create", action="store_true")
    args = parser.parse_args(argv)
    workdir = (
        Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="n5zarr-big-labels-"))
    )
    try:
        if not args.skip_create:
            create_times(workdir)
        session(workdir, tuple(int(s) for s in args.shape.split(",")), args.planes)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
