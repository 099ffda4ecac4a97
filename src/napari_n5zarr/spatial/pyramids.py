"""Pyramids: a group's attributes plus its children's :class:`ArrayInfo` -> :class:`Multiscale`
(N5 Viewer, COSEM ``multiscales``, OME-NGFF 0.4/0.5, BigDataViewer setups)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from napari_n5zarr.spatial.calibration import calibrate, cosem, downsampling_factors
from napari_n5zarr.spatial.model import (
    CONTAINER_SUFFIXES,
    LABEL_WORDS,
    TIMEPOINT,
    ArrayInfo,
    Attrs,
    Calibration,
    Multiscale,
    as_floats,
    fit,
    identity,
    in_n5_order,
    inheritable,
    level_names,
    level_number,
    unique_axes,
)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def assemble(
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
    multiset = any(
        a.get("isLabelMultiset") is True for a in (attrs, *(infos[i].attrs for i in keep))
    )
    base = cals[0]
    downsampling = tuple(
        tuple((s / s0) if s0 else 1.0 for s, s0 in zip(cals[i].scale, base.scale, strict=True))
        for i in keep
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
        dtype="uint64" if multiset else infos[0].dtype,
        channel_axis=channel_axis,
        attrs=dict(attrs),
        label_multiset=multiset,
    )


def dataset_pyramid(
    info: ArrayInfo, path: str = "", *, name: str | None = None, inherited: Attrs | None = None
) -> Multiscale | None:
    """A dataset that is no part of a pyramid: one level at ``path``, calibrated by its own
    attributes and ``inherited`` (``name``, default ``path``, gives N5 Viewer's ``sN`` factor)."""
    cal = calibrate(
        info.attrs, len(info.shape), name=path if name is None else name, inherited=inherited
    )
    return assemble([path], [info], [cal], cal.convention, info.attrs)


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
    merged = {**inheritable(inherited), **group_attrs}
    cals = []
    for name in names:
        info = children[name]
        n = level_number(name) or 0
        ndim = len(info.shape)
        factors: tuple[float, ...] | None = None
        if isinstance(scales, list) and n < len(scales) and as_floats(scales[n]):
            factors = as_floats(scales[n])
        if factors is None and downsampling_factors(info.attrs, ndim) is None:
            factors = (2.0**n,) * min(ndim, 3) + (1.0,) * max(0, ndim - 3)
        cals.append(calibrate(info.attrs, ndim, name=name, inherited=merged, factors=factors))
    convention = cals[0].convention
    if convention == "none":
        convention = "n5viewer"
    if convention == "n5viewer" and isinstance(scales, list):
        convention = "n5viewer-old"
    return assemble(names, [children[n] for n in names], cals, convention, group_attrs)


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
        attrs = (
            {"transform": d["transform"]} if isinstance(d.get("transform"), Mapping) else info.attrs
        )
        cal = cosem(attrs, len(info.shape)) or identity(len(info.shape))
        paths.append(path)
        infos.append(info)
        cals.append(cal)
    return assemble(paths, infos, cals, "cosem", group_attrs)


def ngff_multiscale(attrs: Attrs) -> tuple[Mapping[str, Any], Attrs] | None:
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
        if t.get("type") == "scale" and (s := as_floats(t.get("scale"))):
            s = fit(s, ndim, 1.0)
            scale = [a * b for a, b in zip(scale, s, strict=True)]
            translate = [a * b for a, b in zip(translate, s, strict=True)]
        elif t.get("type") == "translation" and (v := as_floats(t.get("translation"))):
            translate = [a + b for a, b in zip(translate, fit(v, ndim, 0.0), strict=True)]
    return scale, translate


def ngff_pyramid(group_attrs: Attrs, children: Mapping[str, ArrayInfo]) -> Multiscale | None:
    """OME-NGFF 0.4 (``multiscales``) or 0.5 (``ome.multiscales``): axes and
    ``coordinateTransformations`` in C order (N5 order if the axis names say so)."""
    found = ngff_multiscale(group_attrs)
    if found is None:
        return None
    ms, root = found
    raw_axes = axes if isinstance(axes := ms.get("axes"), list) else []
    names = [a.get("name") if isinstance(a, Mapping) else a for a in raw_axes]
    units = [a.get("unit") if isinstance(a, Mapping) else None for a in raw_axes]
    types = [a.get("type") if isinstance(a, Mapping) else None for a in raw_axes]
    reverse = in_n5_order(names) is not True
    paths, infos, cals = [], [], []
    for d in ms["datasets"]:
        path = d.get("path") if isinstance(d, Mapping) else None
        if not isinstance(path, str) or path not in children:
            continue
        info = children[path]
        ndim = len(info.shape)
        scale, translate = _ngff_transform(
            list(d.get("coordinateTransformations") or [])
            + list(ms.get("coordinateTransformations") or []),
            ndim,
        )
        ax = list(fit(names, ndim, None))
        un = list(fit(units, ndim, None))
        if reverse:
            scale, translate, ax, un = scale[::-1], translate[::-1], ax[::-1], un[::-1]
        cals.append(
            Calibration(tuple(scale), tuple(translate), tuple(un), unique_axes(ax, ndim), "ngff")
        )
        paths.append(path)
        infos.append(info)
    if not cals:
        return None
    ty = list(fit(types, len(infos[0].shape), None))
    if reverse:
        ty = ty[::-1]
    channel_axis = ty.index("channel") if "channel" in ty else None
    version = str(ms.get("version") or root.get("version") or "0.4")
    return assemble(paths, infos, cals, f"ngff-{version}", group_attrs, channel_axis)


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
    names = sorted(
        (n for n in timepoints if TIMEPOINT.match(n)), key=lambda n: int(n[len("timepoint") :])
    )
    factors = setup_attrs.get("downsamplingFactors")
    pyramids = []
    for tp in names:
        tp_attrs, arrays = timepoints[tp]
        group = {"scales": factors} if isinstance(factors, list) else {}
        group.update(inheritable(tp_attrs))
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
            scale=(*ms.scale, 1.0),
            translate=(*ms.translate, 0.0),
            units=(*ms.units, None),
            axes=ms.axes + (("time",) if "t" in ms.axes else ("t",)),
            downsampling=tuple((*f, 1.0) for f in ms.downsampling),
            shapes=tuple((*s, len(same)) for s in ms.shapes),
        )
    return ms


