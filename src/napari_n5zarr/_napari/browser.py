"""The N5 browser dock widget: browse a container's tree, filter it, open nodes as layers.

Three parts: this module is the widget (location, filter with its match count, the tree
view, Open); :mod:`~napari_n5zarr._napari.browser_jobs` runs everything that reads storage
in background workers (listing, the walk behind the filter and Expand all, details, layers);
:mod:`~napari_n5zarr._napari.browser_details` is the details panel. The model is
:mod:`napari_n5zarr.read.tree` (pure Python, tested without Qt). The GUI thread reads no
file: rows arrive in batches from the workers and go into the view as they come.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import QEvent, QSize, Qt, QTimer, Signal
from qtpy.QtGui import QBrush, QColor, QFont
from qtpy.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSplitter,
    QToolButton,
    QToolTip,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_n5zarr._napari.browser_details import COLUMNS, HEADERS, DetailsPanel
from napari_n5zarr._napari.browser_jobs import WALKED, Jobs, Lister, Rows
from napari_n5zarr.read.tree import Node, Tree, open_tree
from napari_n5zarr.storage.location import display_name, join

if TYPE_CHECKING:
    import napari

__all__ = [
    "COLUMNS",
    "DOCK_NAME",
    "GREY",
    "HEADERS",
    "BrowserWidget",
    "dock_browser",
    "load_recent",
    "tooltip",
]

WIDTHS = (120, 118, 50, 130, 80, 80, 120, 70)
"""Starting widths; columns grow to fit their content (see ``_Tree``)."""
NAME_MIN = 90
"""The name column never gets narrower (names are elided in the middle only below this)."""
DOCK_NAME = "N5 browser"
"""Title of the browser's dock (one per viewer: the reader and ``n5zarr view`` reuse it)."""
DOCK_WIDTH = 345
"""At 1280 px napari's canvas keeps ~560 px; a name four groups deep (``em_fibsem_mid``),
a 3D shape with its axes and the dtype fit side by side."""
RECENT_MAX = 12
REFILTER_ROWS = 2000
"""Rows shown or hidden per event-loop turn when the filter text changes."""
NODE_ROLE = Qt.ItemDataRole.UserRole
GREY = QColor(128, 128, 128)


def recent_file() -> Path:
    """Where recent locations are kept (``$NAPARI_N5ZARR_CONFIG`` or ``~/.config/napari-n5zarr``)."""
    base = os.environ.get("NAPARI_N5ZARR_CONFIG") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "napari-n5zarr"
    )
    return Path(base) / "recent.json"


def load_recent() -> list[str]:
    try:
        items = json.loads(recent_file().read_text())
        return [str(x) for x in items if isinstance(x, str)][:RECENT_MAX]
    except (OSError, ValueError, TypeError):
        return []


def save_recent(location: str, items: list[str]) -> list[str]:
    items = [location] + [x for x in items if x != location]
    items = items[:RECENT_MAX]
    try:
        path = recent_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(items))
    except OSError:
        pass
    return items


def read_node_layers(tree: Tree, node: Node, notify: Callable[[str, str], None]) -> list[tuple]:
    """Layer data for a node as the reader makes it, from the browser's own tree: the walk
    that made the row (a zip's or a BigDataViewer XML's node with the XML's setups)."""
    from napari_n5zarr._napari.layers import MAX_LAYERS, layers_from_node

    name = node.name or display_name(tree.location)
    return layers_from_node(
        (tree, node),
        name=name,
        source=join(tree.location, node.path),
        notify=notify,
        max_layers=MAX_LAYERS,
    )


def dock_browser(viewer: napari.Viewer) -> BrowserWidget:
    """The viewer's N5 browser, docked on the right if it is not yet (one per viewer)."""
    browser = dict(viewer.window.dock_widgets).get(DOCK_NAME)
    if browser is None:
        browser = BrowserWidget(viewer)
        viewer.window.add_dock_widget(browser, name=DOCK_NAME, area="right")
    return browser


