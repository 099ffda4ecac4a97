"""The browser dock widget in a real viewer (Xvfb)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def test_browse_and_open(make_napari_viewer, corpus_dir: Path) -> None:
    from napari_n5zarr._napari.browser import BrowserWidget

    viewer = make_napari_viewer()
    widget = BrowserWidget(viewer)
    viewer.window.add_dock_widget(widget)
    top = widget.load(str(corpus_dir / "zarr_implementations/data/n5-java.n5"))
    assert top is not None
    root_item = widget.tree.topLevelItem(0)
    assert root_item.childCount() == 5
    lz4_item = root_item.child(2)
    assert lz4_item.text(0) == "lz4"
    widget._open_item(lz4_item)
    assert len(viewer.layers) == 1
    layer = viewer.layers[0]
    expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
    # napari order is the reverse of N5's [3, 512, 512]: (512, 512, 3), as the expected array
    np.testing.assert_array_equal(np.asarray(layer.data), expected)


def test_bad_location_is_a_message_not_a_crash(make_napari_viewer, tmp_path: Path) -> None:
    from napari_n5zarr._napari.browser import BrowserWidget

    widget = BrowserWidget(make_napari_viewer())
    assert widget.load(str(tmp_path / "missing.n5")) is None
    assert "Cannot open" in widget.status.text()
    assert widget.tree.topLevelItemCount() == 0
