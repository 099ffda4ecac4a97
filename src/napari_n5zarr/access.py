"""path or URL -> zarr store -> N5 wrappers -> zarr node."""

from __future__ import annotations

import json
import os
import threading
from typing import Any, Literal

import zarr
from zarr.abc.store import Store
from zarr.buffer import default_buffer_prototype

from napari_n5zarr.environment import check_environment
from napari_n5zarr.errors import N5FormatError, N5MetadataError, NodeExistsError, NodeNotFoundError
from napari_n5zarr.n5.codec import ensure_codecs_registered
from napari_n5zarr.n5.constants import ZARR_JSON
from napari_n5zarr.n5.stores import ImplicitGroupStore, N5DefaultStore, reads_synchronously
from napari_n5zarr.storage import location
from napari_n5zarr.storage.files import refuse_file_in_the_way
from napari_n5zarr.storage.local import SafeLocalStore
from napari_n5zarr.storage.zip import BoundedZipStore, require_zip_archive
from napari_n5zarr.storage.zip_names import check_member_names
from napari_n5zarr.zarr_internals import sync

AccessMode = Literal["r", "r+", "a", "w", "w-"]


def base_store(
    path_or_url: str | os.PathLike[str],
    mode: AccessMode = "r",
    storage_options: dict[str, Any] | None = None,
) -> Store:
    """The plain zarr store for a local path, ``file://``, ``.zip`` or fsspec URL.

    Local folders refuse non-regular files (FIFOs, devices) and oversized metadata
    (:class:`~napari_n5zarr.storage.local.SafeLocalStore`); URLs get timeouts, retries with
    backoff and errors naming the URL (:class:`~napari_n5zarr.storage.remote.RemoteStore`);
    zip members are size-checked before they inflate
    (:class:`~napari_n5zarr.storage.zip.BoundedZipStore`). Every read stops at its cap
    (:func:`~napari_n5zarr.n5.constants.max_stored_bytes`).

    Parameters
    ----------
    path_or_url
        A local folder, a ``.zip`` file, ``file://...``, or an fsspec URL (``s3://``,
        ``gs://``, ``http(s)://``, ``az://``, ``memory://``).
    mode
        As for :func:`open`; any mode but ``"r"`` opens the store writable.
    storage_options
        Passed to fsspec for URLs (credentials, endpoint, ...); ignored for local paths.

    Returns
    -------
    zarr.abc.store.Store
        The store, not yet wrapped: see :func:`wrap` for the N5 view.

    Raises
    ------
    NodeNotFoundError
        (a ``FileNotFoundError``) in modes ``"r"``/``"r+"`` for a path that does not exist,
        a ``.zip`` that is no file, or another path that is no folder.
    N5FormatError
        For a ``.zip`` that is no zip archive (another format, a truncated file) in modes
        ``"r"``/``"r+"``, naming it.
    EnvironmentVariableError
        (an :class:`~napari_n5zarr.errors.InvalidArgumentError`) when an ``N5ZARR_*``
        variable holds a value it does not take (see :mod:`napari_n5zarr.environment`).
    """
    check_environment()  # a bad N5ZARR_* value fails here, naming it, not as "unreadable" nodes later
    read_only = mode == "r"
    path = location.local_path(path_or_url)
    if path is None:
        from napari_n5zarr.storage.remote import RemoteStore

        return RemoteStore.open_url(
            os.fspath(path_or_url).rstrip("/"), storage_options, read_only=read_only
        )
    existing = mode in ("r", "r+")  # modes that open what is there, never create it
    if location.suffix(path) == ".zip":
        if existing and not path.is_file():
            raise NodeNotFoundError(f"no such zip file: {path}")
        if mode == "r+":
            require_zip_archive(path)  # zipfile's "a" would start a new archive behind another file
        elif not read_only:
            _refuse_foreign_zip(path)
        # Opened here (zarr's public Store.open): zarr < 3.4.2 fails a read of a ZipStore that
        # nobody opened, and our wrappers read it directly.
        store = sync(
            BoundedZipStore.open(path, mode="r" if read_only else "a", read_only=read_only)
        )
        try:
            check_member_names(
                store.member_names(), path
            )  # one place per member, or one clear error
        except N5FormatError:
            store.close()
            raise
        return store
    if existing and not path.exists():
        raise NodeNotFoundError(f"no such N5/Zarr container: {path}")
    if existing and not path.is_dir():
        raise NodeNotFoundError(f"not a directory (an N5 container is a folder): {path}")
    if not read_only:
        refuse_file_in_the_way(path, os.fspath(path_or_url))
    return SafeLocalStore(path, read_only=read_only)


