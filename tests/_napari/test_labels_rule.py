"""Layer type: labels from metadata first, from a name only when the name IS a labels name
(whole words, the dataset's/group's own name, never the container's); float never labels.
Real pyramids (tensorstore- and export-written) copied to misleading names, opened through
the reader (issue 18 item 1)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari.reader import read_path

DATA = (np.arange(6 * 12 * 20).reshape(6, 12, 20) % 4000).astype("uint16")  # napari order z, y, x


def _tensorstore_pyramid(folder: Path, data: np.ndarray = DATA) -> None:
    """An N5 Viewer pyramid (s0, s1) written by tensorstore, group attributes by hand."""
    ts = pytest.importorskip("tensorstore")
    for k, level in enumerate((data, data[:, ::2, ::2])):
        n5 = level.T
        store = ts.open(
            {
                "driver": "n5",
                "kvstore": {"driver": "file", "path": str(folder / f"s{k}")},
                "metadata": {
                    "compression": {"type": "gzip"},
                    "dataType": str(level.dtype),
                    "dimensions": list(n5.shape),
                    "blockSize": [8, 8, 4],
                    "downsamplingFactors": [2**k, 2**k, 1],
                },
            },
            create=True,
        ).result()
        store[...] = n5
    (folder / "attributes.json").write_text(
        json.dumps({"pixelResolution": {"unit": "um", "dimensions": [0.5, 0.5, 2.0]}})
    )


@pytest.fixture(scope="module")
def pyramid(tmp_path_factory) -> Path:
    """One real uint16 intensity pyramid (tensorstore-written), copied per test."""
    folder = tmp_path_factory.mktemp("ts") / "raw.n5"
    _tensorstore_pyramid(folder)
    return folder


def kinds(path: Path) -> list[tuple[str, str]]:
    notes: list[tuple[str, str]] = []
    layers = read_path(path, notify=lambda level, message: notes.append((level, message)))
    assert notes == []
    return [(layer[1]["name"], layer[2]) for layer in layers]


MISNAMED = [
    "unlabeled_brain.n5",
    "Segura_lab_em.n5",
    "presegmentation_raw.n5",
    "tmpsegr1234-copy.n5",
]


@pytest.mark.parametrize("name", ["raw.n5", *MISNAMED, "labels.n5", "neuron_labels.n5"])
def test_a_container_name_never_makes_labels(pyramid, tmp_path, name):
    """The pyramid at a container's root is an image whatever the container is called."""
    shutil.copytree(pyramid, tmp_path / name)
    assert kinds(tmp_path / name) == [(name, "image")]


@pytest.mark.parametrize(
    ("group", "kind"),
    [
        *[(name.removesuffix(".n5"), "image") for name in MISNAMED],
        ("labels_raw", "image"),
        ("labels", "labels"),
        ("raw_labels", "labels"),
        ("neuronLabels", "labels"),
        ("segmentation", "labels"),
        ("seg", "labels"),
        ("seg2", "labels"),
    ],
)
def test_a_group_inside_a_container_is_labels_only_when_named_so(pyramid, tmp_path, group, kind):
    shutil.copytree(pyramid, tmp_path / "c.n5" / group)
    assert kinds(tmp_path / "c.n5") == [(group, kind)]
    # the same group opened on its own (a path inside the container): the same answer
    assert kinds(tmp_path / "c.n5" / group) == [(group, kind)]


def test_a_labels_group_holding_datasets(pyramid, tmp_path):
    """``labels/`` as a group in a container: its own pyramid is labels; an image dataset
    inside it (``labels/em``) is not labels because of its parent's name."""
    shutil.copytree(pyramid, tmp_path / "c.n5" / "labels")
    shutil.copytree(pyramid / "s0", tmp_path / "c.n5" / "labels" / "em")
    assert sorted(kinds(tmp_path / "c.n5")) == [("labels", "labels"), ("labels/em", "image")]


@pytest.mark.parametrize("ome", [False, True])
def test_ome_image_label_makes_labels_under_any_name(pyramid, tmp_path, ome):
    shutil.copytree(pyramid, tmp_path / "c.n5" / "cells")
    attrs_file = tmp_path / "c.n5" / "cells" / "attributes.json"
    attrs = json.loads(attrs_file.read_text())
    attrs.update({"ome": {"image-label": {}}} if ome else {"image-label": {}})
    attrs_file.write_text(json.dumps(attrs))
    assert kinds(tmp_path / "c.n5") == [("cells", "labels")]
    assert kinds(tmp_path / "c.n5" / "cells") == [("cells", "labels")]


def test_paintera_type_decides(pyramid, tmp_path):
    for name, kind in (("cells", "label"), ("labels", "raw")):
        shutil.copytree(pyramid, tmp_path / "c.n5" / name)
        attrs_file = tmp_path / "c.n5" / name / "attributes.json"
        attrs_file.write_text(
            json.dumps({**json.loads(attrs_file.read_text()), "painteraData": {"type": kind}})
        )
    assert sorted(kinds(tmp_path / "c.n5")) == [("cells", "labels"), ("labels", "image")]


def test_export_with_labels_true_reopens_as_labels_under_a_neutral_name(tmp_path):
    napari_n5zarr.export(DATA, tmp_path / "volume.n5", labels=True, levels=2, chunks=8)
    napari_n5zarr.export(DATA, tmp_path / "intensity.n5", levels=2, chunks=8)
    assert kinds(tmp_path / "volume.n5") == [("volume.n5", "labels")]
    assert kinds(tmp_path / "intensity.n5") == [("intensity.n5", "image")]


def test_float_data_named_labels_is_an_image(tmp_path):
    _tensorstore_pyramid(tmp_path / "c.n5" / "labels", DATA.astype("float32"))
    assert kinds(tmp_path / "c.n5") == [("labels", "image")]


@pytest.mark.napari
def test_viewer_opens_a_misnamed_intensity_pyramid_as_an_image(
    make_napari_viewer, pyramid, tmp_path
):
    shutil.copytree(pyramid, tmp_path / "unlabeled_brain.n5")
    shutil.copytree(pyramid, tmp_path / "c.n5" / "raw_labels")
    viewer = make_napari_viewer()
    (image,) = viewer.open(str(tmp_path / "unlabeled_brain.n5"), plugin="napari-n5zarr")
    (labels,) = viewer.open(str(tmp_path / "c.n5"), plugin="napari-n5zarr")
    assert (type(image).__name__, type(labels).__name__) == ("Image", "Labels")
