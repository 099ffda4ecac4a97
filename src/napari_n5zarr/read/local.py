"""A local N5 folder opened without zarr: the open path a person waits for in napari.

``import zarr`` (and the garbage collection its objects set off) costs about half a second;
a local N5 folder needs none of it to show a pyramid. :func:`open_local` gives the folder's
root as a :class:`LocalNode`, a :class:`~napari_n5zarr.spatial.detect.NodeView` that
:func:`napari_n5zarr.spatial.detect` walks exactly as it walks a zarr node (same pyramids,
calibration, labels, inherited attributes), reading metadata with ``os`` calls and the
library's one metadata parser (:func:`~napari_n5zarr.n5.constants.parse_document`,
:func:`~napari_n5zarr.n5.metadata.parse_attributes`). Its datasets read their blocks through
:meth:`BlockSource.for_local_n5 <napari_n5zarr.read.fetch.BlockSource.for_local_n5>`; zarr is
opened only when a level needs it (a strided preview, tiny blocks, a dask array).

It mirrors what the N5 Default Store and the implicit-group store show for a local
folder: ``attributes.json`` makes a node (dataset or group); a folder without it but with
entries is an implicit group; files are no nodes. Anything else (a ``zarr.json`` without
``attributes.json``, metadata that does not parse, a compression zarr would refuse, paths
leaving the folder) raises :class:`NeedsZarr`: the caller opens the location with zarr,
whose path says what is wrong in its own words.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from napari_n5zarr.n5.block_format import block_name, check_block_file_size, check_block_header
from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON
from napari_n5zarr.n5.label_multiset import file_itemsize, is_label_multiset
from napari_n5zarr.read.block_cache import store_token
from napari_n5zarr.read.pyramid_walk import OUTER_LEVELS, NodeView, merge_outer_attrs
from napari_n5zarr.spatial.model import ArrayInfo, ErrorHandler
from napari_n5zarr.storage import files
from napari_n5zarr.storage.location import local_path, suffix

if TYPE_CHECKING:
    import zarr

    from napari_n5zarr.n5.metadata import N5DatasetMetadata, N5GroupMetadata
    from napari_n5zarr.read.levels import LazyLevel


class NeedsZarr(Exception):
    """Something the zarr-free path does not read: open the location with zarr instead."""


class LocalContainer:
    """One opening of a local folder: its name in errors (as the N5 Default Store names
    it), a cache token of its own, and the zarr root, opened on first need and shared by
    every level."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.name = self.root  # describe_store(SafeLocalStore(root)): the same text in errors
        self.token = store_token(self)
        self.links = files.LinkGuard(self.root)  # each real folder once: link loops and fan-out end
        self._zarr: Any = None
        self._lock = threading.Lock()
        self._nodes: dict[str, LocalNode | None] = {}  # read once per opening

    def path(self, key: str) -> str:
        return os.path.join(self.root, key) if key else self.root

    def zarr_node(self, path: str) -> zarr.Array | zarr.Group:
        """The node at ``path`` opened with zarr (:func:`napari_n5zarr.open` of the root, as
        the zarr path opens it, so its errors name blocks the same way)."""
        with self._lock:
            if self._zarr is None:
                from napari_n5zarr.access import open as open_node

                self._zarr = open_node(self.root)
            root = self._zarr
        return root if not path else root[path]

    def node(self, path: str) -> LocalNode | None:
        """The node at ``path`` (None: nothing there, as zarr finds no node); metadata read
        once per opening."""
        if path not in self._nodes:
            self._nodes[path] = self._read_node(path)
        return self._nodes[path]

    def _read_node(self, path: str) -> LocalNode | None:
        folder = self.path(path)
        doc = self._metadata(path)
        if doc is None:
            if os.path.lexists(os.path.join(folder, ZARR_JSON)):
                raise NeedsZarr(f"{folder}: a Zarr v3 node")
            try:
                with os.scandir(folder) as entries:
                    empty = next(entries, None) is None
            except (FileNotFoundError, NotADirectoryError):
                return None
            except OSError as e:
                raise NeedsZarr(str(e)) from None
            return None if empty else LocalNode(self, path, None)  # an implicit N5 group
        return LocalNode(self, path, doc)

    def _metadata(self, path: str) -> N5DatasetMetadata | N5GroupMetadata | None:
        from napari_n5zarr.n5.compression import zarr_refuses
        from napari_n5zarr.n5.constants import parse_document
        from napari_n5zarr.n5.metadata import N5DatasetMetadata, parse_attributes

        where = self.path(path + "/" + N5_JSON if path else N5_JSON)
        try:
            raw = files.read_regular_file(where, metadata=True)
        except files.MISSING:
            return None
        except Exception as e:  # a FIFO, unreadable: zarr's path reports it
            raise NeedsZarr(str(e)) from None
        try:
            meta = parse_attributes(parse_document(raw, where), where, check_zarr=False)
            if isinstance(meta, N5DatasetMetadata) and zarr_refuses(dict(meta.compression)):
                raise NeedsZarr(f"{where}: a compression zarr refuses")
        except NeedsZarr:
            raise
        except Exception as e:  # not valid N5: zarr's path reports it
            raise NeedsZarr(str(e)) from None
        return meta


