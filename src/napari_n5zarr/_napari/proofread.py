"""Proofreading in napari, thin: the "Save labels" dock widget (button, Ctrl+Alt+S, status
line), a guard that asks before napari closes with unsaved label edits, and the one notice
when a read-only labels layer is first painted. The editing and saving are the library's
(:mod:`napari_n5zarr.write.editable`)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from magicgui.widgets import Container, Label, PushButton

from napari_n5zarr.write.editable import EditableLevel, save_edits

if TYPE_CHECKING:
    import napari

SHORTCUT = "Control-Alt-S"
"""Save every edited labels layer (napari keeps Ctrl+S / Ctrl+Shift+S for its own saving)."""
PAINT_MODES = {"paint", "fill", "erase", "polygon"}
PAINT_KEYS = ("1", "E", "2", "P", "3", "4", "F")
"""napari's keys for the erase, paint, polygon and fill tools."""
_watched: weakref.WeakSet[Any] = weakref.WeakSet()


def edited_layers(viewer: napari.Viewer) -> list[Any]:
    """Labels layers of ``viewer`` opened editable that hold unsaved edits."""
    return [layer for layer in viewer.layers if isinstance(layer.data, EditableLevel) and layer.data.modified]


def save_all(viewer: napari.Viewer) -> str:
    """Save every edited layer; the status line's text."""
    from napari.utils import notifications

    done = []
    for layer in edited_layers(viewer):
        try:
            result = save_edits(layer)
        except Exception as exc:  # boundary: one line, the edits stay in memory
            message = f"napari-n5zarr: {layer.name} not saved: {exc}"
            notifications.show_error(message)
            return message
        kb = result.bytes_written / 1024
        done.append(f"{layer.name}: {result.total_blocks} blocks ({kb:.1f} KiB; per level {result.blocks})")
    return "saved " + "; ".join(done) if done else "nothing to save"


def _refuse_paint(layer: Any) -> None:
    """The first switch of a read-only labels layer to a painting tool: one notice, back to pan/zoom."""
    from napari_n5zarr._napari.layers import notify_napari, refused_message

    reason = str((layer.metadata.get("napari_n5zarr") or {}).get("read_only"))
    told = False

    def on_mode(event: Any) -> None:
        nonlocal told
        if str(layer.mode) in PAINT_MODES:
            if not told:
                told = True
                notify_napari("warning", refused_message(layer.name, reason))
            layer.mode = "pan_zoom"

    def on_key(layer_: Any) -> None:
        nonlocal told
        if not told:
            told = True
            notify_napari("warning", refused_message(layer.name, reason))

    layer.events.mode.connect(on_mode)
    for key in PAINT_KEYS:  # a multiscale layer's paint tools are disabled: the keys still tell
        layer.bind_key(key, on_key, overwrite=True)


def _on_layer(layer: Any) -> None:
    meta = getattr(layer, "metadata", None) or {}
    if (meta.get("napari_n5zarr") or {}).get("read_only") and not getattr(layer, "_n5zarr_guarded", False):
        layer._n5zarr_guarded = True
        _refuse_paint(layer)


def watch(viewer: napari.Viewer | None) -> None:
    """Once per viewer: read-only labels refuse painting tools with one notice; closing
    the window with unsaved label edits asks first; :data:`SHORTCUT` saves."""
    if viewer is None or viewer in _watched:
        return
    _watched.add(viewer)
    for layer in viewer.layers:
        _on_layer(layer)
    viewer.layers.events.inserted.connect(lambda event: _on_layer(event.value))
    viewer.bind_key(SHORTCUT, lambda v: _shortcut(v), overwrite=True)
    window = getattr(getattr(viewer, "window", None), "_qt_window", None)
    if window is not None:
        guard = CloseGuard(viewer)
        window.installEventFilter(guard.filter)
        window._n5zarr_close_guard = guard  # lives as long as the window


def _shortcut(viewer: napari.Viewer) -> None:
    from napari.utils import notifications

    text = save_all(viewer)
    for widget in list(SaveLabelsWidget.instances):
        widget.status.value = text
    notifications.show_info(f"napari-n5zarr: {text}")


class CloseGuard:
    """Asks before napari's window closes while labels hold unsaved edits."""

    def __init__(self, viewer: napari.Viewer) -> None:
        from qtpy.QtCore import QEvent, QObject

        ref = weakref.ref(viewer)
        guard = self

        class Filter(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:
                v = ref()
                if event.type() == QEvent.Type.Close and v is not None and obj.isVisible():
                    names = [layer.name for layer in edited_layers(v)]
                    if names and not guard.confirm(names):
                        event.ignore()
                        return True
                return False

        self.filter = Filter()

    def confirm(self, names: list[str]) -> bool:
        """True: close without saving."""
        from qtpy.QtWidgets import QMessageBox

        answer = QMessageBox.question(
            None, "Unsaved label edits", f"{', '.join(names)}: label edits not saved. Close napari without saving?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No,
        )  # fmt: skip
        return answer == QMessageBox.StandardButton.Yes


class SaveLabelsWidget(Container):
    """Dock widget: Save (and :data:`SHORTCUT`) writes every edited labels layer back."""

    instances: ClassVar[weakref.WeakSet[SaveLabelsWidget]] = weakref.WeakSet()

    def __init__(self, napari_viewer: napari.Viewer) -> None:
        import napari

        self.viewer = napari_viewer
        self.save_button = PushButton(text="Save labels (Ctrl+Alt+S)")
        self.status = Label(value="no edits yet")
        super().__init__(widgets=[self.save_button, self.status])
        self.save_button.changed.connect(self.save)
        SaveLabelsWidget.instances.add(self)
        watch(napari.current_viewer())  # the viewer itself (a widget is given a public-only proxy)

    def save(self) -> str:
        self.status.value = save_all(self.viewer)
        return str(self.status.value)
