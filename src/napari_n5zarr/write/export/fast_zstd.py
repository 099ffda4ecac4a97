"""zarr's standard ``zstd`` codec, encoding with ``zstandard`` (the package's own zstd binding).

The same codec for every reader (its metadata is zarr's ``{"name": "zstd", ...}``, its
output a standard zstd frame); only the writer's encoder differs: ``zstandard`` with one
reused compression context per thread costs about a quarter less CPU per chunk than
numcodecs' (measured on 64^3 uint16 blocks, level 3), which is most of a standard
OME-Zarr export's time. Decoding is zarr's own.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from zarr.codecs import ZstdCodec

if TYPE_CHECKING:
    from zarr.abc.buffer import Buffer

    from napari_n5zarr.zarr_internals import ArraySpec

__all__ = ["FastZstdCodec"]

_local = threading.local()


def _compressor(level: int, checksum: bool) -> Any:
    """This thread's compression context for ``level`` (a context is not thread-safe)."""
    import zstandard

    contexts = getattr(_local, "contexts", None)
    if contexts is None:
        contexts = _local.contexts = {}
    key = (level, checksum)
    if key not in contexts:
        contexts[key] = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
    return contexts[key]


class FastZstdCodec(ZstdCodec):
    """:class:`zarr.codecs.ZstdCodec` whose encoding runs ``zstandard`` (see the module)."""

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = chunk_bytes.as_numpy_array()
        encoded = _compressor(self.level, self.checksum).compress(data)
        return chunk_spec.prototype.buffer.from_bytes(encoded)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)
