"""The spec's two store wrappers, over any zarr store (local, memory, zip, fsspec, ...).

* :class:`N5DefaultStore` answers ``<prefix>zarr.json`` from ``<prefix>attributes.json``
  and, on writes, stores both documents (the folder is then N5 and Zarr v3 at once).
* :class:`ImplicitGroupStore` answers a default group document for prefixes that exist
  but have no metadata (N5 groups need no attributes.json).

Both present one consistent view: listings show ``zarr.json`` where ``attributes.json`` is,
never ``attributes.json`` itself. Errors name the storage under a store and the key in it
(:func:`describe_store`, :func:`store_location`).

Over a local folder (:class:`~napari_n5zarr.storage.local.SafeLocalStore`) both also answer
synchronously (``get_sync``, ``list_dir_sync``), without zarr's event loop: :func:`get_many` and
:func:`list_names` read a page of a hierarchy (the tree lister) that way, and any other store
with all requests at once in one round trip.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zarr.abc.buffer import Buffer
from zarr.abc.store import Store
from zarr.buffer import default_buffer_prototype
from zarr.storage import FsspecStore, LocalStore, MemoryStore, WrapperStore, ZipStore

from napari_n5zarr.byte_ranges import byte_span
from napari_n5zarr.errors import BLOCK_NAME_ATTR
from napari_n5zarr.n5.block_format import block_name, check_block_header, stored_block_limit
from napari_n5zarr.n5.constants import (
    N5_JSON,
    ZARR_JSON,
    ReadLimit,
    check_stored_size,
    parse_document,
)
from napari_n5zarr.n5.label_multiset import stored_payload
from napari_n5zarr.n5.metadata import (
    GROUP_DOC,
    attributes_to_zarr,
    zarr_to_attributes,
)

if TYPE_CHECKING:
    from zarr.abc.buffer import BufferPrototype
    from zarr.abc.store import ByteRequest

logger = logging.getLogger(__name__)


def store_chain(store: Any, most: int = 16) -> list[Any]:
    """``store`` and every store it wraps (``WrapperStore._store``), outermost first: the
    one unwrapping of a wrapper chain (at most ``most`` deep)."""
    chain = [store]
    while getattr(chain[-1], "_store", None) is not None and len(chain) < most:
        chain.append(chain[-1]._store)
    return chain


def innermost(store: Any) -> Any:
    """The plain store under every wrapper of ``store`` (see :func:`store_chain`)."""
    return store_chain(store)[-1]


def describe_store(store: Any) -> str:
    """``/data/x.n5`` (local), ``s3://bucket/x.n5`` / ``https://host/x.n5`` (fsspec),
    ``/data/x.zip`` (zip), ``memory store``; wrappers are described by what they wrap."""
    store = innermost(store)
    if isinstance(store, LocalStore):
        return str(store.root)
    if isinstance(store, ZipStore):
        return str(store.path)
    if isinstance(store, FsspecStore):
        try:
            return str(store.fs.unstrip_protocol(store.path))
        except Exception:
            return str(store.path)
    if isinstance(store, MemoryStore):
        return "memory store"
    for attr in ("url", "root", "path", "prefix"):
        value = getattr(store, attr, None)
        if isinstance(value, str | bytes) or hasattr(value, "__fspath__"):
            return str(value)
    return repr(store)


def store_location(store: Any, key: str) -> str:
    """The path or URL of ``key`` in ``store`` (seen through wrappers), for error messages."""
    inner = innermost(store)
    if isinstance(inner, LocalStore):
        return str(inner.root / key)
    if isinstance(inner, FsspecStore):
        path = f"{inner.path.rstrip('/')}/{key}" if inner.path.strip("/") else key
        try:
            return str(inner.fs.unstrip_protocol(path))
        except Exception:
            return path
    if isinstance(inner, ZipStore):
        return f"{inner.path}/{key}"
    if isinstance(inner, MemoryStore):
        return f"memory://{key}"
    return f"{key} in {describe_store(inner)}"


def _meta_prefix(key: str) -> str | None:
    """``a/b/`` for ``a/b/zarr.json``, ``""`` for ``zarr.json``, None for other keys."""
    if key == ZARR_JSON:
        return ""
    if key.endswith("/" + ZARR_JSON):
        return key[: -len(ZARR_JSON)]
    return None


def _json_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(
        doc, separators=(",", ":")
    ).encode()  # compact: C-encoded, 10x faster than indent=2


_GROUP_BYTES = _json_bytes(GROUP_DOC)


def _group_buffer(prototype: BufferPrototype | None) -> Buffer:
    return (prototype or default_buffer_prototype()).buffer.from_bytes(_GROUP_BYTES)


_TRANSLATIONS = 512
"""attributes.json documents whose translation each N5DefaultStore keeps (by their bytes)."""


def _put[K, V](kept: dict[K, V], key: K, value: V, most: int) -> None:
    """``kept[key] = value``, dropping the oldest entry past ``most`` (safe when threads share it)."""
    if len(kept) >= most:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            kept.pop(next(iter(kept)))
    kept[key] = value


def reads_synchronously(store: Store) -> bool:
    """Every layer of ``store`` reads without zarr's event loop (``get_sync``, ``list_dir_sync``):
    a local folder under these wrappers."""
    *wrappers, base = store_chain(store)
    if not all(isinstance(s, N5DefaultStore | ImplicitGroupStore) for s in wrappers):
        return False
    return getattr(base, "sync_reads", False) is True


def get_many(store: Store, keys: Sequence[str]) -> list[bytes | BaseException | None]:
    """The bytes at each of ``keys`` (None: nothing there; the exception a read raised in its
    place: one bad key never hides the others). Synchronous where every layer reads
    synchronously (a local folder); else every request at once, in one round trip to zarr's
    event loop (``asyncio.gather``)."""
    if reads_synchronously(store):
        out: list[bytes | BaseException | None] = []
        proto = default_buffer_prototype()
        for key in keys:
            try:
                value = store.get_sync(key, prototype=proto)  # type: ignore[attr-defined]
                out.append(None if value is None else value.to_bytes())
            except Exception as exc:
                out.append(exc)
        return out
    import asyncio

    from napari_n5zarr.zarr_internals import sync

    async def one(key: str) -> bytes | None:
        value = await store.get(key, default_buffer_prototype())
        return None if value is None else value.to_bytes()

    async def gather() -> list[Any]:
        return await asyncio.gather(*(one(k) for k in keys), return_exceptions=True)

    return sync(gather())


def list_names(store: Store, prefix: str) -> list[str]:
    """The names directly under ``prefix`` (``list_dir``), synchronously where the store can."""
    if reads_synchronously(store):
        return list(store.list_dir_sync(prefix))  # type: ignore[attr-defined]
    from napari_n5zarr.zarr_internals import sync

    async def names() -> list[str]:
        return [k async for k in store.list_dir(prefix)]

    return sync(names())


def count_keys(
    store: Store, prefix: str, keep: Callable[[str], bool], limit: int
) -> tuple[int, bool]:
    """(keys under ``prefix`` that ``keep`` accepts, counting stopped at ``limit``)."""
    from napari_n5zarr.zarr_internals import sync

    async def count() -> tuple[int, bool]:
        n = 0
        async for key in store.list_prefix(f"{prefix}/" if prefix else ""):
            if keep(key):
                n += 1
                if n >= limit:
                    return n, True
        return n, False

    return sync(count())


def stored_size(store: Store, prefix: str, limit: int = 100_000) -> int | None:
    """Bytes stored under ``prefix`` (its blocks and metadata documents) in the plain store
    beneath the N5 wrappers (sizes from the listing's store, no block read or checked);
    None past ``limit`` keys."""
    from napari_n5zarr.zarr_internals import sync

    base = innermost(store)

    async def total() -> int | None:
        n = size = 0
        async for key in base.list_prefix(f"{prefix}/" if prefix else ""):
            n += 1
            if n > limit:
                return None
            size += await base.getsize(key)
        return size

    return sync(total())


def _in_range(value: Buffer, byte_range: ByteRequest | None) -> Buffer:
    """The part of a generated document that ``byte_range`` asks for."""
    if byte_range is None:
        return value
    start, stop = byte_span(byte_range, len(value))
    return value[start:stop]


def _parse_json(raw: Buffer, where: str) -> Any:
    """The JSON document in ``raw`` (read from ``where``, a path or URL); see
    :func:`~napari_n5zarr.n5.constants.parse_document`."""
    return parse_document(raw.to_bytes(), where)


class _ReadsThroughGet(WrapperStore[Store]):
    """zarr's WrapperStore sends these reads straight to the inner store, past our ``get``:
    route them through it (zarr's generic ``Store`` implementations do exactly that)."""

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return [await self.get(k, prototype, r) for k, r in key_ranges]

    async def _get_many(
        self, requests: Iterable[tuple[str, BufferPrototype, ByteRequest | None]]
    ) -> AsyncGenerator[tuple[str, Buffer | None], None]:
        async for item in Store._get_many(self, requests):
            yield item

    def get_ranges(
        self, key: str, byte_ranges: Sequence[ByteRequest | None], **kwargs: Any
    ) -> AsyncIterator[Any]:
        return Store.get_ranges(self, key, byte_ranges, **kwargs)


class _Renamer:
    """One listing's keys as the N5 view shows them: ``attributes.json`` as ``zarr.json``, each once."""

    def __init__(self, *, names: bool) -> None:
        self.names = names
        self.seen: set[str] = set()
        self.listed: set[str] = set()

    def __call__(self, key: str) -> str | None:
        if self.names:  # fsspec stores of zarr < 3.4.1 list child folders as "name/"
            key = key.rstrip("/")
            if key in self.listed:
                return None
            self.listed.add(key)
        if key == N5_JSON or key.endswith("/" + N5_JSON):
            key = key[: -len(N5_JSON)] + ZARR_JSON
        if key.endswith(ZARR_JSON):
            if key in self.seen:
                return None
            self.seen.add(key)
        return key


def stored_limit(doc: Mapping[str, Any]) -> ReadLimit | None:
    """The cap on one stored block of the ``n5_default`` array whose zarr.json document is
    ``doc`` (:func:`stored_block_limit`: block size, element size, the compression's worst
    case). KeyError, TypeError, ...: not such a document."""
    block = tuple(int(b) for b in doc["chunk_grid"]["configuration"]["chunk_shape"])
    payload, varlength, what = stored_payload(str(doc["data_type"]), doc.get("attributes"), block)
    inner = doc["codecs"][0]["configuration"]["codecs"]
    compressor = (
        inner[-1] if inner and inner[-1].get("name") not in ("bytes", "transpose") else None
    )
    return stored_block_limit(block, payload, compressor, varlength=varlength, what=what)


class N5DefaultStore(_ReadsThroughGet):
    """Wrap a zarr store holding N5 so that zarr-python 3 reads and writes it as Zarr v3.

    Reads: ``zarr.json`` is translated from ``attributes.json`` (a real ``zarr.json`` is used
    only where no ``attributes.json`` exists). Writes of ``zarr.json`` store the matching
    ``attributes.json`` as well. Blocks pass through; a block in varlength/object mode is
    refused with its key.

    Parameters
    ----------
    store
        Any zarr store holding an N5 container (local, zip, fsspec, memory, ...).
    write_zarr_json
        Also store the ``zarr.json`` written through this wrapper (default). ``False``
        stores N5 only (z5py 3 refuses folders holding both).

    Raises
    ------
    N5MetadataError
        From reads and writes of ``zarr.json``: an ``attributes.json`` that is not valid N5
        (naming its path or URL), or a ``zarr.json`` N5 cannot store.
    N5BlockError
        From block reads: a block whose header is impossible at its position, or not in
        default mode (naming the block and the container).

    Examples
    --------
    >>> import zarr
    >>> from zarr.storage import LocalStore
    >>> arr = zarr.open_array(N5DefaultStore(LocalStore("data.n5/raw")), mode="r")  # doctest: +SKIP
    """

    def __init__(self, store: Store, *, write_zarr_json: bool = True) -> None:
        super().__init__(store)
        self.write_zarr_json = write_zarr_json
        self._array_ndim: dict[str, int] = {}  # prefix of each array seen -> ndim
        self._array_grid: dict[
            str, tuple[tuple[int, ...], tuple[int, ...], ReadLimit | None]
        ] = {}  # -> (shape, blockSize, cap)
        self._translations: dict[
            bytes, tuple[dict[str, Any], bytes]
        ] = {}  # attributes.json -> (zarr.json doc, its bytes)
        self._array_docs: dict[
            str, dict[str, Any]
        ] = {}  # prefix -> the document its grid was taken from

    def _with_store(self, store: Store) -> N5DefaultStore:
        return type(self)(store, write_zarr_json=self.write_zarr_json)

    def __repr__(self) -> str:
        return f"N5DefaultStore({self._store!r})"

    # -- metadata translation ------------------------------------------------------
    def _location(self, key: str) -> str:
        """:func:`store_location` of ``key``; over a local folder a string join (no pathlib)."""
        root = self.__dict__.get("_local_root")
        if root is None:
            inner = self._store
            root = self.__dict__["_local_root"] = (
                os.fspath(inner.root) if isinstance(inner, LocalStore) else ""
            )
        return os.path.join(root, key) if root else store_location(self._store, key)

    def _translate(self, prefix: str, raw: Buffer) -> bytes:
        """The zarr.json bytes for the attributes.json ``raw`` at ``prefix``."""
        return self._translation(prefix, raw.to_bytes())[1]

    def translation(self, prefix: str, data: bytes) -> dict[str, Any]:
        """The zarr.json document (shared: do not change it) of the attributes.json bytes
        ``data`` read at ``prefix`` (``""`` or ``"path/"``), as :meth:`get` of its zarr.json
        would answer: a reader that read attributes.json itself (the tree) asks for its
        translation here instead of reading the document a second time."""
        return self._translation(prefix, data)[0]

    def _translation(self, prefix: str, data: bytes) -> tuple[dict[str, Any], bytes]:
        """(document, bytes); the translation of each distinct document is kept (a container
        repeats them: levels, time points, tiles)."""
        known = self._translations.get(data)
        if known is None:
            where = self._location(prefix + N5_JSON)
            doc = attributes_to_zarr(parse_document(data, where), path=where)
            known = (doc, _json_bytes(doc))
            _put(self._translations, data, known, _TRANSLATIONS)
        doc = known[0]
        if doc["node_type"] == "array" and self._array_docs.get(prefix) is not doc:
            self._array_docs[prefix] = (
                doc  # its block grid is worked out at its first block (_grid)
            )
            self._array_ndim[prefix] = len(doc["shape"])
            self._array_grid.pop(prefix, None)
        return known

    def _grid(
        self, prefix: str
    ) -> tuple[tuple[int, ...], tuple[int, ...], ReadLimit | None] | None:
        """(shape, blockSize, stored block cap) of the array at ``prefix``, if known."""
        if prefix not in self._array_grid and (doc := self._array_docs.get(prefix)) is not None:
            self._remember_grid(prefix, doc)
        return self._array_grid.get(prefix)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (zarr arrays go to dask workers) with the block grids worked out, without
        the kept translations and documents (a worker starts its own)."""
        for prefix in list(self._array_docs):
            self._grid(prefix)
        return {
            **self.__dict__,
            "_translations": {},
            "_array_docs": {},
            "_array_grid": dict(self._array_grid),
        }

    # -- blocks: checked where the key is known -------------------------------------
    @property
    def container(self) -> str:
        """Readable name of the storage (path or URL), used in error messages."""
        name = self.__dict__.get("_container")
        if name is None:
            name = self.__dict__["_container"] = describe_store(self._store)
        return name

    def _remember_grid(self, prefix: str, doc: dict[str, Any]) -> None:
        try:
            block = tuple(int(b) for b in doc["chunk_grid"]["configuration"]["chunk_shape"])
            self._array_grid[prefix] = (
                tuple(int(n) for n in doc["shape"]),
                block,
                stored_limit(doc),
            )
        except (
            KeyError,
            IndexError,
            TypeError,
            ValueError,
            AttributeError,
        ):  # the codec's position-free checks remain
            logger.debug(
                "%s%s: no block grid known; blocks get the codec's position-free checks only",
                self.container,
                prefix,
            )
            self._array_grid.pop(prefix, None)
            self._array_docs.pop(prefix, None)  # not worked out again

    def _read_limit(self, key: str) -> ReadLimit | None:
        """The cap on the stored block at ``key`` (its dataset's :func:`stored_block_limit`),
        or None when ``key`` is no block of a dataset read so far (the global cap applies)."""
        location = self._block_location(key)
        grid = self._grid(location[0]) if location is not None else None
        return grid[2] if grid is not None else None

    def _read_capped(
        self, key: str, value: Buffer | None, limit: ReadLimit | None
    ) -> Buffer | None:
        """``value`` read from a store that knows no per-dataset cap (a MemoryStore, zarr's own
        stores): checked after the read (bounded stores stop at the cap while reading)."""
        if (
            value is not None
            and limit is not None
            and not getattr(self._store, "limited_reads", False)
        ):
            check_stored_size(
                len(value), block_name(key, self.container), metadata=False, limit=limit
            )
        return value

    def _block_location(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """(array prefix, grid index) when ``key`` is a block of an array read so far."""
        if not self._array_ndim or key.endswith(".json"):
            return None
        parts = key.split("/")
        for ndim in set(self._array_ndim.values()):
            if len(parts) < ndim:
                continue
            prefix = "/".join(parts[:-ndim])
            prefix = prefix + "/" if prefix else ""
            if self._array_ndim.get(prefix) != ndim:
                continue
            try:
                return prefix, tuple(int(p) for p in parts[-ndim:])
            except ValueError:
                return None
        return None

    def _check_block(self, key: str, value: Buffer | None) -> Buffer | None:
        """Check a block's header where the key is known, and name the block on its buffer.

        Refuses header shapes that the block's position makes
        impossible: a header must be the full ``blockSize`` (padded, tensorstore/zarr 2) or
        exactly the part of the block inside the array on every axis (truncated, n5-java/
        z5py). Interior blocks therefore must be full. O(header): reads only the header.
        The codec (which never sees keys) reads the name from the buffer for its own errors.
        """
        if value is None:
            return value
        location = self._block_location(key)
        if location is None:
            return value
        where = block_name(key, self.container)
        prefix, index = location
        grid = self._grid(prefix)
        check_block_header(
            value.as_numpy_array(), index, grid[:2] if grid is not None else None, where
        )
        with contextlib.suppress(
            AttributeError
        ):  # a buffer class with __slots__: errors then lack the name
            setattr(value, BLOCK_NAME_ATTR, where)
        return value

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        prefix = _meta_prefix(key)
        if prefix is None:
            limit = self._read_limit(key)
            if limit is not None and getattr(self._store, "limited_reads", False):
                value = await self._store.get(key, prototype, byte_range, limit=limit)  # type: ignore[call-arg]
            else:
                value = self._read_capped(
                    key, await self._store.get(key, prototype, byte_range), limit
                )
            return self._check_block(key, value) if byte_range is None else value
        raw = await self._store.get(prefix + N5_JSON, default_buffer_prototype())
        if raw is None:
            return await self._store.get(key, prototype, byte_range)
        return _in_range(
            (prototype or default_buffer_prototype()).buffer.from_bytes(
                self._translate(prefix, raw)
            ),
            byte_range,
        )

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        proto = prototype or default_buffer_prototype()
        prefix = _meta_prefix(key)
        if prefix is None:
            limit = self._read_limit(key)
            if limit is not None and getattr(self._store, "limited_reads", False):
                get_sync = self._store.get_sync  # type: ignore[attr-defined]
                value = get_sync(key, prototype=proto, byte_range=byte_range, limit=limit)
            else:
                get_sync = self._store.get_sync  # type: ignore[attr-defined]
                value = self._read_capped(
                    key, get_sync(key, prototype=proto, byte_range=byte_range), limit
                )
            return self._check_block(key, value) if byte_range is None else value
        raw = self._store.get_sync(prefix + N5_JSON, prototype=proto)  # type: ignore[attr-defined]
        if raw is None:
            return self._store.get_sync(key, prototype=proto, byte_range=byte_range)  # type: ignore[attr-defined]
        return _in_range(proto.buffer.from_bytes(self._translate(prefix, raw)), byte_range)

    async def exists(self, key: str) -> bool:
        prefix = _meta_prefix(key)
        if prefix is not None and await self._store.exists(prefix + N5_JSON):
            return True
        return await self._store.exists(key)

    async def _n5_document(self, prefix: str, value: Buffer) -> bytes:
        existing_raw = await self._store.get(prefix + N5_JSON, default_buffer_prototype())
        where = store_location(self._store, prefix + N5_JSON)
        existing = _parse_json(existing_raw, where) if existing_raw is not None else None
        if not isinstance(existing, dict):
            existing = None
        attrs = zarr_to_attributes(
            _parse_json(value, prefix + ZARR_JSON), existing, root=prefix == "", path=where
        )
        return json.dumps(attrs, indent=2).encode()

    async def set(self, key: str, value: Buffer) -> None:
        prefix = _meta_prefix(key)
        if prefix is not None:
            n5 = await self._n5_document(prefix, value)
            await self._store.set(
                prefix + N5_JSON, default_buffer_prototype().buffer.from_bytes(n5)
            )
            self._array_ndim.pop(prefix, None)
            self._array_docs.pop(prefix, None)
            if not self.write_zarr_json:
                return
        await self._store.set(key, value)

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        if not await self.exists(key):
            await self.set(key, value)

    async def _set_many(self, values: Iterable[tuple[str, Buffer]]) -> None:
        for key, value in values:
            await self.set(key, value)

    def set_sync(self, key: str, value: Buffer) -> None:
        if _meta_prefix(key) is not None:
            from napari_n5zarr.zarr_internals import sync

            sync(self.set(key, value))
        else:
            self._store.set_sync(key, value)  # type: ignore[attr-defined]

    async def delete(self, key: str) -> None:
        prefix = _meta_prefix(key)
        if prefix is not None:
            if await self._store.exists(prefix + N5_JSON):
                await self._store.delete(prefix + N5_JSON)
            self._array_ndim.pop(prefix, None)
            self._array_docs.pop(prefix, None)
        await self._store.delete(key)

    def delete_sync(self, key: str) -> None:
        # WrapperStore.delete_sync goes straight to the inner store: it would leave the
        # attributes.json of a deleted zarr.json behind (the async delete removes both).
        if _meta_prefix(key) is not None:
            from napari_n5zarr.zarr_internals import sync

            sync(self.delete(key))
        else:
            self._store.delete_sync(key)  # type: ignore[attr-defined]

    # -- listings: attributes.json shows as zarr.json ----------------------------------
    async def _renamed(
        self, keys: AsyncIterator[str], *, names: bool = False
    ) -> AsyncGenerator[str, None]:
        rename = _Renamer(names=names)
        async for key in keys:
            shown = rename(key)
            if shown is not None:
                yield shown

    def list_dir_sync(self, prefix: str) -> list[str]:
        """:meth:`list_dir` in the calling thread (an inner store with ``list_dir_sync``)."""
        rename = _Renamer(names=True)
        return [k for k in map(rename, self._store.list_dir_sync(prefix)) if k is not None]  # type: ignore[attr-defined]

    def list(self) -> AsyncGenerator[str, None]:
        return self._renamed(self._store.list())

    def list_prefix(self, prefix: str) -> AsyncGenerator[str, None]:
        return self._renamed(self._store.list_prefix(prefix))

    def list_dir(self, prefix: str) -> AsyncGenerator[str, None]:
        return self._renamed(self._store.list_dir(prefix), names=True)


class ImplicitGroupStore(_ReadsThroughGet):
    """Answer ``{"zarr_format": 3, "node_type": "group"}`` for metadata-less prefixes.

    Only for prefixes that really exist (hold at least one key) and do not lie inside an
    array; wrap an :class:`N5DefaultStore` with it (N5 groups need no attributes.json).

    Parameters
    ----------
    store
        The store to wrap, normally an :class:`N5DefaultStore`.

    Raises
    ------
    N5MetadataError
        When deciding whether a prefix lies inside an array meets an ancestor's metadata
        that is not valid JSON (naming it).
    """

    def _with_store(self, store: Store) -> ImplicitGroupStore:
        return type(self)(store)

    def __repr__(self) -> str:
        return f"ImplicitGroupStore({self._store!r})"

    async def _is_implicit_group(self, prefix: str) -> bool:
        has_children = False
        try:
            async for _ in self._store.list_dir(prefix.rstrip("/")):
                has_children = True
                break
        except FileNotFoundError:  # some fsspec backends raise for a missing prefix
            return False
        if not has_children:
            return False
        parts = prefix.rstrip("/").split("/") if prefix else []
        for i in range(len(parts) - 1, -1, -1):  # not inside an array (e.g. block folders)
            ancestor = "/".join(parts[:i])
            key = (ancestor + "/" if ancestor else "") + ZARR_JSON
            raw = await self._store.get(key, default_buffer_prototype())
            if raw is not None:
                doc = _parse_json(raw, store_location(self._store, key))
                return not (isinstance(doc, dict) and doc.get("node_type") == "array")
        return True

    def _is_implicit_group_sync(self, prefix: str) -> bool:
        """:meth:`_is_implicit_group` in the calling thread (see :func:`reads_synchronously`)."""
        inner: Any = self._store
        if not inner.list_dir_sync(prefix.rstrip("/")):
            return False
        parts = prefix.rstrip("/").split("/") if prefix else []
        proto = default_buffer_prototype()
        for i in range(len(parts) - 1, -1, -1):
            ancestor = "/".join(parts[:i])
            key = (ancestor + "/" if ancestor else "") + ZARR_JSON
            raw = inner.get_sync(key, prototype=proto)
            if raw is not None:
                doc = _parse_json(raw, store_location(self._store, key))
                return not (isinstance(doc, dict) and doc.get("node_type") == "array")
        return True

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        value = await self._store.get(key, prototype, byte_range)
        if value is None:
            prefix = _meta_prefix(key)
            if prefix is not None and await self._is_implicit_group(prefix):
                return _in_range(_group_buffer(prototype), byte_range)
        return value

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        prefix = _meta_prefix(key)
        if prefix is not None:
            if not reads_synchronously(self._store):
                from napari_n5zarr.zarr_internals import sync

                return sync(self.get(key, prototype or default_buffer_prototype(), byte_range))
            value = self._store.get_sync(key, prototype=prototype, byte_range=byte_range)  # type: ignore[attr-defined]
            if value is None and self._is_implicit_group_sync(prefix):
                return _in_range(_group_buffer(prototype), byte_range)
            return value
        return self._store.get_sync(key, prototype=prototype, byte_range=byte_range)  # type: ignore[attr-defined]

    def list_dir_sync(self, prefix: str) -> list[str]:
        """:meth:`list_dir` in the calling thread (an inner store with ``list_dir_sync``)."""
        return list(self._store.list_dir_sync(prefix))  # type: ignore[attr-defined]

    async def exists(self, key: str) -> bool:
        if await self._store.exists(key):
            return True
        prefix = _meta_prefix(key)
        return prefix is not None and await self._is_implicit_group(prefix)

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        if not await self._store.exists(key):
            await self._store.set(key, value)
