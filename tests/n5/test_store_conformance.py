"""zarr's own store conformance suite (``zarr.testing.store.StoreTests``) over the N5 wrappers,
plus the laws the suite does not reach for metadata keys (sync/async parity, byte ranges).

Every test of the suite runs unchanged except where metadata keys are rewritten: a
``zarr.json`` written through :class:`N5DefaultStore` is translated into ``attributes.json``,
so it must be a Zarr v3 metadata document, and the store rightly refuses the suite's
``b"bar"`` there (``N5MetadataError``). The tests that write ``zarr.json`` keys through the
store therefore run with their values made into a valid group document
that carries the suite's bytes as an attribute (:class:`_GroupDocBuffer`); their assertions
are the suite's own.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, default_buffer_prototype
from zarr.core.buffer.cpu import Buffer as CPUBuffer
from zarr.storage import LocalStore, MemoryStore
from zarr.testing.store import StoreTests

from napari_n5zarr import ImplicitGroupStore, N5DefaultStore

pytest.importorskip("pytest_asyncio")  # the suite's tests and fixtures are coroutines


class _GroupDocBuffer(CPUBuffer):
    """``from_bytes(b)`` gives a Zarr v3 group document holding ``b`` (as hex): a value every
    key accepts, ``zarr.json`` included, and distinct for distinct ``b``."""

    @classmethod
    def from_bytes(cls, bytes_like: Any) -> CPUBuffer:  # type: ignore[override]
        doc = {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": {"suite_value": bytes(bytes_like).hex()},
        }
        return CPUBuffer.from_bytes(json.dumps(doc).encode())


def _with_group_documents(test: Any) -> Any:
    """The suite's ``test`` (same parameters and marks) with :class:`_GroupDocBuffer` values."""

    @functools.wraps(test)
    async def run(self: Any, *args: Any, **kwargs: Any) -> None:
        self.buffer_cls = _GroupDocBuffer  # per instance: pytest makes one per test
        await test(self, *args, **kwargs)

    return run


def _doc(tag: str) -> CPUBuffer:
    """A valid Zarr v3 group document with attribute ``tag``."""
    return CPUBuffer.from_bytes(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"tag": tag}}).encode()
    )


_N5_ARRAY = {
    "dimensions": [4, 3],
    "blockSize": [2, 2],
    "dataType": "uint8",
    "compression": {"type": "raw"},
}
_RANGES = [
    RangeByteRequest(1, 4),
    OffsetByteRequest(5),
    SuffixByteRequest(7),
    RangeByteRequest(10**6, 10**6 + 5),
]
_RANGE_IDS = ["range", "offset", "suffix", "range-past-eof"]


def _base(store: Any) -> Any:
    """The storage under every wrapper."""
    while isinstance(store, (N5DefaultStore, ImplicitGroupStore)):
        store = store._store
    return store


async def _assert_ranges_of_document(
    store: Any, key: str, byte_range: Any, *, node_type: str
) -> None:
    proto = default_buffer_prototype()
    whole = (await store.get(key, proto)).to_bytes()
    assert json.loads(whole)["node_type"] == node_type  # the generated document, not a raw file
    start, stop = {
        RangeByteRequest: lambda r: (r.start, r.end),
        OffsetByteRequest: lambda r: (r.offset, None),
        SuffixByteRequest: lambda r: (len(whole) - r.suffix, None),
    }[type(byte_range)](byte_range)
    expected = whole[start:stop]
    assert len(expected) < len(whole)
    assert (await store.get(key, proto, byte_range)).to_bytes() == expected
    assert store.get_sync(key, byte_range=byte_range).to_bytes() == expected
    [partial] = await store.get_partial_values(proto, [(key, byte_range)])
    assert partial.to_bytes() == expected


class _LocalBacked:
    """Direct access to the files under the wrapped LocalStore (bypasses the wrapper)."""

    @staticmethod
    def _root(store: Any) -> Path:
        while not isinstance(store, LocalStore):
            store = store._store
        return Path(store.root)

    async def get(self, store: Any, key: str) -> Buffer:
        return CPUBuffer.from_bytes((self._root(store) / key).read_bytes())

    async def set(self, store: Any, key: str, value: Buffer) -> None:
        path = self._root(store) / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value.to_bytes())


class _MemoryBacked:
    """Direct access to the dict under the wrapped MemoryStore (bypasses the wrapper)."""

    @staticmethod
    def _dict(store: Any) -> dict[str, Buffer]:
        while not isinstance(store, MemoryStore):
            store = store._store
        return store._store_dict

    async def get(self, store: Any, key: str) -> Buffer:
        return self._dict(store)[key]

    async def set(self, store: Any, key: str, value: Buffer) -> None:
        self._dict(store)[key] = value


