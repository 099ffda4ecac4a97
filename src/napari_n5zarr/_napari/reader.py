"""napari reader: path -> :func:`napari_n5zarr.open` -> :func:`spatial.detect` -> layers.

Layers hold lazy dask arrays of the zarr arrays transposed to napari's order (..., z, y, x),
with dask chunks that are whole multiples of the storage blocks. Opening reads metadata,
plus a bounded sample of the coarsest level for the contrast limits.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.n5.constants import CODEC_NAME, N5_JSON, ZARR_JSON
from napari_n5zarr.read.levels import (  # noqa: F401 (dask_chunks, dask_level: public)
    contrast_limits,
    dask_chunks,
    dask_level,
    LevelReader,
    lazy_level,
    needs_preview,
    preview_levels,
)
from napari_n5zarr._napari.preferences import remember_n5_folders as _remember_n5_folders
from napari_n5zarr.spatial import Multiscale

if TYPE_CHECKING:
    import dask.array as da
    import zarr

LayerData = tuple  # (data, kwargs, layer_type) or (None,)
PathLike = str | os.PathLike[str]

MAX_LAYERS = 32
"""Above this many pyramids, a dropped container opens nothing but the N5 browser."""
MAX_CHILDREN = 256
"""Above this many entries at a container's top, it is not walked (one listing decides)."""

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_N5_URL = re.compile(r"\.n5(/|$)", re.IGNORECASE)
_CHANNEL_NAME = re.compile(r"(^|/)(c|ch|channel|setup)\d+$")
_SETUP_NAME = re.compile(r"(?:^|/)setup(\d+)$")
_COLORMAPS = ("green", "magenta", "cyan", "yellow", "red", "blue")
_ANCESTOR_LEVELS = 16
_XML_MAX_FILES = 32
_XML_MAX_BYTES = 8 * 2**20


# ---------------------------------------------------------------------------
# is it ours?
# ---------------------------------------------------------------------------


def get_reader(path: PathLike | Sequence[PathLike]) -> Callable[[Any], list[LayerData]] | None:
    """npe2 reader hook: :func:`read` for N5 / Zarr v3 paths; for a file our patterns claim
    (a zip or XML holding no N5) a reader that explains and opens nothing; else None."""
    try:
        paths = [path] if isinstance(path, str | os.PathLike) else list(path)
        if not paths or not all(isinstance(p, str | os.PathLike) for p in paths):
            return None
        _remember_n5_folders()
        if all(is_n5(p) for p in paths):
            return read
        if len(paths) == 1 and _claimed_file(os.fspath(paths[0])):
            return _decline
    except Exception:  # never raise from a reader hook
        pass
    return None


CLAIMED_FILES = (".zip", ".xml", N5_JSON, ZARR_JSON)
"""Files napari.yaml's patterns offer to this plugin that may turn out to hold no N5."""


def _claimed_file(text: str) -> bool:
    """A zip, XML or metadata file (or such a URL): what napari.yaml's patterns claim."""
    if not text.lower().endswith(CLAIMED_FILES):
        return False
    if _URL.match(text) and not text.startswith("file://"):
        return True
    return Path(text.removeprefix("file://")).expanduser().is_file()


def _decline(path: PathLike | Sequence[PathLike], **_: Any) -> list[LayerData]:
    """Reader for a zip/XML/metadata file without N5 in it: one notice, no layer, no error."""
    text = os.fspath(path if isinstance(path, str | os.PathLike) else path[0])
    _notify("info", f"{display_name(text)} holds no N5 or Zarr v3 data: nothing opened (napari-n5zarr reads zips of N5 and BigDataViewer N5 XML)")
    return [(None,)]


