"""OME-NGFF 0.5 metadata for the Zarr side of a dual N5 + Zarr v3 pyramid.

The ``ome`` block of a pyramid group's ``zarr.json`` (and the ``dimension_names`` of its
level arrays) is made here, through the ``yaozarrs`` models, from the very
:class:`~napari_n5zarr.spatial.model.Multiscale` this package's reader makes of the N5
metadata: scale, translation (a coarse level's included, by the N5 Viewer rule of
:meth:`~napari_n5zarr.spatial.model.Multiscale.level_translate`), units and axes match what
the reader shows. Axes are in the Zarr arrays' order, which for the ``n5_default`` view is
the N5 order (``x, y, z``; zarr ``shape`` == N5 ``dimensions``).

The block lives in ``zarr.json`` only: ``attributes.json`` keeps the N5 Viewer keys, so N5
readers (and this reader, which reads ``attributes.json``) see what they saw before.

OME-NGFF orders axes by type (time, then channel or custom, then 2 or 3 space axes). A
dataset whose Zarr order breaks that rule (N5 order puts channels and time points after
space) or that has not 2-3 space axes gets no ``ome`` block: :func:`ome_metadata` says why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from napari_n5zarr.spatial.model import ArrayInfo, Attrs, Multiscale
from napari_n5zarr.spatial.units import normalize_unit

__all__ = [
    "OME_KEY",
    "dimension_names",
    "group_ome",
    "labels_group",
    "ome_metadata",
    "pyramid_ome",
    "with_dimension_names",
    "without_zarr_only",
]

_logger = logging.getLogger(__name__)

OME_KEY = "ome"
"""The group attribute holding OME-NGFF 0.5 metadata (in ``zarr.json`` only)."""
SPACE_NAMES = frozenset({"x", "y", "z"})
TIME_NAMES = frozenset({"t", "time"})
CHANNEL_NAMES = frozenset({"c", "ch", "channel", "channels", "rgb", "rgba"})


def _axis_type(name: str, all_space: bool) -> str | None:
    low = name.strip().lower()
    if low in SPACE_NAMES or all_space:
        return "space"
    if low in TIME_NAMES:
        return "time"
    if low in CHANNEL_NAMES:
        return "channel"
    return None  # a custom axis


def _valid_units() -> dict[str, set[str]]:
    """The unit names OME-NGFF lists for space and time axes (others are left out: yaozarrs
    only warns about them, and readers would not know them)."""
    from typing import get_args

    try:
        from yaozarrs._axis import ValidSpaceUnit, ValidTimeUnit
    except ImportError:  # moved in a later yaozarrs: this package's own unit names
        from napari_n5zarr.spatial.units import UNITS

        space = {u.name for u in UNITS if u.meters_exponent is not None} | {"angstrom"}
        return {
            "space": space,
            "time": {u.name for u in UNITS if u.name.endswith(("second", "minute", "hour"))},
        }
    return {"space": set(get_args(ValidSpaceUnit)), "time": set(get_args(ValidTimeUnit))}


def _axes(ms: Multiscale) -> list[Any]:
    """The typed axes (Zarr = N5 order); units only where OME-NGFF knows them."""
    from yaozarrs import v05

    valid = _valid_units()
    all_space = ms.ndim <= 3 and not any(a.strip().lower() in SPACE_NAMES for a in ms.axes)
    axes: list[Any] = []
    for name, unit in zip(ms.axes, ms.units, strict=True):
        kind = _axis_type(name, all_space)
        full = normalize_unit(unit)
        unit_ok = full if kind in valid and full in valid[kind] else None
        if kind == "space":
            axes.append(v05.SpaceAxis(name=name, unit=unit_ok))
        elif kind == "time":
            axes.append(v05.TimeAxis(name=name, unit=unit_ok))
        elif kind == "channel":
            axes.append(v05.ChannelAxis(name=name))
        else:
            axes.append(v05.CustomAxis(name=name))
    return axes


def _datasets(ms: Multiscale) -> list[Any]:
    from yaozarrs import v05

    datasets = []
    for k, path in enumerate(ms.paths):
        transforms: list[Any] = [v05.ScaleTransformation(scale=list(ms.level_scale(k)))]
        translation = list(ms.level_translate(k))
        if any(translation):
            transforms.append(v05.TranslationTransformation(translation=translation))
        datasets.append(v05.Dataset(path=path, coordinateTransformations=transforms))
    return datasets


def ome_metadata(
    ms: Multiscale, *, labels: bool = False, name: str | None = None
) -> tuple[dict[str, Any] | None, str]:
    """``(the "ome" attribute, "")`` for the pyramid ``ms`` (N5 = Zarr order), validated by
    the ``yaozarrs`` OME-NGFF 0.5 models; ``(None, why)`` where OME-NGFF cannot describe it."""
    from pydantic import ValidationError
    from yaozarrs import v05

    try:
        multiscale = v05.Multiscale(name=name or None, axes=_axes(ms), datasets=_datasets(ms))
        if labels:
            image: Any = v05.LabelImage.model_validate(
                {"multiscales": [multiscale], "image-label": {}}
            )
        else:
            image = v05.Image(multiscales=[multiscale])
    except ValidationError as e:
        first = e.errors()[0]
        return None, " ".join(str(first.get("msg", e)).split())
    return image.model_dump(mode="json", exclude_none=True, by_alias=True), ""


def labels_group(names: list[str]) -> dict[str, Any]:
    """The ``ome`` attribute of an image's ``labels`` group listing ``names``."""
    from yaozarrs import v05

    return v05.LabelsGroup(labels=names).model_dump(mode="json", exclude_none=True, by_alias=True)


