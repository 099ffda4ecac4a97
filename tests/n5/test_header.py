"""The N5 block header."""

from __future__ import annotations

import struct

import pytest

from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.n5.block_format import encode_header, header_size, parse_header


def test_default_header_round_trip() -> None:
    raw = encode_header((100, 20, 3))
    assert raw == struct.pack(">HHIII", 0, 3, 100, 20, 3)
    assert len(raw) == header_size(3) == 16
    h = parse_header(raw + b"payload")
    assert (h.mode, h.shape, h.num_elements, h.size) == (0, (100, 20, 3), None, 16)


def test_varlength_and_object_headers() -> None:
    h = parse_header(struct.pack(">HHIII", 1, 2, 4, 3, 99))
    assert (h.mode, h.shape, h.num_elements, h.size) == (1, (4, 3), 99, 16)
    h = parse_header(struct.pack(">HI", 2, 7))
    assert (h.mode, h.shape, h.num_elements, h.size) == (2, (), 7, 6)


@pytest.mark.parametrize(
    "raw", [b"", b"\x00", b"\x00\x00\x00\x03\x00\x00", struct.pack(">HH", 9, 1)]
)
def test_short_or_unknown_headers(raw: bytes) -> None:
    with pytest.raises(N5BlockError):
        parse_header(raw)


def test_unencodable_shapes() -> None:
    with pytest.raises(N5BlockError, match="uint32"):
        encode_header((2**32,))
