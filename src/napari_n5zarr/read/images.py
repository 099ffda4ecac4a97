"""The read wing's one entry: a location -> the images in it, ready to show.

:func:`open_images` opens a path or URL as a tree (:mod:`napari_n5zarr.read.tree`: the
browser's and ``n5zarr tree``'s model, read through the store chain, each metadata document
once), finds every image/labels pyramid in it and builds each one's lazy levels
(and contrast limits from a bounded sample of its coarsest level). It returns plain data, an
:class:`Images`: the images, the problems (``"path: reason"``, one per node or image that
could not be read: the rest are still there), the pyramids found but hidden (label
multisets whose blocks cannot be decoded) and the too-many verdict (a container with more
than :data:`MAX_CHILDREN` entries at its top, or more than ``limit`` pyramids, gives no
images). It never raises for what is at the location: an unopenable one gives
:attr:`Images.error`.

:func:`images_of` does the same for a node of a tree already open (a node of a zip or
BigDataViewer XML, shown by the N5 browser). napari's reader maps an :class:`Images` to layer tuples;
``n5zarr info`` and ``n5zarr convert`` use the functions underneath
(:func:`~napari_n5zarr.read.multiscale.find_multiscales`,
:func:`~napari_n5zarr.read.multiscale.levels_for`).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.read.levels import contrast_limits
from napari_n5zarr.read.multiscale import find_multiscales, is_rgb, levels_for, storage_blocks
from napari_n5zarr.read.pyramid_walk import Where, place
from napari_n5zarr.read.tree import Tree, tree_of

if TYPE_CHECKING:
    import zarr

    from napari_n5zarr.spatial import Multiscale

__all__ = ["MAX_CHILDREN", "Image", "Images", "build_image", "images_of", "open_images"]

MAX_CHILDREN = 256
"""Above this many entries at a container's top, it is not walked (one listing decides)."""
MAX_CHANNELS = 16
"""A channel axis of at most this many entries is split into one image per channel."""

Report = Callable[[str], None]
"""Called with one line per unreadable block met while reading (from any thread)."""


@dataclass
class Image:
    """One pyramid, ready to show: its description and its lazy levels."""

    multiscale: Multiscale
    levels: list[Any]
    """Finest first, napari order (..., z, y, x): array-likes that read on indexing."""
    fragments: list[Any] = field(default_factory=list)
    """Paintera labels shown as segments: the same levels as raw fragments; else empty."""
    rgb: bool = False
    """N5 axis 0 holds 3 or 4 colour components (napari's last axis)."""
    channel_axis: int | None = None
    """The axis (napari order) split into one image per channel, if any."""
    contrast_limits: Any = None
    """(min, max), one per channel when split, or None (labels, non-8-bit RGB)."""


@dataclass
class Images:
    """What :func:`open_images` found at one location."""

    location: str
    """The location opened (a metadata file's folder; a URL without trailing slash); ""
    when :func:`images_of` was given none."""
    name: str
    """Its display name."""
    images: list[Image] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """``"path: reason"`` for every node or image that could not be read."""
    hidden: list[str] = field(default_factory=list)
    """``"path: reason"`` for pyramids found whose blocks cannot be decoded by design."""
    too_many: str | None = None
    """Why nothing was built (``"more than 32 images"``); None when the images were."""
    error: str | None = None
    """The location itself could not be opened (one line); None when it was."""


def open_images(
    location: str | os.PathLike[str], *, limit: int | None = None, report: Report | None = None
) -> Images:
    """Every image at ``location`` (a folder, ``.zip``, BigDataViewer XML, metadata file or
    URL), levels built; above ``limit`` pyramids (or :data:`MAX_CHILDREN` top entries when a
    ``limit`` is given), none. Unreadable blocks met later go to ``report``. Never raises."""
    from napari_n5zarr.extras import describe
    from napari_n5zarr.read.locate import resolve

    source = resolve(location)
    found = Images(location=source.target, name=source.name)
    try:
        tree = _tree_of(source)
        tree.raise_for_root()
    except Exception as exc:  # boundary: any backend's failure is one line
        text = describe(exc)  # most lines name the place already: once is enough
        found.error = text if source.target in text else f"cannot open {source.target}: {text}"
        return found
    if limit is not None and tree.root.has_children and _count_names(tree) > MAX_CHILDREN:
        found.too_many = f"more than {MAX_CHILDREN} entries"
        return found
    return images_of(
        (tree, tree.root), name=source.name, source=source.target, limit=limit, report=report
    )


