"""Images as napari layer data: the mapping half of the reader.

The read wing (:func:`napari_n5zarr.read.images.open_images`) finds the pyramids, builds
their lazy levels and says what it could not read; this module maps each
:class:`~napari_n5zarr.read.images.Image` to a ``(data, kwargs, layer_type)`` tuple (scale,
translate, units in napari/pint names, axis labels, channels and colours, labels editable or
read-only) and the rest to notifications. Used by the npe2 reader
(:mod:`napari_n5zarr._napari.reader`) and the N5 browser.
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr._napari.notices import (
    notify_napari,
    plain_name,
    refused_notice,
)
from napari_n5zarr.read.images import (
    MAX_CHILDREN,
    Image,
    Images,
    build_image,
    images_of,
    import_store_chain,
    open_images,
)
from napari_n5zarr.spatial import Multiscale
from napari_n5zarr.storage.location import display_name

if TYPE_CHECKING:
    import napari
    import zarr
    from npe2.types import LayerData

    from napari_n5zarr.read.pyramid_walk import Where

__all__ = [
    "MAX_CHILDREN",
    "MAX_LAYERS",
    "add_to_viewer",
    "layer_data",
    "layers_from_node",
    "location_layers",
    "notify_napari",
    "plain_name",
]

Notify = Callable[[str, str], None]
TooMany = Callable[[str, str, Notify], list["LayerData"]]
"""``(location, what, notify) -> layers`` when a container holds too much to show."""

MAX_LAYERS = 32
"""Above this many pyramids, a dropped container opens nothing but the N5 browser."""

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
    problems go to ``notify``, never raised."""
    return images_layers(open_in_napari(path, max_layers, notify), notify, too_many=too_many)


def open_in_napari(path: str | os.PathLike[str], max_layers: int | None, notify: Notify) -> Images:
    """:func:`~napari_n5zarr.read.images.open_images` in napari's process: the first open
    files its imports with the old objects (no full collection of napari's heap after it;
    see :func:`~napari_n5zarr.read.images.import_store_chain`)."""
    import_store_chain(as_old_objects=True)
    return open_images(path, limit=max_layers, report=block_reporter(notify))


def layers_from_node(
    where: Where,
    *,
    name: str,
    source: str = "",
    notify: Notify | None = None,
    max_layers: int | None = None,
    too_many: TooMany = say_too_many,
) -> list[LayerData]:
    """Layer data tuples for every pyramid under a node of an open tree (BigDataViewer setups
    with the voxel size of the tree's XML). Above ``max_layers`` pyramids: no layers (see
    :func:`read_path`)."""
    notify = notify_napari if notify is None else notify
    found = images_of(
        where, name=name, source=source, limit=max_layers, report=block_reporter(notify)
    )
    return images_layers(found, notify, too_many=too_many)


def images_layers(
    found: Images, notify: Notify, *, too_many: TooMany = say_too_many
) -> list[LayerData]:
    """Layer data tuples for what the read wing found; the rest becomes notices."""
    if found.error is not None:
        notify("error", f"napari-n5zarr: {found.error}")
        return []
    if found.too_many is not None:
        return too_many(found.location or found.name, found.too_many, notify)
    for hidden in found.hidden:
        notify("warning", f"napari-n5zarr: {hidden}; not shown")
    layers: list[Any] = []  # full (data, kwargs, layer_type) tuples with mutable kwargs
    problems = list(found.problems)
    for image in found.images:
        try:
            layers.extend(image_layers(image, source=found.location))
        except Exception as exc:  # boundary: one image's problem, never its siblings'
            problems.append(spatial.describe_error(image.multiscale.name, exc))
    layers.sort(key=lambda layer: layer[2] == "labels")  # labels drawn over images
    _color_channels(layers)
    for problem in problems:
        notify("warning", f"napari-n5zarr: skipped {problem}")
    for image in found.images:  # fallbacks taken (a resolution of 0 shown at 1): one line each
        for note in image.multiscale.notes:
            notify("warning", f"napari-n5zarr: {image.multiscale.name or found.name}: {note}")
    if not (found.images or found.hidden or problems):
        notify("warning", f"napari-n5zarr: no N5 dataset found in {found.location or found.name}")
    return layers


def block_reporter(notify: Notify) -> Callable[[str], None]:
    """Unreadable blocks are notified once each (from whatever thread reads them)."""
    seen: set[str] = set()

    def report(message: str) -> None:
        if message not in seen:
            seen.add(message)
            notify("warning", f"napari-n5zarr: {message}")

    return report


