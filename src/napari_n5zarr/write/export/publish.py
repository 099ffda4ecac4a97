"""Step 3 of an export (and the frame around step 2): where blocks go, and making them visible.

:class:`Destination` takes the lock, refuses what must not be replaced, picks the store the
blocks are written to (the destination itself, or a staging folder beside it when a local
node is overwritten), marks it incomplete, and on :meth:`Destination.publish` writes each
dataset's metadata, then the pyramid group, swaps a staging folder into place, adds the
groups above, and removes the marker last. If anything fails before that, the partial output
is removed (a full disk says so) and the old destination is untouched.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from napari_n5zarr.errors import NodeExistsError
from napari_n5zarr.n5.constants import INCOMPLETE_MARKER, N5_JSON, ZARR_JSON
from napari_n5zarr.n5.stores import N5DefaultStore
from napari_n5zarr.storage.foreign import describe_foreign, foreign_entries
from napari_n5zarr.write import safe_destination
from napari_n5zarr.write.export.blocks import WriteGate, store_get, store_set
from napari_n5zarr.write.export.resume import (
    Journal,
    marker_document,
    remove_partial_writes,
    resumable,
)

if TYPE_CHECKING:
    from zarr.abc.store import Store

    from napari_n5zarr.write.export.plan import ExportPlan

_logger = logging.getLogger(__name__)

__all__ = [
    "INCOMPLETE_MARKER",
    "Destination",
    "publish_metadata",
    "publish_node",
    "publish_parents",
]


def _node_buffer(doc: dict[str, Any]) -> Any:
    from zarr.buffer import default_buffer_prototype

    return default_buffer_prototype().buffer.from_bytes(json.dumps(doc, indent=2).encode())


async def _set_node(store: Store, prefix: str, doc: dict[str, Any], zarr_json: bool) -> None:
    """``attributes.json`` through :class:`N5DefaultStore` from ``doc`` without its Zarr-only
    parts (OME-NGFF ``ome``, ``dimension_names``), then ``doc`` itself as ``zarr.json``."""
    from napari_n5zarr.write.ome import without_zarr_only

    key = f"{prefix}{ZARR_JSON}"
    await N5DefaultStore(store, write_zarr_json=False).set(
        key, _node_buffer(without_zarr_only(doc))
    )
    if zarr_json:
        await store.set(key, _node_buffer(doc))


def publish_node(store: Store, prefix: str, doc: dict[str, Any], zarr_json: bool) -> None:
    """Write the node ``doc`` (a ``zarr.json`` document) at ``prefix``: its ``attributes.json``
    (N5 keys only) and, if ``zarr_json``, the ``zarr.json`` itself."""
    from napari_n5zarr.zarr_internals import sync

    sync(_set_node(store, prefix, doc, zarr_json))


def publish_metadata(store: Store, prefix: str, plan: ExportPlan) -> None:
    """The plan's datasets (``s0 .. sN``, all at once), then its pyramid group at ``prefix``."""
    import asyncio

    from napari_n5zarr.zarr_internals import sync

    async def datasets() -> None:
        await asyncio.gather(
            *(
                _set_node(store, f"{prefix}{lv.name}/", lv.document, plan.zarr_json)
                for lv in plan.levels
            )
        )

    sync(datasets())
    publish_node(store, prefix, plan.group_document, plan.zarr_json)


def publish_parents(store: Store, prefix: str, zarr_json: bool) -> None:
    """Group metadata for the container root and groups above ``prefix`` that have none."""
    parts = prefix.strip("/").split("/")[:-1]
    for i in range(len(parts), -1, -1):
        parent = "".join(f"{p}/" for p in parts[:i])
        if all(store_get(store, f"{parent}{name}") is None for name in (N5_JSON, ZARR_JSON)):
            publish_node(
                store, parent, {"zarr_format": 3, "node_type": "group", "attributes": {}}, zarr_json
            )


def node_state(store: Store, prefix: str) -> tuple[bool, bool]:
    """(holds anything, looks like an N5/Zarr node or an unfinished export)."""
    from napari_n5zarr.zarr_internals import sync

    empty = sync(store.is_empty(prefix))
    known = any(
        store_get(store, f"{prefix}{name}") is not None
        for name in (N5_JSON, ZARR_JSON, INCOMPLETE_MARKER)
    )
    return not empty, known


