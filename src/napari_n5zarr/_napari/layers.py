"""A node's pyramids as napari layer data: the mapping half of the reader.

:func:`napari_n5zarr.read.multiscale.find_multiscales` and
:func:`~napari_n5zarr.read.multiscale.levels_for` (the library) find the pyramids and build
their lazy levels; this module maps each to a ``(data, kwargs, layer_type)`` tuple: scale,
translate, units (napari/pint names), axis labels, channels and colours, contrast limits.
Used by the npe2 reader (:mod:`napari_n5zarr._napari.reader`) and the N5 browser.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from napari_n5zarr import spatial
from napari_n5zarr.read.levels import contrast_limits
from napari_n5zarr.read.locate import Source, resolve
from napari_n5zarr.read.multiscale import (
    Found,
    find_multiscales,
    is_rgb,
    levels_for,
    storage_blocks,
)
from napari_n5zarr.spatial import Multiscale
from napari_n5zarr.storage.location import display_name

if TYPE_CHECKING:
    import napari
    import zarr
    from npe2.types import LayerData

    from napari_n5zarr.read.local import LocalNode

Notify = Callable[[str, str], None]
TooMany = Callable[[str, str, Notify], list["LayerData"]]
"""``(location, what, notify) -> layers`` when a container holds too much to show."""

MAX_LAYERS = 32
"""Above this many pyramids, a dropped container opens nothing but the N5 browser."""
MAX_CHILDREN = 256
"""Above this many entries at a container's top, it is not walked (one listing decides)."""

_CHANNEL_NAME = re.compile(r"(^|/)(c|ch|channel|setup)\d+$")
_COLORMAPS = ("green", "magenta", "cyan", "yellow", "red", "blue")


def too_many_message(location: str, what: str, browser_open: bool) -> str:
    """The notice for a container that holds too much to open as layers."""
    where = (
        "the N5 browser is open on it: pick what to show"
        if browser_open
        else f"open it with the N5 browser (Plugins > N5 browser) or `n5zarr view {location}`"
    )
    return f"napari-n5zarr: {display_name(location)} holds {what}; no layers were added: {where}"


def say_too_many(location: str, what: str, notify: Notify) -> list[LayerData]:
    """Default for too much to show: no layers, one notice."""
    notify("warning", too_many_message(location, what, browser_open=False))
    return []


def location_layers(
    path: str | os.PathLike[str],
    notify: Notify,
    *,
    max_layers: int | None,
    too_many: TooMany = say_too_many,
) -> list[LayerData]:
    """Layers for one path or URL (see :func:`napari_n5zarr._napari.reader.read_path`);
    problems go to ``notify``, never raised. A local N5 folder is read without zarr
    where it can be (:func:`_local_layers`), else opened with :func:`napari_n5zarr.open`."""
    source = resolve(path)
    target = source.target
    local = _local_layers(source, notify, max_layers=max_layers, too_many=too_many)
    if local is not None:
        return local
    try:
        import napari_n5zarr

        node = napari_n5zarr.open(target)
    except Exception as exc:  # boundary: any backend's failure becomes one notification
        notify("error", f"napari-n5zarr: cannot open {target}: {missing_extra_message(exc)}")
        return []
    from napari_n5zarr.access import read_once

    with read_once():  # the size check, detection and the layers share listings and levels
        if max_layers is not None and _too_many_children(node):
            return too_many(target, f"more than {MAX_CHILDREN} entries", notify)
        return layers_from_node(
            node,
            name=source.name,
            source=target,
            bdv_setups=source.bdv_setups,
            notify=notify,
            max_layers=max_layers,
            too_many=too_many,
        )


def _local_layers(source: Source, notify: Notify, *, max_layers: int | None, too_many: TooMany) -> list[LayerData] | None:
    """The layers of a local N5 folder read without importing zarr
    (:mod:`napari_n5zarr.read.local`): the same pyramids, layer tuples and notices as
    through zarr. None where zarr must open it: not a local N5 folder, a BigDataViewer
    XML's voxel sizes, time points, or any problem (zarr's path then says what it is)."""
    from napari_n5zarr.read.local import NeedsZarr, open_local

    if source.bdv_setups is not None:
        return None
    node = open_local(source.target)
    if node is None:
        return None
    try:
        if max_layers is not None and not node.is_array and len(node.entries()) > MAX_CHILDREN:
            return too_many(source.target, f"more than {MAX_CHILDREN} entries", notify)
        found = find_multiscales(node, source.name, limit=max_layers)
    except (NeedsZarr, Exception):  # noqa: BLE001 (anything unusual: the zarr path reads it and says what is wrong)
        return None
    if found.problems or not (found.multiscales or found.too_many) or any(ms.time_paths for ms in found.multiscales):
        return None
    if found.too_many:
        return too_many(source.target, f"more than {max_layers} images", notify)
    held = _HeldNotices(notify)
    layers, problems = _build_layers(node, _shown(found, held), source=source.target, report=_block_reporter(held))
    if problems:  # an image could not be shown: zarr's path reads it all again and says why
        return None
    held.release()
    return layers


