"""Listing times of the tree model (``napari_n5zarr.read.tree``) and of ``n5zarr tree --json``.

Reports, never asserts (timings depend on the machine and its load). Containers (metadata
only: listing never reads blocks):

* ``10k``: 10,000 N5 datasets in 20 groups of 500 (10,021 nodes);
* ``10k-distinct``: the same, each attributes.json different (no document repeats);
* ``2225``: the 2,225-node container of the browser's measurements (4 groups of 5 groups of
  110 datasets; ``tests/format_cases.write_container``).

For each: in this process, the time to the first page of the root, the root listed and the
whole tree walked; then ``n5zarr tree --json`` in a subprocess: the time to its first row on
stdout and to its last (interpreter start and imports included, as a person sees it), and
the CPU time it used (user + system: moves far less with the load than wall time). With
``--old SRC`` (the ``src`` folder of another checkout, e.g. a worktree of main:
``git worktree add --detach /tmp/old-tree main``) the subprocess runs alternate between
that code and this one, round by round, so that both see the same load.

    python benchmarks/tree_listing.py [--sizes 10k,10k-distinct,2225,50000] [--rounds 3] [--old /tmp/old-tree/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "tests"))


def make_container(root: Path, nodes: int, per_group: int = 500, *, distinct: bool = False) -> Path:
    """``root`` holding ``nodes`` datasets in groups ``g0000..`` of ``per_group`` (metadata
    only); ``distinct``: every dataset's attributes.json differs (its width), so that nothing
    learnt from one document serves another."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')
    for i in range(nodes):
        d = root / f"g{i // per_group:04d}" / f"d{i % per_group:04d}"
        d.mkdir(parents=True, exist_ok=True)
        attrs = {"dimensions": [64 + (i if distinct else 0), 64, 8], "blockSize": [32, 32, 8], "dataType": "uint16",
                 "compression": {"type": "gzip", "level": -1}, "pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}  # fmt: skip
        (d / "attributes.json").write_text(json.dumps(attrs))
    return root


def make_browser_container(root: Path) -> Path:
    """2,225 nodes: the root, 4 groups of 5 groups, 110 datasets in each (2,200)."""
    from format_cases import write_container

    return write_container(
        root, [f"a{i}/b{j}/d{k:03d}" for i in range(4) for j in range(5) for k in range(110)]
    )


def in_process(path: Path) -> dict[str, float]:
    """The tree model in this process (this checkout's code)."""
    from napari_n5zarr.read.tree import open_tree

    out: dict[str, float] = {}
    t0 = time.perf_counter()
    tree = open_tree(path)
    next(iter(tree.iter_children(tree.root)))
    out["model: first page of root"] = time.perf_counter() - t0
    tree.children(tree.root)
    out["model: root listed"] = time.perf_counter() - t0
    out["nodes"] = sum(1 for _ in tree.walk())
    out["model: whole tree"] = time.perf_counter() - t0
    return out


def cli_json(path: Path, src: str) -> tuple[float, float, int, float]:
    """(first row, last row, rows, CPU seconds) of ``n5zarr tree --json`` run with ``src``
    first on the path. CPU time (user + system, of the child) moves far less with the load."""
    env = {**os.environ, "PYTHONPATH": src}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "napari_n5zarr.cli", "tree", "--json", str(path)],
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()
    first = time.perf_counter() - t0
    rows = 1 + sum(1 for _ in proc.stdout)
    proc.wait()
    total = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        first,
        total,
        rows,
        (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default="10k,10k-distinct,2225",
        help="10k, 10k-distinct, 2225 or a number of datasets (groups of 500)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old", default=None, help="src folder of the code to compare with")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    new_src = str(HERE / "src")
    sides = [("old", args.old), ("new", new_src)] if args.old else [("this", new_src)]
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} (timings move with the load)"
    )
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for size in args.sizes.split(","):
            path = Path(tmp) / f"c{size}.n5"
            if size == "2225":
                make_browser_container(path)
            else:
                make_container(
                    path,
                    10_000 if size.startswith("10k") else int(size),
                    distinct=size.endswith("distinct"),
                )
            print(f"{size} container:")
            for key, value in in_process(path).items():
                text = f"{value:,}" if isinstance(value, int) else f"{value * 1000:,.0f} ms"
                print(f"  {key:<40} {text}")
            runs: dict[str, list[tuple[float, float, int, float]]] = {name: [] for name, _ in sides}
            for _ in range(args.rounds):
                for name, src in sides:  # interleaved: both sides see the same load
                    runs[name].append(cli_json(path, str(src)))
            for name, found in runs.items():
                firsts = [f for f, _, _, _ in found]
                totals = [t for _, t, _, _ in found]
                cpus = [c for _, _, _, c in found]
                print(f"  n5zarr tree --json [{name}]: first row median {statistics.median(firsts) * 1000:,.0f} ms "
                      f"(min {min(firsts) * 1000:,.0f}), all {found[0][2]:,} rows median {statistics.median(totals) * 1000:,.0f} ms "
                      f"(min {min(totals) * 1000:,.0f}), CPU median {statistics.median(cpus) * 1000:,.0f} ms over {len(found)} runs")  # fmt: skip


if __name__ == "__main__":
    main()
