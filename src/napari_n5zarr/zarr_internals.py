"""The one seam to zarr-python's internals: every name zarr does not promise comes from here.

Rule (``tests/test_imports.py`` enforces it on ``src/``):

* **Public zarr API may be imported anywhere**: names of ``zarr``, ``zarr.storage`` (not its
  ``_``-modules), ``zarr.codecs``, ``zarr.buffer``, ``zarr.dtype``, ``zarr.errors``,
  ``zarr.registry``'s public functions, and ``zarr.abc.*``: zarr documents ``zarr.abc`` as its
  extension API, including the underscore hooks its base classes declare for implementers
  (``Store._get_many``, ``WrapperStore._store`` / ``_with_store``, ``BaseCodec._decode_single``,
  ``SupportsSyncCodec._decode_sync``, ...): a store or codec subclass overrides or calls those
  where it stands.
* **Only this module** imports from ``zarr.core.*`` or an ``_``-module (``zarr.storage._utils``),
  imports a ``_``-name from zarr, or reads a private attribute of zarr's concrete classes
  (``ZipStore._zipfile`` / ``_zf``, ``zarr.registry._codec_registries``).
  Each name carries the zarr versions it was checked against; a zarr upgrade checks this file.
* One private hook is overridden, not imported (an override must stand in its class):
  :class:`~napari_n5zarr.storage.zip.BoundedZipStore` replaces ``ZipStore._get``
  (checked 3.3.0, 3.4.1, 3.4.2; see :data:`OVERRIDDEN`).

Checked versions: 3.3.0 (the floor in ``pyproject.toml``), 3.4.1 and 3.4.2.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

# zarr.core.array_spec: the per-chunk spec a codec gets, and an array's runtime config (3.3.0, 3.4.1, 3.4.2).
from zarr.core.array_spec import ArrayConfig, ArraySpec

# zarr.core.common: the JSON type and the {"name", "configuration"} parser codecs use (3.3.0, 3.4.1, 3.4.2).
from zarr.core.common import JSON, parse_named_configuration

# zarr.core.dtype: data type from its v3 JSON form; the dtype generics of ZDType (3.3.0, 3.4.1, 3.4.2).
from zarr.core.dtype import parse_data_type
from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar

# zarr.core.metadata.v3: Zarr v3 array metadata, its chunk grids and the codec-list parser (3.3.0, 3.4.1, 3.4.2).
from zarr.core.metadata.v3 import ArrayV3Metadata, ChunkGridMetadata, parse_codecs

# zarr.core.sync.sync: run a coroutine on zarr's event-loop thread and wait; _get_loop: that
# loop, started if need be (3.3.0, 3.4.1, 3.4.2).
from zarr.core.sync import _get_loop, sync

if TYPE_CHECKING:
    import zipfile

    from zarr.registry import Registry
    from zarr.storage import ZipStore

__all__ = [
    "JSON",
    "OVERRIDDEN",
    "ArrayConfig",
    "ArraySpec",
    "ArrayV3Metadata",
    "ChunkGridMetadata",
    "TBaseDType",
    "TBaseScalar",
    "codec_registry",
    "event_loop",
    "fused_pipeline",
    "parse_codecs",
    "parse_data_type",
    "parse_named_configuration",
    "sync",
    "zip_archive",
]

OVERRIDDEN: tuple[tuple[str, str], ...] = (("zarr.storage.ZipStore", "_get"),)
"""(class, private method) our subclasses override: checked 3.3.0, 3.4.1, 3.4.2."""


DEFAULT_PIPELINE = "zarr.core.codec_pipeline.BatchedCodecPipeline"
"""zarr's default ``codec_pipeline.path`` (3.3.0, 3.4.1, 3.4.2)."""

FUSED_PIPELINE = "zarr.core.codec_pipeline.FusedCodecPipeline"
"""zarr's opt-in synchronous pipeline: decodes a read's blocks on a thread pool, reading them
with ``get_sync`` (3.3.0, 3.4.1, 3.4.2; absent before 3.3.0)."""


def event_loop() -> asyncio.AbstractEventLoop:
    """zarr's event loop (its IO thread, started if need be), for a coroutine whose caller
    works while it runs (``asyncio.run_coroutine_threadsafe``) instead of waiting in
    :func:`sync`."""
    return _get_loop()


def fused_pipeline() -> str | None:
    """:data:`FUSED_PIPELINE` while zarr's config names its default pipeline, else None
    (the user chose a pipeline: theirs is kept; or this zarr has no fused pipeline).

    zarr picks an array's pipeline when the array is built, from ``codec_pipeline.path``;
    it has no per-array setting (checked 3.3.0, 3.4.1, 3.4.2).
    """
    import zarr

    if zarr.config.get("codec_pipeline.path") != DEFAULT_PIPELINE:
        return None
    try:
        from zarr.core.codec_pipeline import FusedCodecPipeline  # noqa: F401
    except ImportError:
        return None
    return FUSED_PIPELINE


def codec_registry(name: str) -> Registry[Any]:
    """zarr's registry of the codec classes registered as ``name`` (after ``register_codec``).

    ``zarr.registry._codec_registries``: a dict of :class:`zarr.registry.Registry` by codec
    name (3.3.0, 3.4.1, 3.4.2); zarr has no public lookup of every class under one name.
    """
    from zarr.registry import _codec_registries

    return _codec_registries[name]


def zip_archive(store: ZipStore) -> zipfile.ZipFile:
    """The open :class:`zipfile.ZipFile` of a zarr ``ZipStore``.

    zarr 3.4.2 opens it on first use (``ZipStore._zipfile()``); 3.3.0 and 3.4.1 open it in
    ``_sync_open`` and keep it as ``_zf``.
    """
    opener = getattr(store, "_zipfile", None)
    if callable(opener):
        return opener()
    if not store._is_open:
        store._sync_open()
    return store._zf
