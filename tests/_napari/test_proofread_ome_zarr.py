"""Proofreading a standard OME-Zarr labels pyramid (sharded and not) in a real napari viewer:
it opens editable (level 0, single-scale); paint, fill and the Save labels widget write
every level as export of the edited array would; zarr-python and tensorstore read it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from napari_n5zarr import export, save_edits
from napari_n5zarr.write.edit.editable import EditableLevel

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (12, 40, 50)


def labels() -> np.ndarray:
    data = np.zeros(SHAPE, dtype="uint32")
    data[:, 5:20, 5:30] = 3
    data[2:9, 22:35, 10:45] = 8
    return data


def levels_of(dest):
    ome = json.loads((dest / "zarr.json").read_text())["attributes"]["ome"]
    names = [d["path"] for d in ome["multiscales"][0]["datasets"]]
    return [np.asarray(zarr.open_array(dest / n, mode="r")[...]) for n in names]


@pytest.mark.parametrize("shards", [None, 2], ids=["chunks", "shards"])
def test_ome_zarr_labels_open_editable_and_save_every_level(make_napari_viewer, tmp_path, shards):
    dest = tmp_path / "seg.ome.zarr"
    export(labels(), dest, format="ome-zarr", labels=True, chunks=8, shards=shards,
           compression="zstd")  # fmt: skip
    viewer = make_napari_viewer()
    (layer,) = viewer.open(str(dest), plugin="napari-n5zarr")
    assert isinstance(layer.data, EditableLevel)
    assert not layer.multiscale
    assert layer.metadata["napari_n5zarr"]["editable"]
    assert "read_only" not in layer.metadata["napari_n5zarr"]
    viewer.dims.set_point(0, 4)
    layer.brush_size = 5
    layer.paint((4, 30, 30), 5)
    layer.fill((4, 10, 10), 11)
    edited = np.asarray(layer.data[...])
    assert (edited != labels()).sum() > 0
    result = save_edits(layer)
    assert result.total_blocks > 0
    assert not layer.data.modified
    ref = tmp_path / "ref.ome.zarr"
    export(edited, ref, format="ome-zarr", labels=True, chunks=8, shards=shards)
    want = levels_of(ref)
    for got, w in zip(levels_of(dest), want, strict=True):
        np.testing.assert_array_equal(got, w)
    ts = pytest.importorskip("tensorstore")
    got = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(dest / "s0")}})
    np.testing.assert_array_equal(np.asarray(got.result().read().result()), edited)
    (again,) = viewer.open(str(dest), plugin="napari-n5zarr")
    np.testing.assert_array_equal(np.asarray(again.data[...]), edited)


def test_save_widget_saves_ome_zarr_labels(make_napari_viewer, tmp_path):
    dest = tmp_path / "seg.ome.zarr"
    export(labels(), dest, format="ome-zarr", labels=True, chunks=8, shards=2)
    viewer = make_napari_viewer(show=True)
    (layer,) = viewer.open(str(dest), plugin="napari-n5zarr")
    _, widget = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Save labels")
    viewer.dims.set_point(0, 6)
    layer.brush_size = 9
    layer.paint((6, 20, 20), 42)
    text = widget.save()
    assert text.startswith("saved seg"), text
    levels = levels_of(dest)
    assert (levels[0][6] == 42).any()
    assert (levels[1][3] == 42).any()


def test_labels_inside_an_ome_zarr_image_open_editable_beside_it(make_napari_viewer, tmp_path):
    """The usual OME-Zarr layout: an image with ``labels/seg`` inside it; opening the image
    shows both, and the labels layer paints and saves into ``labels/seg`` only."""
    image = tmp_path / "cells.ome.zarr"
    export(np.arange(np.prod(SHAPE)).reshape(SHAPE).astype("uint8"), image, format="ome-zarr",
           chunks=8)  # fmt: skip
    export(labels(), image, path="labels/seg", format="ome-zarr", labels=True, chunks=8, shards=2)
    image_files = {p: p.read_bytes() for p in image.glob("s*/**/*") if p.is_file()}
    viewer = make_napari_viewer()
    layers = viewer.open(str(image), plugin="napari-n5zarr")
    (seg,) = [layer for layer in layers if isinstance(layer.data, EditableLevel)]
    viewer.dims.set_point(0, 6)
    seg.brush_size = 5
    seg.paint((6, 30, 30), 9)
    edited = np.asarray(seg.data[...])
    save_edits(seg)
    np.testing.assert_array_equal(levels_of(image / "labels" / "seg")[0], edited)
    assert {p: p.read_bytes() for p in image.glob("s*/**/*") if p.is_file()} == image_files
