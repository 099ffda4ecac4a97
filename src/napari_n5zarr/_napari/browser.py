"""The N5 browser dock widget: browse a container's tree, see details, open nodes as layers.

The model is :mod:`napari_n5zarr.read.tree` (pure Python, tested without Qt); this module is the
view. Nothing that reads storage runs on the GUI thread: opening a location, listing a
group (page by page, behind a "loading…" row), details, thumbnails and reading layers run
in worker threads, and their results are put into the tree a few milliseconds at a time so
the event loop never stalls, whatever the number of nodes.
"""

from __future__ import annotations

import html
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qtpy.QtCore import QEvent, QObject, QSize, Qt, QTimer, Signal
from qtpy.QtGui import QBrush, QColor, QFont, QImage, QPixmap
from qtpy.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QTextBrowser,
    QToolButton,
    QToolTip,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_n5zarr.n5.constants import N5_JSON
from napari_n5zarr.read.tree import Node, Tree, open_tree
from napari_n5zarr.storage.location import display_name, join

if TYPE_CHECKING:
    import napari

COLUMNS = ("name", "shape", "dtype", "kind", "compression", "blocks", "voxel", "size")
"""Columns in order of importance: at the default dock width (~315 px) name, shape and
dtype are visible; the rest scroll into view and are all in the details pane."""
WIDTHS = (120, 118, 50, 130, 80, 80, 120, 70)
"""Starting widths; columns grow to fit their content (see ``_Tree``)."""
NAME_MIN = 90
"""The name column never gets narrower (names are elided in the middle)."""
HEADERS = {"name": "name", "shape": "shape", "dtype": "dtype", "kind": "kind", "compression": "compression",
           "blocks": "blocks", "voxel": "voxel size", "size": "size"}  # fmt: skip
DOCK_NAME = "N5 browser"
"""Title of the browser's dock (one per viewer: the reader and ``n5zarr view`` reuse it)."""
DOCK_WIDTH = 315
BUDGET_S = 0.012
"""GUI time spent per event-loop turn putting results into the tree."""
RECENT_MAX = 12
THUMB_SIZE = 160
NODE_ROLE = Qt.ItemDataRole.UserRole
GREY = QColor(128, 128, 128)


_EXITING = threading.Event()
"""Set when the interpreter shuts down: browser workers return instead of waiting for a GUI
thread that no longer takes their results (a waiting worker kept the process alive after
``viewer.close()``: concurrent.futures joins its threads at exit)."""

# concurrent.futures joins its worker threads from a threading-atexit hook; hooks run in
# reverse order of registration, so this one (registered later) sets the flag first.
getattr(threading, "_register_atexit", lambda f: None)(_EXITING.set)


def spare_gui_from_full_collections() -> None:
    """``gc.freeze()``: CPython's full garbage collections skip the objects alive now.

    Measured here: in a napari window every full collection walks napari's whole heap and
    stalls the GUI thread 110-460 ms, and listing 50,000 nodes (one Python object each for
    the node and its row) triggers several. Frozen objects are still freed by reference
    counting as usual; only reference cycles among them wait for ``gc.unfreeze()``, which
    :func:`release_frozen` calls when the widget goes away. Called after each page of rows,
    so the heap a collection walks stays small.
    """
    import gc

    gc.freeze()


def release_frozen(*_args: Any) -> None:
    """``gc.unfreeze()``: frozen objects are collectable again (the widget is gone)."""
    import gc

    gc.unfreeze()


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
    """Layer data for a node as the reader makes it: for a folder or URL, what napari's
    reader gives for that location; inside a .zip or a BigDataViewer XML, the node's
    layers with the XML's setups."""
    from napari_n5zarr._napari.layers import MAX_LAYERS, layers_from_node, location_layers

    if tree.bdv_setups is None and not tree.location.lower().endswith(".zip"):
        return location_layers(join(tree.n5_location, node.path), notify, max_layers=MAX_LAYERS)
    return layers_from_node(
        tree.zarr_node(node),
        name=node.name or display_name(tree.location),
        source=join(tree.location, node.path),
        bdv_setups=tree.bdv_setups,
        notify=notify,
    )


