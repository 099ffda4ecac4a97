"""Dock widget: export an image or labels layer as an N5 + Zarr v3 pyramid.

The export runs in a worker thread (the viewer stays responsive) with a progress bar in
the widget, determinate from the start (blocks are counted before writing); Cancel stops
it at the next block and removes the partial output (and an empty destination folder).
Block sizes are checked before anything is written. Ordinary mistakes (an existing
destination, a bad block size) are explained in the widget and a notification, without a
traceback; closing napari during an export asks first.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from magicgui.types import FileDialogMode
from magicgui.widgets import (
    CheckBox,
    ComboBox,
    Container,
    FileEdit,
    FloatSpinBox,
    Label,
    ProgressBar,
    PushButton,
)

from napari_n5zarr._napari.notices import plain_name
from napari_n5zarr.errors import ExportCancelled
from napari_n5zarr.n5.compression import N5_TYPES
from napari_n5zarr.write.export.plan import (  # the rule `n5zarr convert` applies too
    MAX_BLOCK_BYTES,
    MIN_BLOCK,
    block_edge_problem,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import napari
    from napari.qt.threading import FunctionWorker


MAX_BLOCKS = 250_000
"""Most blocks one export may write from the widget (over all levels)."""
ORDINARY = (FileExistsError, FileNotFoundError, PermissionError, ValueError, TypeError, OSError)
"""Errors that are a person's mistake or situation: explained, never shown as a traceback."""


NO_DESTINATION = (
    "Choose a destination: a folder name ending in .n5 or .ome.zarr (type it, or pick it with …)"
)
FORMATS = [("N5 + Zarr v3 (.n5)", "dual"), ("OME-Zarr (.ome.zarr)", "ome-zarr")]
"""The widget's format choice: the dual dataset (default) or a standard OME-Zarr."""
SUFFIXES = {"dual": ".n5", "ome-zarr": ".ome.zarr"}
COMPRESSIONS = {
    "dual": (list(N5_TYPES), "gzip"),
    "ome-zarr": (["zstd", "gzip", "blosc", "raw"], "zstd"),
}
"""Per format: (the compressions offered, the default)."""


def _full_width_message(form: Any, label: Any) -> None:
    """Put ``label`` under the form, across its whole width (no label column), wrapping
    at word boundaries and as tall as its text: a long message is never cut off."""
    from qtpy.QtCore import Qt
    from qtpy.QtWidgets import QSizePolicy

    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
    policy.setHeightForWidth(True)
    label.setSizePolicy(policy)
    form.layout().addWidget(label)


def _count_box(label: str, maximum: int, tooltip: str) -> FloatSpinBox:
    """A whole-number spin box whose 0 reads "auto". magicgui's SpinBox is superqt's
    QLargeIntSpinBox, which has no special-value text; QDoubleSpinBox (0 decimals) has."""
    box = FloatSpinBox(label=label, value=0, min=0, max=maximum, step=1, tooltip=tooltip)
    box.native.setDecimals(0)
    box.native.setSpecialValueText("auto")
    return box


def planned_blocks(
    shape: tuple[int, ...], dtype: Any, axis_labels: Any, block_size: int, levels: int, rgb: bool
) -> tuple[int, int]:
    """(blocks over all levels, bytes of one block) that an export would write."""
    import numpy as np

    from napari_n5zarr.write import pyramid
    from napari_n5zarr.write.export.plan import default_chunks

    labels = list(axis_labels) if axis_labels is not None else None
    if rgb:
        labels = [
            *(labels or [str(-i) for i in range(len(shape) - 1, 0, -1)])[: len(shape) - 1],
            "rgb",
        ]
    spatial = pyramid.spatial_axes(
        len(shape), labels if labels and any(str(a) in ("x", "y", "z") for a in labels) else None
    )
    if rgb and len(shape) - 1 in spatial:
        spatial = tuple(a for a in spatial if a != len(shape) - 1)
    block = (
        default_chunks(shape, spatial)
        if not block_size
        else tuple(block_size if i in spatial else 1 for i in range(len(shape)))
    )
    block = tuple(max(1, min(b, n)) for b, n in zip(block, shape, strict=True))
    steps = pyramid.plan(shape, block, spatial, None, levels or "auto")
    total, cur = 0, list(shape)
    for step in [None, *steps]:
        if step is not None:
            cur = [math.ceil(n / f) for n, f in zip(cur, step, strict=True)]
        total += math.prod(math.ceil(n / min(b, n)) for n, b in zip(cur, block, strict=True))
    return total, math.prod(block) * np.dtype(dtype).itemsize


