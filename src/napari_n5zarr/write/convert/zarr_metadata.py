"""Make an N5 container readable as Zarr v3 in place: a ``zarr.json`` beside every
``attributes.json`` (and for implicit groups); blocks and ``attributes.json`` are never touched.

The library side of ``n5zarr add-zarr-metadata`` (as zarr-python's ``metadata/migrate_v3.py``
sits behind its ``zarr migrate`` command): the walk returns a report, the CLI prints it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from napari_n5zarr.errors import N5StoreError
from napari_n5zarr.n5.constants import METADATA_FILES, N5_JSON, ZARR_JSON

if TYPE_CHECKING:
    from pathlib import Path

    from zarr.abc.store import Store

__all__ = ["ZarrMetadataReport", "ZarrMetadataStep", "add_zarr_metadata"]

_logger = logging.getLogger(__name__)

MAX_DEPTH = 64
"""Folders deeper than this are not walked (a guard against link loops)."""

StepKind = Literal["written", "unchanged", "skipped"]


@dataclass(frozen=True)
class ZarrMetadataStep:
    """One node of the walk: its ``zarr.json`` key (``path`` for a skipped node) and what happened."""

    kind: StepKind
    path: str
    reason: str = ""
    replaced: bool = False
    """For ``written``: an existing (different or unreadable) ``zarr.json`` was replaced."""


@dataclass
class ZarrMetadataReport:
    """What :func:`add_zarr_metadata` did (with ``dry_run``: would do), in walk order."""

    location: str
    dry_run: bool = False
    steps: list[ZarrMetadataStep] = field(default_factory=list)

    @property
    def written(self) -> list[str]:
        """Keys of the ``zarr.json`` documents written (with ``dry_run``: that would be)."""
        return [s.path for s in self.steps if s.kind == "written"]

    @property
    def unchanged(self) -> list[str]:
        """Keys of the ``zarr.json`` documents already up to date."""
        return [s.path for s in self.steps if s.kind == "unchanged"]

    @property
    def skipped(self) -> list[tuple[str, str]]:
        """``(node path, reason)`` of each node Zarr v3 cannot express (or that is unreadable)."""
        return [(s.path, s.reason) for s in self.steps if s.kind == "skipped"]


def add_zarr_metadata(
    path_or_store: str | os.PathLike[str] | Store, *, dry_run: bool = False
) -> ZarrMetadataReport:
    """Write a ``zarr.json`` beside every N5 ``attributes.json`` under ``path_or_store``.

    Datasets get a Zarr v3 array document with the ``n5_default`` codec, groups (also implicit
    ones, folders without ``attributes.json`` that hold N5 content) a group document. A node
    Zarr v3 cannot express (object dtype, snappy, sharded, varlength-mode blocks) or whose
    ``attributes.json`` is unreadable is skipped with its reason; its siblings go on.
    Up-to-date ``zarr.json`` documents are left alone, so a second run writes nothing.

    Parameters
    ----------
    path_or_store : str, os.PathLike or zarr.abc.store.Store
        The N5 container: a local folder or ``.zip``, a BigDataViewer ``.xml`` (its N5
        folder), a URL, or a store (opened read-write unless ``dry_run``).
    dry_run : bool, optional
        Walk and report, but write nothing.

    Returns
    -------
    ZarrMetadataReport
        Every node in walk order: written (or would be), unchanged, or skipped with a reason.

    Raises
    ------
    FileNotFoundError
        If no ``attributes.json`` is found at all (not an N5 container).
    OSError
        If the container's own ``attributes.json`` cannot be read (a remote fault, a
        refused connection, a permission): :class:`~napari_n5zarr.errors.N5StoreError`.
    N5MetadataError
        If the container's own ``attributes.json`` is not a JSON object (not JSON, over the
        size cap, nested too deep), naming it; nothing is written.
    """
    from napari_n5zarr.access import base_store
    from napari_n5zarr.read.locate import require

    if isinstance(path_or_store, str | os.PathLike):
        location = require(path_or_store).target  # a BigDataViewer XML: its N5 folder
        store = base_store(location, "r" if dry_run else "r+")
    else:
        from napari_n5zarr.n5.stores import store_location

        store = path_or_store
        location = store_location(store, "")
    report = ZarrMetadataReport(location=location, dry_run=dry_run)
    _logger.debug("adding zarr.json under %s (dry_run=%s)", location, dry_run)
    if not _add_metadata(store, "", report):
        raise FileNotFoundError(f"{location}: no N5 attributes.json found")
    return report


def _list_dir(store: Store, prefix: str) -> list[str]:
    from napari_n5zarr.zarr_internals import sync

    async def names() -> list[str]:
        return [k async for k in store.list_dir(prefix)]

    return sorted(sync(names()))


def _same_json(raw: bytes, doc: dict[str, Any]) -> bool:
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.constants import parse_document

    try:
        return parse_document(raw, None) == doc
    except N5FormatError:  # an unreadable zarr.json is rewritten
        return False


def _write(store: Store, prefix: str, doc: dict[str, Any], report: ZarrMetadataReport) -> None:
    from zarr.storage import LocalStore

    from napari_n5zarr.write.export.blocks import store_get, store_set

    key = f"{prefix}{ZARR_JSON}"
    existing = store_get(store, key)
    if existing is not None and _same_json(existing, doc):
        report.steps.append(ZarrMetadataStep("unchanged", key))
        return
    if not report.dry_run:
        data = json.dumps(doc, indent=2).encode()
        if isinstance(store, LocalStore):
            replace_file(store.root / key, data)
        else:
            store_set(store, key, data)
    _logger.debug("%s %s", "would write" if report.dry_run else "wrote", key)
    report.steps.append(ZarrMetadataStep("written", key, replaced=existing is not None))


def replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` beside ``path`` and rename it into place: a full disk or a kill
    leaves the old file (or none), never a truncated one. OSError names ``path``."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.partial")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise N5StoreError(
            f"cannot write {path}: {e.strerror or e}; it was left as it was"
        ) from None


def _skip(report: ZarrMetadataReport, where: str, reason: str) -> None:
    _logger.debug("skipped %s: %s", where or "/", reason)
    report.steps.append(ZarrMetadataStep("skipped", where, reason))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _add_dataset(
    store: Store, prefix: str, attrs: dict[str, Any], report: ZarrMetadataReport
) -> None:
    """The zarr.json of the dataset at ``prefix``, or the reason it gets none (its metadata
    has no Zarr v3 form, or its blocks are in a mode Zarr cannot read)."""
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.block_format import MODE_NAMES, first_block_mode
    from napari_n5zarr.n5.metadata import attributes_to_zarr
    from napari_n5zarr.n5.stores import store_location
    from napari_n5zarr.write.ome import with_dimension_names

    where = prefix.rstrip("/")
    try:
        doc = attributes_to_zarr(attrs, path=where or "/")
    except N5FormatError as e:
        _skip(report, where, str(e))
        return
    try:
        mode = first_block_mode(
            store, prefix, len(doc["shape"]), lambda block: store_location(store, block)
        )
    except N5FormatError as e:  # not an N5 block: neither spec can read it
        _skip(report, where, f"its first block cannot be read: {_one_line(e)}")
        return
    if mode not in (None, 0):
        _skip(
            report,
            where,
            f"its blocks are in {MODE_NAMES.get(mode, mode)} mode; Zarr reads default-mode blocks only",
        )
        return
    _write(store, prefix, with_dimension_names(doc), report)


def _add_metadata(store: Store, prefix: str, report: ZarrMetadataReport, depth: int = 0) -> bool:
    """Walk one folder; True if it holds N5 content (then it gets a zarr.json)."""
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.constants import parse_document
    from napari_n5zarr.n5.metadata import GROUP_DOC, attributes_to_zarr, is_dataset
    from napari_n5zarr.n5.stores import store_location
    from napari_n5zarr.write.export.blocks import store_get

    where = prefix.rstrip("/")
    key = f"{prefix}{N5_JSON}"
    try:
        raw = store_get(store, key)
    except OSError as e:  # unreadable (permissions, a FIFO, a remote fault): report it in place
        if not prefix:
            raise  # the container itself: nothing else can be read either
        _skip(report, where, _one_line(e))
        return True
    attrs: Any = None
    if raw is not None:
        try:  # the library's one parser: size cap, nesting limit, the file named
            attrs = parse_document(raw, store_location(store, key))
        except N5FormatError as e:
            if not prefix:
                raise  # the container's own document: nothing below can be trusted to be its
            _skip(report, where, _one_line(e))
            return True
        if not prefix and not isinstance(attrs, dict):
            from napari_n5zarr.errors import N5MetadataError

            raise N5MetadataError(f"{store_location(store, key)}: does not hold a JSON object")
    if isinstance(attrs, dict) and is_dataset(attrs):
        _add_dataset(store, prefix, attrs, report)
        return True
    holds_n5 = raw is not None
    children = (
        [n for n in _list_dir(store, where) if n not in METADATA_FILES and not n.startswith(".")]
        if depth < MAX_DEPTH
        else []
    )
    for name in children:
        holds_n5 |= _add_metadata(store, f"{prefix}{name}/", report, depth + 1)
    if holds_n5:
        if attrs is not None and not isinstance(attrs, dict):
            _skip(report, where, "attributes.json does not hold a JSON object")
        else:
            try:
                doc = (
                    attributes_to_zarr(attrs, path=where or "/")
                    if attrs is not None
                    else dict(GROUP_DOC)
                )
            except N5FormatError as e:
                _skip(report, where, str(e))
                return True
            _write(store, prefix, _with_ome(store, prefix, doc, children, report.location), report)
    return holds_n5


def _with_ome(
    store: Store, prefix: str, doc: dict[str, Any], children: list[str], location: str
) -> dict[str, Any]:
    """The group document ``doc`` with OME-NGFF 0.5 metadata if the group is an N5 Viewer
    pyramid (its datasets ``sN``, read again here) that OME-NGFF can describe."""
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.constants import parse_document
    from napari_n5zarr.n5.metadata import N5DatasetMetadata, parse_attributes
    from napari_n5zarr.spatial.model import level_names
    from napari_n5zarr.write.export.blocks import store_get
    from napari_n5zarr.write.ome import OME_KEY, group_ome

    levels: dict[str, N5DatasetMetadata] = {}
    for name in level_names(children):
        try:
            raw = store_get(store, f"{prefix}{name}/{N5_JSON}")
            meta = (
                parse_attributes(parse_document(raw, None), name, check_zarr=False)
                if raw is not None
                else None
            )
        except (N5FormatError, OSError):
            meta = None
        if isinstance(meta, N5DatasetMetadata):
            levels[name] = meta
    where = prefix.rstrip("/")
    group_name = where.rsplit("/", 1)[-1] if where else location.rstrip("/").rsplit("/", 1)[-1]
    ome = group_ome(doc.get("attributes") or {}, levels, name=group_name, where=where or "/")
    return doc if ome is None else {**doc, "attributes": {**doc["attributes"], OME_KEY: ome}}