def prepare(
    store: Store, prefix: str, overwrite: bool, where: str, target: Path | None
) -> Path | None:
    """Refuse an existing node unless ``overwrite``; then only replace a node an export of
    this project wrote, in a local folder: return a staging folder beside it (None: the
    destination is empty, write in place)."""
    exists, known = node_state(store, prefix)
    if not exists:
        return None
    if not overwrite:
        raise NodeExistsError(f"{where} already exists (pass overwrite=True to replace it)")
    if not known:
        raise NodeExistsError(
            f"refusing to overwrite {where}: it holds files but is no N5/Zarr node; nothing was deleted"
        )
    if target is None:
        if not store.supports_deletes:
            raise NodeExistsError(
                f"cannot overwrite {where}: its store ({type(store).__name__}) cannot delete"
            )
        raise NodeExistsError(
            f"cannot overwrite {where}: only local folders are replaced safely (written beside, then renamed "
            f"into place) and {type(store).__name__} cannot rename; delete it yourself or export elsewhere"
        )
    found, total = foreign_entries(target)
    if found:
        raise NodeExistsError(
            f"refusing to overwrite {where}: it holds {describe_foreign(found, total)}. "
            "Overwrite only replaces what an export wrote; nothing was deleted"
        )
    return safe_destination.staging_folder(target)


def clean_up(
    store: Store, prefix: str, staging: Path | None, where: str, created: Path | None
) -> str:
    """Remove a failed export's partial output (and the folder it created); say what."""
    from napari_n5zarr.zarr_internals import sync

    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
        return f"removed the partial export {staging}"
    if store.supports_deletes:
        if prefix:
            sync(store.delete_dir(prefix.rstrip("/")))
        else:
            sync(store.clear())
        if created is not None:
            with contextlib.suppress(OSError):
                created.rmdir()  # only if empty
        return f"removed the partial export at {where}"
    return f"could not remove the partial export at {where} (its store cannot delete)"


def _clean_up_keeping_cause(
    store: Store, prefix: str, staging: Path | None, where: str, created: Path | None
) -> str:
    """:func:`clean_up`, tried twice; a clean-up that still fails is logged, never raised:
    the export's own error is what the caller must see."""
    for attempt in range(2):
        try:
            return clean_up(store, prefix, staging, where, created)
        except OSError as e:
            if attempt:
                _logger.warning("could not remove the partial export at %s: %s", where, e)
                return f"could not remove the partial export at {where} ({e})"
            time.sleep(
                0.2
            )  # a write finishing meanwhile (a file created while the folder was removed)
    raise AssertionError("unreachable")