class _Tree(QTreeWidget):
    """The tree view: Enter opens, tooltips show a row's full text (built on demand).

    Columns are as wide as the rows on screen (and the header) need and never narrower
    than what they held before. The name column's need comes first, then shape and dtype
    (always shown), then the others in order of importance while they fit (all are in the
    tooltip and the details); the name column takes what is left. So names are whole and
    there is no horizontal scrollbar at any dock width where name, shape and dtype fit;
    narrower, the name is elided in the middle (never below ``NAME_MIN``)."""

    open_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._content = [0] * len(COLUMNS)
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self.fit_columns)
        self.header().setStretchLastSection(False)
        self.header().setSectionsMovable(False)

    def setColumnCount(self, columns: int) -> None:
        super().setColumnCount(columns)
        self._content = [0] * columns
        model = self.model()
        model.rowsInserted.connect(self.schedule_fit)  # rows stream in: refit once per turn
        self.itemExpanded.connect(self.schedule_fit)
        self.verticalScrollBar().valueChanged.connect(self.schedule_fit)

    def schedule_fit(self, *_args: Any) -> None:
        if not self._fit_timer.isActive():
            self._fit_timer.start()

    def clear(self) -> None:
        super().clear()
        self._content = [0] * self.columnCount()
        self.schedule_fit()

    def fit_columns(self) -> None:
        """Widen each column to what its rows on screen and its header need, then lay out."""
        header = self.header()
        for i in range(self.columnCount()):
            self._content[i] = max(
                self._content[i], header.sectionSizeHint(i), self.sizeHintForColumn(i)
            )
        self.layout_columns()

    def layout_columns(self) -> None:
        room = self.viewport().width()
        name = max(NAME_MIN, self._content[0] if self._content else 0)
        used = name
        for i in range(1, self.columnCount()):
            width = self._content[i] or WIDTHS[i]
            show = i <= 2 or (not self.isColumnHidden(i - 1) and used + width <= room)
            self.setColumnHidden(i, not show)
            if show:
                self.setColumnWidth(i, width)
                used += width
        self.setColumnWidth(0, max(NAME_MIN, room - (used - name)))

    def keyPressEvent(self, event: Any) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.open_requested.emit()
            return
        super().keyPressEvent(event)

    def viewportEvent(self, event: Any) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.layout_columns()  # the view's width changed (dock resized, scrollbar shown)
        if event.type() == QEvent.Type.ToolTip:
            item = self.itemAt(event.pos())
            node = item.data(0, NODE_ROLE) if item is not None else None
            if isinstance(node, Node):
                QToolTip.showText(event.globalPos(), tooltip(node), self.viewport())
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)


def tooltip(node: Node) -> str:
    row = node.row()
    lines = [f"<b>{html.escape(node.path or row['name'])}</b> — {html.escape(row['kind'])}"]
    lines += [f"{HEADERS[c]}: {html.escape(row[c])}" for c in COLUMNS[1:] if c != "kind" and row[c]]
    if (
        node.problem and node.lookup_table and not node.error
    ):  # bookkeeping, listed as such: no fault
        lines.append(f"<span style='color:grey'>{html.escape(node.problem)}</span>")
    elif node.problem:
        lines.append(
            f"<span style='color:#c33'>{'unreadable' if node.error else 'cannot open'}: {html.escape(node.problem)}</span>"
        )
    return "<br>".join(lines)


