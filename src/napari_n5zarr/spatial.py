"""Metadata conventions -> :class:`Multiscale` descriptions.

Every per-axis tuple in this module is in **N5 order** (index 0 = fastest axis = x),
the order of the zarr array shape the library presents (shape == N5 ``dimensions``).
Viewers that show C order (napari: ..., z, y, x) reverse them.

One small pure function per convention turns attribute dicts into a
:class:`Calibration` (scale, translate, units, axes); the pyramid functions turn a
group's attributes plus its children's :class:`ArrayInfo` into a :class:`Multiscale`.
:func:`detect` walks a zarr node (metadata only, never chunks) and applies them.

Conventions: N5 Viewer (modern and old), neuroglancer / tensorstore, COSEM /
OpenOrganelle, BigDataViewer, OME-NGFF 0.4 / 0.5, ImageJ (n5-ij). Downsampled levels
follow N5 Viewer: level k's pixel centre sits at ``0.5 * (f - 1)`` source pixels.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import zarr

Attrs = Mapping[str, Any]
ErrorHandler = Callable[[str, BaseException], None]

__all__ = [
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
    "detect",
    "downsampling_factors",
    "imagej",
    "is_labels",
    "n5viewer",
    "n5viewer_pyramid",
    "neuroglancer",
    "ngff_pyramid",
    "normalize_unit",
    "with_bdv_setup",
]

DEFAULT_AXES = ("x", "y", "z", "t", "c")
N5_RESERVED = frozenset({"dimensions", "blockSize", "dataType", "compression", "compressionType"})
# Group keys that N5 Viewer and neuroglancer let children inherit.
INHERITABLE = ("pixelResolution", "resolution", "units", "axes", "offset")

_LEVEL = re.compile(r"^s(\d+)$")
_SETUP = re.compile(r"^setup(\d+)$")
_TIMEPOINT = re.compile(r"^timepoint(\d+)$")
_LABEL_NAME = re.compile(r"label|seg", re.IGNORECASE)
_UNIT_WITH_FACTOR = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([^\d\s].*)$")


class SkippedNodeWarning(UserWarning):
    """A node could not be read; its siblings were still read."""


class ArrayInfo(NamedTuple):
    """What the conventions need to know about one array (metadata only)."""

    attrs: Attrs
    shape: tuple[int, ...]
    dtype: str = ""

    @classmethod
    def from_n5(cls, attributes: Attrs) -> ArrayInfo:
        """From an N5 ``attributes.json`` dict (reserved keys split off)."""
        user = {k: v for k, v in attributes.items() if k not in N5_RESERVED}
        shape = tuple(int(d) for d in attributes["dimensions"])
        return cls(user, shape, str(attributes.get("dataType", "")))


class Calibration(NamedTuple):
    """Scale/translate/units/axes of one array, N5 order."""

    scale: tuple[float, ...]
    translate: tuple[float, ...]
    units: tuple[str | None, ...]
    axes: tuple[str, ...]
    convention: str = "none"


@dataclass(frozen=True)
class Multiscale:
    """One image (or labels) pyramid, finest level first; per-axis values in N5 order.

    ``scale``/``translate`` are those of level 0. ``downsampling[k]`` is level k's
    factor relative to level 0. ``time_paths`` (BigDataViewer) lists, per time point,
    the level paths; a reader stacks them along a trailing (slowest) ``t`` axis that
    ``scale``/``axes``/... already include.
    """

    name: str
    paths: tuple[str, ...]
    scale: tuple[float, ...]
    translate: tuple[float, ...]
    units: tuple[str | None, ...]
    axes: tuple[str, ...]
    downsampling: tuple[tuple[float, ...], ...]
    convention: str = "none"
    is_labels: bool = False
    shapes: tuple[tuple[int, ...], ...] = ()
    dtype: str = ""
    time_paths: tuple[tuple[str, ...], ...] = ()
    channel_axis: int | None = None
    attrs: Attrs = field(default_factory=dict, compare=False, repr=False)

    @property
    def ndim(self) -> int:
        return len(self.scale)

    def level_scale(self, level: int) -> tuple[float, ...]:
        """Scale of ``level`` (level 0 scale times its downsampling)."""
        return tuple(s * f for s, f in zip(self.scale, self.downsampling[level], strict=True))

    def level_translate(self, level: int) -> tuple[float, ...]:
        """Translate of ``level`` by the N5 Viewer rule (pixel centre at 0.5 * (f - 1))."""
        return tuple(
            t + 0.5 * (f - 1) * s
            for t, s, f in zip(self.translate, self.scale, self.downsampling[level], strict=True)
        )


# ---------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------


def _floats(value: Any) -> tuple[float, ...] | None:
    """A list of finite numbers as floats, else None."""
    if not isinstance(value, list | tuple) or not value:
        return None
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        return None
    if any(isinstance(v, bool) for v in value) or not all(math.isfinite(v) for v in out):
        return None
    return out


def _strings(value: Any) -> tuple[str | None, ...] | None:
    if not isinstance(value, list | tuple) or not value:
        return None
    return tuple(v if isinstance(v, str) else None for v in value)


def _fit(values: Sequence[Any], ndim: int, fill: Any) -> tuple[Any, ...]:
    """Truncate or pad ``values`` to ``ndim`` entries."""
    return tuple(values[:ndim]) + (fill,) * max(0, ndim - len(values))


def default_axes(ndim: int) -> tuple[str, ...]:
    """Axis names in N5 order when metadata gives none: x, y, z, t, c, d5, ..."""
    return tuple(DEFAULT_AXES[i] if i < len(DEFAULT_AXES) else f"d{i}" for i in range(ndim))


def identity(ndim: int) -> Calibration:
    """Unit scale, zero translate, unknown units."""
    return Calibration((1.0,) * ndim, (0.0,) * ndim, (None,) * ndim, default_axes(ndim))


def _unique_axes(axes: Sequence[str | None], ndim: int) -> tuple[str, ...]:
    """Axis names fitted to ``ndim``, blanks and duplicates replaced by defaults."""
    names = list(_fit(list(axes), ndim, None))
    defaults = default_axes(ndim)
    seen: set[str] = set()
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name or name in seen:
            name = defaults[i] if defaults[i] not in seen and defaults[i] not in names else f"d{i}"
        names[i] = name
        seen.add(name)
    return tuple(names)


def _n5_order(axes: Sequence[Any] | None) -> bool | None:
    """True if axis names list x before y (or z): N5 order; False if after; None if unknown."""
    if not axes:
        return None
    names = [a.lower() if isinstance(a, str) else None for a in axes]
    if "x" in names:
        for other in ("y", "z"):
            if other in names:
                return names.index("x") < names.index(other)
    return None


def _unit_and_factor(unit: str | None) -> tuple[str | None, float]:
    """Split neuroglancer-style ``"4nm"`` into ``("nm", 4.0)``."""
    if not isinstance(unit, str):
        return None, 1.0
    m = _UNIT_WITH_FACTOR.match(unit)
    if m:
        return m.group(2).strip(), float(m.group(1))
    return unit.strip() or None, 1.0


_UNIT_ALIASES = {
    "um": "micrometer",
    "µm": "micrometer",  # micro sign
    "μm": "micrometer",  # greek mu
    "micron": "micrometer",
    "microns": "micrometer",
    "nm": "nanometer",
    "mm": "millimeter",
    "cm": "centimeter",
    "m": "meter",
    "pm": "picometer",
    "å": "angstrom",
    "a": "angstrom",
    "s": "second",
    "sec": "second",
    "ms": "millisecond",
    "us": "microsecond",
    "min": "minute",
    "h": "hour",
    "px": "pixel",
    "pixels": "pixel",
}


def normalize_unit(unit: str | None) -> str | None:
    """A unit spelling as a full unit name (``"um"`` -> ``"micrometer"``); unknowns kept."""
    if not isinstance(unit, str) or not unit.strip():
        return None
    return _UNIT_ALIASES.get(unit.strip().lower(), unit.strip())


# ---------------------------------------------------------------------------
# per-convention calibration of one array (attribute dicts only)
# ---------------------------------------------------------------------------


def downsampling_factors(attrs: Attrs, ndim: int) -> tuple[float, ...] | None:
    """N5 Viewer / BigDataViewer per-dataset ``downsamplingFactors`` [fx, fy, fz]."""
    f = _floats(attrs.get("downsamplingFactors"))
    return _fit(f, ndim, 1.0) if f else None


def n5viewer(attrs: Attrs, ndim: int) -> Calibration | None:
    """N5 Viewer ``pixelResolution`` ({unit, dimensions} or bare list in um) or ``resolution``.

    Gives the resolution of full-resolution pixels; no translate.
    """
    pr = attrs.get("pixelResolution")
    unit: str | None = None
    res = None
    if isinstance(pr, Mapping):
        res = _floats(pr.get("dimensions"))
        unit = pr.get("unit") if isinstance(pr.get("unit"), str) else None
    elif isinstance(pr, list):
        res, unit = _floats(pr), "um"
    if res is None:
        res, unit = _floats(attrs.get("resolution")), None
    if res is None:
        return None
    return Calibration(
        _fit(res, ndim, 1.0), (0.0,) * ndim, _fit((unit,) * len(res), ndim, None), default_axes(ndim), "n5viewer"
    )


def neuroglancer(attrs: Attrs, ndim: int) -> Calibration | None:
    """Neuroglancer / tensorstore keys ``axes``, ``units``, ``resolution`` on top of N5 Viewer's.

    Units may carry a factor (``"4nm"``). Paintera's ``offset`` (physical) is the translate.
    """
    axes, units = _strings(attrs.get("axes")), _strings(attrs.get("units"))
    offset = _floats(attrs.get("offset"))
    base = n5viewer(attrs, ndim)
    if base is None and not (axes or units or offset):
        return None
    cal = base or identity(ndim)
    scale, unit_list = list(cal.scale), list(cal.units)
    if units:
        for i, u in enumerate(_fit(units, ndim, None)):
            unit_list[i], factor = _unit_and_factor(u)
            scale[i] *= factor
    convention = "neuroglancer" if axes or units else (base.convention if base else "paintera")
    return Calibration(
        tuple(scale),
        _fit(offset, ndim, 0.0) if offset else cal.translate,
        tuple(unit_list),
        _unique_axes(axes, ndim) if axes else cal.axes,
        convention,
    )


def cosem(attrs: Attrs, ndim: int) -> Calibration | None:
    """COSEM / OpenOrganelle ``transform`` {axes, units, scale, translate}.

    Lists are in C order unless ``"order"`` (or n5-ij's ``"ordering"``) is ``"F"``; without
    that key, axis names listing x before y mean N5 order.
    """
    t = attrs.get("transform")
    if not isinstance(t, Mapping):
        return None
    scale = _floats(t.get("scale"))
    if scale is None:
        return None
    n = len(scale)
    translate = _floats(t.get("translate")) or (0.0,) * n
    axes = _strings(t.get("axes")) or (None,) * n
    units = _strings(t.get("units")) or (None,) * n
    order = t.get("order", t.get("ordering"))
    fortran = str(order).upper() == "F" if isinstance(order, str) else bool(_n5_order(axes))
    if not fortran:
        scale, translate, axes, units = scale[::-1], translate[::-1], axes[::-1], units[::-1]
    return Calibration(
        _fit(scale, ndim, 1.0),
        _fit(translate, ndim, 0.0),
        _fit(units, ndim, None),
        _unique_axes(axes, ndim),
        "cosem",
    )


def imagej(attrs: Attrs, ndim: int) -> Calibration | None:
    """ImageJ (n5-ij) ``pixelWidth/Height/Depth``, ``pixelUnit``, ``x/y/zOrigin``, ``num*``.

    Axes are x, y then c, z, t for those with more than one entry (ImageJ drops
    singletons). The origins are physical offsets, as n5-ij uses them.
    """
    if "pixelWidth" not in attrs:
        return None

    def num(key: str, default: float) -> float:
        v = attrs.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else default

    axes = ["x", "y"]
    for key, axis in (("numChannels", "c"), ("numSlices", "z"), ("numFrames", "t")):
        if num(key, 1) > 1:
            axes.append(axis)
    if len(axes) != ndim:  # num* keys missing or inconsistent: spatial axes first
        axes = list(("x", "y", "z")[: min(ndim, 3)]) + list(default_axes(ndim)[3:])
    unit = attrs.get("pixelUnit") if isinstance(attrs.get("pixelUnit"), str) else None
    interval = num("frameInterval", 0.0)
    per_axis = {
        "x": (num("pixelWidth", 1.0), num("xOrigin", 0.0), unit),
        "y": (num("pixelHeight", 1.0), num("yOrigin", 0.0), unit),
        "z": (num("pixelDepth", 1.0), num("zOrigin", 0.0), unit),
        "t": (interval or 1.0, 0.0, "sec" if interval > 0 else None),
    }
    values = [per_axis.get(a, (1.0, 0.0, None)) for a in axes]
    return Calibration(
        tuple(v[0] for v in values),
        tuple(v[1] for v in values),
        tuple(v[2] for v in values),
        tuple(axes),
        "imagej",
    )


def _inherited(attrs: Attrs | None) -> dict[str, Any]:
    return {k: attrs[k] for k in INHERITABLE if attrs and k in attrs}


def calibrate(
    attrs: Attrs,
    ndim: int,
    *,
    name: str = "",
    inherited: Attrs | None = None,
    factors: Sequence[float] | None = None,
) -> Calibration:
    """Calibration of one array: COSEM, else ImageJ, else N5 Viewer/neuroglancer, else unit.

    N5 Viewer family: ``inherited`` group keys are defaults for the array's own; the
    array's ``downsamplingFactors`` (else ``factors``, else 2^N for a dataset named
    ``sN`` that has a resolution) scale the full-resolution pixel size, and shift the
    pixel centre by ``0.5 * (f - 1)`` full-resolution pixels.
    """
    for parse in (cosem, imagej):
        cal = parse(attrs, ndim)
        if cal is not None:
            return cal
    merged = {**_inherited(inherited), **attrs}
    base = neuroglancer(merged, ndim)
    f = downsampling_factors(attrs, ndim)
    if f is None and factors is not None:
        f = _fit(tuple(float(x) for x in factors), ndim, 1.0)
    if f is None and base is not None and (m := _LEVEL.match(name.rsplit("/", 1)[-1])):
        f = (2.0 ** int(m.group(1)),) * min(ndim, 3) + (1.0,) * max(0, ndim - 3)
    if base is None:
        base = identity(ndim)
        if f is None:
            return base
        base = base._replace(convention="n5viewer")
    if f is None or all(x == 1 for x in f):
        return base
    return base._replace(
        scale=tuple(s * x for s, x in zip(base.scale, f, strict=True)),
        translate=tuple(t + 0.5 * (x - 1) * s for t, s, x in zip(base.translate, base.scale, f, strict=True)),
    )


# ---------------------------------------------------------------------------
# pyramids: a group's attributes + its children's ArrayInfo -> Multiscale
# ---------------------------------------------------------------------------


def _assemble(
    paths: Sequence[str],
    infos: Sequence[ArrayInfo],
    cals: Sequence[Calibration],
    convention: str,
    attrs: Attrs,
    channel_axis: int | None = None,
) -> Multiscale | None:
    """Level calibrations -> Multiscale (level 0 values + per-level factors)."""
    if not paths:
        return None
    ndim = len(infos[0].shape)
    if channel_axis is None and cals[0].axes.count("c") == 1:
        channel_axis = cals[0].axes.index("c")
    keep = [i for i, info in enumerate(infos) if len(info.shape) == ndim]
    base = cals[0]
    downsampling = tuple(
        tuple((s / s0) if s0 else 1.0 for s, s0 in zip(cals[i].scale, base.scale, strict=True)) for i in keep
    )
    return Multiscale(
        name="",
        paths=tuple(paths[i] for i in keep),
        scale=base.scale,
        translate=base.translate,
        units=base.units,
        axes=base.axes,
        downsampling=downsampling,
        convention=convention,
        shapes=tuple(tuple(infos[i].shape) for i in keep),
        dtype=infos[0].dtype,
        channel_axis=channel_axis,
        attrs=dict(attrs),
    )


def level_names(names: Iterable[str]) -> list[str]:
    """Names ``s0, s1, ...`` among ``names``, sorted by level number."""
    found = [(int(m.group(1)), n) for n in names if (m := _LEVEL.match(n))]
    return [n for _, n in sorted(found)]


def n5viewer_pyramid(
    group_attrs: Attrs, children: Mapping[str, ArrayInfo], inherited: Attrs | None = None
) -> Multiscale | None:
    """N5 Viewer (modern or old) / neuroglancer pyramid: a group with datasets ``s0, s1, ...``.

    Level factors: the dataset's ``downsamplingFactors``, else the group's ``scales[N]``
    (old N5 Viewer, neuroglancer), else 2^N. Resolution, units and axes: the dataset's
    keys, else the group's, else ``inherited``. Per-dataset COSEM ``transform`` wins.
    """
    names = level_names(children)
    if not names:
        return None
    scales = group_attrs.get("scales")
    merged = {**_inherited(inherited), **group_attrs}
    cals = []
    for name in names:
        info = children[name]
        n = int(name[1:])
        ndim = len(info.shape)
        factors: tuple[float, ...] | None = None
        if isinstance(scales, list) and n < len(scales) and _floats(scales[n]):
            factors = _floats(scales[n])
        if factors is None and downsampling_factors(info.attrs, ndim) is None:
            factors = (2.0**n,) * min(ndim, 3) + (1.0,) * max(0, ndim - 3)
        cals.append(calibrate(info.attrs, ndim, name=name, inherited=merged, factors=factors))
    convention = cals[0].convention
    if convention == "none":
        convention = "n5viewer"
    if convention == "n5viewer" and isinstance(scales, list):
        convention = "n5viewer-old"
    return _assemble(names, [children[n] for n in names], cals, convention, group_attrs)


def cosem_pyramid(group_attrs: Attrs, children: Mapping[str, ArrayInfo]) -> Multiscale | None:
    """COSEM group ``multiscales: [{datasets: [{path, transform}]}]`` (transform in C order).

    A dataset entry without ``transform`` uses the dataset's own ``transform`` attribute.
    """
    ms = group_attrs.get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
        return None
    datasets = ms[0].get("datasets")
    if not isinstance(datasets, list) or not datasets:
        return None
    if any(isinstance(d, Mapping) and "coordinateTransformations" in d for d in datasets):
        return None  # OME-NGFF
    paths, infos, cals = [], [], []
    for d in datasets:
        path = d.get("path") if isinstance(d, Mapping) else None
        if not isinstance(path, str) or path not in children:
            continue
        info = children[path]
        attrs = {"transform": d["transform"]} if isinstance(d.get("transform"), Mapping) else info.attrs
        cal = cosem(attrs, len(info.shape)) or identity(len(info.shape))
        paths.append(path)
        infos.append(info)
        cals.append(cal)
    return _assemble(paths, infos, cals, "cosem", group_attrs)


def _ngff_multiscale(attrs: Attrs) -> tuple[Mapping[str, Any], Attrs] | None:
    """(multiscale, attrs holding it): 0.5 keeps everything under ``"ome"``."""
    ome = attrs.get("ome")
    root = ome if isinstance(ome, Mapping) and "multiscales" in ome else attrs
    ms = root.get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
        return None
    datasets = ms[0].get("datasets")
    if not isinstance(datasets, list) or not any(
        isinstance(d, Mapping) and "coordinateTransformations" in d for d in datasets
    ):
        return None
    return ms[0], root


def _ngff_transform(transforms: Any, ndim: int) -> tuple[list[float], list[float]]:
    """Compose a list of NGFF scale/translation transforms into (scale, translate)."""
    scale, translate = [1.0] * ndim, [0.0] * ndim
    for t in transforms if isinstance(transforms, list) else []:
        if not isinstance(t, Mapping):
            continue
        if t.get("type") == "scale" and (s := _floats(t.get("scale"))):
            s = _fit(s, ndim, 1.0)
            scale = [a * b for a, b in zip(scale, s, strict=True)]
            translate = [a * b for a, b in zip(translate, s, strict=True)]
        elif t.get("type") == "translation" and (v := _floats(t.get("translation"))):
            translate = [a + b for a, b in zip(translate, _fit(v, ndim, 0.0), strict=True)]
    return scale, translate


def ngff_pyramid(group_attrs: Attrs, children: Mapping[str, ArrayInfo]) -> Multiscale | None:
    """OME-NGFF 0.4 (``multiscales``) or 0.5 (``ome.multiscales``): axes and
    ``coordinateTransformations`` in C order (N5 order if the axis names say so)."""
    found = _ngff_multiscale(group_attrs)
    if found is None:
        return None
    ms, root = found
    raw_axes = ms.get("axes") if isinstance(ms.get("axes"), list) else []
    names = [a.get("name") if isinstance(a, Mapping) else a for a in raw_axes]
    units = [a.get("unit") if isinstance(a, Mapping) else None for a in raw_axes]
    types = [a.get("type") if isinstance(a, Mapping) else None for a in raw_axes]
    reverse = _n5_order(names) is not True
    paths, infos, cals = [], [], []
    for d in ms["datasets"]:
        path = d.get("path") if isinstance(d, Mapping) else None
        if not isinstance(path, str) or path not in children:
            continue
        info = children[path]
        ndim = len(info.shape)
        scale, translate = _ngff_transform(
            list(d.get("coordinateTransformations") or []) + list(ms.get("coordinateTransformations") or []), ndim
        )
        ax = list(_fit(names, ndim, None))
        un = list(_fit(units, ndim, None))
        if reverse:
            scale, translate, ax, un = scale[::-1], translate[::-1], ax[::-1], un[::-1]
        cals.append(Calibration(tuple(scale), tuple(translate), tuple(un), _unique_axes(ax, ndim), "ngff"))
        paths.append(path)
        infos.append(info)
    if not cals:
        return None
    ty = list(_fit(types, len(infos[0].shape), None))
    if reverse:
        ty = ty[::-1]
    channel_axis = ty.index("channel") if "channel" in ty else None
    version = str(ms.get("version") or root.get("version") or "0.4")
    return _assemble(paths, infos, cals, f"ngff-{version}", group_attrs, channel_axis)


def bdv_setup(
    setup_attrs: Attrs,
    timepoints: Mapping[str, tuple[Attrs, Mapping[str, ArrayInfo]]],
    inherited: Attrs | None = None,
) -> Multiscale | None:
    """One BigDataViewer setup: ``timepointN/sK`` datasets; setup ``downsamplingFactors``
    [[1,1,1],[2,2,1],...] (else each level's own, else 2^K). Time points with identical
    level shapes become a trailing ``t`` axis (``time_paths``); otherwise only the first
    time point is described. Resolution comes from the time point's ``resolution``
    (written for Paintera) or inherited N5 Viewer keys."""
    names = sorted((n for n in timepoints if _TIMEPOINT.match(n)), key=lambda n: int(n[len("timepoint") :]))
    factors = setup_attrs.get("downsamplingFactors")
    pyramids = []
    for tp in names:
        tp_attrs, arrays = timepoints[tp]
        group = {"scales": factors} if isinstance(factors, list) else {}
        group.update(_inherited(tp_attrs))
        ms = n5viewer_pyramid(group, arrays, inherited)
        if ms is not None:
            pyramids.append((tp, ms))
    if not pyramids:
        return None
    first_tp, first = pyramids[0]
    paths = tuple(f"{first_tp}/{p}" for p in first.paths)
    ms = replace(first, paths=paths, convention="bdv", attrs=dict(setup_attrs))
    same = [(tp, p) for tp, p in pyramids if p.shapes == first.shapes and p.paths == first.paths]
    if len(same) > 1:
        ms = replace(
            ms,
            time_paths=tuple(tuple(f"{tp}/{x}" for x in p.paths) for tp, p in same),
            scale=ms.scale + (1.0,),
            translate=ms.translate + (0.0,),
            units=ms.units + (None,),
            axes=ms.axes + (("time",) if "t" in ms.axes else ("t",)),
            downsampling=tuple(f + (1.0,) for f in ms.downsampling),
            shapes=tuple(s + (len(same),) for s in ms.shapes),
        )
    return ms


class BdvSetup(NamedTuple):
    """What a BigDataViewer XML says about one setup (sizes in x, y, z order)."""

    name: str | None
    voxel_size: tuple[float, ...] | None
    unit: str | None


def bdv_xml(text: str) -> tuple[str | None, dict[int, BdvSetup]]:
    """(N5 path, setups) from a BigDataViewer/BigStitcher SpimData XML with a ``bdv.n5``
    image loader; ``(None, {})`` for other XML. The N5 path is as written (relative to
    the XML's folder when ``type="relative"``)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None, {}
    loader = root.find("SequenceDescription/ImageLoader")
    if root.tag != "SpimData" or loader is None or loader.get("format") != "bdv.n5":
        return None, {}
    n5 = loader.findtext("n5")
    setups: dict[int, BdvSetup] = {}
    for vs in root.iterfind("SequenceDescription/ViewSetups/ViewSetup"):
        try:
            setup_id = int(vs.findtext("id", ""))
        except ValueError:
            continue
        size = vs.findtext("voxelSize/size")
        try:
            voxel = tuple(float(v) for v in size.split()) if size else None
        except ValueError:
            voxel = None
        unit = (vs.findtext("voxelSize/unit") or "").strip() or None
        setups[setup_id] = BdvSetup(vs.findtext("name"), voxel, unit)
    return (n5.strip() if n5 else None), setups


def with_bdv_setup(ms: Multiscale, setup: BdvSetup) -> Multiscale:
    """A BigDataViewer pyramid calibrated with its XML setup's voxel size and unit."""
    if not setup.voxel_size:
        return ms
    n = min(len(setup.voxel_size), 3, ms.ndim)
    scale = tuple(setup.voxel_size[:n]) + ms.scale[n:]
    units = (setup.unit,) * n + ms.units[n:]
    translate = (0.0,) * n + ms.translate[n:]  # BigDataViewer puts full-resolution pixel centres at 0
    return replace(ms, scale=scale, units=units, translate=translate, convention="bdv-xml")


def is_labels(name: str, attrs: Attrs, dtype: str) -> bool:
    """Integer data marked as labels by its attributes or by a name with 'label'/'seg'."""
    try:
        if np.dtype(dtype).kind not in "iu":
            return False
    except TypeError:
        return False
    ome = attrs.get("ome")
    if "image-label" in attrs or (isinstance(ome, Mapping) and "image-label" in ome):
        return True
    paintera = attrs.get("painteraData")
    if isinstance(paintera, Mapping) and paintera.get("type") == "label":
        return True
    if attrs.get("isLabelMultiset") is True:
        return True
    return bool(_LABEL_NAME.search(name.rsplit("/", 1)[-1] if name else ""))


# ---------------------------------------------------------------------------
# detect: walk a zarr node (metadata only)
# ---------------------------------------------------------------------------


def describe_error(path: str, exc: BaseException) -> str:
    """``"path: reason"`` without repeating a path the message already starts with."""
    msg = str(exc) or type(exc).__name__
    return msg if path and msg.startswith(path) else f"{path or '/'}: {msg}"


def _warn(path: str, exc: BaseException) -> None:
    warnings.warn(f"skipped {describe_error(path, exc)}", SkippedNodeWarning, stacklevel=3)


def _natural_key(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))


def _info(array: zarr.Array) -> ArrayInfo:
    return ArrayInfo(dict(array.attrs), tuple(int(s) for s in array.shape), str(array.dtype))


def _list_dir(group: zarr.Group) -> list[str]:
    from zarr.core.sync import sync

    async def keys() -> list[str]:
        return [k async for k in group.store.list_dir(group.path)]

    return sync(keys())


def _children(group: zarr.Group, where: str, on_error: ErrorHandler) -> dict[str, Any]:
    """Readable children of ``group``; unreadable ones go to ``on_error``.

    zarr's ``members()`` turns a child whose metadata raises ``KeyError`` into a
    warning; such children are fetched again one by one to tell objects that are
    simply not nodes (a plain ``KeyError``) from broken nodes (anything else). Stores
    that cannot list (plain HTTP) are probed for pyramid levels ``s0, s1, ...``.
    """
    try:
        keys = _list_dir(group)
    except Exception as exc:
        found = _probe_levels(group)
        if not found:
            on_error(where, exc)
        return found
    out: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = dict(group.members())
    except Exception:  # a child raised something else than KeyError: go one by one
        out = {}
    for key in keys:
        if key in out:
            continue
        try:
            out[key] = group[key]
        except Exception as exc:
            if type(exc) is not KeyError:
                on_error(_join(where, key), exc)
    return out or _probe_levels(group)


def _probe_levels(group: zarr.Group, limit: int = 32) -> dict[str, Any]:
    """Datasets ``s0, s1, ...`` fetched by name, up to the first missing one."""
    out: dict[str, Any] = {}
    for k in range(limit):
        try:
            out[f"s{k}"] = group[f"s{k}"]
        except Exception:
            break
    return out


def _ancestor_attrs(node: zarr.Array | zarr.Group) -> dict[str, Any]:
    """Inheritable attributes of the node's ancestors in its store (root first)."""
    import zarr

    parts = [p for p in node.path.split("/") if p]
    merged: dict[str, Any] = {}
    for i in range(len(parts)):
        try:
            parent = zarr.open_group(store=node.store, path="/".join(parts[:i]), mode="r")
            merged.update(_inherited(parent.attrs))
        except Exception:
            continue
    return merged


def _lookup(group: zarr.Group, paths: Iterable[str], known: Mapping[str, Any]) -> dict[str, ArrayInfo]:
    """ArrayInfo for the given relative paths that are arrays (nested paths allowed)."""
    import zarr

    out = {}
    for p in paths:
        try:
            node = known[p] if p in known else group[p]
        except Exception:
            continue
        if isinstance(node, zarr.Array):
            out[p] = _info(node)
    return out


def _referenced_paths(attrs: Attrs) -> list[str]:
    ome = attrs.get("ome")
    root = ome if isinstance(ome, Mapping) and "multiscales" in ome else attrs
    ms = root.get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
        return []
    ds = ms[0].get("datasets")
    return [d["path"] for d in ds if isinstance(d, Mapping) and isinstance(d.get("path"), str)] if isinstance(ds, list) else []


def _finish(ms: Multiscale, name: str, prefix: str) -> Multiscale:
    return replace(
        ms,
        name=name,
        paths=tuple(_join(prefix, p) for p in ms.paths),
        time_paths=tuple(tuple(_join(prefix, p) for p in t) for t in ms.time_paths),
        is_labels=is_labels(name, ms.attrs, ms.dtype),
    )


def detect(
    node: zarr.Array | zarr.Group,
    name: str | None = None,
    *,
    inherited: Attrs | None = None,
    on_error: ErrorHandler | None = None,
    max_depth: int = 6,
) -> list[Multiscale]:
    """Every image/labels pyramid under ``node``; paths relative to ``node``.

    A group that is a pyramid gives one :class:`Multiscale`; a group of several
    pyramids/datasets one per pyramid/dataset (named by relative path); an array a
    single-scale one. ``name`` names a pyramid or array at ``node`` itself (default:
    the node's basename). ``inherited`` holds attributes of ancestors outside the
    node's store (N5 Viewer/neuroglancer defaults). Reads metadata only. A child that cannot be read is passed
    to ``on_error(path, exception)`` (default: a :class:`SkippedNodeWarning`) and its
    siblings are still described.
    """
    import zarr

    on_error = on_error or _warn
    base = name if name is not None else (node.basename or "")
    inherited = {**_inherited(inherited), **_ancestor_attrs(node)}
    if isinstance(node, zarr.Array):
        info = _info(node)
        cal = calibrate(info.attrs, len(info.shape), name=node.basename or "", inherited=inherited)
        ms = _assemble([""], [info], [cal], cal.convention, info.attrs)
        return [_finish(ms, base, "")] if ms else []
    return _detect_group(node, base, "", inherited, on_error, max_depth)


def _detect_group(
    group: zarr.Group,
    label: str,
    prefix: str,
    inherited: Attrs,
    on_error: ErrorHandler,
    depth: int,
) -> list[Multiscale]:
    import zarr

    attrs = dict(group.attrs)
    children = _children(group, prefix, on_error)
    arrays = {k: _info(v) for k, v in children.items() if isinstance(v, zarr.Array)}
    groups = {k: v for k, v in children.items() if isinstance(v, zarr.Group)}
    merged = {**inherited, **_inherited(attrs)}
    name = label or prefix
    found: list[Multiscale] = []
    used: set[str] = set()

    referenced = _lookup(group, _referenced_paths(attrs), children)
    pyramid = (
        ngff_pyramid(attrs, referenced)
        or cosem_pyramid(attrs, referenced)
        or n5viewer_pyramid(attrs, arrays, inherited)
    )
    if pyramid is not None:
        found.append(_finish(pyramid, name, prefix))
        used.update(p.split("/", 1)[0] for p in pyramid.paths)

    setups = sorted((k for k in groups if _SETUP.match(k)), key=_natural_key)
    if any(_TIMEPOINT.match(k) for k in groups):  # opened at a BigDataViewer setup
        ms = _bdv(group, attrs, groups, prefix, merged, on_error)
        if ms is not None:
            found.append(_finish(ms, name, prefix))
            used.update(k for k in groups if _TIMEPOINT.match(k))
    for key in setups:
        setup = groups[key]
        sub = _children(setup, _join(prefix, key), on_error)
        tgroups = {k: v for k, v in sub.items() if isinstance(v, zarr.Group)}
        ms = _bdv(setup, dict(setup.attrs), tgroups, _join(prefix, key), merged, on_error)
        if ms is not None:
            found.append(_finish(ms, _join(prefix, key), _join(prefix, key)))
            used.add(key)

    if depth <= 0:
        return found
    for key in sorted(set(children) - used, key=_natural_key):
        path = _join(prefix, key)
        child = children[key]
        if isinstance(child, zarr.Array):
            info = arrays[key]
            cal = calibrate(info.attrs, len(info.shape), name=key, inherited=merged)
            ms = _assemble([key], [info], [cal], cal.convention, info.attrs)
            if ms is not None:
                found.append(_finish(ms, path, prefix))
        else:
            try:
                found.extend(_detect_group(child, "", path, merged, on_error, depth - 1))
            except Exception as exc:
                on_error(path, exc)
    return found


def _bdv(
    setup: zarr.Group,
    setup_attrs: Attrs,
    tgroups: Mapping[str, Any],
    prefix: str,
    inherited: Attrs,
    on_error: ErrorHandler,
) -> Multiscale | None:
    import zarr

    timepoints = {}
    for key in sorted((k for k in tgroups if _TIMEPOINT.match(k)), key=_natural_key):
        tp = tgroups[key]
        sub = _children(tp, _join(prefix, key), on_error)
        arrays = {k: _info(v) for k, v in sub.items() if isinstance(v, zarr.Array)}
        timepoints[key] = (dict(tp.attrs), arrays)
    merged = {**inherited, **_inherited(setup_attrs)}
    return bdv_setup(setup_attrs, timepoints, merged)