PAINTERA_UNIT = "nm"
"""Paintera's world unit: its scale bar measures ``resolution`` in nanometres
(``ScaleBarOverlayConfig.baseUnit`` = NANO(METRE)); a group says otherwise with ``unit``."""
PAINTERA_UNIT_KEY = "unit"
"""Paintera's unit attribute (``N5Helpers.UNIT_KEY``): written on each ``data/sN`` (also read
on ``data`` and the group). Its ``"pixel"`` is the writer's placeholder when no unit is
known (``N5PainteraLabelMultiscaleGroup``: ``child.unit() ?: "pixel"``), not a unit."""
_PLACEHOLDER_UNITS = frozenset({"", "pixel", "pixels", "px"})


def paintera_unit(*attrs: Attrs) -> str:
    """The unit of a Paintera group's ``resolution``: the first ``unit`` among ``attrs`` (level
    0, ``data``, the group) that names one, else nanometres (:data:`PAINTERA_UNIT`)."""
    for a in attrs:
        unit = a.get(PAINTERA_UNIT_KEY)
        if isinstance(unit, str) and unit.strip().lower() not in _PLACEHOLDER_UNITS:
            return unit.strip()
    return PAINTERA_UNIT


def positive_resolution(attrs: Attrs) -> tuple[Attrs, str | None]:
    """``attrs`` with a ``resolution`` entry that is 0 or negative replaced by 1 (napari refuses
    a scale of 0; a negative one would mirror the data), and the one-line notice saying so."""
    res = as_floats(attrs.get("resolution"))
    if res is None or all(r > 0 for r in res):
        return attrs, None
    fixed = [r if r > 0 else 1.0 for r in res]
    bad = ", ".join(
        ax
        for ax, r in zip(
            ("x", "y", "z", *(f"axis {i}" for i in range(3, len(res)))), res, strict=False
        )
        if r <= 0
    )
    note = f"resolution {[float(r) for r in res]} is not positive on {bad}; 1 used there"
    return {**attrs, "resolution": fixed}, note


