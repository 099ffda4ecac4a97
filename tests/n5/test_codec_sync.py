"""``n5_default`` implements zarr's ``SupportsSyncCodec``: the sync and async paths agree
byte for byte, for every N5 compression, full, padded and truncated blocks; an inner
compressor without the protocol is driven through its public async API."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass

import numpy as np
import pytest
import zarr
from format_cases import COMPRESSIONS
from zarr.abc.codec import ArrayBytesCodec, BytesBytesCodec, SupportsSyncCodec
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer as CPUBuffer
from zarr.core.chunk_utils import ChunkTransform
from zarr.core.dtype import parse_data_type

from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.n5.metadata import N5DatasetMetadata, attributes_to_zarr

CHUNK = (8, 6, 5)  # N5 order


def codec_for(compression: dict, dtype: str = "uint16") -> N5DefaultCodec:
    n5 = {
        "dimensions": [20, 20, 20],
        "blockSize": list(CHUNK),
        "dataType": dtype,
        "compression": compression,
    }
    doc = attributes_to_zarr(n5)
    return N5DefaultCodec.from_dict(doc["codecs"][0])


def spec(dtype: str = "uint16", fill: int = 7) -> ArraySpec:
    return ArraySpec(
        shape=CHUNK,
        dtype=parse_data_type(dtype, zarr_format=3),
        fill_value=fill,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def evolved(codec: N5DefaultCodec, chunk_spec: ArraySpec) -> N5DefaultCodec:
    return codec.evolve_from_array_spec(chunk_spec)


@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_codec_is_a_sync_codec_for_every_compression(name: str) -> None:
    codec = evolved(codec_for(COMPRESSIONS[name]), spec())
    assert isinstance(codec, SupportsSyncCodec)
    assert codec._sync_capable
    # zarr's own gate: ChunkTransform refuses any codec that cannot run synchronously
    ChunkTransform(codecs=(codec,))


@pytest.mark.parametrize("dtype", ["uint8", "int16", "uint32", "float32", "float64"])
@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_sync_and_async_decode_agree_exactly(name: str, dtype: str) -> None:
    chunk_spec = spec(dtype)
    codec = evolved(codec_for(COMPRESSIONS[name], dtype), chunk_spec)
    rng = np.random.default_rng(3)
    full = (rng.random(CHUNK) * 100).astype(dtype)
    truncated = full[:5, :6, :2].copy()  # an n5-java boundary block
    for block in (full, truncated, np.asfortranarray(full)):
        stored = CPUBuffer.from_bytes(codec.encode_block(block))
        by_sync = codec._decode_sync(stored, chunk_spec).as_numpy_array()
        (by_async,) = asyncio.run(codec.decode([(stored, chunk_spec)]))
        by_async = by_async.as_numpy_array()
        expected = np.full(CHUNK, 7, dtype=dtype)
        expected[tuple(slice(0, s) for s in block.shape)] = block
        for got in (by_sync, by_async):
            assert got.dtype == np.dtype(dtype)  # native byte order
            assert got.shape == CHUNK
            assert got.flags.c_contiguous
            assert got.tobytes() == expected.tobytes()
        # and the sync encode is the block's own encoding at the chunk shape
        if block.shape == CHUNK:
            encoded = codec._encode_sync(
                chunk_spec.prototype.nd_buffer.from_numpy_array(block), chunk_spec
            )
            as_nd = chunk_spec.prototype.nd_buffer.from_numpy_array(block)
            (encoded_async,) = asyncio.run(codec.encode([(as_nd, chunk_spec)]))
            assert encoded is not None
            assert encoded_async is not None
            assert encoded.to_bytes() == encoded_async.to_bytes() == codec.encode_block(block)


def test_decode_view_is_the_values_without_a_copy() -> None:
    chunk_spec = spec()
    codec = evolved(codec_for(COMPRESSIONS["gzip"]), chunk_spec)
    block = np.arange(np.prod(CHUNK), dtype="uint16").reshape(CHUNK)
    stored = CPUBuffer.from_bytes(codec.encode_block(block))
    view, fresh = codec._decode_view(stored, chunk_spec)
    assert not fresh
    assert view.dtype == np.dtype(">u2")
    assert not view.flags.owndata
    np.testing.assert_array_equal(view, block)
    padded, fresh = codec._decode_view(
        CPUBuffer.from_bytes(codec.encode_block(block[:3])), chunk_spec
    )
    assert fresh
    assert padded.dtype == np.dtype("uint16")
    assert padded.flags.writeable
    np.testing.assert_array_equal(padded[:3], block[:3])
    assert (padded[3:] == 7).all()


def test_validate_signature_is_zarrs() -> None:
    ours = inspect.signature(N5DefaultCodec.validate)
    zarrs = inspect.signature(ArrayBytesCodec.validate)
    assert list(ours.parameters) == list(zarrs.parameters)
    for name, param in zarrs.parameters.items():
        assert ours.parameters[name].kind == param.kind
        assert str(ours.parameters[name].annotation) == str(param.annotation), name
    assert "ChunkGridMetadata" in str(ours.parameters["chunk_grid"].annotation)


# -- an inner compressor that only speaks async ------------------------------------------
@dataclass(frozen=True)
class AsyncOnlyXor(BytesBytesCodec):
    """A test bytes->bytes codec with no ``_decode_sync``/``_encode_sync`` (XOR 0x5A)."""

    is_fixed_size = True

    @classmethod
    def from_dict(cls, data: dict) -> AsyncOnlyXor:
        return cls()

    def to_dict(self) -> dict:
        return {"name": "test.async_only_xor"}

    async def _decode_single(self, chunk_bytes, chunk_spec):  # type: ignore[no-untyped-def]
        return CPUBuffer.from_array_like(chunk_bytes.as_numpy_array() ^ np.uint8(0x5A))

    async def _encode_single(self, chunk_bytes, chunk_spec):  # type: ignore[no-untyped-def]
        return CPUBuffer.from_array_like(chunk_bytes.as_numpy_array() ^ np.uint8(0x5A))

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        return input_byte_length


def _chain() -> list:
    """transpose and bytes of a 3-d uint16 dataset (no compressor)."""
    return list(
        N5DatasetMetadata(dimensions=(1, 1, 1), block_size=(1, 1, 1), data_type="uint16")
        .codec()
        .codecs
    )


def test_inner_codec_without_the_protocol_goes_through_its_async_api(tmp_path) -> None:
    from zarr.registry import register_codec

    register_codec("test.async_only_xor", AsyncOnlyXor)  # zarr re-reads the chain by name
    chunk_spec = spec()
    codec = N5DefaultCodec(codecs=[*_chain(), AsyncOnlyXor()])
    assert not isinstance(AsyncOnlyXor(), SupportsSyncCodec)
    assert not codec._sync_capable
    with pytest.raises(TypeError):  # zarr's fused pipeline then takes its async fallback
        ChunkTransform(codecs=(codec,))
    block = np.arange(np.prod(CHUNK), dtype="uint16").reshape(CHUNK)
    stored = codec.encode_block(block)
    raw = N5DefaultCodec(codecs=_chain()).encode_block(block)
    assert stored[:16] == raw[:16]  # same header
    assert bytes(np.frombuffer(stored[16:], np.uint8) ^ np.uint8(0x5A)) == raw[16:]
    np.testing.assert_array_equal(codec.decode_block(stored, "uint16", 3), block)
    (by_async,) = asyncio.run(codec.decode([(CPUBuffer.from_bytes(stored), chunk_spec)]))
    np.testing.assert_array_equal(by_async.as_numpy_array(), block)
    # a whole zarr array with this chain, with zarr's fused pipeline switched on
    with zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}):
        arr = zarr.create_array(
            tmp_path / "x.zarr",
            shape=(10, 9, 5),
            chunks=CHUNK,
            dtype="uint16",
            serializer=codec,
            compressors=None,
            fill_value=0,
        )
        data = np.arange(450, dtype="uint16").reshape(10, 9, 5)
        arr[...] = data
        np.testing.assert_array_equal(zarr.open_array(tmp_path / "x.zarr", mode="r")[...], data)
