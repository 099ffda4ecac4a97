"""docs/proofread.png: a labels pyramid opened editable, two strokes painted, saved with the
"Save labels" widget (its status line after the save).

    xvfb-run -a python docs/proofread_screenshot.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import napari
import numpy as np

from napari_n5zarr import export


def main() -> None:
    work = Path(tempfile.mkdtemp())
    _z, y, x = np.mgrid[0:32, 0:256, 0:256]
    seg = (((y // 48) * 7 + (x // 48) * 3) % 9 + 1).astype(np.uint64) * (
        (y - 128) ** 2 + (x - 128) ** 2 < 110**2
    )
    export(seg, work / "seg.n5", labels=True, chunks=64)
    viewer = napari.Viewer()
    viewer.window._qt_window.resize(1400, 800)
    layer = viewer.open(str(work / "seg.n5"), plugin="napari-n5zarr")[0]
    viewer.dims.set_point(0, 16)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    layer.brush_size = 14
    for xx in range(40, 220, 3):
        layer.paint((16, 120, xx), 42)
    for yy in range(60, 200, 3):
        layer.paint((16, yy, 64), 0)
    layer.mode = "paint"
    widget.save()
    from qtpy.QtWidgets import QApplication

    viewer.window._qt_window.show()
    for _ in range(20):
        QApplication.processEvents()
    viewer.screenshot(str(Path(__file__).parent / "proofread.png"), canvas_only=False)
    viewer.close()


if __name__ == "__main__":
    main()
