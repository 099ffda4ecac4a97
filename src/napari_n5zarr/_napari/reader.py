"""napari reader: path -> :func:`napari_n5zarr.open` -> :func:`spatial.detect` -> layers.

Layers hold lazy dask arrays of the zarr arrays transposed to napari's order (..., z, y, x),
with dask chunks that are whole multiples of the storage blocks. Opening reads metadata,
plus a bounded sample of the coarsest level for the contrast limits.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr import spatial
from napari_n5zarr.spatial import Multiscale

if TYPE_CHECKING:
    import dask.array as da
    import zarr

LayerData = tuple  # (data, kwargs, layer_type) or (None,)
PathLike = str | os.PathLike[str]

TASK_BYTES = 2**20
"""Target decoded size of one dask task (grown from the storage block in x and y)."""
MAX_TASKS = 2**17
"""Above this many tasks per level, tasks grow (dask culls the whole graph on every compute)."""
MAX_TASK_BYTES = 64 * 2**20
"""...but never beyond this decoded size per task."""
CONTRAST_BUDGET = 16 * 2**20
"""Largest coarsest level read whole for the contrast limits; above, a central sample."""

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
    """npe2 reader hook: :func:`read` for N5 (or ``n5_default`` Zarr) paths, else None."""
    try:
        paths = [path] if isinstance(path, str | os.PathLike) else list(path)
        if paths and all(is_n5(p) for p in paths):
            return read
    except Exception:  # never raise from a reader hook
        pass
    return None


def is_n5(path: PathLike) -> bool:
    """True for an N5 container/group/dataset, a path inside one, a ``.n5`` folder, a zip
    holding N5, or a Zarr node whose ``zarr.json`` uses the ``n5_default`` codec."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif _URL.match(text):
        return _is_n5_url(text)
    p = Path(text).expanduser()
    if p.name in ("attributes.json", "zarr.json"):
        p = p.parent
    if p.is_file():
        if p.suffix.lower() == ".xml":
            return bdv_xml_target(p) is not None
        return p.suffix.lower() == ".zip" and _zip_holds_n5(p)
    if not p.is_dir():
        return False
    if (p / "attributes.json").is_file() or p.suffix.lower() == ".n5" or _uses_n5_codec(p / "zarr.json"):
        return True
    if _child_holds_n5(p):
        return True
    return any((a / "attributes.json").is_file() for a in list(p.parents)[:_ANCESTOR_LEVELS])


def _is_n5_url(url: str) -> bool:
    if _N5_URL.search(url):
        return True
    try:  # one metadata request
        from zarr.core.sync import sync

        from napari_n5zarr.access import base_store

        return bool(sync(base_store(url.rstrip("/")).exists("attributes.json")))
    except Exception:
        return False


def _uses_n5_codec(zarr_json: Path) -> bool:
    try:
        doc = json.loads(zarr_json.read_text())
    except (OSError, ValueError):
        return False
    codecs = doc.get("codecs") if isinstance(doc, dict) else None
    return isinstance(codecs, list) and any(isinstance(c, dict) and c.get("name") == "n5_default" for c in codecs)


def _child_holds_n5(p: Path, limit: int = 256) -> bool:
    """A container without a root attributes.json: some child folder has N5 metadata."""
    try:
        with os.scandir(p) as entries:
            for n, entry in enumerate(entries):
                if n >= limit:
                    break
                if entry.is_dir() and (
                    os.path.isfile(os.path.join(entry.path, "attributes.json"))
                    or _uses_n5_codec(Path(entry.path) / "zarr.json")
                ):
                    return True
    except OSError:
        return False
    return False


def _zip_holds_n5(p: Path) -> bool:
    try:
        with zipfile.ZipFile(p) as z:
            return any(n == "attributes.json" or n.count("/") <= 2 and n.endswith("/attributes.json") for n in z.namelist())
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


def read_path(path: PathLike, notify: Callable[[str, str], None] | None = None) -> list[LayerData]:
    """Layers for one path or URL; problems go to ``notify(level, message)``, never raised."""
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
        notify("error", f"napari-n5zarr: cannot open {target}: {exc}")
        return []
    return layers_from_node(
        node,
        name=display_name(target),
        source=target,
        inherited=_local_ancestors(target),
        bdv_setups=setups,
        notify=notify,
    )