def _refuse_foreign_zip(path: os.PathLike[str]) -> None:
    """Writing a ``.zip`` appends to the file: refuse one that exists and is no zip archive
    (another format, a truncated download), or is no file at all (an empty file is fine)."""
    import stat
    import zipfile

    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise NodeExistsError(
            f"refusing to write into {os.fspath(path)}: it is not a file; nothing was changed"
        )
    if st.st_size and not zipfile.is_zipfile(path):
        raise NodeExistsError(
            f"refusing to write into {os.fspath(path)}: it exists and is not a zip archive (another format or a "
            "truncated file); nothing was changed"
        )


def _refuse_foreign_contents(path_or_url: str | os.PathLike[str], store: Store) -> None:
    """Mode ``"w"`` clears the store: refuse unless it is empty or holds only what an export
    of this project writes (the rule ``export(overwrite=True)`` applies)."""
    from napari_n5zarr.n5.constants import INCOMPLETE_MARKER, N5_JSON
    from napari_n5zarr.storage.foreign import describe_foreign, foreign_entries

    path = location.local_path(path_or_url)
    if path is not None and location.suffix(path) != ".zip":
        if path.is_dir():
            found, total = foreign_entries(path)
            if found:
                raise NodeExistsError(
                    f"refusing to replace {os.fspath(path_or_url)} (mode 'w'): it holds "
                    f"{describe_foreign(found, total)}; nothing was deleted"
                )
        return
    if sync(store.is_empty("")):
        return
    if not any(sync(store.exists(name)) for name in (N5_JSON, ZARR_JSON, INCOMPLETE_MARKER)):
        raise NodeExistsError(
            f"refusing to replace {os.fspath(path_or_url)} (mode 'w'): it holds files but no N5/Zarr node; "
            "nothing was deleted"
        )


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


def open(
    path_or_url: str | os.PathLike[str],
    mode: AccessMode = "r",
    storage_options: dict[str, Any] | None = None,
) -> zarr.Array | zarr.Group:
    """Open an N5 container, group or dataset (or a Zarr node using ``n5_default``).

    The store is rooted at ``path_or_url``; arrays keep N5 order (shape == N5
    ``dimensions``).

    Parameters
    ----------
    path_or_url
        A local folder, ``file://...``, a ``.zip`` file, or an fsspec URL (``s3://``,
        ``gs://``, ``http(s)://``, ...).
    mode
        ``"r"`` read only (default); ``"r+"`` read and write an existing node; ``"a"`` open
        or create a group; ``"w"`` create a group, replacing what is there only if it is
        empty or an N5/Zarr node holding nothing an export would not write (else
        :class:`NodeExistsError`, nothing deleted); ``"w-"`` create a group, failing if a
        node exists.
    storage_options
        Passed to fsspec for URLs (credentials, endpoint, ...).

    Returns
    -------
    zarr.Array or zarr.Group
        Over the N5 Default Store and the implicit-group store (:func:`wrap`).

    Raises
    ------
    ValueError
        For an unknown ``mode``.
    NodeNotFoundError
        (a ``FileNotFoundError``) when nothing is there.
    NodeExistsError
        (a ``FileExistsError``) in mode ``"w-"`` when a node is there; in mode ``"w"``
        when what is there is not ours to delete; in a writing mode when a ``.zip`` path
        holds a file that is no zip archive.
    N5MetadataError
        (an :class:`N5FormatError`) for bad metadata, naming the attributes.json path/URL.
    N5StoreError
        (an ``OSError``, never ``FileNotFoundError``) when the store fails: a remote
        5xx/timeout after retries, a FIFO.
    """
    if mode not in ("r", "r+", "a", "w", "w-"):
        raise ValueError(f"mode must be one of 'r', 'r+', 'a', 'w', 'w-', got {mode!r}")
    ensure_codecs_registered()
    raw = base_store(path_or_url, mode, storage_options)
    store = wrap(raw)
    if mode == "w":
        _refuse_foreign_contents(path_or_url, raw)
        return zarr.open_group(store=store, mode="w")
    try:
        doc = node_metadata(store)
    except FileNotFoundError as e:  # only a real "not found": a 500 or a timeout is not one
        raise NodeNotFoundError(f"cannot read {path_or_url}: {e}") from e
    if doc is None:
        if mode in ("a", "w-"):
            return zarr.open_group(store=store, mode=mode)
        raise NodeNotFoundError(f"no N5 or Zarr node at {path_or_url}")
    if mode == "w-":
        raise NodeExistsError(f"{path_or_url} already holds an N5/Zarr node")
    # The node from the document just read (zarr's open_array/open_group would read it again,
    # with three Zarr v2 probes beside: over a network, a round trip and three requests more).
    # The store itself is read-only for mode "r" (base_store), as zarr's open would make it.
    from zarr.storage import StorePath

    if doc.get("node_type") == "array":
        return array_from_document(store, doc)
    if doc.get("node_type") == "group":
        return zarr.Group(zarr.AsyncGroup.from_dict(StorePath(store), dict(doc)))
    raise N5FormatError(f"{path_or_url}: unknown node type {doc.get('node_type')!r}")


