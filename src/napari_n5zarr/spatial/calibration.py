"""Per-convention calibration of one array: pure functions on attribute dicts.

N5 Viewer (modern and old), neuroglancer / tensorstore, COSEM / OpenOrganelle, ImageJ
(n5-ij); :func:`calibrate` tries :data:`CALIBRATIONS` in order, then the N5 Viewer /
neuroglancer keys (with inherited defaults), else unit scale."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from napari_n5zarr.spatial.model import (
    Attrs,
    Calibration,
    as_floats,
    as_strings,
    default_axes,
    fit,
    identity,
    in_n5_order,
    inheritable,
    level_number,
    unique_axes,
)
from napari_n5zarr.spatial.units import unit_and_factor


def downsampling_factors(attrs: Attrs, ndim: int) -> tuple[float, ...] | None:
    """N5 Viewer / BigDataViewer per-dataset ``downsamplingFactors`` [fx, fy, fz]."""
    f = as_floats(attrs.get("downsamplingFactors"))
    return fit(f, ndim, 1.0) if f else None


def n5viewer(attrs: Attrs, ndim: int) -> Calibration | None:
    """N5 Viewer ``pixelResolution`` ({unit, dimensions} or bare list in um) or ``resolution``.

    Gives the resolution of full-resolution pixels; no translate.
    """
    pr = attrs.get("pixelResolution")
    unit: str | None = None
    res = None
    if isinstance(pr, Mapping):
        res = as_floats(pr.get("dimensions"))
        unit = pr.get("unit") if isinstance(pr.get("unit"), str) else None
    elif isinstance(pr, list):
        res, unit = as_floats(pr), "um"
    if res is None:
        res, unit = as_floats(attrs.get("resolution")), None
    if res is None:
        return None
    return Calibration(
        fit(res, ndim, 1.0),
        (0.0,) * ndim,
        fit((unit,) * len(res), ndim, None),
        default_axes(ndim),
        "n5viewer",
    )


def neuroglancer(attrs: Attrs, ndim: int) -> Calibration | None:
    """Neuroglancer / tensorstore keys ``axes``, ``units``, ``resolution`` on top of N5 Viewer's.

    Units may carry a factor (``"4nm"``). Paintera's ``offset`` (physical) is the translate.
    """
    axes, units = as_strings(attrs.get("axes")), as_strings(attrs.get("units"))
    offset = as_floats(attrs.get("offset"))
    base = n5viewer(attrs, ndim)
    if base is None and not (axes or units or offset):
        return None
    cal = base or identity(ndim)
    scale, unit_list = list(cal.scale), list(cal.units)
    if units:
        for i, u in enumerate(fit(units, ndim, None)):
            unit_list[i], factor = unit_and_factor(u)
            scale[i] *= factor
    # N5 Viewer's own key names the convention (this plugin's export writes it with the
    # neuroglancer/tensorstore keys beside it); axes/units alone are neuroglancer's.
    if base is not None and "pixelResolution" in attrs:
        convention = base.convention
    else:
        convention = "neuroglancer" if axes or units else (base.convention if base else "paintera")
    return Calibration(
        tuple(scale),
        fit(offset, ndim, 0.0) if offset else cal.translate,
        tuple(unit_list),
        unique_axes(axes, ndim) if axes else cal.axes,
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
    scale = as_floats(t.get("scale"))
    if scale is None:
        return None
    n = len(scale)
    translate = as_floats(t.get("translate")) or (0.0,) * n
    axes = as_strings(t.get("axes")) or (None,) * n
    units = as_strings(t.get("units")) or (None,) * n
    order = t.get("order", t.get("ordering"))
    fortran = str(order).upper() == "F" if isinstance(order, str) else bool(in_n5_order(axes))
    if not fortran:
        scale, translate, axes, units = scale[::-1], translate[::-1], axes[::-1], units[::-1]
    return Calibration(
        fit(scale, ndim, 1.0),
        fit(translate, ndim, 0.0),
        fit(units, ndim, None),
        unique_axes(axes, ndim),
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


CALIBRATIONS = (cosem, imagej)
"""Conventions that calibrate an array from its own attributes alone, tried first, in order."""


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
    for parse in CALIBRATIONS:
        cal = parse(attrs, ndim)
        if cal is not None:
            return cal
    merged = {**inheritable(inherited), **attrs}
    base = neuroglancer(merged, ndim)
    f = downsampling_factors(attrs, ndim)
    if f is None and factors is not None:
        f = fit(tuple(float(x) for x in factors), ndim, 1.0)
    if f is None and base is not None and (n := level_number(name.rsplit("/", 1)[-1])) is not None:
        f = (2.0**n,) * min(ndim, 3) + (1.0,) * max(0, ndim - 3)
    if base is None:
        base = identity(ndim)
        if f is None:
            return base
        base = base._replace(convention="n5viewer")
    if f is None or all(x == 1 for x in f):
        return base
    return base._replace(
        scale=tuple(s * x for s, x in zip(base.scale, f, strict=True)),
        translate=tuple(
            t + 0.5 * (x - 1) * s for t, s, x in zip(base.translate, base.scale, f, strict=True)
        ),
    )
