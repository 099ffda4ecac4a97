"""An export's blocks written by a dask.distributed cluster, and a failure that leaves nothing behind.

``dask.array.store`` on a client returns the first error (a task's exception, or
``KilledWorker`` once a task's workers died more often than
``distributed.scheduler.allowed-failures``) while the other workers go on computing and
writing blocks: a clean-up started then races them ("Directory not empty") and they leave
blocks behind. :func:`store_on_cluster` instead, on any failure: cancels the export's
futures, shuts the export's :class:`~napari_n5zarr.write.export.blocks.WriteGate` on every worker
(no block write starts after that) and waits until the writes in flight are done; only
then does the caller remove the partial output. It also gives up, with a clear message,
when the cluster has had no worker for ``worker_timeout`` seconds (dask would wait forever).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from napari_n5zarr.errors import ClusterError, ExportCancelled
from napari_n5zarr.write.export.blocks import WriteGate, shut_gate

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["STOP_WAIT", "cluster_client", "run_on_cluster", "store_on_cluster"]

POLL = 0.2
"""Seconds between two looks at the computation (cancel, workers present)."""
STOP_WAIT = 60.0
"""Longest wait, after a failure, for the workers' block writes in flight to finish."""


def cluster_client(scheduler: Any) -> Any:
    """The ``distributed.Client`` dask would run on with ``scheduler`` (itself, or the
    default client), else None (dask's local schedulers)."""
    if "distributed" not in sys.modules:
        return None
    from dask.base import get_scheduler
    from distributed import Client

    if isinstance(scheduler, Client):
        return scheduler
    owner = getattr(get_scheduler(scheduler=scheduler), "__self__", None)
    return owner if isinstance(owner, Client) else None


def store_on_cluster(
    level: da.Array,
    target: Any,
    client: Any,
    gate: WriteGate | None,
    *,
    worker_timeout: float | None = None,
    cancel: Callable[[], bool] | None = None,
) -> None:
    """``dask.array.store(level, target)`` on ``client``; on any failure (or ``cancel``) the
    export's tasks are cancelled and its workers' writes finished before the error is raised
    (a lost worker as a one-line :class:`ClusterError`)."""
    import dask.array as da

    run_on_cluster(
        [da.store(level, target, lock=False, compute=False)],
        client,
        gate,
        worker_timeout=worker_timeout,
        cancel=cancel,
    )


def run_on_cluster(
    tasks: Sequence[Any],
    client: Any,
    gate: WriteGate | None,
    *,
    worker_timeout: float | None = None,
    cancel: Callable[[], bool] | None = None,
    done: Callable[[int], Any] | None = None,
) -> None:
    """Compute the dask collections ``tasks`` on ``client``; ``done(i)`` runs in this process
    as task ``i`` finishes. On any failure (or ``cancel``) every task is cancelled and the
    workers' writes finished before the error is raised (a lost worker as a one-line
    :class:`ClusterError`)."""
    futures = client.compute(list(tasks))
    try:
        _wait(client, futures, worker_timeout, cancel, done)
        client.gather(futures)
    except BaseException as exc:
        stop(client, futures, gate)
        cause = _cause(exc)
        if cause is exc:
            raise
        raise cause from exc


def _wait(
    client: Any,
    futures: list[Any],
    worker_timeout: float | None,
    cancel: Callable[[], bool] | None,
    done: Callable[[int], Any] | None,
) -> None:
    """Until every future finished, one failed, ``cancel``, or no worker for ``worker_timeout``."""
    from distributed import wait

    pending = dict(enumerate(futures))
    alone_since: float | None = None
    while pending:
        with contextlib.suppress(TimeoutError):
            wait(list(pending.values()), timeout=POLL, return_when="FIRST_COMPLETED")
        for i, future in list(pending.items()):
            if future.status == "finished":
                del pending[i]
                if done is not None:
                    done(i)
            elif future.status in ("error", "cancelled"):
                return  # gather raises its error
        if cancel is not None and cancel():
            raise ExportCancelled("export cancelled")
        if worker_timeout is None:
            continue
        if client.nthreads():
            alone_since = None
        elif alone_since is None:
            alone_since = time.monotonic()
        elif time.monotonic() - alone_since > worker_timeout:
            raise ClusterError(
                f"the dask cluster at {client.scheduler.address} has had no worker for {worker_timeout:g} s "
                "(worker_timeout); start workers, or wait longer"
            )


def stop(client: Any, futures: list[Any], gate: WriteGate | None) -> None:
    """Cancel ``futures`` and their tasks, shut ``gate`` on every worker, and wait (at most
    :data:`STOP_WAIT` s) until no worker is writing a block of this export."""
    with contextlib.suppress(Exception):  # a scheduler gone: nothing left to cancel
        client.cancel(futures, force=True)
    if gate is None:
        return
    deadline = time.monotonic() + STOP_WAIT
    while time.monotonic() < deadline:
        try:
            active = client.run(shut_gate, gate.token, on_error="ignore")
        except Exception:  # no scheduler, no workers to wait for
            return
        if not any(active.values()):
            return
        time.sleep(POLL / 4)


def _cause(exc: BaseException) -> BaseException:
    """A lost worker (``KilledWorker``) as a one-line :class:`ClusterError`; anything else as it is."""
    if type(exc).__name__ != "KilledWorker":
        return exc
    task = getattr(exc, "task", None)
    allowed = getattr(exc, "allowed_failures", None)
    worker = getattr(exc, "last_worker", None)
    tries = f"{allowed + 1} worker(s) died running it, " if isinstance(allowed, int) else ""
    last = getattr(worker, "address", worker)
    return ClusterError(
        f"a dask worker died while running task {task!r} ({tries}distributed.scheduler.allowed-failures "
        f"is {allowed}{f'; last on {last}' if last else ''}); see the workers' logs"
    )