class LocalNode(NodeView):
    """A node of a local N5 folder (see the module docstring); for datasets also the
    source of its blocks (:attr:`metadata`, :attr:`prefix`, :meth:`read_block`)."""

    def __init__(self, container: LocalContainer, path: str, metadata: N5DatasetMetadata | N5GroupMetadata | None) -> None:
        from napari_n5zarr.n5.metadata import N5DatasetMetadata

        self.container = container
        self.path = path
        self.metadata: Any = metadata
        self.is_array = isinstance(metadata, N5DatasetMetadata)
        self.basename = path.rsplit("/", 1)[-1]
        self.prefix = path + "/" if path else ""

    # -- the walk (NodeView) ---------------------------------------------------------
    def attrs(self) -> dict[str, Any]:
        return dict(self.metadata.attributes) if self.metadata is not None else {}

    def info(self) -> ArrayInfo:
        meta = self.metadata
        return ArrayInfo(dict(meta.attributes), tuple(meta.dimensions), meta.data_type)

    def entries(self) -> list[os.DirEntry[str]]:
        """The folder's entries but its metadata documents (what zarr lists as children)."""
        try:
            with os.scandir(self.container.path(self.path)) as it:
                return [e for e in it if e.name not in (N5_JSON, ZARR_JSON)]
        except OSError as e:
            raise NeedsZarr(str(e)) from None

    def children(self, where: str, on_error: ErrorHandler) -> dict[str, NodeView]:
        if self.is_array:
            return {}
        out: dict[str, NodeView] = {}
        for entry in self.entries():
            try:
                is_dir = entry.is_dir() and self.container.links.follows(entry.path, entry.is_symlink())
            except OSError as e:
                raise NeedsZarr(str(e)) from None
            if not is_dir:
                continue  # a file is no node, nor a link back into the container
            child = self.container.node(self.prefix + entry.name)
            if child is not None:
                out[entry.name] = child
        return out

    def get(self, path: str) -> NodeView:
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise NeedsZarr(f"{path!r}: not a plain relative path")
        node: LocalNode = self
        for part in parts:
            if node.is_array:
                raise KeyError(path)
            child = self.container.node(node.prefix + part)
            if child is None:
                raise KeyError(path)
            node = child
        return node

    def ancestor_attrs(self) -> dict[str, Any]:
        if self.path:
            raise NeedsZarr("ancestors of a node below the opened folder")
        try:
            parents = list(Path(self.container.root).resolve().parents)[:OUTER_LEVELS]
        except (OSError, ValueError, RuntimeError):  # an unresolvable path (symlink loop, ...): nothing to inherit
            return {}

        def reader(folder: Path) -> Any:
            return lambda: _read_or_none(os.path.join(folder, N5_JSON))

        return merge_outer_attrs((str(folder), reader(folder)) for folder in parents)

    # -- a dataset's blocks ------------------------------------------------------------
    def read_block(self, key: str) -> bytes | None:
        """The stored block at ``key`` (below the container; None: absent), under the N5
        Default Store's checks over a SafeLocalStore: a block file far too large, a FIFO or
        device, a header its position makes impossible are refused, naming the block."""
        meta = self.metadata
        path = self.container.path(key)
        where = block_name(key, self.container.name)
        try:
            info = os.stat(path)
        except OSError:
            info = None  # missing (fill value) or unreadable: the read decides
        if info is not None and stat.S_ISREG(info.st_mode):
            check_block_file_size(info.st_size, meta.block_size, file_itemsize(meta.data_type, meta.attributes), where)
        try:
            data = files.read_regular_file(path, metadata=False)
        except files.MISSING:
            return None
        index = tuple(int(p) for p in key[len(self.prefix) :].split("/"))
        check_block_header(np.frombuffer(data, np.uint8), index, (meta.dimensions, meta.block_size), where)
        return data

    def level(self, report: Any = None, cls: type[LazyLevel] | None = None) -> LazyLevel:
        """This dataset as the level napari is handed (zarr opened only if a read needs it);
        ``cls``: another :class:`~napari_n5zarr.read.levels.LevelReader` class."""
        import functools

        from napari_n5zarr.read.fetch import BlockSource
        from napari_n5zarr.read.levels import LazyLevel

        if not self.is_array:
            raise ValueError(f"{self.path or '/'} is not an array")
        def open_array() -> zarr.Array:
            import zarr  # a read needs zarr after all (strided, tiny blocks, a retry)

            array = self.container.zarr_node(self.path)
            if not isinstance(array, zarr.Array):
                raise ValueError(f"{self.path or '/'} is not an array in zarr's view")
            return array

        reopen = functools.partial(reopen_level, self.container.root, self.path)
        if is_label_multiset(self.metadata.attributes):  # Paintera: its own decoder, never zarr's values
            from napari_n5zarr.read.label_multiset import MultisetLevel, source_for_local

            level_cls = cls if cls is not None and issubclass(cls, MultisetLevel) else MultisetLevel
            return level_cls.over_source(source_for_local(self), open_array=open_array, report=report, reopen=reopen)
        return (cls or LazyLevel).over_source(BlockSource.for_local_n5(self), open_array=open_array, report=report, reopen=reopen)


