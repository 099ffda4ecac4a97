"""Proofreading in napari, thin: the "Save labels" dock widget (button, Ctrl+Alt+S, a live
status line), the unsaved-edits marker on layer names, a guard that asks Save / Discard /
Cancel before napari closes with unsaved label edits, and the one notice when a read-only
labels layer is first painted. The editing and saving are the library's
(:mod:`napari_n5zarr.write.edit.editable`).

Every route into a viewer reaches :func:`watch`: the reader (drag-drop, ``viewer.open``,
File > Open Sample) watches the current viewer, :func:`napari_n5zarr._napari.layers.add_to_viewer`
(``n5zarr view``, the N5 browser) the viewer it adds to, and every editable level made for
napari reports its writes to :func:`level_changed`, which watches whichever viewers show it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any, ClassVar

from magicgui.widgets import Container, Label, PushButton

from napari_n5zarr._napari import check_out, notices, view_3d
from napari_n5zarr._napari.new_labels import add_to_layer_context_menu
from napari_n5zarr._napari.notices import UNSAVED_MARKER as MARKER
from napari_n5zarr._napari.notices import plain_name
from napari_n5zarr._napari.view_3d import editable_of
from napari_n5zarr.write.edit.editable import EditableLevel, save_edits

if TYPE_CHECKING:
    import napari

SHORTCUT = "Control-Alt-S"
"""Save every edited labels layer (napari keeps Ctrl+S / Ctrl+Shift+S for its own saving)."""
NO_CHANGES = "no changes"
PAINT_MODES = {"paint", "fill", "erase", "polygon"}
PAINT_KEYS = ("1", "E", "2", "P", "3", "4", "F")
"""napari's keys for the erase, paint, polygon and fill tools."""
_watched: weakref.WeakSet[Any] = weakref.WeakSet()


def edited_layers(viewer: napari.Viewer) -> list[Any]:
    """Labels layers of ``viewer`` opened editable that hold unsaved edits."""
    return [
        layer
        for layer in viewer.layers
        if (level := editable_of(layer)) is not None and level.modified
    ]


def save_all(viewer: napari.Viewer) -> str:
    """Save every edited layer; the status line's text."""
    return _save_all(viewer)[0]


def _save_all(viewer: napari.Viewer) -> tuple[str, bool]:
    """Save every edited layer: (the status text, whether all of them were saved)."""
    from napari.utils import notifications

    done, failed = [], []
    for layer in edited_layers(viewer):
        name = plain_name(layer.name)
        try:
            result = save_edits(layer)
        except Exception as exc:  # boundary: one line, the edits stay in memory
            failed.append(f"{name} not saved: {exc}")
            notifications.show_error(f"napari-n5zarr: {failed[-1]}")
            continue
        if result.total_blocks == 0:
            continue
        kb = result.bytes_written / 1024
        text = f"{name}: {result.total_blocks} blocks ({kb:.1f} KiB; per level {result.blocks})"
        if result.overwritten:
            text += f", overwriting {result.overwritten:,} voxels another writer had changed since this layer read them"
        done.append(text)
    parts = (["saved " + "; ".join(done)] if done else []) + failed
    return "; ".join(parts) or NO_CHANGES, not failed


def _tell_read_only(layer: Any, reason: str) -> None:
    """The read-only notice, naming the check-out command for the region in view."""
    import napari

    from napari_n5zarr._napari.view_region import pyramid_location, view_region

    viewer = napari.current_viewer()
    region = view_region(layer, viewer) if viewer is not None else None
    location = pyramid_location(layer.metadata.get("napari_n5zarr") or {})
    notices.notify_napari(
        "warning", notices.refused_message(layer.name, reason, location=location, region=region)
    )