class BrowserWidget(QWidget):
    """Pick a container (folder, .zip, BigDataViewer .xml, s3:// or http(s):// URL), browse
    its tree lazily, filter it by name at any depth, see a node's details and thumbnail,
    open nodes as layers."""

    def __init__(self, napari_viewer: napari.Viewer) -> None:
        super().__init__()
        self.viewer = napari_viewer
        self.tree_model: Tree | None = None
        self.root_location = ""
        self.jobs = jobs = Jobs()
        self._lister: Lister | None = None
        self._items: dict[str, QTreeWidgetItem] = {}
        self._requested: set[str] = set()  # groups whose listing was asked for
        self._done: set[str] = set()  # groups listed completely
        self._loading: dict[str, QTreeWidgetItem] = {}  # group path -> its "loading…" row
        self._walk_asked = False
        self._walked = False
        self._expand_everything = False
        self._text = ""  # the filter, lower case
        self._matches = 0
        self._refilter: Iterator[None] | None = None
        self._reveal: str | None = None  # a node path to select once listed (see reveal)
        self._claimed = False  # the dock was widened to sizeHint once (see _claim_width)
        self._refilter_timer = QTimer(self, singleShot=True, interval=0)
        self._refilter_timer.timeout.connect(self._refilter_step)
        self._recent = load_recent()
        self.destroyed.connect(
            lambda *_: jobs.shutdown()
        )  # not a method of self: it is gone by then
        self._build()

    def _build(self) -> None:
        """The dock's widgets, top to bottom: location, filter, tree over details, status and Open."""
        row = self._location_row()
        filter_row = self._filter_row()
        self._build_tree()
        self.open_button = QPushButton("Open")
        self.open_button.setToolTip(
            "Open the selected datasets/pyramids as layers (double-click or Enter too)"
        )
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self.open_selected)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        split = self._tree_over_details()

        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addLayout(filter_row)
        layout.addWidget(split, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.open_button)
        layout.addLayout(bottom)

    def _location_row(self) -> QHBoxLayout:
        """The location box (typed, recent, Enter loads) and the browse button."""
        self.combo = QComboBox(editable=True)
        self.combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.combo.setMinimumContentsLength(12)  # a long path must not widen the dock
        self.combo.addItems(self._recent)
        self.combo.setCurrentIndex(-1)
        self.combo.setToolTip(
            "Folder, .zip, BigDataViewer .xml, s3://… or https://… (Enter loads; recent locations in the list)"
        )
        self.location: QLineEdit = self.combo.lineEdit()
        self.location.setPlaceholderText("N5: folder, .zip, .xml, s3://, https://")
        self.location.returnPressed.connect(lambda: self.load())
        self.combo.activated.connect(lambda _i: self.load())
        browse = QToolButton(
            text="…", toolTip="Browse for a folder, a .zip or a BigDataViewer .xml"
        )
        menu = QMenu(browse)
        menu.addAction("Folder…", self._pick_folder)
        menu.addAction("File (.zip, BigDataViewer .xml)…", self._pick_file)
        browse.clicked.connect(lambda: menu.exec(browse.mapToGlobal(browse.rect().bottomLeft())))
        self.browse_button = browse  # no setMenu(): its arrow was drawn over the "…"
        row = QHBoxLayout()
        row.addWidget(self.combo, 1)
        row.addWidget(browse)
        return row

    def _filter_row(self) -> QHBoxLayout:
        """The name filter and its match count."""
        self.filter = QLineEdit(
            placeholderText="filter by name (any depth)", clearButtonEnabled=True
        )
        self.filter.textChanged.connect(self._filter_changed)
        self.match_count = QLabel("")
        self.match_count.setToolTip("Nodes whose name contains the filter text, at any depth")
        self.match_count.hide()
        filter_row = QHBoxLayout()
        filter_row.addWidget(self.filter, 1)
        filter_row.addWidget(self.match_count)
        return filter_row

    def _build_tree(self) -> None:
        """The node tree: columns, selection, expanding and opening."""
        self.tree = _Tree()
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels([HEADERS[c] for c in COLUMNS])
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.tree.setUniformRowHeights(True)
        self.tree.setIndentation(12)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setExpandsOnDoubleClick(True)
        for i, w in enumerate(WIDTHS):
            self.tree.setColumnWidth(i, w)
        self.tree.itemExpanded.connect(self._expanded)
        self.tree.itemDoubleClicked.connect(self._double_clicked)
        self.tree.open_requested.connect(self.open_selected)
        self.tree.itemSelectionChanged.connect(self._selection_changed)
        self.tree.setMinimumHeight(120)
        self.tree.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.tree.addAction("Expand all (lists every group)", self.expand_all)
        self.tree.addAction("Collapse all", self.tree.collapseAll)
        self.tree.addAction("Copy view to a local N5…", self.copy_view)

    def _tree_over_details(self) -> QSplitter:
        """The tree above the details panel (the reader's view of the selected node)."""
        self.panel = DetailsPanel(self.jobs)
        self.details = self.panel.text
        self.thumbnail = self.panel.thumbnail
        self._thumbs = self.panel.thumbs
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(self.panel)
        split.setStretchFactor(0, 2)  # details get the larger part: every field, the
        split.setStretchFactor(1, 3)  # reader's scale table and the attributes
        return split

    @property
    def busy(self) -> bool:
        """Work is running or rows are being shown/hidden (tests wait for ``not busy``)."""
        return bool(self.jobs.running or self._refilter is not None)

    def _start(self, work: Callable[[Any], Iterator[Any]], on_yield: Callable[[Any], None]) -> None:
        self.jobs.start(work, on_yield, self._job_failed, self._update_status)

    def _job_failed(self, exc: BaseException) -> None:
        self._set_status(f"error: {exc}")  # shown in the status line, never lost in a thread

    # -- loading a location ----------------------------------------------------------
    def load(self, location: str | None = None) -> None:
        """Open ``location`` (default: the text field) in the background and list its root."""
        location = (location or self.location.text()).strip()
        if not location:
            return
        self.location.setText(location)
        self._reset()
        self._set_status(f"opening {location}…")

        def work(_stop: Any) -> Iterator[Any]:
            try:
                tree = open_tree(location)
            except Exception as exc:
                yield lambda e=exc: self._failed(location, e)
                return
            yield lambda: self._rooted(tree)

        self._start(work, lambda step: step())

    def _reset(self) -> None:
        self.jobs.cancel()
        self._lister = None
        self._walk_asked = self._walked = self._expand_everything = False
        self._reveal = None
        self._refilter = None
        self.tree.clear()
        self._items.clear()
        self._requested.clear()
        self._done.clear()
        self._loading.clear()
        self.tree_model = None
        self.panel.clear()
        self.open_button.setEnabled(False)
        self._show_count()

    def _failed(self, location: str, exc: BaseException) -> None:
        self._set_status(f"Cannot open {location}: {exc}")
        try:
            from napari.utils.notifications import show_error

            show_error(f"napari-n5zarr: cannot open {location}: {exc}")
        except Exception:
            pass

    def _rooted(self, tree: Tree) -> None:
        self.tree_model = tree
        self._lister = Lister(tree, urgent=self._matches_filter)
        self.root_location = tree.location
        self._recent = save_recent(tree.location, self._recent)
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItems(self._recent)
        self.combo.setCurrentIndex(0)
        self.combo.blockSignals(False)
        label = (
            tree.location.rstrip("/").rsplit("/", 1)[-1] or tree.location
        )  # full path: combo and tooltip
        item = self._make_item(tree.root, label=label)
        self.tree.addTopLevelItem(item)
        if tree.root.has_children:
            item.setExpanded(True)  # lists the first level (lazily, in the background)
        self.tree.setCurrentItem(item)
        if self._text:
            self._walk()
        self._reveal_step()

    # -- listing -----------------------------------------------------------------------
    def _make_item(self, node: Node, label: str | None = None) -> QTreeWidgetItem:
        row = node.row()
        texts = [row[c] for c in COLUMNS]
        if label is not None:
            texts[0] = label
        item = QTreeWidgetItem(texts)
        item.setData(0, NODE_ROLE, node)
        if node.has_children:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
        if node.kind == "pyramid":
            font = QFont(item.font(0))
            font.setBold(True)
            item.setFont(0, font)
        if node.problem:
            brush = QBrush(GREY)
            for i in range(len(COLUMNS)):
                item.setForeground(i, brush)
            if node.error:
                item.setText(3, "unreadable")
        self._items[node.path] = item
        return item

    def _expanded(self, item: QTreeWidgetItem) -> None:
        node = item.data(0, NODE_ROLE)
        if not isinstance(node, Node) or not node.has_children or node.path in self._done:
            return
        self._add_loading_row(node.path)
        if node.path not in self._requested and self._lister is not None:
            self._requested.add(node.path)
            if self._lister.request(node):
                self._start_lister()

    def _walk(self) -> None:
        """List every group (for the filter and Expand all), once per location."""
        if self._walk_asked or self._lister is None:
            return
        self._walk_asked = True
        if self._lister.request_walk():
            self._start_lister()

    def _start_lister(self) -> None:
        lister = self._lister
        assert lister is not None
        self._start(lister.work, lambda batch: self._take(lister, batch))

    def _take(self, lister: Lister, batch: Any) -> None:
        """Put a batch of rows from the lister into the view (GUI thread)."""
        try:
            if lister is not self._lister:
                return
            if batch == WALKED:
                self._walked = True
                self._show_count()
                return
            for rows in batch:
                self._add_rows(rows)
            self._update_status()
        finally:
            lister.taken()

    def _add_loading_row(self, path: str) -> None:
        """A "loading…" row under an expanded group being listed. Collapsed groups get none:
        rows going into a collapsed group cost Qt nothing, while every change under an
        expanded one makes the view lay out all its visible rows again."""
        parent = self._items.get(path)
        if parent is None or path in self._loading or path in self._done or not parent.isExpanded():
            return
        row = QTreeWidgetItem(["loading…"])
        font = QFont(row.font(0))
        font.setItalic(True)
        row.setFont(0, font)
        row.setForeground(0, QBrush(GREY))
        row.setFlags(Qt.ItemFlag.NoItemFlags)
        parent.addChild(row)
        self._loading[path] = row

    def _add_rows(self, rows: Rows) -> None:
        parent = self._items.get(rows.path)
        if parent is None or rows.path in self._done:
            return
        if rows.nodes:
            items = [self._make_item(n) for n in rows.nodes]
            loading = self._loading.get(rows.path)
            at = parent.indexOfChild(loading) if loading is not None else parent.childCount()
            parent.insertChildren(at, items)
            if loading is not None:
                loading.setText(0, f"loading… {at + len(items):,} so far")
            if self._text:
                for item in items:
                    self._matches += self._apply_filter(item, self._text)
                self._show_count()
        if rows.complete:
            self._listed(parent, rows.path)
        if self._reveal is not None:
            self._reveal_step()

    def _listed(self, parent: QTreeWidgetItem, path: str) -> None:
        self._done.add(path)
        loading = self._loading.pop(path, None)
        if loading is not None:
            parent.removeChild(loading)
        if parent.childCount() == 0:
            parent.setChildIndicatorPolicy(
                QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicatorWhenChildless
            )
        elif self._expand_everything and not parent.isHidden():
            parent.setExpanded(True)

    def expand_all(self) -> None:
        """Expand the whole tree (listing every group in the background, no cap)."""
        self._expand_everything = True
        for path in list(self._done):
            item = self._items.get(path)
            if item is not None and item.childCount():
                item.setExpanded(True)
        self._walk()

    def _update_status(self) -> None:
        if self.tree_model is None:
            return
        state = "listing…" if self.jobs.running else "listed"
        loading = f" ({len(self._loading)} groups loading)" if self._loading else ""
        self._set_status(f"{len(self._items):,} nodes {state}{loading}")

    def _set_status(self, text: str) -> None:
        self.status.setText(text)

    def reveal(self, path: str) -> None:
        """Select the node at ``path`` (relative to the root), or the pyramid that holds it,
        listing its ancestors in the background as needed; the details pane then shows it."""
        self._reveal = path.strip("/")
        self._reveal_step()

    def _reveal_step(self) -> None:
        """Go down towards the node to reveal as far as the rows listed so far allow."""
        target = self._reveal
        if target is None or self.tree_model is None:
            return
        parts = target.split("/") if target else []
        for depth in range(len(parts) + 1):
            item = self._items.get("/".join(parts[:depth]))
            if item is None:  # not listed yet (its parent is being listed), or not there
                if "/".join(parts[: depth - 1]) in self._done:
                    self._reveal = None
                return
            node = item.data(0, NODE_ROLE)
            if depth == len(parts) or (isinstance(node, Node) and node.kind == "pyramid"):
                self._reveal = None
                self.tree.setCurrentItem(item)
                self.tree.scrollToItem(item)
                return
            if not item.isExpanded():
                item.setExpanded(True)  # lists it in the background

    # -- filter --------------------------------------------------------------------------
    def _filter_changed(self, text: str) -> None:
        self._text = text.strip().lower()
        if self._text:
            self._walk()  # matches at any depth, also in groups not listed yet
        self._matches = 0
        self._refilter = self._refilter_rows(
            self._text, list(self._items.items())
        )  # rows now: later ones are filtered as they come
        self._refilter_timer.start()
        self._show_count()

    def _refilter_rows(self, text: str, items: list[tuple[str, QTreeWidgetItem]]) -> Iterator[None]:
        """Show or hide ``items`` for ``text``, children before parents, in slices."""
        for end in range(len(items), 0, -REFILTER_ROWS):
            for path, item in reversed(items[max(0, end - REFILTER_ROWS) : end]):
                if not path:
                    continue
                if text:
                    self._matches += self._apply_filter(item, text)
                else:
                    item.setHidden(False)
            yield None

    def _refilter_step(self) -> None:
        if self._refilter is None:
            return
        if next(self._refilter, StopIteration) is StopIteration:
            self._refilter = None
        else:
            self._refilter_timer.start()
        self._show_count()

    def _matches_filter(self, node: Node) -> bool:
        """The filter matches ``node`` (called by the lister's worker: reads one str)."""
        text = self._text
        return bool(text) and text in node.name.lower()

    def _apply_filter(self, item: QTreeWidgetItem, text: str) -> bool:
        """Show ``item`` if its name matches (and then its ancestors, expanded), else hide it
        unless a shown descendant needs it; True when it matches."""
        node = item.data(0, NODE_ROLE)
        if text in node.name.lower():
            item.setHidden(False)
            parent = item.parent()
            while parent is not None:
                parent.setHidden(False)
                if not parent.isExpanded():
                    parent.setExpanded(True)
                parent = parent.parent()
            return True
        if not any(
            not item.child(i).isHidden() and item.child(i).data(0, NODE_ROLE) is not None
            for i in range(item.childCount())
        ):
            item.setHidden(True)
        return False

    def _show_count(self) -> None:
        """The match count beside the filter ("… so far" while groups are still listed)."""
        if not self._text or self.tree_model is None:
            self.match_count.hide()
            return
        n = self._matches
        searching = self._refilter is not None or not self._walked
        self.match_count.setText(
            f"{n:,} match{'' if n == 1 else 'es'}{' so far…' if searching else ''}"
        )
        self.match_count.show()

    # -- selection and details ---------------------------------------------------------
    def selected_nodes(self) -> list[Node]:
        nodes = [it.data(0, NODE_ROLE) for it in self.tree.selectedItems()]
        return [n for n in nodes if isinstance(n, Node)]

    def _selection_changed(self) -> None:
        nodes = self.selected_nodes()
        self.open_button.setEnabled(any(n.openable for n in nodes))
        self.open_button.setText(
            f"Open {len([n for n in nodes if n.openable])}" if len(nodes) > 1 else "Open"
        )
        if nodes and self.tree_model is not None:
            self.panel.show_node(self.tree_model, nodes[-1])

    # -- opening ---------------------------------------------------------------------
    def _double_clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        node = item.data(0, NODE_ROLE)
        if isinstance(node, Node) and node.openable:
            self.open_nodes([node])

    def copy_view(self, destination: str | None = None) -> Any:
        """The region napari shows of the selected node's layer, checked out as a local N5
        (:mod:`~napari_n5zarr._napari.check_out`); the node must be open as a layer."""
        from napari.utils import notifications

        from napari_n5zarr._napari import check_out
        from napari_n5zarr._napari.view_region import pyramid_location

        nodes = self.selected_nodes()
        if self.tree_model is None or len(nodes) != 1:
            notifications.show_warning(f"{check_out.TITLE}: select one node")
            return None
        where = f"{self.tree_model.location.rstrip('/')}/{nodes[0].path.strip('/')}".rstrip("/")
        layers = [
            layer
            for layer in self.viewer.layers
            if (pyramid_location(layer.metadata.get("napari_n5zarr") or {}) or "").rstrip("/")
            == where
        ]
        if not layers:
            notifications.show_warning(
                f"{check_out.TITLE}: open {nodes[0].name} first (the view is what napari shows of it)"
            )
            return None
        return check_out.copy_view(self.viewer, layers[0], destination)

    def open_selected(self) -> None:
        """Open every selected dataset/pyramid as layers (several → several layers)."""
        self.open_nodes([n for n in self.selected_nodes() if n.openable])

    def open_nodes(self, nodes: list[Node]) -> None:
        """Read the layers of ``nodes`` in the background, then add them to the viewer."""
        tree = self.tree_model
        if tree is None or not nodes:
            return
        self._set_status(f"opening {', '.join(n.path or n.name for n in nodes)}…")

        def work(_stop: Any) -> Iterator[Any]:
            for node in nodes:
                messages: list[tuple[str, str]] = []
                say = lambda level, msg, m=messages: m.append((level, msg))  # noqa: E731
                layers = read_node_layers(tree, node, say)
                yield lambda n=node, ls=layers, ms=messages: self._add_layers(n, ls, ms)

        self._start(work, lambda step: step())

    def _add_layers(
        self, node: Node, layer_data: list[tuple], messages: list[tuple[str, str]]
    ) -> None:
        from napari.utils import notifications

        from napari_n5zarr._napari.layers import add_to_viewer

        added = add_to_viewer(self.viewer, layer_data)
        for level, message in messages:
            (notifications.show_error if level == "error" else notifications.show_warning)(message)
        self._set_status(f"opened {node.path or node.name}: {len(added)} layer(s)")

    def open_path(self, location: str) -> list:
        """Add the layers of ``location`` to the viewer through this plugin's reader (sync)."""
        from napari.utils import notifications

        from napari_n5zarr._napari.layers import (
            MAX_LAYERS,
            add_to_viewer,
            location_layers,
            notify_napari,
        )

        try:
            found = location_layers(
                location, notify_napari, max_layers=MAX_LAYERS, too_many=self._show_instead
            )
            layers = add_to_viewer(self.viewer, found)
        except Exception as e:  # boundary: a bad layer must not take the widget down
            notifications.show_error(f"Cannot open {location}: {e}")
            return []
        self._set_status(f"opened {location}: {len(layers)} layer(s)")
        return layers

    def _show_instead(self, location: str, what: str, notify: Callable[[str, str], None]) -> list:
        """Too much at ``location`` to add as layers: list it here instead."""
        from napari_n5zarr._napari.layers import too_many_message

        self.load(location)
        notify("warning", too_many_message(location, what, browser_open=True))
        return []

    # -- pickers -------------------------------------------------------------------------
    def _pick_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Choose an N5 container (folder)")
        if folder:
            self.load(folder)

    def _pick_file(self) -> None:
        name, _ = QFileDialog.getOpenFileName(
            self, "Choose a zipped N5 or a BigDataViewer XML", "", "N5 (*.zip *.xml);;All files (*)"
        )
        if name:
            self.load(name)

    def sizeHint(self) -> QSize:
        """napari's usual dock width: name, shape and dtype fit without scrolling."""
        return QSize(DOCK_WIDTH, super().sizeHint().height())

    def showEvent(self, event: Any) -> None:
        super().showEvent(event)
        if not self._claimed:
            self._claimed = True
            QTimer.singleShot(0, self._claim_width)  # once docked and laid out

    def _claim_width(self) -> None:
        """Widen this widget's dock to :meth:`sizeHint` once, when first shown: napari gives
        a dock opened from the Plugins menu (beside the exporter) only ~220 px."""
        from qtpy.QtWidgets import QDockWidget

        dock = self.parent()
        while dock is not None and not isinstance(dock, QDockWidget):
            dock = dock.parent()
        if dock is None or dock.isFloating() or dock.window() is None:
            return
        want = self.sizeHint().width() + dock.width() - dock.contentsRect().width()
        if dock.width() < want and hasattr(dock.window(), "resizeDocks"):
            dock.window().resizeDocks([dock], [want], Qt.Orientation.Horizontal)

    def closeEvent(self, event: Any) -> None:
        self.jobs.shutdown()
        super().closeEvent(event)
