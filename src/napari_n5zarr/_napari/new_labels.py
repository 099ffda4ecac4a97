"""New labels for an image layer, in napari: the "New labels for this image" button of the
Save labels widget, the Layers > Annotate menu entry (the manifest) and the layer list's
context menu entry (registered with napari's app model: napari 0.9 lets plugins' manifests
contribute to the main menus only). Thin: the library's
:func:`~napari_n5zarr.write.edit.new_labels.create_labels` writes the metadata-only pyramid, the
reader opens it (editable, watched for unsaved edits) and the new layer is selected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import napari
import napari.layers

from napari_n5zarr._napari.notices import notify_napari, plain_name, unused_destination

TITLE = "New labels for this image"


def default_destination(layer: Any) -> Path:
    """Beside the image's source folder (or the working folder): ``<image>-labels.n5``,
    numbered when taken."""
    source = str((layer.metadata.get("napari_n5zarr") or {}).get("source") or "")
    folder = (
        Path(source).parent
        if source and "://" not in source and Path(source).exists()
        else Path.cwd()
    )
    return unused_destination(folder, plain_name(layer.name), "labels", "image")


def ask_destination(layer: Any) -> Path | None:
    """A save dialog, starting at :func:`default_destination` (None: cancelled)."""
    from qtpy.QtWidgets import QFileDialog

    path, _ = QFileDialog.getSaveFileName(None, f"{TITLE}: where to create the labels", str(default_destination(layer)),
                                          "N5 + Zarr v3 (*.n5)")  # fmt: skip
    return Path(path) if path else None


def new_labels_for(
    viewer: napari.Viewer, layer: Any, destination: str | Path | None = None
) -> Any | None:
    """Create empty labels overlaying image ``layer`` at ``destination`` (asked when None),
    open them editable in ``viewer`` and select them. Returns the new layer (None: cancelled
    or refused, said in a notification)."""
    from napari_n5zarr.write.edit.new_labels import create_labels

    if not isinstance(layer, napari.layers.Image):
        notify_napari("warning", f"{TITLE}: select an image layer first")
        return None
    target = Path(destination) if destination is not None else ask_destination(layer)
    if target is None:
        return None
    try:
        create_labels(target, like=layer)
    except Exception as exc:  # boundary: any refusal is one notification
        notify_napari("error", f"{TITLE}: {exc}")
        return None
    added = viewer.open(str(target), plugin="napari-n5zarr")  # the reader: editable, watched
    new = next(
        (added_layer for added_layer in added if isinstance(added_layer, napari.layers.Labels)),
        None,
    )
    if new is not None:
        viewer.layers.selection.active = new
    return new


def new_labels_for_active_layer(layer: napari.layers.Layer | None, viewer: napari.Viewer) -> None:
    """The menu entries' command (napari provides the active layer and the viewer)."""
    new_labels_for(viewer, layer)


CONTEXT_ACTION = "napari-n5zarr.new_labels_context"


def add_to_layer_context_menu() -> None:
    """The layer list's context menu gets "New labels for this image" on image layers (once
    per process; nothing when napari's app model is not there)."""
    try:
        from app_model.types import Action, MenuRule
        from napari._app_model import get_app_model
        from napari._app_model.constants import MenuGroup, MenuId
        from napari._app_model.context import LayerListSelectionContextKeys as Keys
    except ImportError:  # another napari: the button and the Layers menu remain
        return
    app = get_app_model()
    if CONTEXT_ACTION in app.commands:
        return
    rule = MenuRule(id=MenuId.LAYERLIST_CONTEXT, group=MenuGroup.LAYERLIST_CONTEXT.CONVERSION,
                    when=Keys.active_layer_type == "image")  # fmt: skip
    app.register_action(
        Action(
            id=CONTEXT_ACTION, title=f"{TITLE}…", callback=new_labels_for_active_layer, menus=[rule]
        )
    )
