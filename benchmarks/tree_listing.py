"""Listing times of the tree model (``napari_n5zarr.read.tree``) on synthetic containers.

Writes containers of 10,000 and 50,000 small N5 datasets (attributes.json only: listing
never reads blocks) and prints, for each: the time to the first page of the root, to the
full root listing, and to the whole tree (every group expanded), and the same for
``n5zarr tree``'s first line and last line in a subprocess.

    python benchmarks/tree_listing.py [--sizes 10000,50000] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_container(root: Path, nodes: int, per_group: int = 500) -> Path:
    """``root`` holding ``nodes`` datasets in groups ``g0000..`` of ``per_group`` (metadata only)."""
    attrs = json.dumps({"dimensions": [64, 64, 8], "blockSize": [32, 32, 8], "dataType": "uint16",
                        "compression": {"type": "gzip", "level": -1}, "pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}})  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')
    for i in range(nodes):
        d = root / f"g{i // per_group:04d}" / f"d{i % per_group:04d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "attributes.json").write_text(attrs)
    return root


def bench(path: Path) -> dict[str, float]:
    from napari_n5zarr.read.tree import open_tree

    out = {}
    t0 = time.perf_counter()
    tree = open_tree(path)
    first = next(iter(tree.iter_children(tree.root)))
    out["first page of root"] = time.perf_counter() - t0
    groups = tree.children(tree.root)
    out["root listed"] = time.perf_counter() - t0
    count = sum(1 for _ in tree.walk())
    out["whole tree"] = time.perf_counter() - t0
    out["nodes"] = count
    assert first
    cmd = [sys.executable, "-m", "napari_n5zarr.cli", "tree", str(path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ})
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.readline()
    out["n5zarr tree: first node printed"] = time.perf_counter() - t0
    lines = 2 + sum(1 for _ in proc.stdout)
    proc.wait()
    out["n5zarr tree: done"] = time.perf_counter() - t0
    out["n5zarr tree lines"] = lines
    assert len(groups) > 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            t0 = time.perf_counter()
            path = make_container(Path(tmp) / f"c{n}.n5", n)
            made = time.perf_counter() - t0
            print(f"{n:,} datasets (written in {made:.1f} s):")  # noqa: T201
            for key, value in bench(path).items():
                text = f"{value:,}" if isinstance(value, int) else f"{value * 1000:,.0f} ms"
                print(f"  {key:<32} {text}")  # noqa: T201


if __name__ == "__main__":
    main()
