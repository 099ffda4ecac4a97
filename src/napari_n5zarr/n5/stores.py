"""The spec's two store wrappers, over any zarr store (local, memory, zip, fsspec, ...).

* :class:`N5DefaultStore` answers ``<prefix>zarr.json`` from ``<prefix>attributes.json``
  and, on writes, stores both documents (the folder is then N5 and Zarr v3 at once).
* :class:`ImplicitGroupStore` answers a default group document for prefixes that exist
  but have no metadata (N5 groups need no attributes.json).

Both present one consistent view: listings show ``zarr.json`` where ``attributes.json`` is,
never ``attributes.json`` itself.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from zarr.abc.store import Store
from zarr.core.buffer import Buffer, default_buffer_prototype
from zarr.storage import FsspecStore, LocalStore, MemoryStore, WrapperStore, ZipStore

from napari_n5zarr.n5.errors import N5BlockError, N5MetadataError
from napari_n5zarr.n5.header import MODE_DEFAULT, MODE_NAMES
from napari_n5zarr.n5.metadata import (
    GROUP_DOC,
    MAX_JSON_DEPTH,
    attributes_to_zarr,
    check_metadata_size,
    check_nesting,
    zarr_to_attributes,
)

if TYPE_CHECKING:
    from zarr.abc.store import ByteRequest
    from zarr.core.buffer import BufferPrototype

ZARR_JSON = "zarr.json"
N5_JSON = "attributes.json"


def _meta_prefix(key: str) -> str | None:
    """``a/b/`` for ``a/b/zarr.json``, ``""`` for ``zarr.json``, None for other keys."""
    if key == ZARR_JSON:
        return ""
    if key.endswith("/" + ZARR_JSON):
        return key[: -len(ZARR_JSON)]
    return None


def _json_buffer(doc: dict[str, Any], prototype: BufferPrototype | None = None) -> Buffer:
    proto = prototype or default_buffer_prototype()
    return proto.buffer.from_bytes(json.dumps(doc, indent=2).encode())


def store_location(store: Store, key: str) -> str:
    """The path or URL of ``key`` in ``store`` (seen through wrappers), for error messages."""
    inner = store
    while isinstance(inner, WrapperStore):
        inner = inner._store
    if isinstance(inner, LocalStore):
        return str(inner.root / key)
    if isinstance(inner, FsspecStore):
        path = f"{inner.path.rstrip('/')}/{key}" if inner.path.strip("/") else key
        try:
            return str(inner.fs.unstrip_protocol(path))
        except Exception:  # noqa: BLE001 (a message helper must not fail)
            return path
    if isinstance(inner, ZipStore):
        return f"{inner.path}/{key}"
    if isinstance(inner, MemoryStore):
        return f"memory://{key}"
    return f"{key} in {inner!r}"


def _parse_json(raw: Buffer, where: str) -> Any:
    """The JSON document in ``raw`` (read from ``where``, a path or URL); N5MetadataError
    naming ``where`` if it is too large, not JSON, or nested too deeply."""
    check_metadata_size(len(raw), where)
    try:
        doc = json.loads(raw.to_bytes())
    except ValueError as e:  # includes UnicodeDecodeError
        raise N5MetadataError(f"{where}: not valid JSON ({e})") from None
    except RecursionError:
        raise N5MetadataError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels; refused as bad metadata") from None
    check_nesting(doc, where)
    return doc


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

    def get_ranges(self, key: str, byte_ranges: Sequence[ByteRequest | None], **kwargs: Any) -> AsyncIterator[Any]:
        return Store.get_ranges(self, key, byte_ranges, **kwargs)


class N5DefaultStore(_ReadsThroughGet):
    """Wrap a zarr store holding N5 so that zarr-python 3 reads and writes it as Zarr v3.

    Reads: ``zarr.json`` is translated from ``attributes.json`` (a real ``zarr.json`` is used
    only where no ``attributes.json`` exists). Writes of ``zarr.json`` store the matching
    ``attributes.json`` as well (``write_zarr_json=False`` stores N5 only: z5py 3 refuses
    folders holding both). Blocks pass through; a block in varlength/object mode is refused
    with its key.
    """

    def __init__(self, store: Store, *, write_zarr_json: bool = True) -> None:
        super().__init__(store)
        self.write_zarr_json = write_zarr_json
        self._array_ndim: dict[str, int] = {}  # prefix of each array seen -> ndim

    def _with_store(self, store: Store) -> N5DefaultStore:
        return type(self)(store, write_zarr_json=self.write_zarr_json)

    def __repr__(self) -> str:
        return f"N5DefaultStore({self._store!r})"

    # -- metadata translation ------------------------------------------------------
    def _translate(self, prefix: str, raw: Buffer) -> dict[str, Any]:
        where = store_location(self._store, prefix + N5_JSON)
        doc = attributes_to_zarr(_parse_json(raw, where), path=where)
        if doc["node_type"] == "array":
            self._array_ndim[prefix] = len(doc["shape"])
        return doc

    def _check_block(self, key: str, value: Buffer | None) -> Buffer | None:
        """Refuse non-default blocks with their key (the codec never sees keys)."""
        if value is None or not self._array_ndim or key.endswith(".json"):
            return value
        parts = key.split("/")
        for ndim in set(self._array_ndim.values()):
            if len(parts) < ndim:
                continue
            prefix = "/".join(parts[:-ndim])
            if self._array_ndim.get(prefix + "/" if prefix else "") != ndim:
                continue
            head = value.as_numpy_array()[:2].tobytes()
            mode = int.from_bytes(head, "big") if len(head) == 2 else MODE_DEFAULT
            if mode != MODE_DEFAULT:
                raise N5BlockError(
                    f"N5 block {key!r} is in {MODE_NAMES.get(mode, 'unknown')} mode (mode {mode}); "
                    "only default-mode (0) blocks are supported"
                )
        return value

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        prefix = _meta_prefix(key)
        if prefix is None:
            value = await self._store.get(key, prototype, byte_range)
            return self._check_block(key, value) if byte_range is None else value
        raw = await self._store.get(prefix + N5_JSON, default_buffer_prototype())
        if raw is None:
            return await self._store.get(key, prototype, byte_range)
        return _json_buffer(self._translate(prefix, raw), prototype)

    def get_sync(self, key: str, *, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None) -> Buffer | None:
        proto = prototype or default_buffer_prototype()
        prefix = _meta_prefix(key)
        if prefix is None:
            value = self._store.get_sync(key, prototype=proto, byte_range=byte_range)  # type: ignore[attr-defined]
            return self._check_block(key, value) if byte_range is None else value
        raw = self._store.get_sync(prefix + N5_JSON, prototype=proto)  # type: ignore[attr-defined]
        if raw is None:
            return self._store.get_sync(key, prototype=proto, byte_range=byte_range)  # type: ignore[attr-defined]
        return _json_buffer(self._translate(prefix, raw), proto)

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
        attrs = zarr_to_attributes(_parse_json(value, prefix + ZARR_JSON), existing, root=prefix == "", path=where)
        return json.dumps(attrs, indent=2).encode()

    async def set(self, key: str, value: Buffer) -> None:
        prefix = _meta_prefix(key)
        if prefix is not None:
            n5 = await self._n5_document(prefix, value)
            await self._store.set(prefix + N5_JSON, default_buffer_prototype().buffer.from_bytes(n5))
            self._array_ndim.pop(prefix, None)
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
            from zarr.core.sync import sync

            sync(self.set(key, value))
        else:
            self._store.set_sync(key, value)  # type: ignore[attr-defined]

    async def delete(self, key: str) -> None:
        prefix = _meta_prefix(key)
        if prefix is not None:
            if await self._store.exists(prefix + N5_JSON):
                await self._store.delete(prefix + N5_JSON)
            self._array_ndim.pop(prefix, None)
        await self._store.delete(key)

    # -- listings: attributes.json shows as zarr.json ----------------------------------
    async def _renamed(self, keys: AsyncIterator[str], *, names: bool = False) -> AsyncGenerator[str, None]:
        seen: set[str] = set()
        async for key in keys:
            if key == N5_JSON or key.endswith("/" + N5_JSON):
                key = key[: -len(N5_JSON)] + ZARR_JSON
            if key.endswith(ZARR_JSON):
                if key in seen:
                    continue
                seen.add(key)
            yield key

    def list(self) -> AsyncGenerator[str, None]:
        return self._renamed(self._store.list())

    def list_prefix(self, prefix: str) -> AsyncGenerator[str, None]:
        return self._renamed(self._store.list_prefix(prefix))

    def list_dir(self, prefix: str) -> AsyncGenerator[str, None]:
        return self._renamed(self._store.list_dir(prefix))


class ImplicitGroupStore(_ReadsThroughGet):
    """Answer ``{"zarr_format": 3, "node_type": "group"}`` for metadata-less prefixes.

    Only for prefixes that really exist (hold at least one key) and do not lie inside an
    array; wrap an :class:`N5DefaultStore` with it.
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

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None) -> Buffer | None:
        value = await self._store.get(key, prototype, byte_range)
        if value is None:
            prefix = _meta_prefix(key)
            if prefix is not None and await self._is_implicit_group(prefix):
                return _json_buffer(GROUP_DOC, prototype)
        return value

    def get_sync(self, key: str, *, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None) -> Buffer | None:
        if _meta_prefix(key) is not None:
            from zarr.core.sync import sync

            return sync(self.get(key, prototype or default_buffer_prototype(), byte_range))
        return self._store.get_sync(key, prototype=prototype, byte_range=byte_range)  # type: ignore[attr-defined]

    async def exists(self, key: str) -> bool:
        if await self._store.exists(key):
            return True
        prefix = _meta_prefix(key)
        return prefix is not None and await self._is_implicit_group(prefix)

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        if not await self._store.exists(key):
            await self._store.set(key, value)
