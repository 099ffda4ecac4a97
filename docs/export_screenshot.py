"""Make docs/export.png: a napari image layer exported with the "Export as N5 + Zarr v3" widget
(zstd, auto levels), the widget showing its finished progress bar and status line.

    xvfb-run -a python docs/export_screenshot.py [OUT.png]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


def main(out: str = str(Path(__file__).parent / "export.png")) -> None:
    import napari
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.sample import blobs

    image, _labels = blobs()
    viewer = napari.Viewer()
    viewer.window._qt_window.resize(1280, 720)
    viewer.add_image(image, name="cells", scale=(4.0, 1.0, 1.0))
    viewer.dims.set_point(0, image.shape[0] * 2)
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Export as N5 + Zarr v3")
    widget.destination.value = str(Path(tempfile.mkdtemp()) / "cells.n5")
    widget.compression.value = "zstd"
    worker = widget.start()
    app = QApplication.instance()
    end = time.time() + 120
    while (worker is not None and widget.worker is not None) and time.time() < end:
        app.processEvents()
        time.sleep(0.02)
    viewer.window._qt_window.show()
    app.processEvents()
    viewer.reset_view()
    for _ in range(50):
        app.processEvents()
        time.sleep(0.01)
    viewer.screenshot(out, canvas_only=False)
    print(f"saved {out}: {widget.status.value}")  # noqa: T201
    viewer.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
