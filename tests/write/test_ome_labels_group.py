"""Labels exported at IMAGE/labels/NAME of a standard OME-Zarr image are listed in the
image's OME-NGFF ``labels`` group (and nothing else is touched)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import napari_n5zarr


def _image(tmp_path: Path) -> Path:
    dest = tmp_path / "img.ome.zarr"
    napari_n5zarr.export(np.arange(16 * 32 * 32, dtype="uint16").reshape(16, 32, 32), dest,
                         format="ome-zarr", chunks=16)  # fmt: skip
    return dest


def _labels_attrs(dest: Path) -> dict:
    return json.loads((dest / "labels" / "zarr.json").read_text())["attributes"]


def test_each_label_is_listed_once_in_the_labels_group(tmp_path):
    import yaozarrs

    dest = _image(tmp_path)
    seg = np.zeros((16, 32, 32), "uint32")
    for name in ("cells", "nuclei", "cells"):
        napari_n5zarr.export(seg, dest, path=f"labels/{name}", format="ome-zarr", labels=True,
                             overwrite=True, chunks=16)  # fmt: skip
    assert _labels_attrs(dest)["ome"] == {"version": "0.5", "labels": ["cells", "nuclei"]}
    yaozarrs.validate_zarr_store(str(dest))


def test_other_attributes_of_the_labels_group_are_kept(tmp_path):
    dest = _image(tmp_path)
    (dest / "labels").mkdir()
    doc = {"zarr_format": 3, "node_type": "group",
           "attributes": {"note": "mine", "ome": {"version": "0.5", "labels": ["old"]}}}  # fmt: skip
    (dest / "labels" / "zarr.json").write_text(json.dumps(doc))
    napari_n5zarr.export(np.zeros((16, 32, 32), "uint8"), dest, path="labels/new",
                         format="ome-zarr", labels=True)  # fmt: skip
    attrs = _labels_attrs(dest)
    assert attrs["note"] == "mine"
    assert attrs["ome"]["labels"] == ["old", "new"]


def test_a_labels_group_it_cannot_read_is_left_alone(tmp_path):
    dest = _image(tmp_path)
    (dest / "labels").mkdir()
    raw = json.dumps(
        {"zarr_format": 3, "node_type": "group", "attributes": {"ome": {"labels": "x"}}}
    )
    (dest / "labels" / "zarr.json").write_text(raw)
    napari_n5zarr.export(np.zeros((16, 32, 32), "uint8"), dest, path="labels/new",
                         format="ome-zarr", labels=True)  # fmt: skip
    assert (dest / "labels" / "zarr.json").read_text() == raw


def test_labels_outside_an_image_are_not_listed(tmp_path):
    dest = tmp_path / "plain.ome.zarr"
    napari_n5zarr.export(np.zeros((16, 32, 32), "uint8"), dest, path="labels/seg",
                         format="ome-zarr", labels=True)  # fmt: skip
    assert "ome" not in _labels_attrs(dest)