class Destination:
    """The container ``dest`` (a pyramid group at ``prefix`` in it) for one export.

    ``with Destination(...) as d:`` locks it; :meth:`open` returns ``(store, prefix)`` the
    blocks go to; :meth:`publish` makes them visible. Leaving the block by an exception
    before the publish completed closes :attr:`gate` (no block write after that), removes
    the partial output and re-raises (a full disk as an ``OSError`` saying what was done).
    """

    def __init__(
        self,
        dest: str | os.PathLike[str],
        prefix: str,
        overwrite: bool,
        storage_options: dict[str, Any] | None,
        *,
        plan: str | None = None,
        resume: bool = False,
    ) -> None:
        self.dest, self.prefix, self.overwrite, self.storage_options = (
            dest,
            prefix,
            overwrite,
            storage_options,
        )
        self.plan, self.resume = plan, resume
        self.journal: Journal | None = None
        """Set by :meth:`open` when ``plan`` is given and the blocks go into a local folder in
        place: the shards recorded as written (resumable); None otherwise."""
        self.where = f"{os.fspath(dest)}{'/' + prefix.rstrip('/') if prefix else ''}"
        self.folder = safe_destination.local_folder(dest)
        self._zip = safe_destination.local_zip(dest)
        self._lock: safe_destination.DestinationLock | None = None
        self.gate = WriteGate()
        self.store: Store | None = None
        self.target: Path | None = None
        self._created: Path | None = None
        self._staging: Path | None = None
        self._out: Store | None = None
        self._marker: str | None = None
        self._swapped = False

    def __enter__(self) -> Self:
        from napari_n5zarr.access import base_store

        if self.folder is not None:
            # one node, one lock, however it is spelled (container + path, symlinks, "./")
            self.target = safe_destination.check_inside(self.folder, self.prefix).resolve()
        lock_at = self.target if self.target is not None else self._zip
        if lock_at is not None:
            self._lock = safe_destination.DestinationLock(lock_at, self.where)
            self._lock.__enter__()
        try:
            if self.target is not None:
                safe_destination.check_ancestors(self.target, self.where)
                safe_destination.recover(self.target)
                self._created = (
                    None if self.target.exists() else self.target
                )  # removed again if the export fails
            self.store = base_store(self.dest, "a", self.storage_options)
        except BaseException:  # release the lock on any failure, even KeyboardInterrupt; re-raised
            if self._lock is not None:
                self._lock.__exit__(None, None, None)
            raise
        return self

    def open(self) -> tuple[Store, str]:
        """Refuse what must not be replaced; ``(store, prefix)`` to write the blocks to,
        marked incomplete."""
        from napari_n5zarr.access import base_store

        assert self.store is not None, "use Destination in a with block"
        if self.resume and self._resume():
            return self.store, self.prefix
        self._staging = prepare(self.store, self.prefix, self.overwrite, self.where, self.target)
        if self._staging is not None:
            out, out_prefix = base_store(self._staging, "a"), ""
        else:
            out, out_prefix = self.store, self.prefix
        self._out = out
        if (
            out.supports_deletes and self._staging is None
        ):  # a staging folder is marked from its start
            self._marker = f"{out_prefix}{INCOMPLETE_MARKER}"
            store_set(out, self._marker, marker_document(self.plan))
            if self.plan is not None and self.target is not None:
                self.journal = Journal(self.target, set())
        return out, out_prefix

    def _resume(self) -> bool:
        """Go on with the unfinished export of the same plan found here (True), or start
        afresh when nothing is here (False); refuse anything else (nothing deleted)."""
        from napari_n5zarr.errors import InvalidArgumentError

        assert self.store is not None
        if self.plan is None or self.target is None:
            raise InvalidArgumentError(
                f"resume: {self.where} is not a local folder (or the format is not a standard OME-Zarr): "
                "only an OME-Zarr export into a local folder can be resumed"
            )
        if self.overwrite:
            raise InvalidArgumentError(
                "resume and overwrite=True: choose one (resume goes on with an unfinished export)"
            )
        if not node_state(self.store, self.prefix)[0]:
            return False
        done = resumable(self.target, self.where, self.plan)
        for key in remove_partial_writes(self.target):
            _logger.debug("resume: removed %s (a chunk write cut short)", key)
        self._out, self._marker = self.store, f"{self.prefix}{INCOMPLETE_MARKER}"
        self.journal = Journal(self.target, done)
        return True

    def publish(
        self,
        plan: ExportPlan,
        *,
        metadata: Callable[[Store, str], None] | None = None,
        parents: Callable[[Store, str], None] | None = None,
    ) -> None:
        """Datasets, then the pyramid group, then (after a swap) groups above it; the marker last.
        ``metadata(store, prefix)`` / ``parents(store, prefix)`` replace the dual dataset's
        (a standard OME-Zarr: :mod:`~napari_n5zarr.write.export.ome_zarr`)."""
        from napari_n5zarr.zarr_internals import sync

        assert self.store is not None, "open() first"
        assert self._out is not None, "open() first"
        out = self._out
        at = "" if self._staging is not None else self.prefix
        if metadata is None:
            publish_metadata(out, at, plan)
        else:
            metadata(out, at)
        if self._staging is not None and self.target is not None:
            out.close()  # the staging marker goes with it into place, removed there once the old copy is marked
            safe_destination.swap_in(
                self._staging, self.target
            )  # the old node stays whole until here
            self._staging, self._swapped = None, True
        if self.prefix and parents is not None:
            parents(self.store, self.prefix)
        elif self.prefix:
            publish_parents(self.store, self.prefix, plan.zarr_json)
        if self.journal is not None:
            self.journal.close()
        if self._marker and out is self.store:
            sync(self.store.delete(self._marker))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.journal is not None:
            self.journal.close()
        try:
            if exc is None or self._swapped or self.store is None:
                return  # done, or the new node is complete and in place: keep it
            if self._out is None:
                return  # refused before anything was written
            if self.journal is not None and isinstance(exc, KeyboardInterrupt):
                self.gate.close()
                _logger.warning(
                    "interrupted: kept the unfinished export at %s; the same convert with --resume "
                    "(resume=True) finishes it",
                    self.where,
                )
                return
            self.gate.close()  # no block write after this (threads still running finish first)
            cleaned = _clean_up_keeping_cause(
                self.store, self.prefix, self._staging, self.where, self._created
            )
            if safe_destination.is_disk_full(exc):
                kept = (
                    "; the existing destination was not touched"
                    if self._staging is not None
                    else ""
                )
                assert isinstance(exc, OSError)
                raise OSError(
                    exc.errno, f"disk full while exporting to {self.where}: {cleaned}{kept} ({exc})"
                ) from exc
        finally:
            if self.store is not None:
                self.store.close()
            if self._lock is not None:
                self._lock.__exit__(exc_type, exc, tb)
