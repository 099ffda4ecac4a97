"""The N5 browser's longest event-loop stall while it lists big containers (reported, never asserted).

Two rows, as the test suite's behaviour tests in ``tests/_napari/test_browser.py`` run them:
``load-10k`` lists the first level of a group of 10,000 datasets; ``expand-50k`` expands a
whole tree of 50,000 datasets in 100 groups. A 10 ms QTimer ticks during each; the largest
gap between two ticks is the longest time napari could not answer. Garbage collections over
20 ms in the window are listed too (to tell causes apart). Prints one JSON line.

    xvfb-run -a python benchmarks/browser_stalls.py

The figure depends on the machine and its load (about 100-200 ms measured on a busy 2-core
machine, under 100 ms on an idle one): that is why it is measured here and not asserted.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from format_cases import write_container  # noqa: E402 (the tests' container writer, shared)


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


def main() -> None:
    os.environ.setdefault("NAPARI_N5ZARR_CONFIG", tempfile.mkdtemp(prefix="n5zarr-cfg-"))
    import napari
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.browser import BrowserWidget

    tmp = Path(tempfile.mkdtemp(prefix="browser-stalls-"))
    flat = write_container(tmp / "flat.n5", [f"d{i:05d}" for i in range(10_000)])
    nested = write_container(tmp / "nested.n5", [f"g{i // 500:03d}/d{i % 500:03d}" for i in range(50_000)])
    viewer = napari.Viewer(show=True)
    app = QApplication.instance()
    rows = {}
    for name, location, action, total in (
        ("load-10k", flat, "load", 10_001),
        ("expand-50k", nested, "expand", 50_101),
    ):
        widget = BrowserWidget(viewer)
        viewer.window.add_dock_widget(widget, name=f"N5 browser {name}", area="right")
        if action == "expand":
            widget.load(str(location))
            wait(app, lambda w=widget: w.tree_model is not None and not w.busy and not w._loading)
        with GapMeter() as meter:
            if action == "load":
                widget.load(str(location))
            else:
                widget.expand_all()
            seconds = wait(app, lambda w=widget, n=total: len(w._items) == n and not w.busy and not w._loading)
        rows[name] = {
            "seconds": round(seconds, 2),
            "max_stall_ms": round(meter.max_gap * 1000),
            "longest_gui_step_ms": round(widget.longest_gui_step * 1000),
            "slow_collections": meter.collections,
        }
    print(json.dumps({"cores": os.cpu_count(), "rows": rows}))
    viewer.close()


if __name__ == "__main__":
    main()
