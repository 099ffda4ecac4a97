"""``n5_default``: the Zarr v3 array->bytes codec for N5 default-mode blocks.

Spec: zarr-extensions ``codecs/n5_default``. The configuration is a nested chain:
``transpose`` (full reversal), ``bytes`` (big endian), then zero or one bytes->bytes codec.
The chain is honoured exactly, but run as one fused step: header, decompression, then the
byte swap + transpose + pad/truncate in a single numpy copy (no per-codec copies).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.abc.codec import ArrayBytesCodec, BytesBytesCodec
from zarr.codecs.bytes import BytesCodec
from zarr.codecs.transpose import TransposeCodec
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer as CPUBuffer
from zarr.core.dtype import parse_data_type
from zarr.core.common import JSON, parse_named_configuration
from zarr.core.metadata.v3 import parse_codecs

from napari_n5zarr.n5 import bounded
from napari_n5zarr.n5.compression import fast_compressor, fast_decompressor
from napari_n5zarr.errors import BLOCK_NAME_ATTR, N5BlockError, located
from napari_n5zarr.n5.constants import CODEC_NAME, N5_DTYPES
from napari_n5zarr.n5.header import MODE_DEFAULT, MODE_NAMES, BlockHeader, encode_header, parse_header

if TYPE_CHECKING:
    from typing import Self

    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType

@dataclass(frozen=True)
class N5DefaultCodec(ArrayBytesCodec):
    """Array->bytes codec ``n5_default``: N5 default-mode blocks inside Zarr v3.

    ``N5DefaultCodec(codecs=[transpose, bytes, optional compressor])``; see
    :meth:`~napari_n5zarr.n5.model.N5DatasetMetadata.codec`. Decodes padded, truncated and mixed boundary blocks; encodes
    blocks at the chunk shape (padded). :meth:`encode_block` / :meth:`decode_block` work at
    a block's own shape, for writers that truncate boundary blocks like n5-java.
    """

    is_fixed_size = False

    codecs: tuple[Any, ...]

    def __init__(self, *, codecs: Any) -> None:
        parsed = parse_codecs(codecs)
        _check_chain(parsed)
        object.__setattr__(self, "codecs", parsed)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, config = parse_named_configuration(data, CODEC_NAME)
        unknown = set(config) - {"codecs"}
        if unknown:
            raise ValueError(f"n5_default: unknown configuration keys {sorted(unknown)}")
        return cls(codecs=config["codecs"])

    def to_dict(self) -> dict[str, JSON]:
        return {"name": CODEC_NAME, "configuration": {"codecs": [c.to_dict() for c in self.codecs]}}

    # -- the chain -------------------------------------------------------------------
    @property
    def compressor(self) -> BytesBytesCodec | None:
        """The bytes->bytes codec of the chain, or None (N5 ``raw``)."""
        return self.codecs[2] if len(self.codecs) == 3 else None

    def _inner_spec(self, spec: ArraySpec) -> ArraySpec:
        return replace(spec, shape=spec.shape[::-1])

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
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
        chunk_grid: ChunkGrid,
    ) -> None:
        native = dtype.to_native_dtype()
        if native.name not in N5_DTYPES:
            raise ValueError(f"n5_default cannot encode data type {native}; N5 has {', '.join(N5_DTYPES)}")
        if len(shape) > 0xFFFF:
            raise ValueError("n5_default supports at most 65535 dimensions")
        if any(s > 0xFFFFFFFF for s in shape):
            raise ValueError("n5_default: array shape must fit in uint32")
        order = self.codecs[0].order
        if tuple(order) != tuple(range(len(shape) - 1, -1, -1)):
            raise ValueError(f"n5_default: transpose order must be {list(range(len(shape) - 1, -1, -1))}, got {list(order)}")

    def resolve_metadata(self, chunk_spec: ArraySpec) -> ArraySpec:
        return chunk_spec

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
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
        self, data: bytes | memoryview | np.ndarray, dtype: Any, ndim: int | None = None, where: str | None = None
    ) -> np.ndarray:
        """Decode one N5 block at its own (header) shape; N5 order, native byte order.

        ``where`` names the block in errors (``"N5 block 0/1 in /data/x.n5"``).
        """
        raw = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).ravel()
        try:
            header = _validated_header(raw, ndim)
            return self._payload_to_array(raw[header.size :], header.shape, np.dtype(dtype))
        except N5BlockError as e:
            raise located(e, where) from None

    def _payload_to_array(self, payload: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Decompress to exactly what ``shape`` needs (more or less is corrupt) and view it."""
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        comp = self.compressor
        if comp is None:
            bounded.raw_check(payload, nbytes)
        else:
            try:
                if self._fast_decompress is not None:  # every N5 compression: bounded, exact
                    payload = np.frombuffer(self._fast_decompress(payload.data, nbytes), dtype=np.uint8)
                else:  # a bytes->bytes codec N5 has no name for (Zarr-only arrays)
                    out = comp._decode_sync(CPUBuffer.from_array_like(payload), _bytes_spec(nbytes))
                    payload = bounded.raw_check(out.as_numpy_array(), nbytes)
            except N5BlockError:
                raise
            except Exception as e:  # corrupt data: say so, not a deep library traceback
                raise N5BlockError(f"cannot decompress ({_name(comp)}): {e}") from None
        stored = payload.view(dtype.newbyteorder(">") if dtype.itemsize > 1 else dtype)
        # C order of the reversed shape == F order of the N5 shape: .T is a free view.
        return stored.reshape(shape[::-1]).T

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        dtype = chunk_spec.dtype.to_native_dtype()
        chunk_shape = chunk_spec.shape
        raw = chunk_bytes.as_numpy_array().view(np.uint8)
        try:
            header = _validated_header(raw, len(chunk_shape), chunk_shape)
            block = self._payload_to_array(raw[header.size :], header.shape, dtype)
        except N5BlockError as e:  # name the block: our store labels the buffers it returns
            raise located(e, getattr(chunk_bytes, BLOCK_NAME_ATTR, None)) from None
        # One pass: byte swap + transpose (+ crop) into a native C-order chunk.
        if header.shape == tuple(chunk_shape):
            out = np.empty(chunk_shape, dtype=dtype)
            out[...] = block
        else:
            fill = chunk_spec.fill_value
            out = np.full(chunk_shape, fill if fill is not None else 0, dtype=dtype)
            region = tuple(slice(0, min(h, c)) for h, c in zip(header.shape, chunk_shape, strict=True))
            out[region] = block[region]
        return chunk_spec.prototype.nd_buffer.from_numpy_array(out)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        # Off the event loop: decompression releases the GIL, so blocks decode in parallel.
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    # -- encode ----------------------------------------------------------------------
    def encode_block(self, array: np.ndarray) -> bytes:
        """Encode ``array`` (N5 order) as one N5 block whose header is ``array.shape``.

        Use this to write truncated boundary blocks, which zarr's pipeline (always the full
        chunk shape) cannot produce.
        """
        array = np.asarray(array)
        if array.dtype.name not in N5_DTYPES:
            raise N5BlockError(f"N5 cannot store data type {array.dtype} (N5 has {', '.join(N5_DTYPES)})")
        header = encode_header(array.shape)
        itemsize = array.dtype.itemsize
        be = array.dtype.newbyteorder(">") if itemsize > 1 else array.dtype
        comp = self.compressor
        if comp is None:
            out = np.empty(len(header) + array.size * itemsize, dtype=np.uint8)
            out[: len(header)] = np.frombuffer(header, dtype=np.uint8)
            # One pass: swap + transpose straight into the output buffer.
            out[len(header) :].view(be).reshape(array.shape[::-1])[...] = array.T
            return out.tobytes()
        payload = np.ascontiguousarray(array.T, dtype=be)
        if self._fast_compress is not None:
            return header + self._fast_compress(payload.reshape(-1).view(np.uint8).data)
        spec = _bytes_spec(payload.nbytes, itemsize)
        comp = comp.evolve_from_array_spec(spec) if _needs_typesize(comp) else comp
        packed = comp._encode_sync(CPUBuffer.from_array_like(payload.reshape(-1).view(np.uint8)), spec)
        return header + packed.to_bytes()

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = self.encode_block(chunk_array.as_numpy_array())
        return chunk_spec.prototype.buffer.from_bytes(data)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)