def layers_from_node(
    node: zarr.Array | zarr.Group,
    *,
    name: str,
    source: str = "",
    inherited: dict[str, Any] | None = None,
    bdv_setups: dict[int, spatial.BdvSetup] | None = None,
    notify: Callable[[str, str], None] | None = None,
) -> list[LayerData]:
    """Layer data tuples for every :class:`Multiscale` under ``node``; BigDataViewer
    setups take their voxel size from ``bdv_setups`` (the dataset's XML)."""
    notify = _notify if notify is None else notify
    problems: list[str] = []
    found = spatial.detect(
        node, name, inherited=inherited, on_error=lambda p, e: problems.append(spatial.describe_error(p, e))
    )
    layers = []
    for ms in found:
        setup = _SETUP_NAME.search(ms.name) if bdv_setups and ms.convention == "bdv" else None
        if setup and int(setup.group(1)) in bdv_setups:
            ms = spatial.with_bdv_setup(ms, bdv_setups[int(setup.group(1))])
        try:
            layers.append(layer_data(node, ms, source=source))
        except Exception as exc:
            problems.append(spatial.describe_error(ms.name, exc))
    for problem in problems:
        notify("warning", f"napari-n5zarr: skipped {problem}")
    if not found and not problems:
        notify("warning", f"napari-n5zarr: no N5 dataset found in {source or name}")
    layers.sort(key=lambda layer: layer[2] == "labels")  # labels drawn over images
    _color_channels(layers)
    return layers


def layer_data(node: zarr.Array | zarr.Group, ms: Multiscale, *, source: str = "") -> LayerData:
    """One (data, kwargs, layer_type) tuple; dask levels in napari order (..., z, y, x)."""
    if ms.ndim < 2:
        raise ValueError(f"{ms.ndim}-D data cannot be shown as an image")
    levels = [_level(node, ms, k) for k in range(len(ms.paths))]
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
        return (data, kwargs, "labels")
    if _is_rgb(ms):
        kwargs["rgb"] = True  # the colour axis is N5 axis 0; the others are uncalibrated
        _spatial_kwargs(kwargs, spatial.identity(ms.ndim - 1), range(ms.ndim - 1))
        kwargs["contrast_limits"] = (0, 255)
        return (data, kwargs, "image")
    kwargs["rgb"] = False
    channel = ms.channel_axis
    if channel is not None and 1 < ms.shapes[0][channel] <= 16 and ms.ndim > 2:
        import dask.array as da

        napari_channel = ms.ndim - 1 - channel
        kwargs["channel_axis"] = napari_channel
        _spatial_kwargs(kwargs, ms, [a for a in n5_axes if a != channel])
        coarsest = levels[-1]
        kwargs["contrast_limits"] = [
            contrast_limits(da.take(coarsest, i, axis=napari_channel)) for i in range(coarsest.shape[napari_channel])
        ]
        kwargs["name"] = [f"{ms.name} [{i}]" for i in range(coarsest.shape[napari_channel])]
        return (data, kwargs, "image")
    _spatial_kwargs(kwargs, ms, n5_axes)
    kwargs["contrast_limits"] = contrast_limits(levels[-1])
    return (data, kwargs, "image")


def _spatial_kwargs(
    kwargs: dict[str, Any], ms: Multiscale | spatial.Calibration, n5_axes: Sequence[int]
) -> None:
    """scale/translate/units/axis_labels for the given N5 axes, in napari order."""
    order = list(n5_axes)[::-1]
    kwargs["scale"] = tuple(ms.scale[i] for i in order)
    kwargs["translate"] = tuple(ms.translate[i] for i in order)
    kwargs["units"] = tuple(napari_unit(ms.units[i]) for i in order)
    kwargs["axis_labels"] = tuple(ms.axes[i] for i in order)


def _is_rgb(ms: Multiscale) -> bool:
    """Uncalibrated uint8 data whose fastest N5 axis has 3 or 4 entries (C-order RGB(A) writers)."""
    return (
        ms.convention == "none"
        and ms.ndim >= 3
        and ms.shapes[0][0] in (3, 4)
        and ms.dtype == "uint8"
        and ms.channel_axis is None
        and not ms.time_paths
    )