def _tree_of(source: Any) -> Tree:
    """The location's tree (zarr, the N5 stores and the codec imported on first use)."""
    import_store_chain()
    return tree_of(source)


def import_store_chain(*, as_old_objects: bool = False) -> None:
    """Import zarr, the N5 stores and the codec (once) with the cyclic garbage collector
    paused: inside napari (a large heap) the collections that zarr's many new objects set
    off cost more than the imports themselves (measured: 0.1-0.35 s of a 0.3-0.55 s import).
    A collector that was off stays off.

    ``as_old_objects`` (napari's process: :func:`napari_n5zarr._napari.layers.open_in_napari`): the objects tracked after the
    import are then filed with the oldest ones (``gc.freeze()`` + ``gc.unfreeze()``, as a
    module's classes and functions would be after a few collections). CPython starts a full
    collection once the objects promoted to the oldest generation since the last one exceed
    a quarter of those already there; zarr's ~25,000 objects, promoted young, set off one of
    napari's whole heap (~235,000 objects, 83-121 ms) in the first minute after the open.
    Filed as old they set off nothing, and every later full collection still examines them
    (nothing stays frozen, no garbage is kept). ``unfreeze`` also thaws what was frozen before
    (CPython 3.12 freezes a few hundred tuples at start; a pre-fork server its whole heap):
    so only napari's opens ask for it, not the library."""
    if "napari_n5zarr.access" in sys.modules:
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        import napari_n5zarr.access
        import napari_n5zarr.n5.codec  # noqa: F401 (the codec every N5 array opens with)
    finally:
        if enabled:
            if as_old_objects:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def _count_names(tree: Tree) -> int:
    try:
        return len(tree.names(""))
    except Exception:  # cannot list (plain HTTP): detection probes what it can
        return 0


def images_of(
    where: Where | zarr.Array | zarr.Group,
    *,
    name: str,
    source: str = "",
    limit: int | None = None,
    report: Report | None = None,
) -> Images:
    """:func:`open_images` for a node of a tree (or a zarr node) already open (paths relative
    to it); BigDataViewer setups take their voxel size from the tree's XML."""
    where = place(where)
    found = find_multiscales(where, name, limit=limit)
    out = Images(location=source, name=name, problems=list(found.problems))
    if found.too_many:
        out.too_many = f"more than {limit} images"
        return out
    out.hidden = found.hidden
    for ms in found.readable:
        try:
            out.images.append(build_image(where, ms, report))
        except Exception as exc:  # boundary: one image's problem, never its siblings'
            out.problems.append(spatial.describe_error(ms.name, exc))
    return out


def build_image(
    where: Where | zarr.Array | zarr.Group, ms: Multiscale, report: Report | None = None
) -> Image:
    """``ms`` (paths relative to ``where``, a tree's node or a zarr node) with its levels and
    contrast limits. Reads metadata and a bounded sample of the coarsest level."""
    node = place(where)
    if ms.ndim < 2:
        raise ValueError(f"{ms.ndim}-D data cannot be shown as an image")
    if ms.unreadable:
        raise ValueError(ms.unreadable)
    levels = levels_for(node, ms, report)
    if ms.is_labels:
        return Image(ms, levels, fragments=_fragments(node, ms, levels, report))
    if is_rgb(ms):
        return Image(
            ms, levels, rgb=True, contrast_limits=(0, 255) if ms.dtype == "uint8" else None
        )
    coarsest = levels[-1]
    channel = ms.channel_axis
    if channel is not None and 1 < ms.shapes[0][channel] <= MAX_CHANNELS and ms.ndim > 2:
        axis = ms.ndim - 1 - channel  # napari order
        per_channel = [b for i, b in enumerate(storage_blocks(node, ms)) if i != axis]
        limits = [
            contrast_limits(coarsest[(slice(None),) * axis + (i,)], per_channel)
            for i in range(coarsest.shape[axis])
        ]
        return Image(ms, levels, channel_axis=axis, contrast_limits=limits)
    blocks = getattr(coarsest, "storage_blocks", None) or storage_blocks(
        node, ms
    )  # dask levels (stacked time points) ask
    return Image(ms, levels, contrast_limits=contrast_limits(coarsest, blocks))


def _fragments(node: Where, ms: Multiscale, levels: list[Any], report: Report | None) -> list[Any]:
    """Paintera labels shown as segments: their levels again, without the assignment."""
    if not any(getattr(level, "assignment", None) is not None for level in levels):
        return []
    fragments = levels_for(node, ms, report)  # new levels, this image's own
    for level in fragments:
        level.assignment = None
    return fragments
