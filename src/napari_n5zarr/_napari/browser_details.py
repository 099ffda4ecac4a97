"""The N5 browser's details panel: the selected node's preview, fields, blocks on disk, the
scale the reader will use and its metadata documents.

The preview, the reader's detection and the block count are read by a background job
(:class:`~napari_n5zarr._napari.browser_jobs.Jobs`) and cached per node; the panel shows
what is known at once and fills in the rest as it arrives.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterator
from typing import Any

from qtpy.QtCore import Qt
from qtpy.QtGui import QImage, QPixmap
from qtpy.QtWidgets import QLabel, QSizePolicy, QTextBrowser, QVBoxLayout, QWidget

from napari_n5zarr._napari.browser_jobs import Jobs
from napari_n5zarr.n5.constants import N5_JSON
from napari_n5zarr.read.node import convention_label
from napari_n5zarr.read.tree import Node, Tree

COLUMNS = ("name", "shape", "dtype", "kind", "compression", "blocks", "voxel", "size")
"""Columns in order of importance: at the default dock width (~345 px) name, shape and
dtype are visible; the rest scroll into view and are all in the details pane."""
HEADERS = {"name": "name", "shape": "shape", "dtype": "dtype", "kind": "kind", "compression": "compression",
           "blocks": "blocks", "voxel": "voxel size", "size": "size"}  # fmt: skip
THUMB_SIZE = 160

Key = tuple[str, str]
"""(the tree's location, the node's path)."""


class DetailsPanel(QWidget):
    """Preview (``thumbnail``) above the details text (``text``) of the node last shown."""

    def __init__(self, jobs: Jobs) -> None:
        super().__init__()
        self.jobs = jobs
        self.thumbs: dict[Key, Any] = {}
        """Previews read so far (an array, or the exception that prevented it)."""
        self.extra: dict[Key, dict[str, Any]] = {}
        """What the background job found per node (multiscale, blocks, their errors)."""
        self.current: Key | None = None
        self.thumbnail = QLabel(alignment=Qt.AlignmentFlag.AlignCenter)
        # At most THUMB_SIZE tall, but never a minimum: in a short dock (n5zarr view docks two
        # widgets) a fixed height pushed the status row and the Open button out of sight.
        self.thumbnail.setMaximumHeight(THUMB_SIZE)
        self.thumbnail.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        self.thumbnail.hide()  # shown with a preview: an empty one must not squeeze the tree
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.thumbnail, 1)
        layout.addWidget(self.text, 2)

    def clear(self) -> None:
        self.current = None
        self.text.clear()
        self.thumbnail.clear()
        self.thumbnail.hide()

    def show_node(self, tree: Tree, node: Node) -> None:
        """Show ``node`` now; read what is missing in the background."""
        key = (tree.location, node.path)
        self.current = key
        self.render(node, self.extra.get(key, {}))
        self.thumbnail.clear()
        self.thumbnail.hide()
        if key in self.thumbs:
            self._set_thumbnail(key, self.thumbs[key])
        if key in self.extra or not node.openable:
            return
        self.extra[key] = {}
        self.jobs.start(
            lambda stop: self._read(stop, tree, node, key), lambda step: step(), self._failed
        )

    def _failed(self, exc: BaseException) -> None:
        self.text.append(f"<p style='color:#c33'>{html.escape(str(exc))}</p>")

    def _read(self, stop: threading.Event, tree: Tree, node: Node, key: Key) -> Iterator[Any]:
        """The background job: the reader's detection, the preview, the block count."""
        extra: dict[str, Any] = {}
        try:
            extra["multiscale"] = tree.multiscale(node)
        except Exception as exc:
            extra["multiscale_error"] = str(exc)
        yield lambda found=dict(extra): self._ready(key, node, found)
        if key not in self.thumbs and not stop.is_set():
            try:
                image: Any = tree.thumbnail(node)
            except Exception as exc:
                image = exc
            yield lambda: self._set_thumbnail(key, image, keep=True)
        if stop.is_set():
            return
        try:
            extra["blocks"] = tree.block_count(node)
        except Exception as exc:
            extra["blocks_error"] = str(exc)
        yield lambda found=dict(extra): self._ready(key, node, found)

    def _ready(self, key: Key, node: Node, extra: dict[str, Any]) -> None:
        self.extra[key] = extra
        if self.current == key:
            self.render(node, extra)

    def _set_thumbnail(self, key: Key, image: Any, keep: bool = False) -> None:
        if keep:
            self.thumbs[key] = image
        if self.current != key:
            return
        if isinstance(image, Exception):
            self.thumbnail.setText(f"(no preview: {image})")
            self.thumbnail.show()
            return
        import numpy as np

        arr = np.ascontiguousarray(image)
        h, w = arr.shape
        qimage = QImage(arr.data, w, h, w, QImage.Format.Format_Grayscale8).copy()
        pix = QPixmap.fromImage(qimage).scaled(
            THUMB_SIZE,
            THUMB_SIZE,
            Qt.AspectRatioMode.KeepAspectRatio,
            Qt.TransformationMode.SmoothTransformation,
        )
        self.thumbnail.setPixmap(pix)
        self.thumbnail.show()

    def render(self, node: Node, extra: dict[str, Any]) -> None:
        """The details text of ``node`` with what the background job found (``extra``)."""
        self.text.setHtml("".join(details_html(node, extra)))


