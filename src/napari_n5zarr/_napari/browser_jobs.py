"""The N5 browser's background jobs: listing, the walk behind the filter and Expand all,
details, thumbnails, block counts and reading layers.

Every job is a generator run by a superqt :class:`~superqt.utils.GeneratorWorker` in the
browser's own ``QThreadPool``; each value it yields reaches the GUI thread through the
worker's ``yielded`` signal. A job of a previous location is dropped (:meth:`Jobs.cancel`);
closing the browser, quitting the application or the interpreter's exit stop them all
(:meth:`Jobs.shutdown`).

:class:`Lister` lists one tree for the browser in one worker at a time: groups the user
expands come first, the walk of the whole tree (for the filter and Expand all) fills the time
between them. Rows go to the GUI in batches, one batch in flight: while the GUI thread puts a
batch into the view the worker reads the next one, then waits for the GUI to take it (Python
runs one thread at a time: a worker reading far ahead slows every Qt call of the GUI thread).
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

from qtpy.QtCore import QCoreApplication, QThreadPool
from superqt.utils import GeneratorWorker

from napari_n5zarr.read.tree import Node, Tree

BATCH_ROWS = 500
"""A walk hands rows to the GUI when it has this many ..."""
BATCH_SECONDS = 0.2
"""... or when this long has passed since the last batch, or at once when a row is
:attr:`Lister.urgent` (a filter match). Fewer batches leave the walk more of the interpreter
(measured on 2,225 nodes: the last node shown after 0.76 s with 50 ms batches, 0.51 s with 200)."""
THREADS = 3
"""Workers of one browser: the lister, details of the selected node, reading layers."""

_ALL: weakref.WeakSet[Jobs] = weakref.WeakSet()


EXIT_WAIT_MS = 5000
"""At exit, how long to wait for running jobs to reach their next step and end."""


@atexit.register
def _stop_all() -> None:
    """At exit, every job stops at its next step (none waits for a GUI that is gone), and
    the interpreter waits for them: a thread still running while Python tears its objects
    down would abort the process."""
    for jobs in list(_ALL):
        jobs.shutdown()
    for jobs in list(_ALL):
        jobs.pool.waitForDone(EXIT_WAIT_MS)


class Jobs:
    """The background jobs of one browser. Each job is ``work(stop)``, a generator; ``stop``
    is set when the job's results are no longer wanted (a new location, the browser closed):
    a job checks it between steps. Each value yielded is passed to ``on_yield`` on the GUI
    thread, unless the job was cancelled meanwhile.

    Not a child of the widget: when napari deletes the widget, Qt must not wait for the
    pool's threads on the GUI thread before :meth:`shutdown` told them to stop."""

    def __init__(self) -> None:
        self.pool = QThreadPool()
        self.pool.setMaxThreadCount(THREADS)
        self.stop_event = threading.Event()
        self._workers: dict[GeneratorWorker, threading.Event] = {}
        """Every worker until it finishes (a Python reference must outlive the thread)."""
        app = QCoreApplication.instance()
        if app is not None and not _ALL:  # once per application (each call stops them all)
            app.aboutToQuit.connect(_stop_all)
        _ALL.add(self)

    @property
    def running(self) -> int:
        """Jobs started and not finished (their last result delivered), cancelled ones aside."""
        return sum(not stop.is_set() for stop in self._workers.values())

    def start(self, work: Callable[[threading.Event], Iterator[Any]], on_yield: Callable[[Any], None],
              on_error: Callable[[BaseException], None], on_done: Callable[[], None] | None = None) -> None:  # fmt: skip
        stop = self.stop_event

        def run(stop: threading.Event) -> Generator[Any, Any, None]:
            yield from work(stop)  # GeneratorWorker takes generator functions only

        worker: GeneratorWorker = GeneratorWorker(run, stop)
        worker.yielded.connect(lambda value: None if stop.is_set() else on_yield(value))
        worker.errored.connect(lambda exc: None if stop.is_set() else on_error(exc))

        def finished(*_args: Any) -> None:
            self._workers.pop(worker, None)
            if on_done is not None and not stop.is_set():
                on_done()

        worker.finished.connect(finished)
        self._workers[worker] = stop
        self.pool.start(worker)

    def cancel(self) -> None:
        """Drop every running job (a new location): their further results are ignored."""
        self.stop_event.set()
        self.stop_event = threading.Event()
        for worker in self._workers:
            worker.quit()  # one not started yet returns at once when it starts

    def shutdown(self) -> None:
        """Stop every job (the browser closes): none is left waiting."""
        self.cancel()
        self.stop_event.set()