def _level(node: zarr.Array | zarr.Group, ms: Multiscale, k: int) -> da.Array:
    if ms.time_paths:
        import dask.array as da

        return da.stack([dask_level(_child(node, paths[k])) for paths in ms.time_paths], axis=0)
    return dask_level(_child(node, ms.paths[k]))


def _child(node: zarr.Array | zarr.Group, path: str) -> zarr.Array:
    return node if path == "" else node[path]


def dask_level(array: zarr.Array) -> da.Array:
    """A lazy dask view of an N5-order zarr array, transposed to napari order."""
    import dask.array as da

    chunks = dask_chunks(tuple(array.shape), tuple(array.chunks), array.dtype.itemsize)
    return da.from_zarr(array, chunks=chunks).T


def dask_chunks(
    shape: Sequence[int],
    blocks: Sequence[int],
    itemsize: int,
    target: int = TASK_BYTES,
    max_tasks: int = MAX_TASKS,
    max_bytes: int = MAX_TASK_BYTES,
) -> tuple[int, ...]:
    """Dask chunks (N5 order): whole storage blocks, doubled along x and y (N5 axes 0
    and 1, napari's last two) until a task decodes ``target`` bytes, so a 2D slice reads
    no block it does not show along the slower axes. Then, while the level has more than
    ``max_tasks`` tasks (dask's per-compute graph cost grows with it), doubled further,
    x and y first, up to ``max_bytes`` per task."""
    chunks = [max(1, min(b, s)) for b, s in zip(blocks, shape, strict=True)]
    xy = [i for i in (0, 1) if i < len(shape)]
    rest = [i for i in range(len(shape)) if i not in xy]

    def grow(wanted: Callable[[], bool], axes: Sequence[int]) -> None:
        while wanted():
            candidates = [i for i in axes if chunks[i] < shape[i]]
            if not candidates:
                return
            i = min(candidates, key=lambda j: chunks[j] / blocks[j])
            chunks[i] = min(chunks[i] * 2, shape[i])

    def nbytes() -> int:
        return math.prod(chunks) * itemsize

    def tasks() -> int:
        return math.prod(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))

    grow(lambda: nbytes() < target, xy)
    for axes in (xy, rest):
        grow(lambda: tasks() > max_tasks and nbytes() * 2 <= max_bytes, axes)
    return tuple(chunks)


def contrast_limits(level: da.Array, budget: int = CONTRAST_BUDGET) -> tuple[float, float]:
    """(min, max) of a (coarsest) level; above ``budget`` bytes, of a central 2D sample."""
    import dask.array as da
    import numpy as np

    sample = level
    if level.nbytes > budget:
        index = tuple(s // 2 for s in level.shape[:-2]) + tuple(
            slice(max(0, s // 2 - 512), s // 2 + 512) for s in level.shape[-2:]
        )
        sample = level[index]
    if np.issubdtype(sample.dtype, np.floating):
        lo, hi = da.compute(da.nanmin(sample), da.nanmax(sample))
    else:
        lo, hi = da.compute(sample.min(), sample.max())
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return (0.0, 1.0)
    return (lo, hi) if hi > lo else (lo, lo + 1.0)


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
    if p.name in ("attributes.json", "zarr.json"):
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


def _local_ancestors(target: str) -> dict[str, Any]:
    """Attributes of enclosing N5 groups on disk, root first (N5 Viewer/neuroglancer
    let children inherit resolution, units and axes)."""
    if _URL.match(target):
        return {}
    merged: dict[str, Any] = {}
    for parent in reversed(list(Path(target).resolve().parents)[:_ANCESTOR_LEVELS]):
        try:
            doc = json.loads((parent / "attributes.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            merged.update(doc)
    return merged


def _notify(level: str, message: str) -> None:
    """A napari notification (falls back to a warning outside napari)."""
    try:
        from napari.utils import notifications
    except ImportError:
        import warnings

        warnings.warn(message, spatial.SkippedNodeWarning, stacklevel=3)
        return
    (notifications.show_error if level == "error" else notifications.show_warning)(message)
