"""Dock widget: export an image or labels layer as an N5 + Zarr v3 pyramid.

The export runs in a worker thread (the viewer stays responsive) with a napari progress
bar; Cancel stops it at the next block and removes the partial output. Errors become
napari notifications.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from magicgui.widgets import CheckBox, ComboBox, Container, FileEdit, Label, PushButton, SpinBox

from napari_n5zarr.blocks import ExportCancelled
from napari_n5zarr.n5.compression import N5_TYPES

if TYPE_CHECKING:
    import napari
    from napari.qt.threading import FunctionWorker


def _run_export(layer: Any, dest: str, options: dict[str, Any], progress: Any, cancel: threading.Event) -> str | None:
    """Worker body: the export, or None when cancelled."""
    from napari_n5zarr._napari.writer import export_layer

    data, meta, layer_type = layer.as_layer_data_tuple()
    try:
        return export_layer(dest, data, meta, labels=layer_type == "labels", progress=progress, cancel=cancel, **options)
    except ExportCancelled:
        return None


class ExportWidget(Container):
    """Layer, destination, compression, block size, levels, overwrite; Export / Cancel."""

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        self.viewer = napari_viewer
        self.layer = ComboBox(label="layer", choices=self._layer_choices, nullable=False)
        self.destination = FileEdit(label="destination", mode="w", filter="*.n5")
        self.compression = ComboBox(label="compression", choices=list(N5_TYPES), value="gzip")
        self.block_size = SpinBox(
            label="block size", value=0, min=0, max=8192, tooltip="block edge on spatial axes; 0 = automatic (64^3 / 256^2)"
        )
        self.levels = SpinBox(label="levels", value=0, min=0, max=32, tooltip="pyramid levels; 0 = until one block")
        self.overwrite = CheckBox(label="overwrite", value=False, tooltip="replace an existing N5/Zarr destination")
        self.export_button = PushButton(text="Export")
        self.cancel_button = PushButton(text="Cancel", enabled=False)
        self.status = Label(value="")
        super().__init__(
            widgets=[
                self.layer, self.destination, self.compression, self.block_size, self.levels,
                self.overwrite, self.export_button, self.cancel_button, self.status,
            ]
        )  # fmt: skip
        self.worker: FunctionWorker | None = None
        self._suggested: Path | None = None
        self._cancel = threading.Event()
        self.export_button.changed.connect(self.start)
        self.cancel_button.changed.connect(self.cancel)
        self.layer.changed.connect(self._suggest_destination)
        for event in (napari_viewer.layers.events.inserted, napari_viewer.layers.events.removed):
            event.connect(self._refresh)
        self._suggest_destination()

    def _layer_choices(self, _widget: Any = None) -> list[tuple[str, Any]]:
        from napari.layers import Image, Labels

        return [(layer.name, layer) for layer in self.viewer.layers if isinstance(layer, Image | Labels)]

    def _refresh(self, _event: Any = None) -> None:
        self.layer.reset_choices()

    def _suggest_destination(self, _value: Any = None) -> None:
        """``<folder>/<layer name>.n5`` unless the user typed a destination."""
        layer = self.layer.value
        current = Path(str(self.destination.value or "."))
        if layer is None or (current.suffix.lower() == ".n5" and current != self._suggested):
            return
        folder = current.parent if current.suffix.lower() == ".n5" else Path.cwd()
        self._suggested = folder / f"{layer.name}.n5"
        self.destination.value = self._suggested

    def options(self) -> dict[str, Any]:
        """The export keywords the form describes."""
        return {
            "compression": self.compression.value,
            "chunks": self.block_size.value or None,
            "levels": self.levels.value or "auto",
            "overwrite": self.overwrite.value,
        }

    def start(self, _value: Any = None) -> FunctionWorker | None:
        """Start the export in a worker thread; returns the worker."""
        from napari.qt.threading import create_worker
        from napari.utils import notifications, progress
        from superqt.utils import ensure_main_thread

        layer = self.layer.value
        if layer is None:
            notifications.show_warning("Choose an image or labels layer to export")
            return None
        if self.worker is not None:
            return self.worker
        dest = str(self.destination.value)
        self._cancel = threading.Event()
        bar = progress(total=0, desc=f"Exporting {layer.name}")

        @ensure_main_thread
        def on_progress(done: int, total: int) -> None:
            if bar.total != total:
                bar.total = total
            bar.update(done - bar.n)

        worker = create_worker(
            _run_export, layer, dest, self.options(), on_progress, self._cancel,
            _start_thread=False, _connect={"errored": self._failed},
        )  # fmt: skip
        worker.returned.connect(lambda result: self._done(result, dest))
        worker.finished.connect(bar.close)
        worker.finished.connect(self._finished)
        self.worker = worker
        self.export_button.enabled = False
        self.cancel_button.enabled = True
        self.status.value = f"exporting {layer.name}..."
        worker.start()
        return worker

    def cancel(self, _value: Any = None) -> None:
        """Stop the running export at its next block."""
        self._cancel.set()
        self.status.value = "cancelling..."

    def _done(self, result: str | None, dest: str) -> None:
        from napari.utils import notifications

        if result is None:
            self.status.value = "cancelled"
            notifications.show_info(f"Export to {dest} cancelled")
        else:
            self.status.value = f"saved {result}"
            notifications.show_info(f"Exported to {result}")

    def _failed(self, exc: BaseException) -> None:
        from napari.utils.notifications import notification_manager

        self.status.value = f"failed: {exc}"
        notification_manager.receive_error(type(exc), exc, exc.__traceback__)

    def _finished(self) -> None:
        self.worker = None
        self.export_button.enabled = True
        self.cancel_button.enabled = False