_PIPELINE_CHOICE = threading.Lock()


def array_from_document(store: Store, doc: dict[str, Any], path: str = "") -> zarr.Array:
    """The array at ``path`` of ``store`` (the root by default), built from its document
    ``doc`` as already read (zarr's ``open_array`` would read it again).

    On a local folder it reads through zarr's fused codec pipeline (each read's blocks fetched
    and decoded on a thread pool, without a coroutine per block: see ``benchmarks/README.md``),
    unless the user configured a pipeline of their own. zarr takes an array's pipeline from its
    config as the array is built and has no per-array setting, so the setting is scoped to
    building this one array; the lock keeps two threads opening arrays from restoring each
    other's value. Elsewhere (zip, URLs) zarr's configured pipeline, as ``zarr.open_array``.
    """
    from zarr.storage import StorePath

    from napari_n5zarr.zarr_internals import fused_pipeline

    def build() -> zarr.Array:
        return zarr.Array(zarr.AsyncArray(metadata=doc, store_path=StorePath(store, path)))  # type: ignore[call-overload]

    if not reads_synchronously(store):
        return build()
    with _PIPELINE_CHOICE:
        fused = fused_pipeline()
        if fused is None:
            return build()
        with zarr.config.set({"codec_pipeline.path": fused}):
            return build()


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

    The array uses the ``n5_default`` codec; through the N5 Default Store it gets an
    attributes.json and a zarr.json. Writes through zarr pad boundary blocks (use ``export``
    or ``N5DefaultCodec.encode_block`` for truncated ones).

    Parameters
    ----------
    parent
        A writable group opened with :func:`open`.
    name
        The dataset's path under ``parent``.
    shape, chunks
        The array and block shapes, N5 order (index 0 = x).
    dtype
        Anything numpy takes as a dtype; N5 stores only
        :data:`~napari_n5zarr.n5.constants.N5_DTYPES`.
    compression
        An N5 compression object (``{"type": "gzip", "level": 6}``); default
        ``{"type": "raw"}``.
    attributes
        User attributes; N5's reserved keys (``dimensions``, ...) are refused.
    overwrite
        Replace an existing node at ``name``.

    Returns
    -------
    zarr.Array

    Raises
    ------
    N5MetadataError
        Naming ``name``, for what N5 cannot store (data type, block size, compression,
        reserved attribute keys); nothing is written then.
    TypeError
        For something numpy does not take as a dtype.
    """
    import numpy as np

    from napari_n5zarr.n5.metadata import N5DatasetMetadata

    try:
        meta = N5DatasetMetadata(
            dimensions=tuple(shape),
            block_size=tuple(chunks),
            data_type=np.dtype(dtype).name,
            compression=compression or {"type": "raw"},
            attributes=attributes or {},
        )
    except N5MetadataError as e:
        raise N5MetadataError(f"{name}: {e}") from None
    return parent.create_array(
        name,
        shape=meta.dimensions,
        dtype=np.dtype(dtype),
        chunks=meta.block_size,
        serializer=meta.codec(),
        compressors=None,
        chunk_key_encoding={"name": "v2", "separator": "/"},
        fill_value=0,
        attributes=attributes or {},
        overwrite=overwrite,
    )