def check_block_size(total: int, block_bytes: int, block_size: int) -> str | None:
    """Why these blocks are refused, or None."""
    too_small = block_edge_problem(block_size or None)
    if too_small:
        return f"{too_small}: it would write {total:,} blocks"
    if total > MAX_BLOCKS:
        return f"this would write {total:,} blocks (at most {MAX_BLOCKS:,}): choose a larger block size, or auto"
    if block_bytes > MAX_BLOCK_BYTES:
        return f"one block would hold {block_bytes / 2**20:,.0f} MiB (at most {MAX_BLOCK_BYTES // 2**20} MiB): choose a smaller block size, or auto"
    return None


_CHOOSE_WRITABLE = "choose a folder you can write to"
OS_ERROR_WORDS = {
    errno.EEXIST: 'already exists: choose another name, or tick "overwrite" to replace an N5/Zarr container',
    errno.EROFS: f"is on a read-only location: {_CHOOSE_WRITABLE}",
    errno.EACCES: f"cannot be written here (permission denied): {_CHOOSE_WRITABLE}",
    errno.EPERM: f"cannot be written here (not permitted): {_CHOOSE_WRITABLE}",
    errno.ENOENT: "is in a folder that does not exist: choose an existing folder",
    errno.ENOTDIR: "is inside a file, not a folder: choose another destination",
    errno.EISDIR: "is a folder where a file was expected: choose another destination",
    errno.ENAMETOOLONG: "has a name that is too long: choose a shorter one",
}
"""What an OSError's errno means for an export destination, and what to do."""


def os_error_words(exc: OSError) -> str:
    """An OSError as a sentence without its ``[Errno N]`` prefix: what happened to which path
    and what to do. A message this package wrote (not the system's short text) is kept."""
    if exc.errno is not None and exc.strerror and exc.strerror != os.strerror(exc.errno):
        return exc.strerror
    path = exc.filename if exc.filename is not None else ""
    if exc.errno == errno.ENOSPC:
        return f"no space left on the disk{f' writing {path}' if path else ''}: free some space or choose another disk"
    words = OS_ERROR_WORDS.get(exc.errno) if exc.errno is not None else None
    if words is not None:
        return f"{path} {words}" if path else f"the destination {words}"
    detail = exc.strerror or (str(exc.args[0]) if exc.args else type(exc).__name__)
    return f"{detail}: {path}" if path else detail


