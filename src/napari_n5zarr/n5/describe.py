"""A readable name for the storage under a zarr store, for error messages."""

from __future__ import annotations

from typing import Any


def describe_store(store: Any) -> str:
    """``/data/x.n5`` (local), ``s3://bucket/x.n5`` / ``https://host/x.n5`` (fsspec),
    ``/data/x.zip`` (zip), ``memory store``; wrappers are described by what they wrap."""
    seen = 0
    while hasattr(store, "_store") and seen < 16:  # WrapperStore chain
        store = store._store
        seen += 1
    name = type(store).__name__
    if name == "LocalStore":
        return str(store.root)
    if name == "ZipStore":
        return str(store.path)
    if name == "FsspecStore":
        try:
            return str(store.fs.unstrip_protocol(store.path))
        except Exception:  # noqa: BLE001 (a description must never fail)
            return str(store.path)
    if name == "MemoryStore":
        return "memory store"
    for attr in ("url", "root", "path", "prefix"):
        value = getattr(store, attr, None)
        if isinstance(value, str | bytes) or hasattr(value, "__fspath__"):
            return str(value)
    return repr(store)
