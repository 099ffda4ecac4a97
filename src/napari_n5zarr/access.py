"""path or URL -> zarr store -> N5 wrappers -> zarr node."""

from __future__ import annotations

import json
import os
from typing import Any, Literal

import zarr
from zarr.abc.store import Store
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import ZipStore

from napari_n5zarr.n5.errors import N5FormatError, N5MetadataError
from napari_n5zarr.n5.registry import ensure_codecs_registered
from napari_n5zarr.n5.stores import ZARR_JSON, ImplicitGroupStore, N5DefaultStore
from napari_n5zarr.storage import location
from napari_n5zarr.storage.local import SafeLocalStore

AccessMode = Literal["r", "r+", "a", "w", "w-"]


def base_store(path_or_url: str | os.PathLike[str], mode: AccessMode = "r", storage_options: dict[str, Any] | None = None) -> Store:
    """The plain zarr store for a local path, ``file://``, ``.zip`` or fsspec URL.

    Local folders refuse non-regular files (FIFOs, devices) and oversized metadata
    (:class:`~napari_n5zarr.storage.local.SafeLocalStore`); URLs get timeouts, retries with
    backoff and errors naming the URL (:class:`~napari_n5zarr.storage.remote.RemoteStore`).
    """
    read_only = mode == "r"
    path = location.local_path(path_or_url)
    if path is None:
        from napari_n5zarr.storage.remote import RemoteStore

        return RemoteStore.open_url(os.fspath(path_or_url).rstrip("/"), storage_options, read_only=read_only)
    if location.suffix(path) == ".zip":
        if read_only and not path.is_file():
            raise FileNotFoundError(f"no such zip file: {path}")
        return ZipStore(path, mode="r" if read_only else "a", read_only=read_only)
    if read_only and not path.exists():
        raise FileNotFoundError(f"no such N5/Zarr container: {path}")
    if mode in ("r", "r+") and not path.is_dir():
        raise FileNotFoundError(f"not a directory (an N5 container is a folder): {path}")
    return SafeLocalStore(path, read_only=read_only)


def wrap(store: Store) -> ImplicitGroupStore:
    """Both spec wrappers over ``store``: implicit groups over the N5 Default Store."""
    return ImplicitGroupStore(N5DefaultStore(store))


def node_metadata(store: Store, path: str = "") -> dict[str, Any] | None:
    """The (translated) ``zarr.json`` document at ``path`` of a wrapped store, or None."""
    key = f"{path.strip('/')}/{ZARR_JSON}" if path.strip("/") else ZARR_JSON
    raw = sync(store.get(key, default_buffer_prototype()))
    if raw is None:
        return None
    try:
        return json.loads(raw.to_bytes())
    except ValueError as e:
        raise N5MetadataError(f"{key}: not valid JSON ({e})") from None


def child_names(group: zarr.Group) -> list[str]:
    """Names of the keys directly under ``group`` (candidate children), ``zarr.json`` excluded."""

    async def names() -> list[str]:
        return [k async for k in group.store_path.store.list_dir(group.store_path.path) if k != ZARR_JSON]

    return sync(names())


def open(  # noqa: A001 (the public name is a contract)
    path_or_url: str | os.PathLike[str],
    mode: AccessMode = "r",
    storage_options: dict[str, Any] | None = None,
) -> zarr.Array | zarr.Group:
    """Open an N5 container, group or dataset (or a Zarr node using ``n5_default``).

    The store is rooted at ``path_or_url``; arrays keep N5 order (shape == N5
    ``dimensions``). Local paths, ``file://``, ``.zip``, ``s3://``, ``http(s)://``.
    Raises FileNotFoundError when nothing is there, N5FormatError (N5MetadataError) for
    bad metadata naming the attributes.json path/URL, and N5StoreError (an OSError, never
    FileNotFoundError) when the store fails: a remote 5xx/timeout after retries, a FIFO.
    """
    if mode not in ("r", "r+", "a", "w", "w-"):
        raise ValueError(f"mode must be one of 'r', 'r+', 'a', 'w', 'w-', got {mode!r}")
    ensure_codecs_registered()
    store = wrap(base_store(path_or_url, mode, storage_options))
    if mode == "w":
        return zarr.open_group(store=store, mode="w")
    try:
        doc = node_metadata(store)
    except FileNotFoundError as e:  # only a real "not found": a 500 or a timeout is not one
        raise FileNotFoundError(f"cannot read {path_or_url}: {e}") from e
    if doc is None:
        if mode in ("a", "w-"):
            return zarr.open_group(store=store, mode=mode)
        raise FileNotFoundError(f"no N5 or Zarr node at {path_or_url}")
    if mode == "w-":
        raise FileExistsError(f"{path_or_url} already holds an N5/Zarr node")
    zarr_mode: AccessMode = "r" if mode == "r" else "r+"
    if doc.get("node_type") == "array":
        from napari_n5zarr.n5.pipeline import use_fused_pipeline

        # zarr's fused pipeline for this array only (never the user's global config)
        return use_fused_pipeline(zarr.open_array(store=store, mode=zarr_mode))
    if doc.get("node_type") == "group":
        return zarr.open_group(store=store, mode=zarr_mode)
    raise N5FormatError(f"{path_or_url}: unknown node type {doc.get('node_type')!r}")


def create_dataset(
    parent: zarr.Group,
    name: str,
    *,
    shape: tuple[int, ...] | list[int],
    dtype: Any,
    chunks: tuple[int, ...] | list[int],
    compression: dict[str, Any] | None = None,
    attributes: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> zarr.Array:
    """Create an N5 dataset (N5 order) in a group opened with :func:`open`.

    ``compression`` is an N5 compression object (default ``{"type": "raw"}``). The array
    uses the ``n5_default`` codec; through the N5 Default Store it gets an attributes.json
    and a zarr.json. Writes through zarr pad boundary blocks (use ``export`` or
    ``N5DefaultCodec.encode_block`` for truncated ones).
    """
    import numpy as np

    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.n5.metadata import attributes_to_zarr

    n5 = {"dimensions": list(shape), "blockSize": list(chunks), "dataType": np.dtype(dtype).name,
          "compression": compression or {"type": "raw"}}
    doc = attributes_to_zarr(n5, path=name)
    return parent.create_array(
        name,
        shape=tuple(shape),
        dtype=np.dtype(dtype),
        chunks=tuple(chunks),
        serializer=N5DefaultCodec.from_dict(doc["codecs"][0]),
        compressors=None,
        chunk_key_encoding={"name": "v2", "separator": "/"},
        fill_value=0,
        attributes=attributes or {},
        overwrite=overwrite,
    )
