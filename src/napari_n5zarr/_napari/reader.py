"""The npe2 reader hook, thin: claim a path (:func:`napari_n5zarr.read.locate.is_n5`), read it
(:func:`napari_n5zarr.read.images.open_images`: the pyramids, their lazy levels, the
problems), map that to layer tuples (:func:`napari_n5zarr._napari.layers.images_layers`),
and when a container holds too much to show, open the N5 browser on it instead. Problems
become napari notifications, never exceptions.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from napari_n5zarr._napari.layers import (
    MAX_LAYERS,
    Notify,
    location_layers,
    too_many_message,
)
from napari_n5zarr._napari.layers import notify_napari as _notify
from napari_n5zarr._napari.preferences import remember_n5_folders as _remember_n5_folders
from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON
from napari_n5zarr.read.locate import is_n5
from napari_n5zarr.storage.location import display_name, local_path

if TYPE_CHECKING:
    from npe2.types import LayerData, PathLike, PathOrPaths, ReaderFunction

CLAIMED_NOTHING: Any = (None,)
"""napari's "path claimed, no layer" answer (npe2's LayerData type does not spell it)."""


# ---------------------------------------------------------------------------
# is it ours?
# ---------------------------------------------------------------------------


def get_reader(path: PathOrPaths) -> ReaderFunction | None:
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
    except Exception:  # boundary: a reader hook must never raise (napari would show a traceback)
        pass
    return None


CLAIMED_FILES = (".zip", ".xml", N5_JSON, ZARR_JSON)
"""Files napari.yaml's patterns offer to this plugin that may turn out to hold no N5."""


def _claimed_file(text: str) -> bool:
    """A zip, XML or metadata file (or such a URL): what napari.yaml's patterns claim."""
    if not text.lower().endswith(CLAIMED_FILES):
        return False
    path = local_path(text)
    return path is None or path.is_file()


def _decline(path: PathOrPaths, **_: Any) -> list[LayerData]:
    """Reader for a zip/XML/metadata file without N5 in it: one notice, no layer, no error."""
    text = os.fspath(path if isinstance(path, str | os.PathLike) else path[0])
    _notify(
        "info",
        f"{display_name(text)} holds no N5 or Zarr v3 data: nothing opened (napari-n5zarr reads zips of N5 and BigDataViewer N5 XML)",
    )
    return [CLAIMED_NOTHING]


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


def read(path: PathOrPaths) -> list[LayerData]:
    """Reader function: the layers of every pyramid/dataset at ``path`` (or paths)."""
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    layers: list[LayerData] = []
    for p in paths:
        layers.extend(read_path(p))
    if any(
        isinstance(layer, tuple) and len(layer) == 3 and layer[2] == "labels" for layer in layers
    ):
        _watch_labels()
    _offer_new_labels()
    return layers or [CLAIMED_NOTHING]  # claimed: problems were already reported


def _offer_new_labels() -> None:
    """Layers opened: the layer list's context menu offers new labels for an image and a
    local copy of the view."""
    import threading

    if (
        threading.current_thread() is threading.main_thread() and "napari.viewer" in sys.modules
    ):  # inside napari
        from napari_n5zarr._napari import check_out, new_labels

        new_labels.add_to_layer_context_menu()
        check_out.add_to_layer_context_menu()


def _watch_labels() -> None:
    """Labels opened: the current viewer guards read-only ones, unsaved edits on close and
    binds the save shortcut (:func:`napari_n5zarr._napari.proofread.watch`)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        import napari

        from napari_n5zarr._napari.proofread import watch

        watch(napari.current_viewer())
    except Exception:  # boundary: reading never fails for this
        pass


def read_path(
    path: PathLike | os.PathLike[str],
    notify: Notify | None = None,
    *,
    max_layers: int | None = MAX_LAYERS,
) -> list[LayerData]:
    """Layers for one path or URL; problems go to ``notify(level, message)``, never raised.

    A container holding more than ``max_layers`` pyramids (or more than
    :data:`~napari_n5zarr.read.images.MAX_CHILDREN` entries at its top) gives no
    layers: the N5 browser is opened on it instead (when a viewer is open) and ``notify`` says so.
    """
    notify = _notify if notify is None else notify
    return location_layers(path, notify, max_layers=max_layers, too_many=_too_many)


def _too_many(source: str, what: str, notify: Notify) -> list[LayerData]:
    """Open the N5 browser on ``source`` instead of thousands of layers."""
    notify("warning", too_many_message(source, what, browser_open=_open_browser(source)))
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
        from napari_n5zarr._napari.browser import dock_browser

        dock_browser(viewer).load(source)
        return True
    except Exception:  # boundary: the fallback is a notification naming `n5zarr view`
        return False
