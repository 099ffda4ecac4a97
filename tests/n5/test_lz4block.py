"""lz4-java LZ4Block framing."""

from __future__ import annotations

import os
import struct

import pytest

from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.n5 import lz4block


@pytest.mark.parametrize("size", [0, 1, 1000, 65536, 65537, 300_000])
def test_round_trip_and_structure(size: int) -> None:
    data = os.urandom(size // 2) + bytes(size - size // 2)
    stream = lz4block.compress(data)
    assert lz4block.decompress(stream) == data
    # pieces of at most blockSize, each with lz4-java's 21-byte header; token level 6 = 64 KiB
    assert stream[:8] == b"LZ4Block"
    assert stream[8] & 0x0F == 6
    magic, token, clen, dlen, check = struct.unpack_from("<8sBiii", stream, len(stream) - 21)
    assert (magic, token, clen, dlen, check) == (b"LZ4Block", 0x16, 0, 0, 0)  # end marker


def test_incompressible_piece_is_stored_raw() -> None:
    data = os.urandom(5000)
    stream = lz4block.compress(data)
    assert stream[8] & 0xF0 == lz4block.METHOD_RAW
    assert lz4block.decompress(stream) == data


def test_bad_magic_is_refused_clearly() -> None:
    with pytest.raises(N5BlockError, match="magic"):
        lz4block.decompress(b"X" * 40)


def test_truncated_stream() -> None:
    with pytest.raises(N5BlockError, match=r"truncated|length"):
        lz4block.decompress(lz4block.compress(b"abc" * 100)[:30])


def test_codec_json() -> None:
    codec = lz4block.LZ4BlockCodec.from_dict(
        {"name": "n5zarr.lz4block", "configuration": {"blockSize": 1024}}
    )
    assert codec.to_dict() == {"name": "n5zarr.lz4block", "configuration": {"blockSize": 1024}}
    with pytest.raises(ValueError, match=r"blockSize must be an int in \[64, 2\*\*25\], got 0"):
        lz4block.LZ4BlockCodec(blockSize=0)