def gui_wording(exc: BaseException) -> str:
    """An error in the words of this form (``overwrite=True`` is the "overwrite" box)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return os_error_words(exc)
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = text.replace("(pass overwrite=True to replace it)", '(tick "overwrite" to replace it)')
    return text.replace("pass overwrite=True", 'tick "overwrite"').replace(
        "overwrite=True", '"overwrite" ticked'
    )


CONTAINER_SUFFIXES = (".n5", ".zarr", ".zip", ".xml")


def suggested_name(
    layer_name: str, taken: Callable[[str], bool] = lambda _name: False, suffix: str = ".n5"
) -> str:
    """``<name>.n5`` (or ``suffix``) for a layer: its last path part, the container suffixes
    it came with dropped (``vol.n5`` gives ``vol.n5``, never ``vol.n5.n5``); ``-copy``,
    ``-copy2``... while ``taken(name)`` (an existing folder, e.g. the one the layer was read from)."""
    base = layer_name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip() or "layer"
    while base.lower().endswith((*CONTAINER_SUFFIXES, ".ome")):
        base = base[: base.rfind(".")] or "layer"
    for n in range(1, 1000):
        name = f"{base}{'' if n == 1 else '-copy' if n == 2 else f'-copy{n - 1}'}{suffix}"
        if not taken(name):
            return name
    return f"{base}{suffix}"


def _suffix_of(path: Path) -> str | None:
    """The format suffix ``path`` ends with (``.n5`` / ``.ome.zarr``), if any."""
    return next((x for x in SUFFIXES.values() if path.name.lower().endswith(x)), None)


def _run_export(
    layer: Any, dest: str, options: dict[str, Any], progress: Any, cancel: threading.Event
) -> str | None:
    """Worker body: the export, or None when cancelled."""
    from napari_n5zarr._napari.writer import export_layer

    data, meta, layer_type = layer.as_layer_data_tuple()
    try:
        return export_layer(
            dest,
            data,
            meta,
            labels=layer_type == "labels",
            progress=progress,
            cancel=cancel,
            **options,
        )
    except ExportCancelled:
        return None


class ExportWidget(Container):
    """Layer, destination, compression, block size, levels, overwrite; Export / Cancel."""

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        self.viewer = napari_viewer
        self.layer = ComboBox(label="layer", choices=self._layer_choices, nullable=False)
        self.destination = FileEdit(
            label="destination", mode=FileDialogMode.OPTIONAL_FILE, filter="*.n5"
        )
        self.format = ComboBox(label="format", choices=FORMATS, value="dual", tooltip=(
            "N5 + Zarr v3: one folder that N5 tools (Fiji, BigDataViewer) and Zarr readers with "
            "this package open; OME-Zarr: standard Zarr v3 codecs and OME-NGFF 0.5 metadata, for any OME-Zarr reader"))  # fmt: skip
        self.compression = ComboBox(label="compression", choices=list(N5_TYPES), value="gzip")
        self.block_size = _count_box(
            "block size",
            4096,
            f"block edge on spatial axes, {MIN_BLOCK} or more; auto = 64^3 (3D) / 256^2 (2D)",
        )
        self.levels = _count_box("levels", 32, "pyramid levels; auto = until one block")
        self.overwrite = CheckBox(
            label="overwrite", value=False, tooltip="replace an existing N5/Zarr destination"
        )
        self.export_button = PushButton(text="Export")
        self.cancel_button = PushButton(text="Cancel", enabled=False)
        self.progress = ProgressBar(label="progress", value=0, min=0, max=1, visible=False)
        self.status = Label(value="")
        super().__init__(
            widgets=[
                self.layer, self.destination, self.format, self.compression, self.block_size, self.levels,
                self.overwrite, self.export_button, self.cancel_button, self.progress,
            ]
        )  # fmt: skip
        _full_width_message(self.native, self.status.native)
        self.worker: FunctionWorker | None = None
        self._suggested: Path | None = None
        self._cancel = threading.Event()
        self.export_button.changed.connect(self.start)
        self.cancel_button.changed.connect(self.cancel)
        self.destination.choose_btn.text = "…"  # the path gets the room "Select file" took
        self.destination.choose_btn.tooltip = "Choose the destination (a folder name ending in .n5)"
        self.destination.changed.connect(self._show_destination)
        self.layer.changed.connect(self._suggest_destination)
        self.format.changed.connect(self._format_changed)
        self.layer.changed.connect(self._levels_for_layer)
        self._close_guard = _CloseGuard(self)
        for event in (napari_viewer.layers.events.inserted, napari_viewer.layers.events.removed):
            event.connect(self._refresh)
        self._suggest_destination()
        self._levels_for_layer()

    def _levels_for_layer(self, _value: Any = None) -> None:
        """A multiscale layer is saved with its own levels: the field says so, disabled."""
        layer = self.layer.value
        if layer is not None and getattr(layer, "multiscale", False):
            self.levels.enabled = False
            self.levels.tooltip = f"{layer.name} is multiscale: its own {len(layer.data)} levels are saved as they are"
        else:
            self.levels.enabled = True
            self.levels.tooltip = "pyramid levels; auto = until one block"

    def _layer_choices(self, _widget: Any = None) -> list[tuple[str, Any]]:
        from napari.layers import Image, Labels

        return [
            (layer.name, layer) for layer in self.viewer.layers if isinstance(layer, Image | Labels)
        ]

    def _format_changed(self, _value: Any = None) -> None:
        """The compressions the format offers, and the destination's suffix following it."""
        fmt = self.format.value
        choices, default = COMPRESSIONS[fmt]
        current = self.compression.value
        chosen = current not in (d for _, d in COMPRESSIONS.values())  # the user's, not a default
        self.compression.choices = choices
        self.compression.value = current if chosen and current in choices else default
        self.destination.filter = f"*{SUFFIXES[fmt]}"
        path = Path(str(self.destination.value or "."))
        old = _suffix_of(path)
        if old is not None and old != SUFFIXES[fmt]:
            renamed = path.with_name(path.name[: -len(old)] + SUFFIXES[fmt])
            if self._suggested == path:
                self._suggested = renamed
            self.destination.value = renamed

    def _refresh(self, _event: Any = None) -> None:
        self.layer.reset_choices()

    def _suggest_destination(self, _value: Any = None) -> None:
        """``<folder>/<layer name>.n5`` (see :func:`suggested_name`) unless the user typed a destination."""
        layer = self.layer.value
        current = Path(str(self.destination.value or "."))
        if layer is None or (_suffix_of(current) and current != self._suggested):
            return
        folder = current.parent if _suffix_of(current) else Path.cwd()
        self._suggested = folder / suggested_name(
            plain_name(layer.name),
            taken=lambda name: (folder / name).exists(),
            suffix=SUFFIXES[self.format.value],
        )
        self.destination.value = self._suggested

    def _show_destination(self, _value: Any = None) -> None:
        """The field shows the path's start (its folder) when it is too long to fit, the
        whole path in its tooltip (a QLineEdit set by code shows the end)."""
        line = self.destination.line_edit.native
        if not line.hasFocus():
            line.setCursorPosition(0)
        line.setToolTip(line.text())

    def options(self) -> dict[str, Any]:  # type: ignore[override]  # shadows magicgui's options property
        """The export keywords the form describes."""
        return {
            "format": self.format.value,
            "compression": self.compression.value,
            "chunks": int(self.block_size.value) or None,
            "levels": int(self.levels.value) or "auto",
            "overwrite": self.overwrite.value,
        }

    def start(self, _value: Any = None) -> FunctionWorker | None:
        """Check the form, then start the export in a worker thread; returns the worker."""
        from napari.qt.threading import create_worker
        from superqt.utils import ensure_main_thread

        layer = self.layer.value
        if layer is None:
            self._refuse("Choose an image or labels layer to export")
            return None
        if self.worker is not None:
            return self.worker
        if str(self.destination.line_edit.value).strip() in ("", "."):
            self._refuse(NO_DESTINATION)  # an empty field would mean napari's working directory
            return None
        problem, total = self._check(layer)
        if problem:
            self._refuse(problem)
            return None
        dest = str(self.destination.value)
        self._existed = Path(dest).exists()
        self._cancel = threading.Event()
        self.progress.max = max(1, total)
        self.progress.value = 0
        self.progress.visible = True

        @ensure_main_thread
        def on_progress(done: int, total: int) -> None:
            self.progress.max = max(1, total)
            self.progress.value = min(done, total)

        worker = create_worker(
            _run_export, layer, dest, self.options(), on_progress, self._cancel,
            _start_thread=False, _connect={"errored": lambda exc: self._failed(exc, dest)},
        )  # fmt: skip
        worker.returned.connect(lambda result: self._done(result, dest))
        worker.finished.connect(self._finished)
        self.worker = worker
        self._close_guard.attach()
        self.export_button.enabled = False
        self.cancel_button.enabled = True
        self.status.value = f"exporting {layer.name}: {total:,} blocks"
        worker.start()
        return worker

    def _check(self, layer: Any) -> tuple[str | None, int]:
        """(why the form cannot be exported, blocks it would write)."""
        multiscale = getattr(layer, "multiscale", False)
        data = layer.data[0] if multiscale else layer.data
        try:
            total, block_bytes = planned_blocks(
                tuple(data.shape), data.dtype, getattr(layer, "axis_labels", None),
                int(self.block_size.value), 1 if multiscale else int(self.levels.value), bool(getattr(layer, "rgb", False)),
            )  # fmt: skip
        except Exception as exc:  # a plan we cannot make: let export() say why
            return None if not isinstance(exc, ValueError) else str(exc), 0
        if multiscale:
            total = total * 4 // 3 + len(layer.data)  # the given levels: about a third more
        return check_block_size(total, block_bytes, int(self.block_size.value)), total

    def _refuse(self, message: str) -> None:
        from napari.utils import notifications

        self.status.value = message
        notifications.show_warning(message)
        return

    def cancel(self, _value: Any = None) -> None:
        """Stop the running export at its next block."""
        self._cancel.set()
        self.status.value = "cancelling..."

    def _done(self, result: str | None, dest: str) -> None:
        from napari.utils import notifications

        if result is None:
            self._remove_empty(dest)
            self.status.value = "cancelled"
            notifications.show_info(f"Export to {dest} cancelled")
        else:
            self.progress.value = self.progress.max
            self.status.value = f"saved {result}"
            notifications.show_info(f"Exported to {result}")

    def _failed(self, exc: BaseException, dest: str = "") -> None:
        from napari.utils import notifications
        from napari.utils.notifications import notification_manager

        self._remove_empty(dest)
        message = gui_wording(exc)
        self.status.value = f"failed: {message}"
        if isinstance(exc, ORDINARY):
            notifications.show_error(
                f"Export failed: {message}"
            )  # no traceback for a person's mistake
        else:
            notification_manager.receive_error(type(exc), exc, exc.__traceback__)

    def _remove_empty(self, dest: str) -> None:
        """A destination folder this export created and left empty goes away."""
        path = Path(dest) if dest else None
        if path is None or getattr(self, "_existed", True):
            return
        with contextlib.suppress(OSError):
            path.rmdir()  # only ever removes an empty folder

    def _finished(self) -> None:
        self.worker = None
        self.export_button.enabled = True
        self.cancel_button.enabled = False
        self.progress.visible = self.status.value.startswith("saved")


class _CloseGuard:
    """Asks before napari's window closes while an export runs (Cancel keeps it open)."""

    def __init__(self, widget: ExportWidget) -> None:
        from qtpy.QtCore import QEvent, QObject

        guard = self

        class Filter(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:
                if (
                    event.type() == QEvent.Type.Close
                    and widget.worker is not None
                    and obj.isVisible()
                ):
                    if not guard.confirm():
                        event.ignore()
                        return True
                    widget.cancel()
                return False

        self.widget = widget
        self.filter = Filter()
        self.watched = 0  # id() of the watched window: no reference that would keep it alive

    def attach(self) -> None:
        """Watch the window this widget is docked in (napari's main window)."""
        window = self.widget.native.window()
        if window is not None and id(window) != self.watched and window is not self.widget.native:
            window.installEventFilter(self.filter)
            self.watched = id(window)

    def confirm(self) -> bool:
        """True: cancel the export and close."""
        from qtpy.QtWidgets import QMessageBox

        answer = QMessageBox.question(
            None, "Export running", "An export is still running. Cancel it and close napari?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No,
        )  # fmt: skip
        return answer == QMessageBox.StandardButton.Yes