def is_n5(path: PathLike) -> bool:
    """True for an N5 container/group/dataset, a path inside one, a ``.n5`` folder, a zip
    holding N5, a BigDataViewer N5 XML, or a Zarr v3 node (plain or ``n5_default``)."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif _URL.match(text):
        return _is_n5_url(text)
    p = Path(text).expanduser()
    if p.name in (N5_JSON, ZARR_JSON):
        if not p.is_file():
            return False
        p = p.parent
    if p.is_file():
        if p.suffix.lower() == ".xml":
            return bdv_xml_target(p) is not None
        return p.suffix.lower() == ".zip" and _zip_holds_n5(p)
    if not p.is_dir():
        return False
    if (p / N5_JSON).is_file() or p.suffix.lower() == ".n5" or _is_zarr_v3(p / ZARR_JSON):
        return True
    if _child_holds_n5(p):
        return True
    return any((a / N5_JSON).is_file() for a in list(p.parents)[:_ANCESTOR_LEVELS])


def _is_n5_url(url: str) -> bool:
    if _N5_URL.search(url):
        return True
    try:  # one metadata request
        from zarr.core.sync import sync

        from napari_n5zarr.access import base_store

        return bool(sync(base_store(url.rstrip("/")).exists(N5_JSON)))
    except Exception:
        return False


def _zarr_json(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > 2**20:
            return None
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _is_zarr_v3(zarr_json: Path) -> bool:
    doc = _zarr_json(zarr_json)
    return doc is not None and doc.get("zarr_format") == 3 and doc.get("node_type") in ("array", "group")


def _uses_n5_codec(zarr_json: Path) -> bool:
    doc = _zarr_json(zarr_json)
    codecs = doc.get("codecs") if doc is not None else None
    return isinstance(codecs, list) and any(isinstance(c, dict) and c.get("name") == CODEC_NAME for c in codecs)


def _child_holds_n5(p: Path, limit: int = 256) -> bool:
    """A container without a root attributes.json: some child folder has N5 metadata."""
    try:
        with os.scandir(p) as entries:
            for n, entry in enumerate(entries):
                if n >= limit:
                    break
                if entry.is_dir() and (
                    os.path.isfile(os.path.join(entry.path, N5_JSON))
                    or _uses_n5_codec(Path(entry.path) / ZARR_JSON)
                ):
                    return True
    except OSError:
        return False
    return False


def _zip_holds_n5(p: Path) -> bool:
    try:
        with zipfile.ZipFile(p) as z:
            return any(n == N5_JSON or n.count("/") <= 2 and n.endswith("/" + N5_JSON) for n in z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


def read(path: PathLike | Sequence[PathLike]) -> list[LayerData]:
    """Reader function: the layers of every pyramid/dataset at ``path`` (or paths)."""
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    layers: list[LayerData] = []
    for p in paths:
        layers.extend(read_path(p))
    return layers or [(None,)]  # claimed: problems were already reported


def read_path(
    path: PathLike,
    notify: Callable[[str, str], None] | None = None,
    *,
    max_layers: int | None = MAX_LAYERS,
) -> list[LayerData]:
    """Layers for one path or URL; problems go to ``notify(level, message)``, never raised.

    A container holding more than ``max_layers`` pyramids (or more than
    :data:`MAX_CHILDREN` entries at its top) gives no layers: the N5 browser is opened
    on it instead (when a viewer is open) and ``notify`` says so.
    """
    notify = _notify if notify is None else notify
    target = _target(os.fspath(path))
    setups = None
    if target.lower().endswith(".xml") and (found := bdv_xml_target(Path(target))):
        target, setups = found
    elif not _URL.match(target):
        setups = _sibling_bdv_xml(Path(target))
    try:
        import napari_n5zarr

        node = napari_n5zarr.open(target)
    except Exception as exc:
        notify("error", f"napari-n5zarr: cannot open {target}: {missing_extra_message(exc)}")
        return []
    if max_layers is not None and _too_many_children(node):
        return _too_many(target, f"more than {MAX_CHILDREN} entries", notify)
    return layers_from_node(
        node,
        name=display_name(target),
        source=target,
        bdv_setups=setups,
        notify=notify,
        max_layers=max_layers,
    )


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
    except Exception:
        return False


def _too_many(source: str, what: str, notify: Callable[[str, str], None]) -> list[LayerData]:
    """Open the N5 browser on ``source`` instead of thousands of layers."""
    opened = _open_browser(source)
    where = "the N5 browser is open on it: pick what to show" if opened else f"open it with the N5 browser (Plugins > N5 browser) or `n5zarr view {source}`"
    notify("warning", f"napari-n5zarr: {display_name(source)} holds {what}; no layers were added: {where}")
    return []


def _open_browser(source: str) -> bool:
    """Show ``source`` in the N5 browser of the current viewer (docked once; reused).
    False outside napari's main thread (e.g. a read started by the browser itself)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        import napari

        viewer = napari.current_viewer()
        if viewer is None:
            return False
        browser = dict(viewer.window.dock_widgets).get("N5 browser")
        if browser is None:
            from napari_n5zarr._napari.browser import BrowserWidget

            browser = BrowserWidget(viewer)
            viewer.window.add_dock_widget(browser, name="N5 browser", area="right")
        browser.load(source)
        return True
    except Exception:
        return False