def pyramid_ome(
    group_attrs: Attrs, levels: Mapping[str, ArrayInfo], *, labels: bool, where: str = "/"
) -> dict[str, Any] | None:
    """The ``ome`` attribute for the N5 Viewer pyramid group with ``group_attrs`` and level
    datasets ``levels`` (``sN`` -> their attributes and N5-order shape), as this package's
    reader calibrates it; None (logged) when OME-NGFF cannot describe it."""
    from napari_n5zarr.spatial.pyramids import n5viewer_pyramid

    ms = n5viewer_pyramid(group_attrs, levels)
    if ms is None:
        return None
    name = group_attrs.get("name")
    ome, why = ome_metadata(ms, labels=labels, name=name if isinstance(name, str) else None)
    if ome is None:
        _logger.info("%s: no OME-NGFF metadata (%s)", where, why)
    return ome


def dimension_names(axes: Any, ndim: int) -> list[str] | None:
    """The ``dimension_names`` of a level array: its N5 ``axes`` (N5 = Zarr order), if they
    are ``ndim`` distinct names."""
    if not isinstance(axes, list) or len(axes) != ndim or not all(isinstance(a, str) for a in axes):
        return None
    return list(axes) if len(set(axes)) == ndim else None


def with_dimension_names(doc: dict[str, Any]) -> dict[str, Any]:
    """An array's ``zarr.json`` document with ``dimension_names`` from its ``axes`` attribute."""
    names = dimension_names((doc.get("attributes") or {}).get("axes"), len(doc.get("shape", ())))
    return doc if names is None else {**doc, "dimension_names": names}


def group_ome(
    group_attrs: Attrs, levels: Mapping[str, Any], *, name: str, where: str
) -> dict[str, Any] | None:
    """The ``ome`` attribute ``n5zarr add-zarr-metadata`` gives an existing N5 group: an N5
    Viewer pyramid (datasets ``sN``, ``levels`` maps them to their
    :class:`~napari_n5zarr.n5.metadata.N5DatasetMetadata`) that no other convention claims
    (no ``multiscales``, ``ome`` or Paintera keys); labels as this reader decides them."""
    from napari_n5zarr.spatial.pyramids import is_labels

    if not levels or any(k in group_attrs for k in ("multiscales", OME_KEY, "painteraData")):
        return None
    infos = {
        k: ArrayInfo(dict(m.attributes), tuple(m.dimensions), m.data_type)
        for k, m in levels.items()
    }
    first = infos[min(levels, key=lambda k: int(k[1:]))]
    labels = is_labels(name, {**group_attrs, **first.attrs}, first.dtype)
    return pyramid_ome(group_attrs, infos, labels=labels, where=where)


def without_zarr_only(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a ``zarr.json`` document) without what only the Zarr side carries (the
    ``ome`` attribute, ``dimension_names``): what ``attributes.json`` is made from."""
    out = {k: v for k, v in doc.items() if k != "dimension_names"}
    attrs = out.get("attributes")
    if isinstance(attrs, dict) and OME_KEY in attrs:
        out["attributes"] = {k: v for k, v in attrs.items() if k != OME_KEY}
    return out