def layer_data(
    node: Where | zarr.Array | zarr.Group,
    ms: Multiscale,
    *,
    source: str = "",
    report: Callable[[str], None] | None = None,
) -> LayerData:
    """One (data, kwargs, layer_type) tuple for ``ms`` under ``node``; lazy levels in
    napari order (..., z, y, x). Reads metadata and a sample of the coarsest level."""
    return image_layers(build_image(node, ms, report), source=source)[-1]


def image_layers(image: Image, *, source: str) -> list[Any]:
    """The layer tuple of ``image`` (Paintera segments: after a hidden fragments layer)."""
    ms, levels = image.multiscale, image.levels
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
    n5_axes = list(range(ms.ndim))
    if ms.is_labels:
        _spatial_kwargs(kwargs, ms, n5_axes)
        labels = _labels(levels, kwargs, ms, source)
        return [*_fragments_layer(image, kwargs), labels]  # kwargs as _labels left them
    kwargs["rgb"] = image.rgb
    if image.contrast_limits is not None:
        kwargs["contrast_limits"] = image.contrast_limits
    if image.rgb:  # the colour axis is N5 axis 0 (napari's last), not a layer dimension
        _spatial_kwargs(kwargs, ms, range(1, ms.ndim))
    elif image.channel_axis is not None:
        channel = ms.ndim - 1 - image.channel_axis
        kwargs["channel_axis"] = image.channel_axis
        _spatial_kwargs(kwargs, ms, [a for a in n5_axes if a != channel])
        kwargs["name"] = [f"{ms.name} [{i}]" for i in range(levels[-1].shape[image.channel_axis])]
        # napari splits channels by indexing each level (`level[..., i, ...]`): on a reader
        # that would read the channel whole; a dask array keeps the split lazy.
        levels = [_as_dask(level) for level in levels]
    else:
        _spatial_kwargs(kwargs, ms, n5_axes)
    return [(levels if len(levels) > 1 else levels[0], kwargs, "image")]


def _fragments_layer(image: Image, shown: dict[str, Any]) -> list[Any]:
    """Paintera labels shown as segments get their raw fragments as a second, hidden labels
    layer (``NAME (raw fragments)``): a person switches by ticking one visible, the other not."""
    if not image.fragments:
        return []
    kwargs = {
        **shown,
        "name": f"{image.multiscale.name} (raw fragments)",
        "visible": False,
        "metadata": dict(shown["metadata"]),
    }
    split = [_as_dask(level) for level in image.fragments]
    return [(split if len(split) > 1 else split[0], kwargs, "labels")]


def _labels(levels: list[Any], kwargs: dict[str, Any], ms: Multiscale, source: str) -> LayerData:
    """Labels: local N5 and Zarr v3 / OME-Zarr integer labels open editable (level 0 alone,
    single-scale: napari cannot paint a multiscale Labels layer); anything else read-only as
    before (dask levels), the reason kept in the metadata for the first paint attempt to tell."""
    from napari_n5zarr.write.edit.editable import ReadOnlyLevel, open_editable, pyramid_root

    meta = kwargs["metadata"]["napari_n5zarr"]
    arrays = [getattr(level, "array", None) for level in levels[: len(ms.paths)]]
    found, reason = (
        (None, ms.unreadable or "label multisets")
        if ms.label_multiset
        else pyramid_root(source, ms.paths, arrays)
    )
    if found is not None and not ms.time_paths:
        try:
            data = open_editable(found[0], base=levels[0], levels=found[1])
        except Exception as exc:
            reason = f"{exc}"
        else:
            meta["editable"] = str(found[0])
            kwargs["multiscale"] = False
            _report_changes(data)
            return (data, kwargs, "labels")
    meta["read_only"] = reason or (
        "a time series is not edited in place" if ms.time_paths else "it cannot be edited in place"
    )
    split = [_as_dask(level) for level in levels]
    if len(split) == 1:
        return (
            ReadOnlyLevel(split[0], meta["read_only"], refused_notice(ms.name)),
            kwargs,
            "labels",
        )
    return (split, kwargs, "labels")


def _report_changes(level: Any) -> None:
    """Every write and save of ``level`` reaches napari: the viewers showing it get the save
    shortcut and close guard, the layer its unsaved marker (:func:`~napari_n5zarr._napari.proofread.changed`)."""
    ref = weakref.ref(level)

    def changed() -> None:
        from napari_n5zarr._napari.proofread import changed

        changed(ref)

    level.subscribe(changed)


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
    images = [
        layer
        for layer in layers
        if len(layer) == 3 and layer[2] == "image" and isinstance(layer[1]["name"], str)
    ]
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
    if any(kind == "labels" for _, _, kind in (t for t in layer_data if len(t) == 3)):
        from napari_n5zarr._napari.proofread import watch

        watch(viewer)  # the save shortcut, the close guard, read-only labels that say why
    return added
