"""The N5 browser's waits and longest event-loop stalls on big containers (reported, never asserted).

Rows, as the test suite's behaviour tests in ``tests/_napari/test_browser.py`` run them:

* ``filter-2225``: a deep container of 2,225 nodes (4 groups x 5 x 10 x 10 datasets, one of
  them ``needle``, the last one listed): type ``needle`` in the filter; ``first_match_s`` is
  the time until its row is shown, ``seconds`` until the whole tree is searched.
* ``expand-2225``: the same container, Expand all: ``seconds`` until every row is in.
* ``n5zarr-tree-2225``: ``n5zarr tree`` on that container in a subprocess, for comparison;
  ``model-walk-2225``: the tree model's own walk of it in this process (the floor for both).
* ``load-10k`` lists the first level of a group of 10,000 datasets; ``expand-50k`` expands a
  whole tree of 50,000 datasets in 100 groups.

A 10 ms QTimer ticks during each; the largest gap between two ticks is the longest time napari
could not answer (``max_stall_ms``). Garbage collections over 20 ms in the window are listed
too (to tell causes apart). Prints one JSON line.

    xvfb-run -a python benchmarks/browser_stalls.py [--rows filter-2225,expand-2225]

The figure depends on the machine and its load (about 100-200 ms measured on a busy 2-core
machine, under 100 ms on an idle one): that is why it is measured here and not asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from format_cases import write_container


class GapMeter:
    """The largest time between two ticks of a 10 ms QTimer; slow garbage collections."""

    def __init__(self) -> None:
        from qtpy.QtCore import QTimer

        self.timer = QTimer(interval=10)
        self.timer.timeout.connect(self._tick)
        self.last = 0.0
        self.max_gap = 0.0
        self.collections: list[str] = []
        self._gc_start = 0.0

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif (d := time.perf_counter() - self._gc_start) > 0.02:
            self.collections.append(f"gen{info['generation']} {d * 1000:.0f} ms")

    def _tick(self) -> None:
        now = time.perf_counter()
        self.max_gap = max(self.max_gap, now - self.last)
        self.last = now

    def __enter__(self) -> GapMeter:
        gc.callbacks.append(self._gc)
        self.last = time.perf_counter()
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.stop()
        self._tick()
        gc.callbacks.remove(self._gc)


def wait(app, done, timeout: float = 600.0) -> float:
    """processEvents until ``done()``; returns the seconds it took."""
    t0 = time.perf_counter()
    while not done():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("the browser did not finish")
        app.processEvents()
        time.sleep(0.001)
    return time.perf_counter() - t0


DEEP = [
    f"g{a}/h{b}/i{c}/d{d}" for a in range(4) for b in range(5) for c in range(10) for d in range(10)
]
DEEP[-1] = DEEP[-1].rsplit("/", 1)[0] + "/needle"
"""2,224 nodes under the root (4 + 20 + 200 implicit groups, 2,000 datasets), the needle last."""
ROWS = (
    "filter-2225",
    "expand-2225",
    "n5zarr-tree-2225",
    "model-walk-2225",
    "load-10k",
    "expand-50k",
)


def shown(widget, path: str) -> bool:
    item = widget._items.get(path)
    if item is None or item.isHidden():
        return False
    parent = item.parent()
    while parent is not None:
        if parent.isHidden() or not parent.isExpanded():
            return False
        parent = parent.parent()
    return True


def listed(widget, total: int) -> bool:
    return len(widget._items) == total and not widget.busy and not widget._loading


def cli_tree_seconds(location: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "napari_n5zarr.cli", "tree", str(location)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0


def model_walk_seconds(location: Path) -> float:
    from napari_n5zarr.read.tree import open_tree

    t0 = time.perf_counter()
    sum(1 for _ in open_tree(location).walk())
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows to measure")
    names = [r for r in parser.parse_args().rows.split(",") if r]
    os.environ.setdefault("NAPARI_N5ZARR_CONFIG", tempfile.mkdtemp(prefix="n5zarr-cfg-"))
    import napari
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.browser import BrowserWidget

    tmp = Path(tempfile.mkdtemp(prefix="browser-stalls-"))
    deep = write_container(tmp / "deep.n5", DEEP)
    viewer = napari.Viewer(show=True)
    app = QApplication.instance()
    rows: dict[str, dict] = {}
    for name in names:
        if name == "n5zarr-tree-2225":
            rows[name] = {"seconds": round(cli_tree_seconds(deep), 2)}
            continue
        if name == "model-walk-2225":
            rows[name] = {"seconds": round(model_walk_seconds(deep), 2)}
            continue
        location, total = {
            "filter-2225": (deep, 2_225), "expand-2225": (deep, 2_225),
            "load-10k": (write_container(tmp / "flat.n5", [f"d{i:05d}" for i in range(10_000)]), 10_001),
            "expand-50k": (write_container(tmp / "nested.n5", [f"g{i // 500:03d}/d{i % 500:03d}" for i in range(50_000)]), 50_101),
        }[name]  # fmt: skip
        widget = BrowserWidget(viewer)
        viewer.window.add_dock_widget(widget, name=f"N5 browser {name}", area="right")
        if name != "load-10k":
            widget.load(str(location))
            wait(app, lambda w=widget: w.tree_model is not None and not w.busy and not w._loading)
        row: dict = {}
        with GapMeter() as meter:
            if name == "load-10k":
                widget.load(str(location))
            elif name == "filter-2225":
                widget.filter.setText("needle")
                row["first_match_s"] = round(wait(app, lambda w=widget: shown(w, DEEP[-1])), 2)
            else:
                widget.expand_all()
            seconds = wait(app, lambda w=widget, n=total: listed(w, n))
        row.update(
            {
                "seconds": round(seconds, 2),
                "max_stall_ms": round(meter.max_gap * 1000),
                "slow_collections": meter.collections,
            }
        )
        if name == "filter-2225":
            row["match_count_text"] = (
                getattr(widget, "match_count", None) and widget.match_count.text()
            )
        rows[name] = row
        print(name, row, file=sys.stderr)
    print(json.dumps({"cores": os.cpu_count(), "rows": rows}))
    viewer.close()


if __name__ == "__main__":
    main()
