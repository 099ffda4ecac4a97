"""Fast whole-array reads: a codec pipeline set on ONE array, never zarr's global config.

zarr's default ``BatchedCodecPipeline`` schedules a coroutine and an ``asyncio.to_thread``
hop per block. zarr 3.4's opt-in ``FusedCodecPipeline`` runs codecs that implement
``SupportsSyncCodec`` (``n5_default`` does) without the event loop: each block is fetched,
decoded and scattered into the output as one task in a thread pool (decompression releases
the GIL). :func:`use_fused_pipeline` gives one ``n5_default`` array that pipeline, leaving
the user's ``codec_pipeline.path`` alone.

On top, :class:`N5FusedPipeline` reads each full block as a view of its decompressed bytes
(big endian, transposed) and lets the scatter into the output do the byte swap and
transpose: one copy per block instead of two. Writes, and the async fallback for stores
without synchronous IO (zip, fsspec), are zarr's own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.codec_pipeline import FusedCodecPipeline
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata

from napari_n5zarr.n5.codec import N5DefaultCodec

if TYPE_CHECKING:
    from collections.abc import Iterable

    import zarr
    from zarr.abc.codec import GetResult
    from zarr.abc.store import ByteGetter
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.indexing import SelectorTuple


@dataclass(frozen=True)
class _ViewDecode:
    """The ``decode_chunk`` zarr's read path calls, returning views where it can."""

    codec: N5DefaultCodec

    def decode_chunk(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        block, _ = self.codec._decode_view(chunk_bytes, chunk_spec)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(block)


@dataclass(frozen=True)
class N5FusedPipeline(FusedCodecPipeline):
    """zarr's ``FusedCodecPipeline``; for a chain that is ``n5_default`` alone, reads
    scatter each block's decoded view into the output (one copy per block)."""

    def read_sync(
        self,
        batch_info: Iterable[tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]],
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
        max_workers: int = 1,
    ) -> tuple[GetResult, ...]:
        codec = self.array_bytes_codec
        if (
            self.sync_transform is None
            or self.array_array_codecs
            or self.bytes_bytes_codecs
            or not isinstance(codec, N5DefaultCodec)
        ):
            return super().read_sync(batch_info, out, drop_axes, max_workers)
        # zarr's read_sync (fetch -> decode -> scatter per block, in its pool) with the
        # view decoder: the decoded chunk only feeds ``out[...] = chunk[...]``, never a write.
        views = replace(self, sync_transform=_ViewDecode(codec))  # type: ignore[arg-type]
        return FusedCodecPipeline.read_sync(views, batch_info, out, drop_axes, max_workers)


def use_fused_pipeline(array: zarr.Array) -> zarr.Array:
    """Give ``array`` (an ``n5_default`` Zarr v3 array) :class:`N5FusedPipeline`.

    Only this array object changes: zarr's global ``codec_pipeline.path`` stays as the
    user set it. Arrays of other codecs, and chains with a codec that cannot run
    synchronously, are returned unchanged.

    Parameters
    ----------
    array : zarr.Array
        An array just opened (the pipeline is replaced in place).

    Returns
    -------
    zarr.Array
        The same array object.
    """
    async_array: Any = array._async_array
    meta = async_array.metadata
    if not isinstance(meta, ArrayV3Metadata) or not any(isinstance(c, N5DefaultCodec) for c in meta.codecs):
        return array
    grid = meta.chunk_grid
    # As zarr's create_codec_pipeline: the transform is shape-agnostic (the chunk shape
    # comes with every call); evolve against the regular chunk shape when there is one.
    chunk_shape = grid.chunk_shape if isinstance(grid, RegularChunkGridMetadata) else (1,) * len(meta.shape)
    spec = ArraySpec(
        shape=chunk_shape,
        dtype=meta.data_type,
        fill_value=meta.fill_value,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )
    pipeline = N5FusedPipeline.from_codecs(meta.codecs).evolve_from_array_spec(spec)
    if pipeline.sync_transform is None:  # an inner codec without the sync protocol
        return array
    # AsyncArray is a frozen dataclass whose pipeline zarr builds from the global config
    # in __init__; setting the field is the only per-array hook zarr 3.4 offers.
    object.__setattr__(async_array, "codec_pipeline", pipeline)
    return array