class _HeldNotices:
    """A :data:`Notify` that holds notices (unreadable blocks met while building the
    layers) until :meth:`release`, then passes everything through: a zarr-free read
    that is given up is dropped unheard."""

    def __init__(self, notify: Notify) -> None:
        self.notify = notify
        self.held: list[tuple[str, str]] | None = []
        self._lock = threading.Lock()

    def __call__(self, level: str, message: str) -> None:
        with self._lock:
            if self.held is not None:
                self.held.append((level, message))
                return
        self.notify(level, message)

    def release(self) -> None:
        with self._lock:
            held, self.held = self.held or [], None
        for level, message in held:
            self.notify(level, message)


def missing_extra_message(exc: BaseException) -> str:
    """The error's text, or which extra to install when a remote backend is missing."""
    from napari_n5zarr.extras import describe

    return describe(exc)


def _too_many_children(node: zarr.Array | zarr.Group) -> bool:
    import zarr

    if not isinstance(node, zarr.Group):
        return False
    try:
        from napari_n5zarr.access import child_names

        return len(child_names(node)) > MAX_CHILDREN
    except Exception:  # cannot list (plain HTTP): detection probes what it can
        return False


def layers_from_node(
    node: zarr.Array | zarr.Group,
    *,
    name: str,
    source: str = "",
    inherited: dict[str, Any] | None = None,
    bdv_setups: dict[int, spatial.BdvSetup] | None = None,
    notify: Notify | None = None,
    max_layers: int | None = None,
    too_many: TooMany = say_too_many,
) -> list[LayerData]:
    """Layer data tuples for every :class:`Multiscale` under ``node``; BigDataViewer
    setups take their voxel size from ``bdv_setups`` (the dataset's XML). Ancestors'
    calibration is inherited through the node's store (any backend). Above
    ``max_layers`` pyramids: no layers (see :func:`read_path`)."""
    notify = notify_napari if notify is None else notify
    found = find_multiscales(node, name, inherited=inherited, bdv_setups=bdv_setups, limit=max_layers)
    return _layers_of(node, found, name=name, source=source, notify=notify, max_layers=max_layers, too_many=too_many)


def _layers_of(
    node: zarr.Array | zarr.Group | LocalNode,
    found: Found,
    *,
    name: str,
    source: str,
    notify: Notify,
    max_layers: int | None,
    too_many: TooMany,
) -> list[LayerData]:
    """Layer data tuples for what :func:`find_multiscales` found under ``node``; what
    could not be shown is notified."""
    if found.too_many:
        return too_many(source or name, f"more than {max_layers} images", notify)
    layers, problems = _build_layers(node, _shown(found, notify), source=source, report=_block_reporter(notify))
    for problem in problems:
        notify("warning", f"napari-n5zarr: skipped {problem}")
    if not found.multiscales and not problems:
        notify("warning", f"napari-n5zarr: no N5 dataset found in {source or name}")
    return layers


def _shown(found: Found, notify: Notify) -> Found:
    """``found`` without the pyramids whose blocks cannot be decoded by design (a label
    multiset would show as zeros): one notice each, saying what it is and that it is not shown."""
    hidden = [ms for ms in found.multiscales if ms.unreadable]
    for ms in hidden:
        notify("warning", f"napari-n5zarr: {ms.name or '/'}: {ms.unreadable}; not shown")
    return replace(found, multiscales=[ms for ms in found.multiscales if not ms.unreadable]) if hidden else found


def _build_layers(
    node: zarr.Array | zarr.Group | LocalNode, found: Found, *, source: str, report: Callable[[str], None]
) -> tuple[list[LayerData], list[str]]:
    """(layer data tuples, ``"path: reason"`` of every image that could not be shown)."""
    problems = list(found.problems)
    layers: list[Any] = []  # full (data, kwargs, layer_type) tuples with mutable kwargs
    for ms in found.multiscales:
        try:
            layer = layer_data(node, ms, source=source, report=report)
            layers.extend(_fragments_beside(node, ms, layer, report))  # below: the segments are on top, selected
            layers.append(layer)
        except Exception as exc:  # boundary: one image's problem, never its siblings'
            problems.append(spatial.describe_error(ms.name, exc))
    layers.sort(key=lambda layer: layer[2] == "labels")  # labels drawn over images
    _color_channels(layers)
    return layers, problems


