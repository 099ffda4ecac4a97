"""``n5_default``: the Zarr v3 array->bytes codec for N5 default-mode blocks.

Spec: zarr-extensions ``codecs/n5_default``. The configuration is a nested chain:
``transpose`` (full reversal), ``bytes`` (big endian), then zero or one bytes->bytes codec.
The chain is honoured exactly, but run as one fused step: header, decompression, then the
byte swap + transpose + pad/truncate in a single numpy copy (no per-codec copies).

The codec implements zarr's :class:`~zarr.abc.codec.SupportsSyncCodec` protocol
(``_decode_sync`` / ``_encode_sync``), so zarr's ``FusedCodecPipeline`` runs it without an
event loop, in a thread pool; the inner compressor is driven through the same protocol
(or through its public async ``decode``/``encode`` when it does not implement it).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from zarr.abc.codec import ArrayBytesCodec, BytesBytesCodec, SupportsSyncCodec
from zarr.buffer import default_buffer_prototype
from zarr.buffer.cpu import Buffer as CPUBuffer
from zarr.codecs.bytes import BytesCodec
from zarr.codecs.transpose import TransposeCodec

from napari_n5zarr.errors import BLOCK_NAME_ATTR, N5BlockError, located
from napari_n5zarr.n5 import bounded
from napari_n5zarr.n5.block_format import (
    CheckedDecompress,
    block_values,
    decode_block,
    encode_header,
    raw_payload,
    validated_header,
)
from napari_n5zarr.n5.compression import fast_compressor, fast_decompressor
from napari_n5zarr.n5.constants import CODEC_NAME, MAX_DIMENSION, N5_DTYPES
from napari_n5zarr.zarr_internals import (
    JSON,
    ArrayConfig,
    ArraySpec,
    parse_codecs,
    parse_data_type,
    parse_named_configuration,
    sync,
)

if TYPE_CHECKING:
    from typing import Self

    from zarr.abc.buffer import Buffer, NDBuffer
    from zarr.dtype import ZDType

    from napari_n5zarr.zarr_internals import ChunkGridMetadata, TBaseDType, TBaseScalar


@dataclass(frozen=True)
class N5DefaultCodec(ArrayBytesCodec):
    """Array->bytes codec ``n5_default``: N5 default-mode blocks inside Zarr v3.

    ``N5DefaultCodec(codecs=[transpose, bytes, optional compressor])``; see
    :meth:`~napari_n5zarr.n5.metadata.N5DatasetMetadata.codec`. Decodes padded, truncated and mixed boundary blocks; encodes
    blocks at the chunk shape (padded). :meth:`encode_block` / :meth:`decode_block` work at
    a block's own shape, for writers that truncate boundary blocks like n5-java.

    Parameters
    ----------
    codecs : sequence of codecs or codec JSON
        The spec's inner chain: ``transpose`` (full reversal), ``bytes`` (big endian),
        then zero or one bytes->bytes codec (the N5 compression).

    Raises
    ------
    ValueError
        If the chain is not the one the spec allows.
    """

    is_fixed_size = False

    codecs: tuple[Any, ...]

    def __init__(self, *, codecs: Any) -> None:
        parsed = parse_codecs(codecs)
        _check_chain(parsed)
        object.__setattr__(self, "codecs", parsed)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """The codec from its JSON (``{"name": "n5_default", "configuration": {...}}``).

        Parameters
        ----------
        data : dict
            The codec's zarr.json entry.

        Returns
        -------
        N5DefaultCodec

        Raises
        ------
        ValueError
            If the name is not ``n5_default``, the configuration has unknown keys, or the
            inner chain is not the spec's.
        """
        _, config = parse_named_configuration(data, CODEC_NAME)
        unknown = set(config) - {"codecs"}
        if unknown:
            raise ValueError(f"n5_default: unknown configuration keys {sorted(unknown)}")
        return cls(codecs=config["codecs"])

    def to_dict(self) -> dict[str, JSON]:
        """The codec's JSON for zarr.json.

        Returns
        -------
        dict
            ``{"name": "n5_default", "configuration": {"codecs": [...]}}``.
        """
        return {"name": CODEC_NAME, "configuration": {"codecs": [c.to_dict() for c in self.codecs]}}

    # -- the chain -------------------------------------------------------------------
    @property
    def compressor(self) -> BytesBytesCodec | None:
        """The bytes->bytes codec of the chain, or None (N5 ``raw``)."""
        return self.codecs[2] if len(self.codecs) == 3 else None

    @cached_property
    def _sync_capable(self) -> bool:
        # zarr's opt-out convention for SupportsSyncCodec (as ShardingCodec's): the sync
        # methods need a compressor that implements the protocol too. False makes zarr's
        # FusedCodecPipeline fall back to the async path (_decode_single/_encode_single).
        comp = self.compressor
        return comp is None or (
            isinstance(comp, SupportsSyncCodec) and getattr(comp, "_sync_capable", True)
        )

    def _inner_spec(self, spec: ArraySpec) -> ArraySpec:
        return replace(spec, shape=spec.shape[::-1])

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        """The codec with each inner codec evolved for this array (zarr calls this).

        Parameters
        ----------
        array_spec : ArraySpec
            The array's chunk spec (N5 order).

        Returns
        -------
        N5DefaultCodec
        """
        inner = self._inner_spec(array_spec)
        evolved = [
            self.codecs[0].evolve_from_array_spec(array_spec),
            *(c.evolve_from_array_spec(inner) for c in self.codecs[1:]),
        ]
        return replace(self, codecs=tuple(evolved))

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGridMetadata,
    ) -> None:
        """Refuse array metadata N5 cannot hold (zarr calls this on open and create).

        Parameters
        ----------
        shape : tuple of int
            The array shape (N5 order).
        dtype : ZDType
            The array's zarr data type.
        chunk_grid : ChunkGridMetadata
            The array's chunk grid metadata (not checked here: the N5 store checks blocks).

        Raises
        ------
        ValueError
            If the data type is not an N5 one, the array has more than 65535 dimensions,
            an extent does not fit in int64, or the transpose order is not a full reversal.
        """
        native = dtype.to_native_dtype()
        if native.name not in N5_DTYPES:
            raise ValueError(
                f"n5_default cannot encode data type {native}; N5 has {', '.join(N5_DTYPES)}"
            )
        if len(shape) > 0xFFFF:
            raise ValueError("n5_default supports at most 65535 dimensions")
        if any(s > MAX_DIMENSION for s in shape):
            raise ValueError(
                "n5_default: array shape must fit in int64 (N5 dimensions are Java longs)"
            )
        order = self.codecs[0].order
        if tuple(order) != tuple(range(len(shape) - 1, -1, -1)):
            raise ValueError(
                f"n5_default: transpose order must be {list(range(len(shape) - 1, -1, -1))}, got {list(order)}"
            )

    def resolve_metadata(self, chunk_spec: ArraySpec) -> ArraySpec:
        """The chunk spec unchanged (the codec maps a whole chunk to bytes).

        Parameters
        ----------
        chunk_spec : ArraySpec

        Returns
        -------
        ArraySpec
        """
        return chunk_spec

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Not known in advance: N5 blocks have a variable size.

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError

    @cached_property
    def _fast_decompress(self) -> Any:
        comp = self.compressor
        return None if comp is None else fast_decompressor(_name(comp))

    @cached_property
    def _fast_compress(self) -> Any:
        comp = self.compressor
        return None if comp is None else fast_compressor(comp.to_dict())

    # -- decode ----------------------------------------------------------------------
    def decode_block(
        self,
        data: bytes | memoryview | np.ndarray,
        dtype: Any,
        ndim: int | None = None,
        where: str | None = None,
    ) -> np.ndarray:
        """Decode one N5 block at its own (header) shape; N5 order, native byte order.

        Parameters
        ----------
        data : bytes-like or ndarray
            The whole stored block: header and payload.
        dtype : dtype-like
            The dataset's data type.
        ndim : int, optional
            The dataset's number of dimensions; the header must agree.
        where : str, optional
            Names the block in errors (``"N5 block 0/1 in /data/x.n5"``).

        Returns
        -------
        numpy.ndarray
            The block at the header's shape, N5 order: a view of the decompressed bytes
            (big endian, F order; for ``raw``, of ``data`` itself). Copy it to modify it.

        Raises
        ------
        N5BlockError
            If the block is not a default-mode block of ``ndim`` dimensions, its payload
            is corrupt, or it does not decode to exactly what its header shape needs.
        """
        return decode_block(data, dtype, ndim, where, self._decompress)

    @cached_property
    def _checked_fast(self) -> CheckedDecompress | None:
        comp = self.compressor
        fast = self._fast_decompress
        return None if comp is None or fast is None else CheckedDecompress(_name(comp), fast)

    def _decompress(self, payload: np.ndarray, nbytes: int) -> np.ndarray:
        """Exactly ``nbytes`` decompressed: the compression table's bounded decompression
        for every N5 compression (:mod:`napari_n5zarr.n5.block_format`), else the inner zarr codec
        (Zarr-only arrays), checked to give exactly ``nbytes``."""
        if self.compressor is None:
            return raw_payload(payload, nbytes)
        checked = self._checked_fast
        if checked is None:  # a codec N5 has no name for (Zarr-only arrays)
            checked = CheckedDecompress(_name(self.compressor), self._inner_decompress)
        return checked(payload, nbytes)

    def _inner_decompress(self, data: memoryview, nbytes: int) -> np.ndarray:
        """The inner zarr codec's decode: its sync protocol, else its public async API
        (from this non-loop thread)."""
        payload = np.frombuffer(data, dtype=np.uint8)
        if not self._sync_capable:
            return sync(self._inner_decode_async(payload, nbytes))
        comp = cast("SupportsSyncCodec[Buffer, Buffer]", self.compressor)
        out = comp._decode_sync(CPUBuffer.from_array_like(payload), _bytes_spec(nbytes))
        payload = out.as_numpy_array().view(np.uint8).reshape(-1)
        bounded.raw_check(payload.data, nbytes)
        return payload

    def _payload_to_array(
        self, payload: np.ndarray, shape: tuple[int, ...], dtype: np.dtype
    ) -> np.ndarray:
        """Decompress to exactly what ``shape`` needs (more or less is corrupt) and view it."""
        return block_values(
            self._decompress(payload, math.prod(shape) * dtype.itemsize), shape, dtype
        )

    async def _inner_decode_async(self, payload: np.ndarray, nbytes: int) -> np.ndarray:
        comp = self.compressor
        assert comp is not None
        (out,) = await comp.decode([(CPUBuffer.from_array_like(payload), _bytes_spec(nbytes))])
        if out is None:
            raise N5BlockError(f"{_name(comp)} decoded the payload to nothing")
        payload = out.as_numpy_array().view(np.uint8).reshape(-1)
        bounded.raw_check(payload.data, nbytes)
        return payload

    def _decode_view(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> tuple[np.ndarray, bool]:
        """The chunk's values, without the final copy when it can be avoided.

        Returns ``(array, fresh)``: a block at the full chunk shape comes back as a
        (big-endian, transposed) view of the decompressed bytes, ``fresh`` False: read it,
        never write into it (it may share memory with the stored bytes);
        a boundary block as a new native array padded with the fill value, ``fresh`` True.
        """
        chunk_shape = chunk_spec.shape
        raw = chunk_bytes.as_numpy_array().view(np.uint8)
        try:
            header = validated_header(raw, len(chunk_shape), chunk_shape)
            block = self._payload_to_array(
                raw[header.size :], header.shape, chunk_spec.dtype.to_native_dtype()
            )
        except N5BlockError as e:  # name the block: our store labels the buffers it returns
            raise located(e, getattr(chunk_bytes, BLOCK_NAME_ATTR, None)) from None
        if header.shape == tuple(chunk_shape):
            return block, False
        return _padded(block, chunk_spec), True

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        """Decode one stored block into a native C-order chunk (``SupportsSyncCodec``).

        Parameters
        ----------
        chunk_bytes : Buffer
            The stored block (header and payload).
        chunk_spec : ArraySpec
            The chunk spec: full chunk shape (N5 order), dtype, fill value, prototype.

        Returns
        -------
        NDBuffer
            The chunk at ``chunk_spec.shape``: a truncated boundary block padded with the
            fill value, a padded one as stored.

        Raises
        ------
        N5BlockError
            If the block is corrupt, not default mode, or larger than the chunk shape.
        """
        block, fresh = self._decode_view(chunk_bytes, chunk_spec)
        if not fresh:  # one pass: byte swap + transpose into a native C-order chunk
            out = np.empty(chunk_spec.shape, dtype=chunk_spec.dtype.to_native_dtype())
            out[...] = block
            block = out
        return chunk_spec.prototype.nd_buffer.from_numpy_array(block)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        # Off the event loop: decompression releases the GIL, so blocks decode in parallel.
        if self._sync_capable:
            return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)
        # An inner codec without the sync protocol: its own async decode, on this loop.
        chunk_shape = chunk_spec.shape
        dtype = chunk_spec.dtype.to_native_dtype()
        raw = chunk_bytes.as_numpy_array().view(np.uint8)
        try:
            header = validated_header(raw, len(chunk_shape), chunk_shape)
            nbytes = math.prod(header.shape) * dtype.itemsize
            try:
                payload = await self._inner_decode_async(raw[header.size :], nbytes)
            except N5BlockError:
                raise
            except (
                Exception
            ) as e:  # any failure of the inner compressor is a bad block, named by the caller
                raise N5BlockError(f"cannot decompress ({_name(self.compressor)}): {e}") from None
        except N5BlockError as e:
            raise located(e, getattr(chunk_bytes, BLOCK_NAME_ATTR, None)) from None
        block = block_values(payload, header.shape, dtype)
        if header.shape == tuple(chunk_shape):
            out = np.empty(chunk_shape, dtype=dtype)
            out[...] = block
        else:
            out = _padded(block, chunk_spec)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(out)

    # -- encode ----------------------------------------------------------------------
    def encode_block(self, array: np.ndarray) -> bytes:
        """Encode ``array`` (N5 order) as one N5 block whose header is ``array.shape``.

        Use this to write truncated boundary blocks, which zarr's pipeline (always the full
        chunk shape) cannot produce.

        Parameters
        ----------
        array : array-like
            The block's values in N5 order, any byte order and memory layout.

        Returns
        -------
        bytes
            The stored block: header, then the (compressed) big-endian payload.

        Raises
        ------
        N5BlockError
            If the data type is not an N5 data type.
        """
        array = np.asarray(array)
        if array.dtype.name not in N5_DTYPES:
            raise N5BlockError(
                f"N5 cannot store data type {array.dtype} (N5 has {', '.join(N5_DTYPES)})"
            )
        return self.encode_payload(array.shape, stored_values(array))

    def encode_payload(self, shape: tuple[int, ...], payload: np.ndarray) -> bytes:
        """One N5 block from its :func:`stored_values`: header (``shape``, N5 order), then
        ``payload`` compressed. :meth:`encode_block` in two steps, for writers that look at
        the contiguous values first (e.g. to skip empty blocks)."""
        header = encode_header(shape)
        comp = self.compressor
        flat = payload.reshape(-1)
        if comp is None:
            return b"".join((header, flat.view(np.uint8).data))  # one copy
        if self._fast_compress is not None:
            return header + self._fast_compress(flat.data)  # typed: blosc's typesize
        itemsize = payload.dtype.itemsize
        spec = _bytes_spec(payload.nbytes, itemsize)
        comp = comp.evolve_from_array_spec(spec) if _needs_typesize(comp) else comp
        buf = CPUBuffer.from_array_like(flat.view(np.uint8))
        if isinstance(comp, SupportsSyncCodec) and getattr(comp, "_sync_capable", True):
            packed = cast("SupportsSyncCodec[Buffer, Buffer]", comp)._encode_sync(buf, spec)
        else:  # no sync protocol: its public async API, from this (non-loop) thread
            (packed,) = sync(comp.encode([(buf, spec)]))
        if packed is None:
            raise N5BlockError(f"{_name(comp)} encoded the block to nothing")
        return header + packed.to_bytes()

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        """Encode one chunk (padded to the chunk shape) as an N5 block (``SupportsSyncCodec``).

        Parameters
        ----------
        chunk_array : NDBuffer
            The chunk at the full chunk shape, N5 order.
        chunk_spec : ArraySpec
            The chunk spec (its prototype makes the returned buffer).

        Returns
        -------
        Buffer
            The stored block.

        Raises
        ------
        N5BlockError
            If the data type is not an N5 data type.
        """
        data = self.encode_block(chunk_array.as_numpy_array())
        return chunk_spec.prototype.buffer.from_bytes(data)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        # encode_block reaches a non-sync inner codec through zarr's sync(), which must not
        # run on the event loop: always a worker thread.
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)


_CACHE_LINE = 64
_TILED_MIN_SIZE = 1 << 15


def stored_values(array: np.ndarray) -> np.ndarray:
    """The values of an N5 block as stored: big endian, F order of ``array`` (N5 order),
    i.e. ``array.T`` in C order; contiguous (a new array unless ``array`` already is that).

    A block cut from an array whose memory runs along another axis than the stored one
    (napari order of an F-ordered array, a transposed view) is a full transpose: numpy
    copies it along the output rows, each element from another cache line, and the
    power-of-two strides of a block make those lines evict one another. Copying in
    strips one cache line wide of the output's last axis is ~2-3x faster for big blocks."""
    src = array.T
    dtype = src.dtype.newbyteorder(">") if src.dtype.itemsize > 1 else src.dtype
    if src.flags.c_contiguous and src.dtype == dtype:
        return src
    out = np.empty(src.shape, dtype=dtype)
    strip = max(1, _CACHE_LINE // src.itemsize)
    strides = [abs(st) for st, n in zip(src.strides, src.shape, strict=True) if n > 1]
    if (
        src.size >= _TILED_MIN_SIZE
        and src.shape[-1] > strip
        and abs(src.strides[-1]) > min(strides)
    ):
        for lo in range(0, src.shape[-1], strip):
            out[..., lo : lo + strip] = src[..., lo : lo + strip]
    else:
        out[...] = src
    return out


def _padded(block: np.ndarray, chunk_spec: ArraySpec) -> np.ndarray:
    """A boundary block (header shape <= chunk shape) as a native chunk padded with the fill value."""
    chunk_shape = chunk_spec.shape
    fill = chunk_spec.fill_value
    out = np.full(
        chunk_shape, fill if fill is not None else 0, dtype=chunk_spec.dtype.to_native_dtype()
    )
    region = tuple(slice(0, min(h, c)) for h, c in zip(block.shape, chunk_shape, strict=True))
    out[region] = block[region]
    return out


def _needs_typesize(codec: Any) -> bool:
    return getattr(codec, "typesize", 1) in (None, 0)


def _name(codec: Any) -> str | None:
    return codec.to_dict().get("name")


@lru_cache(maxsize=256)
def _bytes_spec(nbytes: int, itemsize: int = 1) -> ArraySpec:
    """An ArraySpec describing a flat byte payload (for inner bytes->bytes codecs)."""
    dtype = parse_data_type(f"uint{8 * itemsize}", zarr_format=3)
    return ArraySpec(
        shape=(nbytes // itemsize,),
        dtype=dtype,
        fill_value=0,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def _check_chain(codecs: tuple[Any, ...]) -> None:
    """Enforce the spec's chain: transpose (full reversal), bytes (big endian), [bytes->bytes]."""
    if not 2 <= len(codecs) <= 3:
        raise ValueError(
            f"n5_default needs 2 or 3 inner codecs (transpose, bytes, [compressor]), got {len(codecs)}"
        )
    transpose, to_bytes, *rest = codecs
    if not isinstance(transpose, TransposeCodec):
        raise ValueError("n5_default: the first inner codec must be 'transpose'")
    ndim = len(transpose.order)
    if tuple(transpose.order) != tuple(range(ndim - 1, -1, -1)):
        raise ValueError(
            f"n5_default: transpose order must be a full reversal, got {list(transpose.order)}"
        )
    if not isinstance(to_bytes, BytesCodec):
        raise ValueError("n5_default: the second inner codec must be 'bytes'")
    if to_bytes.endian not in (None, "big"):
        raise ValueError("n5_default: the bytes codec must be big endian")
    if rest and not isinstance(rest[0], BytesBytesCodec):
        raise ValueError("n5_default: the third inner codec must be a bytes->bytes codec")


def ensure_codecs_registered() -> None:
    """Register this package's codecs with zarr (also done by entry points) and pin
    ``n5_default`` to ours if another package registers the same name."""
    import zarr
    from zarr.registry import register_codec

    from napari_n5zarr.n5.lz4block import CODEC_NAME as LZ4_NAME
    from napari_n5zarr.n5.lz4block import LZ4BlockCodec
    from napari_n5zarr.zarr_internals import codec_registry

    register_codec(CODEC_NAME, N5DefaultCodec)
    register_codec(LZ4_NAME, LZ4BlockCodec)
    registry = codec_registry(CODEC_NAME)
    registry.lazy_load()
    if len(registry) > 1 and zarr.config.get(f"codecs.{CODEC_NAME}", None) is None:
        zarr.config.set(
            {f"codecs.{CODEC_NAME}": f"{N5DefaultCodec.__module__}.{N5DefaultCodec.__qualname__}"}
        )