def paintera_pyramid(
    group_attrs: Attrs,
    data_attrs: Attrs,
    data_arrays: Mapping[str, ArrayInfo],
    inherited: Attrs | None = None,
) -> Multiscale | None:
    """A Paintera group (``painteraData``): its ``data/s0, s1, ...`` pyramid, with the group's
    ``painteraData`` (the layer type) beside ``data``'s attributes. ``inherited``: the
    group's ancestors' (its own inheritable keys are added). Spatial axes without a unit
    are in :func:`paintera_unit`; a ``resolution`` that is not positive falls back to 1
    (:func:`positive_resolution`, noted in :attr:`Multiscale.notes`)."""
    paintera = group_attrs.get("painteraData")
    if not isinstance(paintera, Mapping):
        return None
    merged, note = positive_resolution({**inheritable(inherited), **inheritable(group_attrs)})
    notes = [note] if note else []
    data, note = positive_resolution(data_attrs)
    notes += [note] if note and note not in notes else []
    arrays = dict(data_arrays)
    for name, info in data_arrays.items():
        fixed, note = positive_resolution(info.attrs)
        if note:
            arrays[name] = info._replace(attrs=fixed)
            notes += [] if note in notes else [note]
    ms = n5viewer_pyramid(data, arrays, merged)
    if ms is None:
        return None
    level0 = data_arrays[ms.paths[0]].attrs if ms.paths[0] in data_arrays else {}
    unit = paintera_unit(level0, data_attrs, group_attrs)
    spatial = min(ms.ndim, 3)
    units = tuple(unit if u is None and i < spatial else u for i, u in enumerate(ms.units))
    return replace(
        ms,
        paths=tuple(f"data/{p}" for p in ms.paths),
        units=units,
        attrs={**data_attrs, "painteraData": dict(paintera)},
        notes=(*ms.notes, *notes),
    )


class BdvSetup(NamedTuple):
    """What a BigDataViewer XML says about one setup (sizes in x, y, z order)."""

    name: str | None
    voxel_size: tuple[float, ...] | None
    unit: str | None
    problem: str | None = None
    """What was wrong with the XML's voxel size (a size of 0, negative or NaN: 1 used)."""


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
        problem = None
        if voxel and not all(math.isfinite(v) and v > 0 for v in voxel):
            problem = f"setup{setup_id}: the XML's voxel size '{(size or '').strip()}' is not positive and finite; 1 used for those axes"
            voxel = tuple(v if math.isfinite(v) and v > 0 else 1.0 for v in voxel)
        unit = (vs.findtext("voxelSize/unit") or "").strip() or None
        setups[setup_id] = BdvSetup(vs.findtext("name"), voxel, unit, problem)
    return (n5.strip() if n5 else None), setups


def with_bdv_setup(ms: Multiscale, setup: BdvSetup) -> Multiscale:
    """A BigDataViewer pyramid calibrated with its XML setup's voxel size and unit."""
    if not setup.voxel_size:
        return ms
    n = min(len(setup.voxel_size), 3, ms.ndim)
    scale = tuple(setup.voxel_size[:n]) + ms.scale[n:]
    units = (setup.unit,) * n + ms.units[n:]
    translate = (0.0,) * n + ms.translate[
        n:
    ]  # BigDataViewer puts full-resolution pixel centres at 0
    return replace(ms, scale=scale, units=units, translate=translate, convention="bdv-xml")


def labels_name(name: str) -> bool:
    """True when the last component of ``name`` IS a labels name: its last word (split on
    non-alphanumerics and camelCase, trailing numbers dropped) is one of
    :data:`~napari_n5zarr.spatial.model.LABEL_WORDS`. ``labels``, ``raw_labels``,
    ``neuronLabels``, ``seg``, ``segmentation2`` are; ``unlabeled_brain``, ``Segura_lab_em``,
    ``presegmentation_raw``, ``labels_raw`` are not, nor any container name (``labels.n5``,
    ``seg.zarr``, ``.zip``, ``.xml``)."""
    last = name.rstrip("/").rsplit("/", 1)[-1] if name else ""
    if not last or last.lower().endswith(CONTAINER_SUFFIXES):
        return False
    words = [w.lower() for w in _WORD.findall(last)]
    while words and words[-1].isdigit():
        words.pop()
    return bool(words) and words[-1] in LABEL_WORDS


def is_labels(name: str, attrs: Attrs, dtype: str) -> bool:
    """Integer data that is labels: by metadata first (OME-NGFF ``image-label``, also under
    ``"ome"``, which this package's export writes for labels; Paintera
    ``painteraData.type``; ``isLabelMultiset``), else by a name that is a labels name
    (:func:`labels_name`). Float data is never labels."""
    try:
        if np.dtype(dtype).kind not in "iu":
            return False
    except TypeError:
        return False
    ome = attrs.get("ome")
    if "image-label" in attrs or (isinstance(ome, Mapping) and "image-label" in ome):
        return True
    paintera = attrs.get("painteraData")
    if isinstance(paintera, Mapping) and paintera.get("type") in ("label", "raw", "channel"):
        return paintera.get("type") == "label"
    if attrs.get("isLabelMultiset") is True:
        return True
    return labels_name(name)
