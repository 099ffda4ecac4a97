"""Copy the view to a local N5: the region of a layer that napari shows, checked out as a local
pyramid (``n5zarr convert SRC DEST --region ...``, in a worker thread) and opened beside the
source, exactly over it (labels editable). Offered in the layer list's context menu for the
layers this package's reader opened."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import napari
import napari.layers

from napari_n5zarr._napari.notices import (
    in_gui_thread,
    notify_napari,
    plain_name,
    unused_destination,
)
from napari_n5zarr._napari.view_region import pyramid_location, view_region

TITLE = "Copy view to a local N5"
CONTEXT_ACTION = "napari-n5zarr.copy_view"


def default_destination(layer: Any) -> Path:
    """``<layer>-region.n5`` in the working folder, numbered when taken."""
    return unused_destination(
        Path.cwd(), plain_name(layer.name).rsplit("/", 1)[-1], "region", "view"
    )


def ask_destination(layer: Any) -> Path | None:
    from qtpy.QtWidgets import QFileDialog

    path, _ = QFileDialog.getSaveFileName(None, f"{TITLE}: where to write the copy", str(default_destination(layer)),
                                          "N5 + Zarr v3 (*.n5)")  # fmt: skip
    return Path(path) if path else None


def copy_view(
    viewer: Any, layer: Any, destination: str | Path | None = None, *, wait: bool = False
) -> threading.Thread | None:
    """Check the region of ``layer`` in view out to ``destination`` (asked when None) in a
    thread, then open it in ``viewer``; ``wait`` joins the thread (tests, scripts)."""
    meta = getattr(layer, "metadata", {}).get("napari_n5zarr") or {}
    location = pyramid_location(meta)
    region = view_region(layer, viewer)
    if location is None or region is None:
        notify_napari(
            "warning",
            f"{TITLE}: only layers opened by napari-n5zarr, shown in a viewer, can be copied",
        )
        return None
    target = Path(destination) if destination is not None else ask_destination(layer)
    if target is None:
        return None
    notify_napari("info", f"{TITLE}: copying {region} of {location} to {target}")
    worker = threading.Thread(
        target=_run, args=(viewer, location, target, region), name="n5zarr-copy-view", daemon=True
    )
    worker.start()
    if wait:
        worker.join()
    return worker


def _run(viewer: Any, location: str, target: Path, region: str) -> None:
    """The copy (worker thread); the result opened on napari's thread."""
    from napari_n5zarr.write.convert.convert import convert

    try:
        convert(location, target, region=region)
    except Exception as exc:  # boundary: one notification, nothing opened
        message = f"{TITLE}: {exc}"
        in_gui_thread(lambda: notify_napari("error", message))
        return
    in_gui_thread(lambda: viewer.open(str(target), plugin="napari-n5zarr"))


def copy_view_of_active_layer(layer: napari.layers.Layer | None, viewer: napari.Viewer) -> None:
    """The context menu's command (napari provides the active layer and the viewer)."""
    copy_view(viewer, layer)


def add_to_layer_context_menu() -> None:
    """The layer list's context menu gets "Copy view to a local N5…" (once per process)."""
    try:
        from app_model.types import Action, MenuRule
        from napari._app_model import get_app_model
        from napari._app_model.constants import MenuGroup, MenuId
    except ImportError:  # another napari: `n5zarr convert --region` remains
        return
    app = get_app_model()
    if CONTEXT_ACTION not in app.commands:
        rule = MenuRule(id=MenuId.LAYERLIST_CONTEXT, group=MenuGroup.LAYERLIST_CONTEXT.CONVERSION)
        app.register_action(
            Action(
                id=CONTEXT_ACTION,
                title=f"{TITLE}…",
                callback=copy_view_of_active_layer,
                menus=[rule],
            )
        )