def layers_from_node(
    node: zarr.Array | zarr.Group,
    *,
    name: str,
    source: str = "",
    inherited: dict[str, Any] | None = None,
    bdv_setups: dict[int, spatial.BdvSetup] | None = None,
    notify: Callable[[str, str], None] | None = None,
    max_layers: int | None = None,
) -> list[LayerData]:
    """Layer data tuples for every :class:`Multiscale` under ``node``; BigDataViewer
    setups take their voxel size from ``bdv_setups`` (the dataset's XML). Ancestors'
    calibration is inherited through the node's store (any backend). Above
    ``max_layers`` pyramids: no layers (see :func:`read_path`)."""
    notify = _notify if notify is None else notify
    problems: list[str] = []
    found = spatial.detect(
        node,
        name,
        inherited=inherited,
        on_error=lambda p, e: problems.append(spatial.describe_error(p, e)),
        limit=max_layers,
    )
    if max_layers is not None and len(found) > max_layers:
        return _too_many(source or name, f"more than {max_layers} images", notify)
    report = _block_reporter(notify)
    layers = []
    for ms in found:
        setup = _SETUP_NAME.search(ms.name) if bdv_setups and ms.convention == "bdv" else None
        if setup and bdv_setups and int(setup.group(1)) in bdv_setups:
            ms = spatial.with_bdv_setup(ms, bdv_setups[int(setup.group(1))])
        try:
            layers.append(layer_data(node, ms, source=source, report=report))
        except Exception as exc:
            problems.append(spatial.describe_error(ms.name, exc))
    for problem in problems:
        notify("warning", f"napari-n5zarr: skipped {problem}")
    if not found and not problems:
        notify("warning", f"napari-n5zarr: no N5 dataset found in {source or name}")
    layers.sort(key=lambda layer: layer[2] == "labels")  # labels drawn over images
    _color_channels(layers)
    return layers


def _block_reporter(notify: Callable[[str, str], None]) -> Callable[[str], None]:
    """Unreadable blocks are notified once each (from whatever thread reads them)."""
    seen: set[str] = set()

    def report(message: str) -> None:
        if message not in seen:
            seen.add(message)
            notify("warning", f"napari-n5zarr: {message}")

    return report


def layer_data(
    node: zarr.Array | zarr.Group, ms: Multiscale, *, source: str = "", report: Callable[[str], None] | None = None
) -> LayerData:
    """One (data, kwargs, layer_type) tuple; dask levels in napari order (..., z, y, x).

    Building it reads metadata and a bounded sample of the coarsest level (contrast)."""
    if ms.ndim < 2:
        raise ValueError(f"{ms.ndim}-D data cannot be shown as an image")
    if len(ms.paths) == 1 and not ms.time_paths and needs_preview(ms.shapes[0][::-1]):
        array = _child(node, ms.paths[0])  # no pyramid: nearest-neighbour preview levels
        levels = preview_levels(LevelReader(array, n5_order=spatial.n5_ordered(array), report=report))
    else:
        levels = [_level(node, ms, k, report) for k in range(len(ms.paths))]
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
    blocks = _blocks(node, ms)
    if ms.is_labels:
        _spatial_kwargs(kwargs, ms, n5_axes)
        return (data, kwargs, "labels")
    if _is_rgb(ms):
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
        per_channel = [b for i, b in enumerate(blocks) if i != napari_channel]
        kwargs["contrast_limits"] = [
            contrast_limits(coarsest[(slice(None),) * napari_channel + (i,)], per_channel)
            for i in range(coarsest.shape[napari_channel])
        ]
        kwargs["name"] = [f"{ms.name} [{i}]" for i in range(coarsest.shape[napari_channel])]
        return (data, kwargs, "image")
    _spatial_kwargs(kwargs, ms, n5_axes)
    kwargs["contrast_limits"] = contrast_limits(levels[-1], blocks)
    return (data, kwargs, "image")


