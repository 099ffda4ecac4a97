"""Colour and channels survive save + reopen; only spatial axes are ever downsampled."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari import writer
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export.exporter import export


def reopen(path) -> list[tuple]:
    notes = []
    layers = read_path(path, notify=lambda level, message: notes.append(message))
    assert notes == []
    return layers


def levels(layer) -> list:
    data, kwargs, _ = layer
    return list(data) if kwargs["multiscale"] else [data]


def rgb_image(channels: int, shape=(300, 400)) -> np.ndarray:
    y, x = np.mgrid[: shape[0], : shape[1]]
    planes = [(x * 255 // shape[1]), (y * 255 // shape[0]), np.full(shape, 40), np.full(shape, 255)]
    return np.stack(planes[:channels], axis=-1).astype("uint8")


@pytest.mark.parametrize("channels", [3, 4])
@pytest.mark.parametrize("units", [None, ("nm", "nm")])
def test_rgb_layer_round_trips(tmp_path, channels, units):
    napari = pytest.importorskip("napari")
    image = rgb_image(channels)
    layer = napari.layers.Image(
        image, rgb=True, scale=(2.0, 3.0), translate=(10.0, 20.0), units=units, name="photo"
    )
    data, meta, _ = layer.as_layer_data_tuple()
    dest = tmp_path / "photo.n5"
    writer.write_image(str(dest), data, meta)
    (back,) = reopen(dest)
    data2, kw, kind = back
    assert kind == "image"
    assert kw["rgb"] is True
    assert "channel_axis" not in kw
    assert kw["scale"] == (2.0, 3.0)
    assert kw["translate"] == (10.0, 20.0)
    assert kw["units"] == (("nanometer",) * 2 if units else (None, None))
    for level in levels(back):
        assert level.shape[-1] == channels  # the colour axis is never downsampled
    np.testing.assert_array_equal(np.asarray(levels(back)[0]), image)
    napari.layers.Image(
        data2, **{k: v for k, v in kw.items() if k != "metadata"}
    )  # napari accepts it


@pytest.mark.parametrize("calibrated", [False, True])
def test_channel_axis_round_trips(tmp_path, calibrated):
    data = (np.arange(3 * 20 * 64 * 80) % 251).astype("uint16").reshape(3, 20, 64, 80)  # c, z, y, x
    extra = {"scale": [1.0, 4.0, 0.5, 0.5], "units": [None, "um", "um", "um"]} if calibrated else {}
    export(data, tmp_path / "c.n5", axis_labels=["c", "z", "y", "x"], chunks=16, levels=3, **extra)
    (layer,) = reopen(tmp_path / "c.n5")
    _, kw, kind = layer
    assert kind == "image"
    assert kw["channel_axis"] == 0
    assert kw["name"] == ["c.n5 [0]", "c.n5 [1]", "c.n5 [2]"]
    assert kw["scale"] == ((4.0, 0.5, 0.5) if calibrated else (1.0, 1.0, 1.0))
    shapes = [lv.shape for lv in levels(layer)]
    z = (20, 20, 20) if calibrated else (20, 10, 5)  # 4 um z pixels wait for x, y (0.5 um)
    assert shapes == [(3, z[0], 64, 80), (3, z[1], 32, 40), (3, z[2], 16, 20)]
    np.testing.assert_array_equal(np.asarray(levels(layer)[0]), data)


@pytest.mark.napari
def test_channel_layers_saved_and_reopened_in_a_viewer(make_napari_viewer, tmp_path):
    viewer = make_napari_viewer()
    data = (np.arange(2 * 32 * 48) % 200).astype("uint8").reshape(2, 32, 48)
    viewer.add_image(data, channel_axis=0, scale=(0.5, 0.5), units=("um", "um"), name=["a", "b"])
    dest = str(tmp_path / "two.n5")
    viewer.layers.save(dest, plugin="napari-n5zarr")
    reopened = [layer for layer in read_path(dest) if len(layer) == 3]
    assert [kw["name"] for _, kw, _ in reopened] == ["a", "b"]
    for (level, kw, _), expected in zip(reopened, data, strict=True):
        assert kw["scale"] == (0.5, 0.5)
        assert kw["units"] == ("micrometer", "micrometer")
        np.testing.assert_array_equal(np.asarray(level[0] if kw["multiscale"] else level), expected)


@pytest.mark.napari
def test_rgb_reopens_as_one_rgb_layer_in_a_viewer(make_napari_viewer, tmp_path):
    napari = pytest.importorskip("napari")
    image = rgb_image(3, shape=(120, 160))
    image[..., 0] = 255  # red everywhere
    image[..., 1:] = 0
    layer = napari.layers.Image(image, rgb=True, scale=(1.0, 1.0), units=("um", "um"))
    writer.write_image(str(tmp_path / "red.n5"), *layer.as_layer_data_tuple()[:2])
    viewer = make_napari_viewer(show=True)
    viewer.open(str(tmp_path / "red.n5"), plugin="napari-n5zarr")
    assert len(viewer.layers) == 1
    assert viewer.layers[0].rgb
    shot = viewer.screenshot(canvas_only=True, flash=False)
    centre = shot[shot.shape[0] // 2, shot.shape[1] // 2]
    assert centre[0] > 200, centre
    assert centre[1] < 50, centre
    assert centre[2] < 50, centre  # drawn red, not grey


def test_convert_never_downsamples_colour(tmp_path):
    """An uncalibrated C-order RGB dataset (what a tool without metadata writes)."""
    image = rgb_image(3, shape=(256, 320))
    root = napari_n5zarr.open(tmp_path / "astronaut.n5", mode="w")
    napari_n5zarr.create_dataset(
        root, "rgb", shape=image.T.shape, dtype="uint8", chunks=(3, 64, 64)
    )[...] = image.T
    dest = tmp_path / "out.n5"
    run = subprocess.run(
        [sys.executable, "-m", "napari_n5zarr.cli", "convert", str(tmp_path / "astronaut.n5"), str(dest), "--levels", "auto", "--chunks", "32"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (layer,) = reopen(dest)
    assert layer[1]["rgb"] is True
    shapes = [lv.shape for lv in levels(layer)]
    assert len(shapes) > 2, shapes
    assert all(s[-1] == 3 for s in shapes), shapes
    np.testing.assert_array_equal(np.asarray(levels(layer)[0]), image)


def test_export_keeps_time_and_channel_extents(tmp_path):
    data = np.zeros((4, 2, 16, 64, 64), "uint8")  # t, c, z, y, x
    export(data, tmp_path / "tc.n5", axis_labels=["t", "c", "z", "y", "x"], chunks=8)
    group = napari_n5zarr.open(tmp_path / "tc.n5")
    shapes = [tuple(group[f"s{k}"].shape[::-1]) for k in range(len(list(group.array_keys())))]
    assert len(shapes) > 2
    assert all(s[:2] == (4, 2) for s in shapes), shapes


@pytest.mark.parametrize(
    ("labels", "ndim", "expected"),
    [
        (["y", "x", "rgb"], 3, (0, 1)),
        (["y", "x", "rgba"], 3, (0, 1)),
        (["t", "c", "z", "y", "x"], 5, (2, 3, 4)),
        (["c", "y", "x"], 3, (1, 2)),
        (None, 4, (1, 2, 3)),
    ],
)
def test_only_spatial_axes_are_planned(labels, ndim, expected):
    assert pyramid.spatial_axes(ndim, labels) == expected
    steps = pyramid.plan([64] * ndim, [8] * ndim, expected)
    assert steps
    assert all(step[i] == 1 for step in steps for i in range(ndim) if i not in expected)