def dock_browser(viewer: napari.Viewer) -> BrowserWidget:
    """The viewer's N5 browser, docked on the right if it is not yet (one per viewer)."""
    browser = dict(viewer.window.dock_widgets).get(DOCK_NAME)
    if browser is None:
        browser = BrowserWidget(viewer)
        viewer.window.add_dock_widget(browser, name=DOCK_NAME, area="right")
    return browser


class _Bridge(QObject):
    """Carries worker results to the GUI thread (queued signals)."""

    result = Signal(object)


class _Tree(QTreeWidget):
    """The tree view: Enter opens, tooltips show a row's full text (built on demand).

    Columns are as wide as the rows on screen (and the header) need and never narrower
    than what they held before; in order of importance, as many as fit the view are shown
    (shape and dtype always), the rest are hidden (all in the tooltip and the details), and
    the name column takes what is left: no horizontal scrollbar at any dock width where
    name, shape and dtype fit."""

    open_requested = Signal()

    def __init__(self) -> None:
        super().__init__()
        self._content = [0] * len(COLUMNS)
        self._fit_timer = QTimer(self, singleShot=True, interval=0)
        self._fit_timer.timeout.connect(self.fit_columns)
        self.header().setStretchLastSection(False)
        self.header().setSectionsMovable(False)

    def setColumnCount(self, columns: int) -> None:  # noqa: N802 (Qt's name)
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
        for i in range(1, self.columnCount()):
            self._content[i] = max(self._content[i], header.sectionSizeHint(i), self.sizeHintForColumn(i))
        self.layout_columns()

    def layout_columns(self) -> None:
        room = self.viewport().width()
        used = NAME_MIN
        for i in range(1, self.columnCount()):
            width = self._content[i] or WIDTHS[i]
            show = i <= 2 or (not self.isColumnHidden(i - 1) and used + width <= room)
            self.setColumnHidden(i, not show)
            if show:
                self.setColumnWidth(i, width)
                used += width
        self.setColumnWidth(0, max(NAME_MIN, room - used + NAME_MIN))

    def keyPressEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.open_requested.emit()
            return
        super().keyPressEvent(event)

    def viewportEvent(self, event: Any) -> bool:  # noqa: N802
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
    if node.problem:
        lines.append(f"<span style='color:#c33'>{'unreadable' if node.error else 'cannot open'}: {html.escape(node.problem)}</span>")
    return "<br>".join(lines)