def details_html(node: Node, extra: dict[str, Any]) -> list[str]:
    row = node.row()
    esc = html.escape
    parts = [f"<b>{esc(node.path or row['name'])}</b> — {esc(row['kind'])}"]
    if (
        node.problem and node.lookup_table and not node.error
    ):  # bookkeeping, listed as such: no fault
        parts.append(f"<p style='color:grey'>{esc(node.problem)}</p>")
    elif node.problem:
        label = "Unreadable" if node.error else "Cannot be opened"
        parts.append(f"<p style='color:#c33'>{label}: {esc(node.problem)}</p>")
    table = [(HEADERS[c], row[c]) for c in COLUMNS[1:] if c != "kind" and row[c]]
    table.append(
        (
            "stored as",
            " + ".join(x for x, on in (("N5", node.n5), ("Zarr v3", node.zarr)) if on)
            or "implicit group",
        )
    )
    table.extend(node.facts)
    table.extend(_blocks_row(node, extra))
    parts.append(
        "<table>"
        + "".join(
            f"<tr><td style='padding-right:8px'>{esc(k)}</td><td>{esc(v)}</td></tr>"
            for k, v in table
        )
        + "</table>"
    )
    ms = extra.get("multiscale")
    if ms is not None:
        order = slice(None, None, -1)
        axes = list(ms.axes[order])
        parts.append(f"<p><b>The reader will use</b> ({esc(convention_label(ms.convention))}, {len(ms.paths)} level(s)"
                     f"{', labels' if ms.is_labels else ''}):</p>")  # fmt: skip
        cells = "".join(
            f"<tr><td>{esc(a)}</td><td>{s:g}</td><td>{t:g}</td><td>{esc(u or 'pixel')}</td></tr>"
            for a, s, t, u in zip(
                axes, ms.scale[order], ms.translate[order], ms.units[order], strict=True
            )
        )
        parts.append(
            f"<table><tr><th>axis</th><th>scale</th><th>translate</th><th>unit</th></tr>{cells}</table>"
        )
    elif "multiscale_error" in extra:
        parts.append(f"<p style='color:#c33'>{esc(extra['multiscale_error'])}</p>")
    if node.attributes:
        text = json.dumps(node.attributes, indent=1, default=str)
        parts.append(
            f"<p><b>{N5_JSON if node.n5 else 'attributes'}</b></p><pre>{esc(text[:20000])}</pre>"
        )
    if node.zarr_doc is not None and node.kind != "error":
        text = json.dumps(node.zarr_doc, indent=1, default=str)
        parts.append(f"<p><b>zarr.json (Zarr v3 view)</b></p><pre>{esc(text[:20000])}</pre>")
    return parts


def _blocks_row(node: Node, extra: dict[str, Any]) -> list[tuple[str, str]]:
    blocks = extra.get("blocks")
    if blocks is not None:
        on_disk, expected, partial = blocks
        sparse = " — sparse: missing blocks read as 0" if on_disk < expected and not partial else ""
        return [("blocks on disk", f"{on_disk:,}{'+' if partial else ''} of {expected:,}{sparse}")]
    if "blocks_error" in extra:
        return [("blocks on disk", extra["blocks_error"])]
    return [("blocks on disk", "counting…")] if node.openable else []
