"""zarr's own store conformance suite (``zarr.testing.store.StoreTests``) over the N5 wrappers,
plus the laws the suite does not reach for metadata keys (sync/async parity, byte ranges).

Every test of the suite runs unchanged except where metadata keys are rewritten: a
``zarr.json`` written through :class:`N5DefaultStore` is translated into ``attributes.json``,
so it must be a Zarr v3 metadata document, and the store rightly refuses the suite's
``b"bar"`` there (``N5MetadataError``). The tests that write ``zarr.json`` keys through the
store (``_WRITES_METADATA``) therefore run with their values made into a valid group document
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
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore
from zarr.testing.store import StoreTests

from napari_n5zarr import ImplicitGroupStore, N5DefaultStore

pytest.importorskip("pytest_asyncio")  # the suite's tests and fixtures are coroutines


class _GroupDocBuffer(CPUBuffer):
    """``from_bytes(b)`` gives a Zarr v3 group document holding ``b`` (as hex): a value every
    key accepts, ``zarr.json`` included, and distinct for distinct ``b``."""

    @classmethod
    def from_bytes(cls, bytes_like: Any) -> CPUBuffer:  # type: ignore[override]
        doc = {"zarr_format": 3, "node_type": "group", "attributes": {"suite_value": bytes(bytes_like).hex()}}
        return CPUBuffer.from_bytes(json.dumps(doc).encode())


# The suite's tests that write ``zarr.json`` keys through the store (30 failures without this).
_WRITES_METADATA = (
    "test_set", "test_set_many", "test_exists", "test_delete", "test_delete_dir",
    "test_list", "test_list_prefix", "test_list_empty_path", "test_list_dir",
)  # fmt: skip


def _with_group_documents(test: Any) -> Any:
    """The suite's ``test`` (same parameters and marks) with :class:`_GroupDocBuffer` values."""

    @functools.wraps(test)
    async def run(self: Any, *args: Any, **kwargs: Any) -> None:
        self.buffer_cls = _GroupDocBuffer  # per instance: pytest makes one per test
        await test(self, *args, **kwargs)

    return run


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

    locals().update({name: _with_group_documents(getattr(StoreTests, name)) for name in _WRITES_METADATA})


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


class TestImplicitGroupStore(_MemoryBacked, _N5Overrides, StoreTests[ImplicitGroupStore, CPUBuffer]):
    store_cls = ImplicitGroupStore

    @pytest.fixture
    def store_kwargs(self) -> dict[str, Any]:
        return {"store": _n5_memory(store_dict={})}

    @pytest.fixture
    def open_kwargs(self) -> dict[str, Any]:
        return {"store_cls": _n5_memory, "store_dict": {}}

    def test_store_repr(self, store: ImplicitGroupStore) -> None:
        assert repr(store) == f"ImplicitGroupStore({store._store!r})"
