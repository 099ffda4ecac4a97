"""Metadata conventions -> :class:`Multiscale` descriptions.

Every per-axis tuple in this module is in **N5 order** (index 0 = fastest axis = x),
the order of the zarr array shape the library presents (shape == N5 ``dimensions``).
Viewers that show C order (napari: ..., z, y, x) reverse them.

Pure: no I/O, no zarr. One small function per convention turns attribute dicts into a
:class:`Calibration` (scale, translate, units, axes); the pyramid functions turn a
group's attributes plus its children's :class:`ArrayInfo` into a :class:`Multiscale`;
:mod:`~napari_n5zarr.spatial.conventions` holds them as a table of ``matches``/``build``
entries. The walk that reads nodes and applies the table is in the read wing,
:mod:`napari_n5zarr.read.group_pyramids` (this package imports nothing of the read
wing: it is the floor below it).

Conventions: N5 Viewer (modern and old), neuroglancer / tensorstore, COSEM /
OpenOrganelle, BigDataViewer, OME-NGFF 0.4 / 0.5, ImageJ (n5-ij). Downsampled levels
follow N5 Viewer: level k's pixel centre sits at ``0.5 * (f - 1)`` source pixels.
"""

from __future__ import annotations

from napari_n5zarr.errors import SkippedNodeWarning
from napari_n5zarr.spatial.calibration import (
    calibrate,
    cosem,
    downsampling_factors,
    imagej,
    n5viewer,
    neuroglancer,
)
from napari_n5zarr.spatial.conventions import COLOUR_AXES, looks_rgb
from napari_n5zarr.spatial.model import (
    ArrayInfo,
    Calibration,
    Multiscale,
    describe_error,
    identity,
)
from napari_n5zarr.spatial.pyramids import (
    BdvSetup,
    bdv_setup,
    bdv_xml,
    cosem_pyramid,
    is_labels,
    labels_name,
    n5viewer_pyramid,
    ngff_pyramid,
    with_bdv_setup,
)
from napari_n5zarr.spatial.units import normalize_unit

__all__ = [
    "COLOUR_AXES",
    "ArrayInfo",
    "BdvSetup",
    "Calibration",
    "Multiscale",
    "SkippedNodeWarning",
    "bdv_setup",
    "bdv_xml",
    "calibrate",
    "cosem",
    "cosem_pyramid",
    "describe_error",
    "downsampling_factors",
    "identity",
    "imagej",
    "is_labels",
    "labels_name",
    "looks_rgb",
    "n5viewer",
    "n5viewer_pyramid",
    "neuroglancer",
    "ngff_pyramid",
    "normalize_unit",
    "with_bdv_setup",
]