@dataclass
class Rows:
    """Children of the group at ``path`` (one page of them); ``complete``: the last page."""

    path: str
    nodes: list[Node]
    complete: bool


WALKED = "walked"
"""Yielded by :meth:`Lister.work` when the whole tree has been listed."""


class Lister:
    """Lists the groups of one tree for the browser: :meth:`request` (a group the user
    expanded) and :meth:`request_walk` (every group) are called on the GUI thread,
    :meth:`work` runs in a worker and yields lists of :class:`Rows` and :data:`WALKED`.
    Each group's rows are handed out once, after its own row."""

    def __init__(self, tree: Tree, urgent: Callable[[Node], bool] | None = None) -> None:
        self.tree = tree
        self.urgent = urgent
        """Rows the GUI wants without delay (called in the worker)."""
        self._lock = threading.Lock()
        self._requests: deque[Node] = deque()
        self._walk = False
        self._running = False
        self._listed: set[str] = set()
        self._in_flight = threading.Semaphore(1)

    def request(self, node: Node) -> bool:
        """List ``node``'s children next; True when a worker must be started for it."""
        with self._lock:
            self._requests.append(node)
            return self._start()

    def request_walk(self) -> bool:
        """List every group (after any expanded ones); True when a worker must be started."""
        with self._lock:
            self._walk = True
            return self._start()

    def _start(self) -> bool:
        started, self._running = self._running, True
        return not started

    def taken(self) -> None:
        """The GUI thread has put the last batch into the view (called on the GUI thread)."""
        self._in_flight.release()

    def work(self, stop: threading.Event) -> Iterator[Any]:
        """Serve requests until none is left (a generator run in a worker)."""
        while not stop.is_set():
            with self._lock:
                node = self._requests.popleft() if self._requests else None
                walk = node is None and self._walk
                self._walk = self._walk and not walk
                if node is None and not walk:
                    self._running = False
                    return
            if node is not None:
                for rows in self._list(node):
                    if not self._handed(stop):
                        return
                    yield [rows]
            else:
                yield from self._walk_all(stop)

    def _handed(self, stop: threading.Event) -> bool:
        """Wait until the GUI took the previous batch; False when the job is stopped."""
        while not self._in_flight.acquire(timeout=0.05):
            if stop.is_set():
                return False
        return True

    def _list(self, node: Node) -> Iterator[Rows]:
        if node.path in self._listed:
            yield Rows(node.path, [], True)  # listed by the walk: the GUI has its rows
            return
        for page in self.tree.iter_children(node):
            yield Rows(node.path, page, False)
        self._listed.add(node.path)
        yield Rows(node.path, [], True)

    def _walk_all(self, stop: threading.Event) -> Iterator[Any]:
        """Depth first from the root, in the order the view shows; a requested group goes first."""
        stack = [self.tree.root]
        batch: list[Rows] = []
        count, since = 0, time.monotonic()
        urgent = self.urgent or (lambda _node: False)
        while stack and not stop.is_set():
            with self._lock:
                asked = list(self._requests)
                self._requests.clear()
            for node in asked:
                batch.extend(self._list(node))
            node = stack.pop()
            hurry = False
            if node.path in self._listed:
                kids = self.tree.children(node)  # cached
            else:
                kids = []
                for rows in self._list(node):
                    batch.append(rows)
                    kids.extend(rows.nodes)
                    count += len(rows.nodes)
                hurry = any(urgent(k) for k in kids)
            if batch and (
                hurry or count >= BATCH_ROWS or time.monotonic() - since >= BATCH_SECONDS
            ):
                if not self._handed(stop):
                    return
                yield batch
                batch, count, since = [], 0, time.monotonic()
            stack.extend(reversed([k for k in kids if k.has_children]))
        if batch:
            if not self._handed(stop):
                return
            yield batch
        if not self._handed(stop):
            return
        yield WALKED
