"""A few threads that write an export's blocks, without dask's graph and scheduler.

In-memory sources (numpy arrays, array-likes sliced on demand) need no task graph: each
job reads its region, encodes and writes its blocks. Building and scheduling a dask graph
cost a tenth of a small export's time and a lag before the first block; a plain thread
pool starts at once. Compression (libdeflate, zstd, blosc) and numpy copies release the
GIL, so the threads keep every core busy.

The calling thread only feeds jobs and waits: it raises the first error of a job, and
:class:`~napari_n5zarr.errors.ExportCancelled` within :data:`CANCEL_POLL` seconds of
``cancel()`` turning true, without waiting for jobs still running (they start nothing new,
and their block writes are refused by the export's WriteGate).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from napari_n5zarr.errors import ExportCancelled

__all__ = ["CANCEL_POLL", "Workers"]

CANCEL_POLL = 0.05
"""Seconds between two looks at ``cancel`` while jobs run."""


class Workers:
    """``threads`` threads running export jobs; jobs may submit more jobs.

    Use :meth:`run` from the exporting thread to feed jobs (a bounded number in flight) and
    wait for them, and every job they submitted, to finish. :meth:`close` stops the threads:
    queued jobs are dropped; running ones finish in the background.
    """

    def __init__(self, threads: int, cancel: Callable[[], bool] | None = None) -> None:
        self.threads = max(1, int(threads))
        self.cancel = cancel
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="n5zarr-export")
        self._cond = threading.Condition()
        self._pending = 0
        self._error: BaseException | None = None
        self._stopped = False

    def cancelled(self) -> bool:
        return self._stopped or (self.cancel is not None and bool(self.cancel()))

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on a worker thread (from any thread, jobs too)."""
        with self._cond:
            if self._stopped:
                return
            self._pending += 1
        try:
            self._pool.submit(self._run, fn, args)
        except RuntimeError:  # the pool was shut down meanwhile: the job is dropped
            self._finished(None)

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        error = None
        try:
            if not self.cancelled():
                fn(*args)
        except BaseException as e:  # handed to the exporting thread, re-raised there
            error = e
        self._finished(error)

    def _finished(self, error: BaseException | None) -> None:
        with self._cond:
            self._pending -= 1
            if error is not None and self._error is None:
                self._error = error
            self._cond.notify_all()

    def run(
        self,
        fn: Callable[[Any], Any] | None = None,
        items: Iterable[Any] = (),
        window: int | None = None,
    ) -> None:
        """``fn(item)`` for every item, at most ``window`` jobs queued or running at a time
        (default: twice the threads), then wait until no job is left. Raises the first
        error of any job, or ExportCancelled; the threads are closed then."""
        window = window or 2 * self.threads
        feed = iter(items)
        more = True
        try:
            while True:
                with self._cond:
                    self._raise_if_failed()
                    room = window - self._pending
                while more and room > 0:
                    item = next(feed, _END)
                    if item is _END or fn is None:
                        more = False
                        break
                    self.submit(fn, item)
                    room -= 1
                with self._cond:
                    if not more and self._pending == 0:
                        self._raise_if_failed()
                        return
                    self._cond.wait(CANCEL_POLL)
        except BaseException:
            self.close()
            raise

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error
        if self.cancel is not None and self.cancel():
            raise ExportCancelled("export cancelled")

    def close(self) -> None:
        """No job starts after this; returns without waiting for running jobs."""
        with self._cond:
            self._stopped = True
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_END = object()
