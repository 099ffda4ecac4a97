"""Readable names for the storage under a zarr store and for keys in it, for error messages."""

from __future__ import annotations

from typing import Any

from zarr.storage import FsspecStore, LocalStore, MemoryStore, WrapperStore, ZipStore


def _innermost(store: Any) -> Any:
    seen = 0
    while isinstance(store, WrapperStore) and seen < 16:
        store = store._store
        seen += 1
    return store


def describe_store(store: Any) -> str:
    """``/data/x.n5`` (local), ``s3://bucket/x.n5`` / ``https://host/x.n5`` (fsspec),
    ``/data/x.zip`` (zip), ``memory store``; wrappers are described by what they wrap."""
    store = _innermost(store)
    if isinstance(store, LocalStore):
        return str(store.root)
    if isinstance(store, ZipStore):
        return str(store.path)
    if isinstance(store, FsspecStore):
        try:
            return str(store.fs.unstrip_protocol(store.path))
        except Exception:  # noqa: BLE001 (a description must never fail)
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
    inner = _innermost(store)
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
    return f"{key} in {describe_store(inner)}"
