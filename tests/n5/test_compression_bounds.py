"""Each compression's worst case (``Compression.worst_case``, what caps a stored block) holds
for what real writers make of incompressible data, and follows the data (issue 27)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib

import numpy as np
import pytest

from napari_n5zarr.n5 import lz4block
from napari_n5zarr.n5.block_format import FRAMING_SLACK, stored_block_limit
from napari_n5zarr.n5.compression import compressed_bound, n5_to_zarr

SIZES = [0, 1, 100, 4095, 65536 + 7, 300_001]


def noise(n: int) -> bytes:
    return np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8).tobytes()


def writers() -> list[tuple[dict, object]]:
    """(N5 compression, compress(data) -> bytes) of the libraries N5 writers use."""
    import deflate
    import lz4.block
    import numcodecs
    import zstandard

    out: list[tuple[dict, object]] = [({"type": "raw"}, lambda d: d)]
    for level in (1, 6, 9):
        out += [({"type": "gzip", "level": level}, lambda d, lv=level: gzip.compress(d, lv)),
                ({"type": "gzip", "level": level}, lambda d, lv=level: deflate.gzip_compress(d, lv)),
                ({"type": "gzip", "level": level, "useZlib": True}, lambda d, lv=level: zlib.compress(d, lv)),
                ({"type": "gzip", "level": level, "useZlib": True}, lambda d, lv=level: deflate.zlib_compress(d, lv))]  # fmt: skip
    out += [({"type": "gzip", "level": 0}, lambda d: gzip.compress(d, 0))]  # stored blocks only
    out += [({"type": "bzip2", "blockSize": b}, lambda d, b=b: bz2.compress(d, b)) for b in (1, 9)]
    out += [
        ({"type": "xz", "preset": p}, lambda d, p=p: lzma.compress(d, preset=p)) for p in (0, 6)
    ]
    for size in (64, 1000, 65536):
        out.append(({"type": "lz4", "blockSize": size}, lambda d, s=size: lz4block.compress(d, s)))
    out.append(
        ({"type": "lz4", "blockSize": 6}, lambda d: lz4.block.compress(d, store_size=False))
    )  # z5py's bare block
    out.append(({"type": "lz4"}, lambda d: numcodecs.LZ4().encode(d)))  # zarr 2: 4-byte size prefix
    for level in (-5, 1, 3, 19):
        out.append(
            (
                {"type": "zstd", "level": level},
                lambda d, lv=level: zstandard.ZstdCompressor(
                    level=lv, write_checksum=True
                ).compress(d),
            )
        )
    for cname in ("blosclz", "lz4", "zstd", "zlib"):
        for shuffle in (0, 1, 2):
            codec = numcodecs.Blosc(cname=cname, clevel=9, shuffle=shuffle, blocksize=0)
            out.append(
                (
                    {"type": "blosc", "cname": cname, "shuffle": shuffle},
                    lambda d, c=codec: c.encode(d),
                )
            )
    return out


@pytest.mark.parametrize("n", SIZES)
def test_no_writer_exceeds_the_worst_case(n: int) -> None:
    data = noise(n)
    for compression, compress in writers():
        made = len(compress(data))  # type: ignore[operator]
        bound = compressed_bound(n5_to_zarr(compression), n)
        assert bound is not None
        assert made <= bound[0], (compression, n, made, bound)


@pytest.mark.parametrize(
    "compression", [{"type": t} for t in ("raw", "gzip", "bzip2", "xz", "lz4", "blosc", "zstd")]
)
def test_the_limit_follows_the_block_size(compression: dict) -> None:
    """A 64^3 uint16 block (512 KiB) is capped near its size, not at the global 2 GiB;
    lz4-java's smallest pieces (64 bytes) are the worst case: 21 bytes per piece."""
    codec = n5_to_zarr(compression)
    limit = stored_block_limit((64, 64, 64), 2 * 64**3, codec)
    assert limit is not None
    assert 2 * 64**3 <= limit.size - FRAMING_SLACK <= 1.14 * 2 * 64**3, limit
    small = stored_block_limit(
        (64, 64, 64), 2 * 64**3, n5_to_zarr({"type": "lz4", "blockSize": 64})
    )
    assert small is not None
    assert small.size == 16 + 2 * 64**3 + 21 * (2 * 64**3 // 64 + 1) + FRAMING_SLACK


def test_a_store_without_bounded_reads_is_checked_after_the_read() -> None:
    """Over a store that knows no per-dataset cap (zarr's MemoryStore), the N5 Default Store
    checks the block it got: one byte past the dataset's limit is refused, naming the block."""
    import json

    import zarr
    from zarr.core.buffer import default_buffer_prototype
    from zarr.storage import MemoryStore

    from napari_n5zarr.errors import N5BlockError
    from napari_n5zarr.n5.block_format import encode_header
    from napari_n5zarr.n5.stores import N5DefaultStore
    from napari_n5zarr.zarr_internals import sync

    base = MemoryStore()
    attrs = {
        "dimensions": [8, 8],
        "blockSize": [8, 8],
        "dataType": "uint8",
        "compression": {"type": "raw"},
    }
    proto = default_buffer_prototype()
    sync(base.set("attributes.json", proto.buffer.from_bytes(json.dumps(attrs).encode())))
    store = N5DefaultStore(base)
    arr = zarr.open_array(store, mode="r")
    limit = 12 + 64 + FRAMING_SLACK
    block = encode_header([8, 8]) + bytes(range(64))
    sync(base.set("0/0", proto.buffer.from_bytes(block + bytes(limit - len(block)))))
    assert sync(store.get("0/0", proto)) is not None  # at the limit: handed on (the codec decides)
    sync(base.set("0/0", proto.buffer.from_bytes(block + bytes(limit - len(block) + 1))))
    with pytest.raises(
        N5BlockError,
        match=rf"^N5 block 0/0 in memory store: stored block is over its dataset's limit of {limit} bytes",
    ):
        arr[...]