def _block_reporter(notify: Notify) -> Callable[[str], None]:
    """Unreadable blocks are notified once each (from whatever thread reads them)."""
    seen: set[str] = set()

    def report(message: str) -> None:
        if message not in seen:
            seen.add(message)
            notify("warning", f"napari-n5zarr: {message}")

    return report


def layer_data(
    node: zarr.Array | zarr.Group | LocalNode, ms: Multiscale, *, source: str = "", report: Callable[[str], None] | None = None
) -> LayerData:
    """One (data, kwargs, layer_type) tuple; lazy levels in napari order (..., z, y, x).

    Building it reads metadata and a bounded sample of the coarsest level (contrast)."""
    if ms.ndim < 2:
        raise ValueError(f"{ms.ndim}-D data cannot be shown as an image")
    if ms.unreadable:
        raise ValueError(ms.unreadable)
    levels = levels_for(node, ms, report)
    n5_axes = list(range(ms.ndim))
    kwargs: dict[str, Any] = {
        "name": ms.name,
        "multiscale": len(levels) > 1,
        "metadata": {
            "napari_n5zarr": {
                "source": source,
                "paths": list(ms.paths),
                "convention": ms.convention,
                "axes_n5_order": list(ms.axes),
                "attributes": dict(ms.attrs),
            }
        },
    }
    data: Any = levels if len(levels) > 1 else levels[0]
    if ms.is_labels:
        _spatial_kwargs(kwargs, ms, n5_axes)
        return _labels(levels, kwargs, ms, source)
    if is_rgb(ms):
        kwargs["rgb"] = True  # the colour axis is N5 axis 0 (napari's last), not a layer dimension
        _spatial_kwargs(kwargs, ms, range(1, ms.ndim))
        if ms.dtype == "uint8":
            kwargs["contrast_limits"] = (0, 255)
        return (data, kwargs, "image")
    kwargs["rgb"] = False
    channel = ms.channel_axis
    if channel is not None and 1 < ms.shapes[0][channel] <= 16 and ms.ndim > 2:
        napari_channel = ms.ndim - 1 - channel
        kwargs["channel_axis"] = napari_channel
        _spatial_kwargs(kwargs, ms, [a for a in n5_axes if a != channel])
        coarsest = levels[-1]
        per_channel = [b for i, b in enumerate(storage_blocks(node, ms)) if i != napari_channel]
        kwargs["contrast_limits"] = [
            contrast_limits(coarsest[(slice(None),) * napari_channel + (i,)], per_channel)
            for i in range(coarsest.shape[napari_channel])
        ]
        kwargs["name"] = [f"{ms.name} [{i}]" for i in range(coarsest.shape[napari_channel])]
        # napari splits channels by indexing each level (`level[..., i, ...]`): on a reader
        # that would read the channel whole; a dask array keeps the split lazy.
        split = [_as_dask(level) for level in levels]
        return (split if len(split) > 1 else split[0], kwargs, "image")
    _spatial_kwargs(kwargs, ms, n5_axes)
    coarsest = levels[-1]  # readers know their storage blocks; dask levels (stacked time points) ask
    blocks = getattr(coarsest, "storage_blocks", None) or storage_blocks(node, ms)
    kwargs["contrast_limits"] = contrast_limits(coarsest, blocks)
    return (data, kwargs, "image")


def _labels(levels: list[Any], kwargs: dict[str, Any], ms: Multiscale, source: str) -> LayerData:
    """Labels: local N5 integer labels open editable (level 0 alone, single-scale: napari
    cannot paint a multiscale Labels layer); anything else read-only as before (dask
    levels), the reason kept in the metadata for the first paint attempt to tell."""
    from napari_n5zarr.write.editable import ReadOnlyLevel, open_editable, pyramid_root

    meta = kwargs["metadata"]["napari_n5zarr"]
    root, reason = (None, ms.unreadable or "label multisets") if ms.label_multiset else pyramid_root(source, list(ms.paths))
    if root is not None and not ms.time_paths:
        try:
            data = open_editable(root, base=levels[0])
        except Exception as exc:  # noqa: BLE001 (a busy lock, a failed recovery: read-only, saying why)
            reason = f"{exc}"
        else:
            meta["editable"] = str(root)
            kwargs["multiscale"] = False
            return (data, kwargs, "labels")
    meta["read_only"] = reason or "it cannot be edited in place"
    split = [_as_dask(level) for level in levels]
    if len(split) == 1:
        return (ReadOnlyLevel(split[0], meta["read_only"], _refused_notice(ms.name)), kwargs, "labels")
    return (split, kwargs, "labels")


