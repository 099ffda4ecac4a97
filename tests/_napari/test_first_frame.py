"""The first frame after ``viewer.open``: what benchmarks/napari_window.py times as "open +
first frame". napari draws inside ``viewer.open`` (its progress bar processes events), so
the frame that shows the data can come before the call returns; the benchmark finds it with
``_data_drawn`` (napari internals): this proves that frame really holds our pixels, and that
the internals it relies on are still there."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr

WINDOW = Path(__file__).resolve().parents[2] / "benchmarks" / "napari_window.py"


@pytest.fixture(scope="module")
def window():
    spec = importlib.util.spec_from_file_location("bench_napari_window", WINDOW)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_napari_window"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_napari_window"]


def _pyramid(path: Path, data: np.ndarray) -> Path:
    """An N5 Viewer pyramid (z, y, x data), 3 levels, gzip, in micrometers."""
    root = napari_n5zarr.open(path, mode="w")
    root.attrs.update({"pixelResolution": {"unit": "um", "dimensions": [0.5, 0.5, 2.0]}})
    for k in range(3):
        level = data[:: 2**k, :: 2**k, :: 2**k]
        napari_n5zarr.create_dataset(
            root,
            f"s{k}",
            shape=level.T.shape,
            dtype="uint16",
            chunks=(16, 16, 16),
            compression={"type": "gzip"},
        )
        arr = napari_n5zarr.open(path / f"s{k}", mode="r+")
        arr[...] = level.T
        arr.attrs["downsamplingFactors"] = [2**k] * 3
    return path


@pytest.mark.napari
def test_viewer_open_draws_the_data_inside_the_call(make_napari_viewer, window, tmp_path):
    rng = np.random.default_rng(7)
    data = rng.integers(100, 4000, size=(32, 64, 64), dtype="uint16")
    path = _pyramid(tmp_path / "p.n5", data)
    viewer = make_napari_viewer(show=True)
    canvas = viewer.window._qt_viewer.canvas._scene_canvas
    drawn: list[tuple[bool, np.ndarray]] = []  # (viewer.open had returned, the pixels on the node)
    returned = [False]

    def on_draw(_event: object) -> None:
        if window._data_drawn(viewer):
            node = viewer.window._qt_viewer.canvas.layer_to_visual[viewer.layers[0]].node
            drawn.append((returned[0], np.array(node._data)))

    canvas.events.draw.connect(on_draw, position="last")
    assert not window._data_drawn(viewer)  # no layer: nothing to show
    viewer.open(str(path), plugin="napari-n5zarr")
    returned[0] = True
    deadline = time.perf_counter() + 30
    from qtpy.QtWidgets import QApplication

    while not drawn and time.perf_counter() < deadline:  # (a failing check below says which)
        QApplication.processEvents()
    assert drawn, "no frame showed the data"
    layer = viewer.layers[0]
    assert window._data_drawn(viewer)
    assert layer.multiscale
    assert len(layer.data) == 3
    assert [str(u) for u in layer.units] == ["micrometer"] * 3
    np.testing.assert_allclose(layer.scale, (2.0, 0.5, 0.5))
    coarsest = data[::4, ::4, ::4]
    assert tuple(layer.contrast_limits) == (float(coarsest.min()), float(coarsest.max()))
    z = int(viewer.dims.current_step[0])
    f = 2**layer.data_level
    expected = data[::f, ::f, ::f][z // f]
    after_return, pixels = drawn[0]
    assert not after_return  # drawn inside viewer.open: no later draw need follow
    np.testing.assert_array_equal(pixels, expected)  # the first frame shows the plane napari sliced