def _refuse_paint(layer: Any) -> None:
    """The first switch of a read-only labels layer to a painting tool: one notice, back to pan/zoom."""
    reason = str((layer.metadata.get("napari_n5zarr") or {}).get("read_only"))
    told = False

    def on_mode(event: Any) -> None:
        nonlocal told
        if str(layer.mode) in PAINT_MODES:
            if not told:
                told = True
                _tell_read_only(layer, reason)
            layer.mode = "pan_zoom"

    def on_key(layer_: Any) -> None:
        nonlocal told
        if not told:
            told = True
            _tell_read_only(layer, reason)

    layer.events.mode.connect(on_mode)
    for key in PAINT_KEYS:  # a multiscale layer's paint tools are disabled: the keys still tell
        layer.bind_key(key, on_key, overwrite=True)


def _on_layer(layer: Any) -> None:
    meta = getattr(layer, "metadata", None) or {}
    if (meta.get("napari_n5zarr") or {}).get("read_only") and not getattr(
        layer, "_n5zarr_guarded", False
    ):
        layer._n5zarr_guarded = True
        _refuse_paint(layer)
    if isinstance(getattr(layer, "data", None), EditableLevel):
        _mark(layer)
        for viewer in _viewers():
            if layer in viewer.layers:
                view_3d.on_layer(viewer, layer)


def watch(viewer: napari.Viewer | None) -> None:
    """Once per viewer: read-only labels refuse painting tools with one notice; closing
    the window with unsaved label edits asks first; :data:`SHORTCUT` saves."""
    viewer = getattr(viewer, "__wrapped__", viewer)  # a widget's public-only proxy: the viewer
    if viewer is None or viewer in _watched:
        return
    _watched.add(viewer)
    add_to_layer_context_menu()
    check_out.add_to_layer_context_menu()
    view_3d.follow(viewer)
    for layer in viewer.layers:
        _on_layer(layer)
    viewer.layers.events.inserted.connect(lambda event: _on_layer(event.value))
    viewer.bind_key(SHORTCUT, lambda v: _shortcut(v), overwrite=True)
    window = getattr(getattr(viewer, "window", None), "_qt_window", None)
    if window is not None:
        guard = CloseGuard(viewer)
        window.installEventFilter(guard.filter)
        window._n5zarr_close_guard = guard  # lives as long as the window


def _viewers() -> list[Any]:
    """Every open napari viewer."""
    import napari

    found = list(getattr(napari.Viewer, "_instances", ()))
    current = napari.current_viewer()
    return found if current is None or current in found else [*found, current]


def changed(ref: weakref.ref[EditableLevel]) -> None:
    """An editable level made for napari was written or saved (from any thread):
    :func:`level_changed` on napari's thread."""
    notices.in_gui_thread(lambda: level_changed(ref()))


def level_changed(level: EditableLevel | None) -> None:
    """After a write or save of ``level``: the viewers showing it are watched, its layers'
    names marked (or not), the Save labels widgets of those viewers updated."""
    if level is None:
        return
    for viewer in _viewers():
        layers = [layer for layer in viewer.layers if editable_of(layer) is level]
        if layers:
            watch(viewer)
            for layer in layers:
                _mark(layer)
            for widget in SaveLabelsWidget.of(viewer):
                widget.show_unsaved()


def _mark(layer: Any) -> None:
    """``layer``'s name ends with :data:`MARKER` exactly while its data hold unsaved edits."""
    level = editable_of(layer)
    want = plain_name(layer.name) + (MARKER if level is not None and level.modified else "")
    if layer.name != want:
        layer.name = want


def unsaved_text(viewer: napari.Viewer) -> str:
    """How many blocks of which layers are not saved (the widget's live status)."""
    layers = edited_layers(viewer)
    if not layers:
        return NO_CHANGES
    parts = [
        f"{plain_name(layer.name)}: {_blocks(level.unsaved_blocks)}"
        for layer in layers
        if (level := editable_of(layer))
    ]
    return "unsaved: " + "; ".join(parts)


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"


def _shortcut(viewer: napari.Viewer) -> None:
    from napari.utils import notifications

    text = save_all(viewer)
    for widget in SaveLabelsWidget.of(viewer):
        widget.status.value = text
    notifications.show_info(f"napari-n5zarr: {text}")