def _blocks(node: zarr.Array | zarr.Group, ms: Multiscale) -> tuple[int, ...]:
    """Storage block shape of the coarsest level, napari order."""
    paths = ms.time_paths[0] if ms.time_paths else ms.paths
    array = _child(node, paths[-1])
    blocks = tuple(int(b) for b in array.chunks)
    if spatial.n5_ordered(array):
        blocks = blocks[::-1]
    return ((1,) + blocks) if ms.time_paths else blocks


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


def _is_rgb(ms: Multiscale) -> bool:
    """A colour axis (named ``rgb``/``rgba`` by the writer or by :func:`spatial.detect` for
    uncalibrated C-order RGB) as N5 axis 0 with 3 or 4 entries."""
    return (
        ms.ndim >= 3
        and ms.axes[0] in spatial.COLOUR_AXES
        and ms.shapes[0][0] in (3, 4)
        and not ms.time_paths
        and not ms.is_labels
    )


def _level(
    node: zarr.Array | zarr.Group, ms: Multiscale, k: int, report: Callable[[str], None] | None = None
) -> da.Array:
    if ms.time_paths:
        import dask.array as da

        arrays = [_child(node, paths[k]) for paths in ms.time_paths]
        return da.stack([dask_level(a, n5_order=spatial.n5_ordered(a), report=report) for a in arrays], axis=0)
    array = _child(node, ms.paths[k])
    return lazy_level(array, n5_order=spatial.n5_ordered(array), report=report)


def _child(node: zarr.Array | zarr.Group, path: str) -> zarr.Array:
    return node if path == "" else node[path]  # type: ignore[index,return-value]  # a path names an array in a group


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
    except Exception:
        return None
    return name


def _color_channels(layers: list[LayerData]) -> None:
    """Several channel-like image layers (N5 Viewer ``cN``, BDV setups): Fiji-like composite."""
    images = [layer for layer in layers if len(layer) == 3 and layer[2] == "image" and isinstance(layer[1]["name"], str)]
    if len(images) < 2 or not all(_CHANNEL_NAME.search(layer[1]["name"]) for layer in images):
        return
    for i, (_, kwargs, _) in enumerate(images):
        kwargs.setdefault("colormap", _COLORMAPS[i % len(_COLORMAPS)])
        kwargs.setdefault("blending", "additive")


# ---------------------------------------------------------------------------
# paths
# ---------------------------------------------------------------------------


def _target(path: str) -> str:
    """The node to open: a metadata file's folder; URLs unchanged."""
    if _URL.match(path) and not path.startswith("file://"):
        return path.rstrip("/")
    local = path[len("file://") :] if path.startswith("file://") else path
    p = Path(local).expanduser()
    if p.name in (N5_JSON, ZARR_JSON):
        p = p.parent
    return str(p)


def bdv_xml_target(xml: Path) -> tuple[str, dict[int, spatial.BdvSetup]] | None:
    """(N5 folder, setups) of a BigDataViewer XML with a ``bdv.n5`` loader, else None."""
    try:
        if xml.stat().st_size > _XML_MAX_BYTES:
            return None
        n5, setups = spatial.bdv_xml(xml.read_text(errors="replace"))
    except OSError:
        return None
    if n5 is None:
        return None
    path = Path(n5) if Path(n5).is_absolute() else xml.parent / n5
    return str(path), setups


def _sibling_bdv_xml(target: Path) -> dict[int, spatial.BdvSetup] | None:
    """Setups of a BigDataViewer XML next to ``target`` that points at it."""
    try:
        xmls = sorted(target.parent.glob("*.xml"))[:_XML_MAX_FILES] if target.is_dir() else []
        here = target.resolve()
    except OSError:
        return None
    for xml in xmls:
        found = bdv_xml_target(xml)
        if found and Path(found[0]).resolve() == here:
            return found[1]
    return None


def display_name(target: str) -> str:
    """Last path segment of a path or URL (``data.n5``)."""
    return target.rstrip("/").rsplit("/", 1)[-1] or target


def _notify(level: str, message: str) -> None:
    """A napari notification (falls back to a warning outside napari)."""
    try:
        from napari.utils import notifications
    except ImportError:
        import warnings

        warnings.warn(message, spatial.SkippedNodeWarning, stacklevel=3)
        return
    show = {"error": notifications.show_error, "info": notifications.show_info}.get(level, notifications.show_warning)
    show(message)
