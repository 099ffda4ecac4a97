"""zarr's byte requests (``zarr.abc.store.ByteRequest``) as explicit spans of a value."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

if TYPE_CHECKING:
    from zarr.abc.store import ByteRequest


def byte_span(byte_range: ByteRequest | None, size: int) -> tuple[int, int]:
    """``(start, end)`` of ``byte_range`` within ``size`` bytes, both clamped to ``0..size``
    (``None``: all of it). Slicing with it gives what zarr's own stores return."""
    if byte_range is None:
        return 0, size
    if isinstance(byte_range, RangeByteRequest):
        start = min(max(byte_range.start, 0), size)
        return start, max(start, min(byte_range.end, size))
    if isinstance(byte_range, OffsetByteRequest):
        return min(max(byte_range.offset, 0), size), size
    if isinstance(byte_range, SuffixByteRequest):
        return max(0, size - max(byte_range.suffix, 0)), size
    raise TypeError(f"Unexpected byte_range, got {byte_range}.")