def reopen_level(root: str, path: str, cls: Any) -> Any:
    """The level at ``path`` of the local N5 folder ``root``, opened afresh (an unpickled
    :class:`~napari_n5zarr.read.levels.LevelReader`, in another process)."""
    from napari_n5zarr.errors import NodeNotFoundError

    try:
        node = LocalContainer(Path(root)).node(path)
    except NeedsZarr as e:
        raise NodeNotFoundError(f"{os.path.join(root, path)}: cannot be read as the N5 dataset it was ({e})") from None
    if node is None or not node.is_array:
        raise NodeNotFoundError(f"{os.path.join(root, path)}: no N5 dataset there any more")
    return node.level(cls=cls)


def _read_or_none(path: str) -> bytes | None:
    """An ancestor's attributes.json (None: absent); a FIFO, device or oversized document
    raises (OSError / ValueError: no attributes from that folder), never blocks."""
    try:
        return files.read_regular_file(path, metadata=True)
    except files.MISSING:
        return None


def open_local(location: str | os.PathLike[str]) -> LocalNode | None:
    """The root of a local N5 folder for the zarr-free path, or None where zarr must open
    it (URLs, zips, no folder, nothing there, a Zarr v3 node, unusual metadata)."""
    path = local_path(location)
    if path is None or suffix(path) == ".zip" or not path.is_dir():
        return None
    try:
        return LocalContainer(path).node("")
    except NeedsZarr:
        return None


__all__ = ["LocalContainer", "LocalNode", "NeedsZarr", "open_local", "reopen_level"]
