"""zarr's byte requests (``zarr.abc.store.ByteRequest``), the one conversion: as explicit
spans of a value (:func:`byte_span`, :func:`span_of`, :func:`cut`) and as an HTTP ``Range``
header (:func:`http_range`). Below every store (local, zip, remote, the N5 wrappers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

if TYPE_CHECKING:
    from zarr.abc.store import ByteRequest

Span = Callable[[int], tuple[int, int]]
"""A value's size -> ``(start, end)`` of the part asked for."""


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


def span_of(byte_range: ByteRequest | None) -> Span | None:
    """:func:`byte_span` as a function of the size, for a reader that learns the size later
    (None: the whole value). A request of no known kind is refused here, before any read."""
    if byte_range is None:
        return None
    byte_span(byte_range, 0)
    return lambda size: byte_span(byte_range, size)


def cut(data: bytes, byte_range: ByteRequest | None) -> bytes:
    """The part of a whole value that ``byte_range`` asks for."""
    start, end = byte_span(byte_range, len(data))
    return data if (start, end) == (0, len(data)) else data[start:end]


def http_range(byte_range: ByteRequest | None) -> str | None:
    """The HTTP ``Range`` header asking for ``byte_range`` (None: no header, the whole body)."""
    if byte_range is None:
        return None
    if isinstance(byte_range, RangeByteRequest):
        return f"bytes={byte_range.start}-{byte_range.end - 1}"
    if isinstance(byte_range, OffsetByteRequest):
        return f"bytes={byte_range.offset}-"
    if isinstance(byte_range, SuffixByteRequest):
        return f"bytes=-{byte_range.suffix}"
    raise TypeError(f"Unexpected byte_range, got {byte_range}.")