class BrowserWidget(QWidget):
    """Pick a container (folder, .zip, BigDataViewer .xml, s3:// or http(s):// URL), browse
    its tree lazily, see a node's details and thumbnail, open nodes as layers."""

    def __init__(self, napari_viewer: napari.Viewer) -> None:
        super().__init__()
        self.viewer = napari_viewer
        self.tree_model: Tree | None = None
        self.root_location = ""
        self._gen = 0
        self._items: dict[str, QTreeWidgetItem] = {}
        self._owner: dict[str, int] = {}  # group path -> the listing job that fills it
        self._done: set[str] = set()  # groups listed completely
        self._loading: dict[str, QTreeWidgetItem] = {}  # group path -> its "loading…" row
        self._pending: deque[Any] = deque()
        self._jobs = 0
        self._thumbs: dict[tuple[str, str], Any] = {}
        self._details: dict[tuple[str, str], dict[str, Any]] = {}
        self._recent = load_recent()
        self._permits = threading.Semaphore(1)
        self._closed = threading.Event()  # set by closeEvent: workers stop at their next step
        self._lister = ThreadPoolExecutor(1, thread_name_prefix="n5-browser-list")
        self._reader = ThreadPoolExecutor(2, thread_name_prefix="n5-browser-read")
        self._bridge = _Bridge()
        self._bridge.result.connect(self._deliver)
        self._drain_timer = QTimer(self, singleShot=True, interval=0)
        self._drain_timer.timeout.connect(self._drain)
        self.destroyed.connect(release_frozen)

        self.combo = QComboBox(editable=True)
        self.combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.combo.setMinimumContentsLength(12)  # a long path must not widen the dock
        self.combo.addItems(self._recent)
        self.combo.setCurrentIndex(-1)
        self.combo.setToolTip("Folder, .zip, BigDataViewer .xml, s3://… or https://… (Enter loads; recent locations in the list)")
        self.location: QLineEdit = self.combo.lineEdit()
        self.location.setPlaceholderText("N5: folder, .zip, .xml, s3://, https://")
        self.location.returnPressed.connect(lambda: self.load())
        self.combo.activated.connect(lambda _i: self.load())
        browse = QToolButton(text="…", toolTip="Browse for a folder, a .zip or a BigDataViewer .xml")
        menu = QMenu(browse)
        menu.addAction("Folder…", self._pick_folder)
        menu.addAction("File (.zip, BigDataViewer .xml)…", self._pick_file)
        browse.clicked.connect(lambda: menu.exec(browse.mapToGlobal(browse.rect().bottomLeft())))
        self.browse_button = browse  # no setMenu(): its arrow was drawn over the "…"
        row = QHBoxLayout()
        row.addWidget(self.combo, 1)
        row.addWidget(browse)

        self.filter = QLineEdit(placeholderText="filter by name (any depth)", clearButtonEnabled=True)
        self.filter.textChanged.connect(self._filter_changed)

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

        self.open_button = QPushButton("Open")
        self.open_button.setToolTip("Open the selected datasets/pyramids as layers (double-click or Enter too)")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self.open_selected)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.thumbnail = QLabel(alignment=Qt.AlignmentFlag.AlignCenter)
        # At most THUMB_SIZE tall, but never a minimum: in a short dock (n5zarr view docks two
        # widgets) a fixed height pushed the status row and the Open button out of sight.
        self.thumbnail.setMaximumHeight(THUMB_SIZE)
        self.thumbnail.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Ignored)
        self.thumbnail.hide()  # shown with a preview: an empty one must not squeeze the tree
        self.tree.setMinimumHeight(120)
        self.details = QTextBrowser()
        self.details.setOpenLinks(False)
        pane = QWidget()
        pane_layout = QVBoxLayout(pane)
        pane_layout.setContentsMargins(0, 0, 0, 0)
        pane_layout.addWidget(self.thumbnail, 1)
        pane_layout.addWidget(self.details, 2)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.tree)
        split.addWidget(pane)
        split.setStretchFactor(0, 2)  # details get the larger part: every field, the
        split.setStretchFactor(1, 3)  # reader's scale table and the attributes

        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.filter)
        layout.addWidget(split, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.open_button)
        layout.addLayout(bottom)

    # -- background work ---------------------------------------------------------------
    def _submit(self, pool: ThreadPoolExecutor, work: Callable[[], Iterator[Any]], *, throttle: bool = False) -> None:
        """Run a generator in ``pool``; each value it yields is a callable run on the GUI
        thread (within the time budget, in order). With ``throttle`` the worker waits
        while its last result is still being put into the tree: Python runs one thread at
        a time, and a worker reading ahead takes the interpreter back from the GUI thread
        at every Qt call (measured: rows went in 7x slower, stalls of up to 190 ms)."""
        gen = self._gen
        self._jobs += 1
        bridge = self._bridge
        permits = self._permits if throttle else None  # shared: listing jobs take turns

        def emit(item: Any) -> bool:
            try:
                bridge.result.emit((gen, item))
                return True
            except RuntimeError:  # the widget was deleted meanwhile
                return False

        def released(action: Callable[[], Any]) -> Iterator[None]:
            try:
                result = action()
                if isinstance(result, Iterator):
                    yield from result
            finally:
                assert permits is not None
                permits.release()

        closed = self._closed

        def stale() -> bool:
            return gen != self._gen or closed.is_set() or _EXITING.is_set()

        def run() -> None:
            try:
                for item in work():
                    if permits is not None:
                        while not permits.acquire(timeout=0.05):
                            if stale():
                                return
                        item = lambda a=item: released(a)  # noqa: E731
                    if stale() or not emit(item):
                        return
            except Exception as exc:  # shown in the status line, never lost in a thread
                emit(lambda e=exc: self._set_status(f"error: {e}"))
            finally:
                emit(self._job_done)

        pool.submit(run)

    def _job_done(self) -> None:
        self._jobs -= 1
        self._update_status()

    def _deliver(self, payload: tuple[int, Callable[[], Any]]) -> None:
        gen, action = payload
        if gen != self._gen:  # a previous location's work (its job count was reset)
            return
        self._pending.append(action)
        if not self._drain_timer.isActive():
            self._drain_timer.start()

    def _drain(self) -> None:
        """Run queued GUI actions for at most BUDGET_S, then yield to the event loop."""
        start = time.perf_counter()
        end = start + BUDGET_S
        while self._pending and time.perf_counter() < end:
            action = self._pending[0]
            result = action()
            if isinstance(result, Iterator):  # a long GUI task: continue it next time
                self._pending[0] = lambda it=result: self._step(it)
                continue
            self._pending.popleft()
        self.longest_gui_step = max(self.longest_gui_step, time.perf_counter() - start)
        if self._pending:
            self._drain_timer.start()

    def _step(self, it: Iterator[Any]) -> Any:
        """Advance a GUI task generator until the budget is used; re-queue if unfinished."""
        end = time.perf_counter() + BUDGET_S
        for _ in it:
            if time.perf_counter() >= end:
                return it
        return None

    @property
    def busy(self) -> bool:
        """Work is running or queued (tests wait for ``not busy``)."""
        return bool(self._jobs or self._pending)

    # -- loading a location ----------------------------------------------------------
    def load(self, location: str | None = None) -> None:
        """Open ``location`` (default: the text field) in the background and list its root."""
        location = (location or self.location.text()).strip()
        if not location:
            return
        self.location.setText(location)
        self._gen += 1
        self._reset()
        spare_gui_from_full_collections()
        self._set_status(f"opening {location}…")

        def work() -> Iterator[Any]:
            try:
                tree = open_tree(location)
            except Exception as exc:  # noqa: BLE001 (worker boundary: any failure is shown in the browser, not raised in a thread)
                yield lambda e=exc: self._failed(location, e)
                return
            yield lambda t=tree: self._rooted(t)

        self._submit(self._lister, work)

    def _reset(self) -> None:
        self._jobs = 0
        self._permits = threading.Semaphore(1)
        self._walking = False
        self._expand_everything = False
        self.tree.clear()
        self._items.clear()
        self._owner.clear()
        self._done.clear()
        self._loading.clear()
        self._pending.clear()
        self.tree_model = None
        self.details.clear()
        self.thumbnail.clear()
        self.thumbnail.hide()
        self.open_button.setEnabled(False)

    def _failed(self, location: str, exc: BaseException) -> None:
        self._set_status(f"Cannot open {location}: {exc}")
        try:
            from napari.utils.notifications import show_error

            show_error(f"napari-n5zarr: cannot open {location}: {exc}")
        except Exception:  # noqa: BLE001 (napari's notification API is optional; the status line already says it)
            pass

    def _rooted(self, tree: Tree) -> None:
        self.tree_model = tree
        self.root_location = tree.location
        self._recent = save_recent(tree.location, self._recent)
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItems(self._recent)
        self.combo.setCurrentIndex(0)
        self.combo.blockSignals(False)
        label = tree.location.rstrip("/").rsplit("/", 1)[-1] or tree.location  # full path: combo and tooltip
        item = self._make_item(tree.root, label=label)
        self.tree.addTopLevelItem(item)
        if tree.root.has_children:
            item.setExpanded(True)  # lists the first level (lazily, in the background)
        self.tree.setCurrentItem(item)
        if self.filter.text():
            self._list_all()

    # -- lazy listing ----------------------------------------------------------------
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
        if not isinstance(node, Node) or not node.has_children:
            return
        if node.path not in self._owner:
            self._list(node)
        elif node.path not in self._done:
            self._add_loading_row(node.path)  # listing started while collapsed

    def _list(self, node: Node) -> None:
        """List ``node``'s children in the background behind a "loading…" row."""
        job = self._new_job_id()
        self._owner[node.path] = job
        self._add_loading_row(node.path)
        tree = self.tree_model
        assert tree is not None

        def work() -> Iterator[Any]:
            for page in tree.iter_children(node):
                yield lambda p=page: self._add_page(job, node.path, p)
            yield lambda: self._listed(job, node.path)

        self._submit(self._lister, work, throttle=True)

    def _list_all(self) -> None:
        """List every group not listed yet (for the filter), streamed like expansions."""
        tree = self.tree_model
        if tree is None or self._walking:
            return
        self._walking = True
        job = self._new_job_id()
        claimed = set(self._owner)

        def work() -> Iterator[Any]:
            stack = [tree.root]
            while stack:
                node = stack.pop()
                if not node.has_children:
                    continue
                kids: list[Node] = []
                mine = node.path not in claimed
                if mine:
                    yield lambda p=node.path: self._claim(job, p)
                for page in tree.iter_children(node):
                    kids.extend(page)
                    if mine:
                        yield lambda p=page, path=node.path: self._add_page(job, path, p)
                if mine:
                    yield lambda path=node.path: self._listed(job, path)
                stack.extend(reversed([k for k in kids if k.has_children]))
            yield self._walked

        self._submit(self._lister, work, throttle=True)

    def expand_all(self) -> None:
        """Expand the whole tree (listing every group in the background, no cap)."""
        self._expand_everything = True
        for item in list(self._items.values()):
            node = item.data(0, NODE_ROLE)
            if not node.has_children:
                continue
            if node.path in self._owner:
                item.setExpanded(True)
            else:
                self._list(node)

    _expand_everything = False
    _walking = False
    _filter_gen = 0
    longest_gui_step = 0.0
    """Longest single turn spent putting results into the tree, seconds (diagnostics)."""

    def _walked(self) -> None:
        self._walking = False

    _job_counter = 0

    def _new_job_id(self) -> int:
        BrowserWidget._job_counter += 1
        return BrowserWidget._job_counter

    def _claim(self, job: int, path: str) -> None:
        if path not in self._owner:
            self._owner[path] = job
            self._add_loading_row(path)

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

    def _add_page(self, job: int, path: str, page: list[Node]) -> Any:
        if self._owner.get(path) != job:
            return None
        parent = self._items.get(path)
        if parent is None:
            return None
        return self._insert(parent, path, page)

    def _insert(self, parent: QTreeWidgetItem, path: str, page: list[Node]) -> Iterator[None]:
        """Put a page of rows under ``parent`` in slices (a GUI task: see :meth:`_drain`)."""
        text = self.filter.text().strip().lower()
        for start in range(0, len(page), 50):
            items = [self._make_item(n) for n in page[start : start + 50]]
            loading = self._loading.get(path)
            at = parent.indexOfChild(loading) if loading is not None else parent.childCount()
            parent.insertChildren(at, items)
            if loading is not None:
                loading.setText(0, f"loading… {at + len(items):,} so far")
            for item in items:
                if text:
                    self._apply_filter(item, text)
                node = item.data(0, NODE_ROLE)
                if self._expand_everything and node.has_children and node.path not in self._owner:
                    self._list(node)  # expanded once listed: rows go in while it is collapsed
            spare_gui_from_full_collections()
            yield None

    def _listed(self, job: int, path: str) -> None:
        if self._owner.get(path) != job:
            return
        self._done.add(path)
        loading = self._loading.pop(path, None)
        parent = self._items.get(path)
        if loading is not None and parent is not None:
            parent.removeChild(loading)
        if parent is not None and parent.childCount() == 0:
            parent.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicatorWhenChildless)
        elif parent is not None and self._expand_everything:
            parent.setExpanded(True)
        self._update_status()

    def _update_status(self) -> None:
        if self.tree_model is None:
            return
        n = len(self._items)
        state = "listing…" if self._jobs else "listed"
        self._set_status(f"{n:,} nodes {state}" + (f" ({len(self._loading)} groups loading)" if self._loading else ""))

    def _set_status(self, text: str) -> None:
        self.status.setText(text)

    # -- filter --------------------------------------------------------------------------
    def _filter_changed(self, text: str) -> None:
        text = text.strip().lower()
        self._filter_gen += 1
        if text and self.tree_model is not None:
            self._list_all()  # matches at any depth, also in groups not listed yet
        self._pending.append(lambda: self._refilter(text))
        if not self._drain_timer.isActive():
            self._drain_timer.start()

    def _refilter(self, text: str) -> Iterator[None]:
        gen = self._filter_gen
        for path, item in reversed(list(self._items.items())):  # children before parents
            if gen != self._filter_gen:
                return  # superseded by the next keystroke
            if not path:
                continue
            if text:
                self._apply_filter(item, text)
            else:
                item.setHidden(False)
            yield None

    def _apply_filter(self, item: QTreeWidgetItem, text: str) -> None:
        """Show ``item`` if its name matches (and then its ancestors), else hide it unless a
        shown descendant needs it."""
        node = item.data(0, NODE_ROLE)
        if text in node.name.lower():
            item.setHidden(False)
            parent = item.parent()
            while parent is not None:
                parent.setHidden(False)
                if not parent.isExpanded():
                    parent.setExpanded(True)
                parent = parent.parent()
        elif not any(not item.child(i).isHidden() and item.child(i).data(0, NODE_ROLE) is not None for i in range(item.childCount())):
            item.setHidden(True)

    # -- selection and details ---------------------------------------------------------
    def selected_nodes(self) -> list[Node]:
        nodes = [it.data(0, NODE_ROLE) for it in self.tree.selectedItems()]
        return [n for n in nodes if isinstance(n, Node)]

    def _selection_changed(self) -> None:
        nodes = self.selected_nodes()
        self.open_button.setEnabled(any(n.openable for n in nodes))
        self.open_button.setText(f"Open {len([n for n in nodes if n.openable])}" if len(nodes) > 1 else "Open")
        if nodes:
            self._show_details(nodes[-1])

    def _show_details(self, node: Node) -> None:
        tree = self.tree_model
        if tree is None:
            return
        key = (tree.location, node.path)
        self._render_details(node, self._details.get(key, {}))
        self.thumbnail.clear()
        self.thumbnail.hide()
        if key in self._thumbs:
            self._set_thumbnail(key, self._thumbs[key])
        if key in self._details or not node.openable:
            return
        self._details[key] = {}

        def work() -> Iterator[Any]:
            extra: dict[str, Any] = {}
            try:
                ms = tree.multiscale(node)
                extra["multiscale"] = ms
            except Exception as exc:  # noqa: BLE001 (details pane boundary: a failure is shown in place)
                extra["multiscale_error"] = str(exc)
            yield lambda: self._details_ready(key, node, dict(extra))
            if key not in self._thumbs:
                try:
                    self._thumbs[key] = tree.thumbnail(node)
                except Exception as exc:  # noqa: BLE001 (details pane boundary: a failure is shown in place)
                    self._thumbs[key] = exc
                yield lambda: self._set_thumbnail(key, self._thumbs[key])
            try:
                extra["blocks"] = tree.block_count(node)
            except Exception as exc:  # noqa: BLE001 (details pane boundary: a failure is shown in place)
                extra["blocks_error"] = str(exc)
            yield lambda: self._details_ready(key, node, dict(extra))

        self._submit(self._reader, work)

    def _current_key(self) -> tuple[str, str] | None:
        item = self.tree.currentItem()
        node = item.data(0, NODE_ROLE) if item is not None else None
        if self.tree_model is None or not isinstance(node, Node):
            return None
        return (self.tree_model.location, node.path)

    def _details_ready(self, key: tuple[str, str], node: Node, extra: dict[str, Any]) -> None:
        self._details[key] = extra
        if self._current_key() == key:
            self._render_details(node, extra)

    def _set_thumbnail(self, key: tuple[str, str], image: Any) -> None:
        if self._current_key() != key:
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
            THUMB_SIZE, THUMB_SIZE, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation
        )
        self.thumbnail.setPixmap(pix)
        self.thumbnail.show()

    def _render_details(self, node: Node, extra: dict[str, Any]) -> None:
        row = node.row()
        esc = html.escape
        parts = [f"<b>{esc(node.path or row['name'])}</b> — {esc(row['kind'])}"]
        if node.problem:
            label = "Unreadable" if node.error else "Cannot be opened"
            parts.append(f"<p style='color:#c33'>{label}: {esc(node.problem)}</p>")
        table = [(HEADERS[c], row[c]) for c in COLUMNS[1:] if c != "kind" and row[c]]
        table.append(("stored as", " + ".join(x for x, on in (("N5", node.n5), ("Zarr v3", node.zarr)) if on) or "implicit group"))
        table.extend(node.facts)
        blocks = extra.get("blocks")
        if blocks is not None:
            on_disk, expected, partial = blocks
            sparse = " — sparse: missing blocks read as 0" if on_disk < expected and not partial else ""
            table.append(("blocks on disk", f"{on_disk:,}{'+' if partial else ''} of {expected:,}{sparse}"))
        elif "blocks_error" in extra:
            table.append(("blocks on disk", extra["blocks_error"]))
        elif node.openable:
            table.append(("blocks on disk", "counting…"))
        parts.append("<table>" + "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in table) + "</table>")
        ms = extra.get("multiscale")
        if ms is not None:
            order = slice(None, None, -1)
            axes = list(ms.axes[order])
            parts.append(f"<p><b>The reader will use</b> ({esc(ms.convention)}, {len(ms.paths)} level(s)"
                         f"{', labels' if ms.is_labels else ''}):</p>")  # fmt: skip
            cells = "".join(
                f"<tr><td>{esc(a)}</td><td>{s:g}</td><td>{t:g}</td><td>{esc(u or 'pixel')}</td></tr>"
                for a, s, t, u in zip(axes, ms.scale[order], ms.translate[order], ms.units[order], strict=True)
            )
            parts.append(f"<table><tr><th>axis</th><th>scale</th><th>translate</th><th>unit</th></tr>{cells}</table>")
        elif "multiscale_error" in extra:
            parts.append(f"<p style='color:#c33'>{esc(extra['multiscale_error'])}</p>")
        if node.attributes:
            text = json.dumps(node.attributes, indent=1, default=str)
            parts.append(f"<p><b>{N5_JSON if node.n5 else 'attributes'}</b></p><pre>{esc(text[:20000])}</pre>")
        if node.zarr_doc is not None and node.kind != "error":
            text = json.dumps(node.zarr_doc, indent=1, default=str)
            parts.append(f"<p><b>zarr.json (Zarr v3 view)</b></p><pre>{esc(text[:20000])}</pre>")
        self.details.setHtml("".join(parts))

    # -- opening ---------------------------------------------------------------------
    def _double_clicked(self, item: QTreeWidgetItem, _column: int = 0) -> None:
        node = item.data(0, NODE_ROLE)
        if isinstance(node, Node) and node.openable:
            self.open_nodes([node])

    def open_selected(self) -> None:
        """Open every selected dataset/pyramid as layers (several → several layers)."""
        self.open_nodes([n for n in self.selected_nodes() if n.openable])

    def open_nodes(self, nodes: list[Node]) -> None:
        """Read the layers of ``nodes`` in the background, then add them to the viewer."""
        tree = self.tree_model
        if tree is None or not nodes:
            return
        self._set_status(f"opening {', '.join(n.path or n.name for n in nodes)}…")

        def work() -> Iterator[Any]:
            for node in nodes:
                messages: list[tuple[str, str]] = []
                layers = read_node_layers(tree, node, lambda level, msg, m=messages: m.append((level, msg)))  # type: ignore[misc]  # mypy cannot type lambdas with defaults
                yield lambda n=node, ls=layers, ms=messages: self._add_layers(n, ls, ms)

        self._submit(self._reader, work)

    def _add_layers(self, node: Node, layer_data: list[tuple], messages: list[tuple[str, str]]) -> None:
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
            found = location_layers(location, notify_napari, max_layers=MAX_LAYERS, too_many=self._show_instead)
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

    def sizeHint(self) -> QSize:  # noqa: N802
        """napari's usual dock width: name, shape and dtype fit without scrolling."""
        return QSize(DOCK_WIDTH, super().sizeHint().height())

    def closeEvent(self, event: Any) -> None:  # noqa: N802
        self._gen += 1
        self._closed.set()
        self._lister.shutdown(wait=False, cancel_futures=True)
        self._reader.shutdown(wait=False, cancel_futures=True)
        release_frozen()
        super().closeEvent(event)