def _validated_header(raw: np.ndarray, ndim: int | None, chunk_shape: tuple[int, ...] | None = None) -> BlockHeader:
    """Parse a block header and refuse what cannot be array data, before any allocation.

    Position-free (the codec never learns which block it decodes): the header shape may not
    exceed the chunk shape on any axis. The store, which knows the key, checks more
    (:meth:`~napari_n5zarr.n5.stores.N5DefaultStore._check_block`).
    """
    header = parse_header(raw)
    if header.mode != MODE_DEFAULT:
        raise N5BlockError(
            f"{MODE_NAMES.get(header.mode, header.mode)} mode (mode {header.mode}); "
            "only default-mode (0) blocks hold array data"
        )
    if ndim is not None and len(header.shape) != ndim:
        raise N5BlockError(f"header has {len(header.shape)} dimensions, the array has {ndim}")
    if any(s == 0 for s in header.shape):
        raise N5BlockError(f"header shape {list(header.shape)} has a zero extent")
    if chunk_shape is not None and any(h > c for h, c in zip(header.shape, chunk_shape, strict=True)):
        raise N5BlockError(f"header shape {list(header.shape)} exceeds the block size {list(chunk_shape)}")
    return header


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
        raise ValueError(f"n5_default needs 2 or 3 inner codecs (transpose, bytes, [compressor]), got {len(codecs)}")
    transpose, to_bytes, *rest = codecs
    if not isinstance(transpose, TransposeCodec):
        raise ValueError("n5_default: the first inner codec must be 'transpose'")
    ndim = len(transpose.order)
    if tuple(transpose.order) != tuple(range(ndim - 1, -1, -1)):
        raise ValueError(f"n5_default: transpose order must be a full reversal, got {list(transpose.order)}")
    if not isinstance(to_bytes, BytesCodec):
        raise ValueError("n5_default: the second inner codec must be 'bytes'")
    if to_bytes.endian not in (None, "big"):
        raise ValueError("n5_default: the bytes codec must be big endian")
    if rest and not isinstance(rest[0], BytesBytesCodec):
        raise ValueError("n5_default: the third inner codec must be a bytes->bytes codec")