class CloseGuard:
    """Asks Save / Discard / Cancel before napari's window closes while labels hold unsaved
    edits; Save saves, and a failed save keeps the window open with the error shown."""

    def __init__(self, viewer: napari.Viewer) -> None:
        from qtpy.QtCore import QEvent, QObject

        ref = weakref.ref(viewer)
        guard = self

        class Filter(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:
                v = ref()
                if (
                    event.type() == QEvent.Type.Close
                    and v is not None
                    and obj.isVisible()
                    and not guard.may_close(v)
                ):
                    event.ignore()
                    return True
                return False

        self.filter = Filter()

    def may_close(self, viewer: napari.Viewer) -> bool:
        """Whether the window may close: no unsaved edits, or the person's answer allows it."""
        names = [plain_name(layer.name) for layer in edited_layers(viewer)]
        if not names:
            return True
        answer = self.ask(names)
        if answer == "save":
            text, ok = _save_all(viewer)
            for widget in SaveLabelsWidget.of(viewer):
                widget.status.value = text
            return ok
        return answer == "discard"

    def ask(self, names: list[str]) -> str:
        """``"save"``, ``"discard"`` or ``"cancel"``: the person's answer."""
        from qtpy.QtWidgets import QMessageBox

        buttons = QMessageBox.StandardButton
        box = QMessageBox(
            QMessageBox.Icon.Warning, "Unsaved label edits",
            f"{', '.join(names)}: label edits not saved. Save them before closing napari?",
            buttons.Save | buttons.Discard | buttons.Cancel,
        )  # fmt: skip
        box.setDefaultButton(buttons.Save)
        box.setEscapeButton(buttons.Cancel)
        box.exec()
        clicked = box.standardButton(box.clickedButton())
        return {buttons.Save: "save", buttons.Discard: "discard"}.get(clicked, "cancel")


class SaveLabelsWidget(Container):
    """Dock widget: Save (and :data:`SHORTCUT`) writes every edited labels layer back; the
    status line says how many blocks are unsaved (wrapped: it never widens the dock)."""

    instances: ClassVar[weakref.WeakSet[SaveLabelsWidget]] = weakref.WeakSet()

    def __init__(self, napari_viewer: napari.Viewer) -> None:
        from qtpy.QtWidgets import QSizePolicy

        self.viewer = napari_viewer
        self._viewer = weakref.ref(getattr(napari_viewer, "__wrapped__", napari_viewer))
        self.save_button = PushButton(text="Save labels (Ctrl+Alt+S)")
        self.new_button = PushButton(text="New labels for this image")
        self.new_button.tooltip = "Empty labels (0) overlaying the selected image layer, editable at once; no block written"
        self.status = Label(value="")
        label = self.status.native
        label.setWordWrap(True)
        label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        super().__init__(widgets=[self.save_button, self.new_button, self.status])
        self.save_button.changed.connect(self.save)
        self.new_button.changed.connect(self.new_labels)
        SaveLabelsWidget.instances.add(self)
        watch(self._viewer())
        self.show_unsaved()

    @classmethod
    def of(cls, viewer: napari.Viewer) -> list[SaveLabelsWidget]:
        """The widgets docked in ``viewer``."""
        viewer = getattr(viewer, "__wrapped__", viewer)
        return [w for w in list(cls.instances) if w._viewer() is viewer]

    def show_unsaved(self) -> None:
        """The status line: how many blocks are unsaved, or "no changes"."""
        viewer = self._viewer()
        if viewer is not None:
            self.status.value = unsaved_text(viewer)

    def save(self) -> str:
        self.status.value = save_all(self.viewer)
        return str(self.status.value)

    def new_labels(self, destination: str | None = None) -> Any:
        """Empty labels for the selected image layer (asked where), opened editable and selected."""
        from napari_n5zarr._napari.new_labels import new_labels_for

        return new_labels_for(self.viewer, self.viewer.layers.selection.active, destination or None)