class _N5Overrides:
    """What the two wrappers share: CPU buffers, writable, listable, metadata-valued writes."""

    buffer_cls = CPUBuffer

    def test_store_supports_writes(self, store: Any) -> None:
        assert store.supports_writes

    def test_store_supports_listing(self, store: Any) -> None:
        assert store.supports_listing

    # the suite's tests that write ``zarr.json`` keys through the store (30 failures without)
    test_set = _with_group_documents(StoreTests.test_set)
    test_set_many = _with_group_documents(StoreTests.test_set_many)
    test_exists = _with_group_documents(StoreTests.test_exists)
    test_delete = _with_group_documents(StoreTests.test_delete)
    test_delete_dir = _with_group_documents(StoreTests.test_delete_dir)
    test_list = _with_group_documents(StoreTests.test_list)
    test_list_prefix = _with_group_documents(StoreTests.test_list_prefix)
    test_list_empty_path = _with_group_documents(StoreTests.test_list_empty_path)
    test_list_dir = _with_group_documents(StoreTests.test_list_dir)

    # -- laws the suite does not reach: its metadata keys only ever hold raw bytes ------------
    async def test_metadata_write_stores_attributes_json(self, store: Any) -> None:
        await store.set("foo/zarr.json", _doc("x"))
        attrs = json.loads((await self.get(store, "foo/attributes.json")).to_bytes())
        assert attrs == {"tag": "x"}

    @pytest.mark.parametrize("how", ["async", "sync"])
    async def test_delete_metadata_removes_both_documents(self, store: Any, how: str) -> None:
        """``delete_sync`` and ``delete`` of a ``zarr.json`` leave the same state: neither
        document (a stray ``attributes.json`` would still read as the deleted node)."""
        await store.set("foo/zarr.json", _doc("x"))
        await store.set("foo/c/0", CPUBuffer.from_bytes(b"\x01"))
        if how == "sync":
            store.delete_sync("foo/zarr.json")
        else:
            await store.delete("foo/zarr.json")
        base = _base(store)
        assert not await base.exists("foo/attributes.json")
        assert not await base.exists("foo/zarr.json")
        assert await base.exists("foo/c/0")

    @pytest.mark.parametrize("byte_range", _RANGES, ids=_RANGE_IDS)
    async def test_translated_metadata_byte_range(self, store: Any, byte_range: Any) -> None:
        """A range of a ``zarr.json`` translated from ``attributes.json`` is that range of
        the document, the same through get, get_sync and get_partial_values."""
        await self.set(
            store, "foo/attributes.json", CPUBuffer.from_bytes(json.dumps(_N5_ARRAY).encode())
        )
        await _assert_ranges_of_document(store, "foo/zarr.json", byte_range, node_type="array")


class TestN5DefaultStoreLocal(_LocalBacked, _N5Overrides, StoreTests[N5DefaultStore, CPUBuffer]):
    store_cls = N5DefaultStore

    @pytest.fixture
    def store_kwargs(self, tmp_path: Path) -> dict[str, Any]:
        return {"store": LocalStore(tmp_path)}

    @pytest.fixture
    def open_kwargs(self, tmp_path: Path) -> dict[str, Any]:
        return {"store_cls": LocalStore, "root": tmp_path}

    def test_store_repr(self, store: N5DefaultStore) -> None:
        assert repr(store) == f"N5DefaultStore({store._store!r})"


class TestN5DefaultStoreMemory(_MemoryBacked, _N5Overrides, StoreTests[N5DefaultStore, CPUBuffer]):
    store_cls = N5DefaultStore

    @pytest.fixture
    def store_kwargs(self) -> dict[str, Any]:
        return {"store": MemoryStore({})}

    @pytest.fixture
    def open_kwargs(self) -> dict[str, Any]:
        return {"store_cls": MemoryStore, "store_dict": {}}

    def test_store_repr(self, store: N5DefaultStore) -> None:
        assert repr(store) == f"N5DefaultStore({store._store!r})"


def _n5_memory(**kwargs: Any) -> N5DefaultStore:
    """``ImplicitGroupStore.open``'s inner store: the stack :func:`napari_n5zarr.open` builds."""
    return N5DefaultStore(MemoryStore(**kwargs))


class TestImplicitGroupStore(
    _MemoryBacked, _N5Overrides, StoreTests[ImplicitGroupStore, CPUBuffer]
):
    store_cls = ImplicitGroupStore

    @pytest.fixture
    def store_kwargs(self) -> dict[str, Any]:
        return {"store": _n5_memory(store_dict={})}

    @pytest.fixture
    def open_kwargs(self) -> dict[str, Any]:
        return {"store_cls": _n5_memory, "store_dict": {}}

    def test_store_repr(self, store: ImplicitGroupStore) -> None:
        assert repr(store) == f"ImplicitGroupStore({store._store!r})"

    @pytest.mark.parametrize("byte_range", _RANGES, ids=_RANGE_IDS)
    async def test_implicit_group_byte_range(
        self, store: ImplicitGroupStore, byte_range: Any
    ) -> None:
        """A range of the implicit group document is that range of the document."""
        await self.set(store, "grp/child/attributes.json", CPUBuffer.from_bytes(b"{}"))
        await _assert_ranges_of_document(store, "grp/zarr.json", byte_range, node_type="group")