def refused_message(name: str, reason: str) -> str:
    """The one notice of a first paint on read-only labels."""
    return (
        f"napari-n5zarr: {name or 'these labels'} are read-only: {reason}. To edit them, make an editable "
        "copy with `n5zarr convert SOURCE COPY.n5` and open the copy"
    )


def _refused_notice(name: str) -> Callable[[str], None]:
    return lambda reason: notify_napari("warning", refused_message(name, reason))


def _fragments_beside(
    node: zarr.Array | zarr.Group | LocalNode, ms: Multiscale, segments: LayerData, report: Callable[[str], None] | None
) -> list[LayerData]:
    """Paintera labels shown as segments get their raw fragments as a second, hidden labels
    layer (``NAME (raw fragments)``): a person switches by ticking one visible, the other not."""
    levels = levels_for(node, ms, report) if ms.label_multiset else []
    if not any(getattr(level, "assignment", None) is not None for level in levels):
        return []
    for level in levels:
        level.assignment = None  # these levels are this layer's own (levels_for builds new ones)
    shown = dict(cast("tuple[Any, dict[str, Any], str]", segments)[1])  # layer_data returns all three
    kwargs = {**shown, "name": f"{ms.name} (raw fragments)", "visible": False, "metadata": dict(shown["metadata"])}
    split = [_as_dask(level) for level in levels]
    return [(split if len(split) > 1 else split[0], kwargs, "labels")]


def _as_dask(level: Any) -> Any:
    """``level`` as a dask array (readers convert themselves; dask arrays stay)."""
    to_dask = getattr(level, "to_dask", None)
    return to_dask() if to_dask is not None else level


def _spatial_kwargs(
    kwargs: dict[str, Any], ms: Multiscale | spatial.Calibration, n5_axes: Sequence[int]
) -> None:
    """scale/translate/units/axis_labels for the given N5 axes, in napari order."""
    order = list(n5_axes)[::-1]
    kwargs["scale"] = tuple(ms.scale[i] for i in order)
    kwargs["translate"] = tuple(ms.translate[i] for i in order)
    units = tuple(napari_unit(ms.units[i]) for i in order)
    # napari splits channel_axis kwargs per channel when every entry is None-or-iterable
    kwargs["units"] = tuple(u or "pixel" for u in units) if "channel_axis" in kwargs else units
    kwargs["axis_labels"] = tuple(ms.axes[i] for i in order)


def napari_unit(unit: str | None) -> str | None:
    """A unit napari (pint) understands, else None (napari shows "pixel")."""
    name = spatial.normalize_unit(unit)
    if name is None:
        return None
    try:
        import pint

        pint.get_application_registry().parse_expression(name)
    except ImportError:
        return name
    except Exception:  # pint raises many kinds for a unit it does not know
        return None
    return name


def _color_channels(layers: list[Any]) -> None:
    """Several channel-like image layers (N5 Viewer ``cN``, BDV setups): Fiji-like composite."""
    images = [layer for layer in layers if len(layer) == 3 and layer[2] == "image" and isinstance(layer[1]["name"], str)]
    if len(images) < 2 or not all(_CHANNEL_NAME.search(layer[1]["name"]) for layer in images):
        return
    for i, (_, kwargs, _) in enumerate(images):
        kwargs.setdefault("colormap", _COLORMAPS[i % len(_COLORMAPS)])
        kwargs.setdefault("blending", "additive")


def add_to_viewer(viewer: napari.Viewer, layer_data: Sequence[LayerData]) -> list[Any]:
    """Add layer data tuples to ``viewer``; the new layers (a channel axis gives several)."""
    added: list[Any] = []
    for data, kwargs, kind in (t for t in layer_data if len(t) == 3):
        new = getattr(viewer, f"add_{kind}")(data, **kwargs)
        added.extend(new if isinstance(new, list) else [new])
    return added


def notify_napari(level: str, message: str) -> None:
    """A napari notification (falls back to a warning outside napari)."""
    try:
        from napari.utils import notifications
    except ImportError:
        import warnings

        warnings.warn(message, spatial.SkippedNodeWarning, stacklevel=3)
        return
    show = {"error": notifications.show_error, "info": notifications.show_info}.get(level, notifications.show_warning)
    show(message)
