"""The metadata conventions of a group, as a table: each one an entry with ``matches`` and
``build`` (in the spirit of ome-zarr-py's ``Spec.matches``), tried in a documented order.

An entry looks at a :class:`~napari_n5zarr.spatial.model.Listing` (a group's attributes and
its children's facts, plain data read by the one driver of this table,
:mod:`napari_n5zarr.read.group_pyramids`):

* ``matches(group)``: does the convention apply? Cheap, on what the walk already read;
* ``reads(group)``: more paths to read first (a referenced dataset, a Paintera ``data`` group,
  BigDataViewer setups and time points); the walk reads them into the listing and asks again
  until nothing new is asked;
* ``build(group, inherited)``: the pyramids found (:class:`Recognised`), none if the data does
  not hold up after all.

Order: a group is at most one pyramid, the first of :data:`PYRAMIDS` that builds one
(OME-NGFF, COSEM, N5 Viewer / neuroglancer / tensorstore, Paintera); then every entry of
:data:`BIGDATAVIEWER` adds its own (a setup opened directly, the setups of a BigDataViewer
root). Children no entry claimed are walked: an array is a single-level pyramid
(:func:`~napari_n5zarr.spatial.pyramids.dataset_pyramid`, calibrated by
:func:`~napari_n5zarr.spatial.calibration.calibrate`), a group is looked at the same way.
:func:`finish` names what was found and decides colour and labels.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from napari_n5zarr.spatial.model import (
    SETUP,
    TIMEPOINT,
    Attrs,
    Listing,
    Multiscale,
    default_axes,
    inheritable,
    join_path,
    natural_key,
)
from napari_n5zarr.spatial.pyramids import (
    bdv_setup,
    cosem_pyramid,
    is_labels,
    level_names,
    n5viewer_pyramid,
    ngff_multiscale,
    ngff_pyramid,
    paintera_pyramid,
)

PAINTERA_BOOKKEEPING = ("unique-labels", "label-to-block-mapping", "fragment-segment-assignment")
"""What a Paintera label group keeps beside its ``data`` pyramid: lookup tables, not images."""

NAME_KEY = "name"
"""Attribute of a pyramid group: the name it was saved under (napari's layer name). It names
the pyramid opened at that group, in place of the container's folder name."""

COLOUR_AXES = ("rgb", "rgba")
"""Names of a colour axis (N5 axis 0, napari's last): written by this package's writer;
given by :func:`finish` to uncalibrated C-order RGB(A) data."""


class Recognised(NamedTuple):
    """One pyramid a convention found in a group."""

    at: str
    """Where it sits: ``""`` the group itself, else the child group holding it (a setup)."""
    pyramid: Multiscale
    """Level paths relative to ``at``; named by :func:`finish`."""
    claims: tuple[str, ...]
    """The group's children it is made of: the walk does not look at them again."""


@dataclass(frozen=True)
class Convention:
    """One metadata convention: when it applies and what it makes of a group."""

    name: str
    matches: Callable[[Listing], bool]
    build: Callable[[Listing, Attrs], list[Recognised]]
    """``build(group, inherited)``: ``inherited`` holds the group's ancestors' inheritable keys."""
    reads: Callable[[Listing], tuple[str, ...]] = lambda group: ()
    """Paths below the group the walk must read (array facts, or a group's attributes and
    children) before ``build``; asked again after each round."""


def referenced_paths(attrs: Attrs) -> list[str]:
    """Dataset paths named by OME-NGFF / COSEM ``multiscales`` metadata."""
    ome = attrs.get("ome")
    root = ome if isinstance(ome, Mapping) and "multiscales" in ome else attrs
    ms = root.get("multiscales")
    if not isinstance(ms, list) or not ms or not isinstance(ms[0], Mapping):
        return []
    ds = ms[0].get("datasets")
    return (
        [d["path"] for d in ds if isinstance(d, Mapping) and isinstance(d.get("path"), str)]
        if isinstance(ds, list)
        else []
    )


def paintera_bookkeeping(group: Listing) -> tuple[str, ...]:
    """The bookkeeping children of a Paintera group (``painteraData``): never layers, also
    when the group has no ``data`` pyramid."""
    if "painteraData" not in group.attrs:
        return ()
    return tuple(k for k in PAINTERA_BOOKKEEPING if k in group.children.get("", ()))


def _claims(group: Listing, ms: Multiscale) -> tuple[str, ...]:
    """A group's pyramid claims the children its levels lie in, and Paintera's bookkeeping."""
    used = dict.fromkeys(p.split("/", 1)[0] for p in ms.paths)
    used.update(dict.fromkeys(paintera_bookkeeping(group)))
    return tuple(used)


def _one(group: Listing, ms: Multiscale | None) -> list[Recognised]:
    return [Recognised("", ms, _claims(group, ms))] if ms is not None else []


def _unread_references(group: Listing) -> tuple[str, ...]:
    return tuple(
        p for p in referenced_paths(group.attrs) if p not in group.arrays and not group.listed(p)
    )


NGFF = Convention(
    "ome-ngff",
    matches=lambda g: ngff_multiscale(g.attrs) is not None,
    reads=_unread_references,
    build=lambda g, inherited: _one(g, ngff_pyramid(g.attrs, g.arrays)),
)
"""OME-NGFF 0.4 (``multiscales`` with ``coordinateTransformations``) and 0.5 (under ``"ome"``)."""

COSEM = Convention(
    "cosem",
    matches=lambda g: isinstance(g.attrs.get("multiscales"), list),
    reads=_unread_references,
    build=lambda g, inherited: _one(g, cosem_pyramid(g.attrs, g.arrays)),
)
"""COSEM / OpenOrganelle ``multiscales: [{datasets: [{path, transform}]}]``."""

N5_VIEWER = Convention(
    "n5viewer",
    matches=lambda g: bool(level_names(g.arrays_in())),
    build=lambda g, inherited: _one(g, n5viewer_pyramid(g.attrs, g.arrays_in(), inherited)),
)
"""N5 Viewer (modern and old), neuroglancer / tensorstore: datasets ``s0, s1, ...``."""


def _paintera(g: Listing, inherited: Attrs) -> list[Recognised]:
    data = g.sub("data")
    return _one(g, paintera_pyramid(g.attrs, data.attrs, data.arrays_in(), inherited))


PAINTERA = Convention(
    "paintera",
    matches=lambda g: isinstance(g.attrs.get("painteraData"), Mapping) and "data" in g.groups_in(),
    reads=lambda g: () if g.listed("data") else ("data",),
    build=_paintera,
)
"""Paintera (``painteraData``): the pyramid is ``data/s0, s1, ...``."""


def _timepoints(g: Listing, path: str = "") -> list[str]:
    return sorted((k for k in g.groups_in(path) if TIMEPOINT.match(k)), key=natural_key)


def _setups(g: Listing) -> list[str]:
    return sorted((k for k in g.groups_in() if SETUP.match(k)), key=natural_key)


def _bdv(setup: Listing, inherited: Attrs) -> Multiscale | None:
    """One setup's time points (listed) -> its pyramid."""
    timepoints = {}
    for key in _timepoints(setup):
        if setup.listed(key):
            tp = setup.sub(key)
            timepoints[key] = (tp.attrs, tp.arrays_in())
    return bdv_setup(
        setup.attrs, timepoints, {**inheritable(inherited), **inheritable(setup.attrs)}
    )


def _bdv_timepoints(g: Listing, inherited: Attrs) -> list[Recognised]:
    ms = _bdv(g, inherited)
    return [Recognised("", ms, tuple(_timepoints(g)))] if ms is not None else []


BDV_TIMEPOINTS = Convention(
    "bdv-setup",
    matches=lambda g: bool(_timepoints(g)),
    reads=lambda g: tuple(k for k in _timepoints(g) if not g.listed(k)),
    build=_bdv_timepoints,
)
"""A BigDataViewer setup opened directly: ``timepointN/sK`` (time points stacked as ``t``)."""


def _setup_reads(g: Listing) -> tuple[str, ...]:
    out: list[str] = []
    for key in _setups(g):
        if not g.listed(key):
            out.append(key)
        else:
            out += [
                join_path(key, t) for t in _timepoints(g, key) if not g.listed(join_path(key, t))
            ]
    return tuple(out)


def _bdv_setups(g: Listing, inherited: Attrs) -> list[Recognised]:
    merged = {**inheritable(inherited), **inheritable(g.attrs)}
    out = []
    for key in _setups(g):
        ms = _bdv(g.sub(key), merged) if g.listed(key) else None
        if ms is not None:
            out.append(Recognised(key, ms, (key,)))
    return out


BDV_SETUPS = Convention(
    "bdv",
    matches=lambda g: bool(_setups(g)),
    reads=_setup_reads,
    build=_bdv_setups,
)
"""A BigDataViewer root: one pyramid per ``setupN`` group."""

PYRAMIDS = (NGFF, COSEM, N5_VIEWER, PAINTERA)
"""A group is at most one pyramid: the first of these that builds one."""
BIGDATAVIEWER = (BDV_TIMEPOINTS, BDV_SETUPS)
"""Then each of these adds what it finds."""


def looks_rgb(ms: Multiscale) -> bool:
    """Uncalibrated uint8 data whose fastest N5 axis has 3 or 4 entries: an RGB(A) image
    written in C order (y, x, c) by a tool without metadata."""
    return (
        ms.convention == "none"
        and ms.ndim >= 3
        and bool(ms.shapes)
        and ms.shapes[0][0] in (3, 4)
        and ms.dtype == "uint8"
        and ms.channel_axis is None
        and not ms.time_paths
    )


def _name_colour_axis(ms: Multiscale) -> Multiscale:
    if not looks_rgb(ms):
        return ms
    axes = (COLOUR_AXES[ms.shapes[0][0] - 3], *default_axes(ms.ndim - 1))
    return replace(ms, axes=axes)


def positive_scale(ms: Multiscale) -> Multiscale:
    """``ms`` with a scale of 0 or below replaced by 1, and a note saying so (napari refuses a
    scale of 0; a negative one would silently mirror the data)."""
    bad = [i for i, s in enumerate(ms.scale) if not s > 0]
    if not bad:
        return ms
    scale = tuple(1.0 if i in bad else s for i, s in enumerate(ms.scale))
    note = f"scale {[float(s) for s in ms.scale]} is not positive on {', '.join(ms.axes[i] for i in bad)}; 1 used there"
    return replace(ms, scale=scale, notes=(*ms.notes, note))


def finish(ms: Multiscale, name: str, prefix: str) -> Multiscale:
    """``ms`` named ``name``, its paths under ``prefix``, its colour axis named, labels
    decided, a scale that is not positive replaced (:func:`positive_scale`)."""
    ms = positive_scale(_name_colour_axis(ms))
    return replace(
        ms,
        name=name,
        paths=tuple(join_path(prefix, p) for p in ms.paths),
        time_paths=tuple(tuple(join_path(prefix, p) for p in t) for t in ms.time_paths),
        is_labels=is_labels(name, ms.attrs, ms.dtype) or ms.label_multiset,
    )


def stored_name(attrs: Mapping[str, Any]) -> str | None:
    """The pyramid's own name (``NAME_KEY``), if it carries one."""
    name = attrs.get(NAME_KEY)
    return name.strip() if isinstance(name, str) and name.strip() else None
