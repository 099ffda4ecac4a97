"""Make docs/browser.png: the N5 browser docked at its default width, under Xvfb.

    xvfb-run -a python docs/browser_screenshot.py [OUT.png]

Writes a small container (an N5 Viewer pyramid in nm, a labels pyramid, a 2-D dataset, a
group of 1,000 datasets, a node with an out-of-range zstd level), opens it in the browser,
selects the pyramid (details, thumbnail) and saves a grab of the dock widget.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def make_container(root: Path) -> Path:
    from napari_n5zarr import export
    from napari_n5zarr._napari.sample import blobs

    image, labels = blobs()
    common = {"chunks": 64, "scale": (40.0, 4.0, 4.0), "units": "nanometer"}
    export(image, root, path="em/raw", compression="zstd", **common)
    export(labels, root, path="em/labels", labels=True, compression="gzip", **common)
    export(
        (image[image.shape[0] // 2] // 256).astype("uint8"),
        root,
        path="overview",
        chunks=128,
        levels=1,
    )
    attrs = {
        "dimensions": [512, 512, 64],
        "blockSize": [64, 64, 64],
        "dataType": "uint16",
        "compression": {"type": "zstd", "level": 3},
    }
    for i in range(1000):
        d = root / "tiles" / f"tile{i:04d}"
        d.mkdir(parents=True)
        (d / "attributes.json").write_text(json.dumps(attrs))
    bad = root / "broken"
    bad.mkdir()
    (bad / "attributes.json").write_text(
        json.dumps({**attrs, "compression": {"type": "zstd", "level": 10**9}})
    )
    return root


def main(out: str = "docs/browser.png") -> None:
    import napari
    from qtpy.QtWidgets import QApplication

    from napari_n5zarr._napari.browser import BrowserWidget

    root = make_container(Path(tempfile.mkdtemp()) / "experiment.n5")
    viewer = napari.Viewer()
    widget = BrowserWidget(viewer)
    dock = viewer.window.add_dock_widget(widget, name="N5 browser", area="right")
    app = QApplication.instance()

    def settle(until, timeout=60.0) -> None:
        end = time.time() + timeout
        while not until() and time.time() < end:
            app.processEvents()
            time.sleep(0.01)

    widget.load(str(root))
    settle(lambda: widget.tree_model is not None and not widget.busy and not widget._loading)
    for path in ("em",):
        widget._items[path].setExpanded(True)
    settle(lambda: not widget.busy and not widget._loading)
    widget.tree.setCurrentItem(widget._items["em/raw"])
    settle(
        lambda: (
            widget.thumbnail.pixmap() is not None
            and not widget.thumbnail.pixmap().isNull()
            and not widget.busy
        )
    )
    for _ in range(50):
        app.processEvents()
        time.sleep(0.01)
    dock.grab().save(out)
    print(f"saved {out} ({dock.width()} x {dock.height()} px)")  # noqa: T201
    viewer.close()


if __name__ == "__main__":
    main(*sys.argv[1:])
