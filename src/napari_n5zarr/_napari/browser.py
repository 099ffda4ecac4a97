"""Dock widget that browses an N5/Zarr hierarchy and opens nodes in the viewer.

The tree comes from :func:`napari_n5zarr.tree.build_tree` (pure, tested without Qt); this
module is only the view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qtpy.QtCore import Qt
from qtpy.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_n5zarr.tree import TreeNode, build_tree, join

if TYPE_CHECKING:
    import napari

PATH_ROLE = Qt.ItemDataRole.UserRole


class BrowserWidget(QWidget):
    """Type or pick a container, see its groups and datasets, double-click to open one."""

    def __init__(self, napari_viewer: napari.Viewer) -> None:
        super().__init__()
        self.viewer = napari_viewer
        self.root_location = ""
        self.location = QLineEdit(placeholderText="N5 container: folder, .zip, s3://… or https://…")
        self.location.returnPressed.connect(self.load)
        pick = QPushButton("…")
        pick.setToolTip("Choose a folder")
        pick.clicked.connect(self._pick)
        load = QPushButton("Load")
        load.clicked.connect(self.load)
        row = QHBoxLayout()
        row.addWidget(self.location)
        row.addWidget(pick)
        row.addWidget(load)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["name", "shape / dtype / blocks / compression"])
        self.tree.itemDoubleClicked.connect(self._open_item)
        self.open_button = QPushButton("Open selected in viewer")
        self.open_button.clicked.connect(lambda: self._open_item(self.tree.currentItem()))
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.tree)
        layout.addWidget(self.open_button)
        layout.addWidget(self.status)

    def _pick(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose an N5 container")
        if folder:
            self.location.setText(folder)
            self.load()

    def load(self, location: str | None = None) -> TreeNode | None:
        """Read the hierarchy at ``location`` (default: the text field) into the tree."""
        import napari_n5zarr

        location = location or self.location.text().strip()
        self.location.setText(location)
        self.tree.clear()
        try:
            root = napari_n5zarr.open(location)
            top = build_tree(root)
        except Exception as e:  # shown, never raised into Qt's event loop
            self.status.setText(f"Cannot open {location}: {e}")
            from napari.utils.notifications import show_error

            show_error(f"Cannot open {location}: {e}")
            return None
        self.root_location = location
        item = self._item(top, location)
        self.tree.addTopLevelItem(item)
        item.setExpanded(True)
        errors = sum(1 for n in top.walk() if n.kind == "error")
        count = sum(1 for n in top.walk() if n.kind == "array")
        self.status.setText(f"{count} datasets" + (f", {errors} unreadable" if errors else ""))
        return top

    def _item(self, node: TreeNode, label: str) -> QTreeWidgetItem:
        item = QTreeWidgetItem([label, node.summary])
        item.setData(0, PATH_ROLE, node.path)
        if node.kind == "error":
            item.setToolTip(1, node.error or "")
        for child in node.children:
            item.addChild(self._item(child, child.name))
        return item

    def _open_item(self, item: QTreeWidgetItem | None, _column: int = 0) -> None:
        if item is None or not self.root_location:
            return
        path = item.data(0, PATH_ROLE) or ""
        self.open_path(join(self.root_location, path))

    def open_path(self, location: str) -> list:
        """Add the layers of ``location`` to the viewer through this plugin's reader."""
        from napari_n5zarr._napari.viewer_launch import add_to_viewer

        try:
            layers = add_to_viewer(self.viewer, location)
        except Exception as e:
            from napari.utils.notifications import show_error

            show_error(f"Cannot open {location}: {e}")
            return []
        self.status.setText(f"opened {location}: {len(layers)} layer(s)")
        return layers
