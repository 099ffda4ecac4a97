"""Decompression to EXACTLY the size a block needs, never more: one function per compression.

Every function takes the compressed payload and ``size`` (what the block header's shape
needs, in bytes) and returns a bytes-like object of exactly ``size`` bytes, or raises
:class:`N5BlockError` saying what is wrong (without the block's name: the caller adds it).

Why: a payload that decodes to more or less than its header shape needs is corrupt, and a
"decompression bomb" (a small block that inflates to gigabytes) must be refused while
memory stays within a small multiple of the block size. So the declared sizes in the
format's own headers (gzip ISIZE, zstd frame content size, blosc header, LZ4Block pieces)
are checked before anything is allocated, and streaming decoders stop one byte past the
bound.

Each compression library is imported when a block of its kind is first decoded, so opening
a dataset loads only the library it uses (``import`` of a loaded module is a dict lookup).
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from napari_n5zarr.errors import N5BlockError

BytesLike = bytes | bytearray | memoryview

XZ_MEMLIMIT = 1 << 28
"""liblzma decoder memory cap (256 MiB; preset 9 needs ~65 MiB): a forged dictionary size
in an xz header cannot make the reader allocate gigabytes."""

GZIP_MAGIC = b"\x1f\x8b"


def _exact[B: BytesLike](out: B, size: int, what: str) -> B:
    if len(out) != size:
        raise N5BlockError(
            f"{what} payload decompresses to {len(out)} bytes, the header shape needs {size}"
        )
    return out


# -- streaming decoders with a maximum output (zlib/gzip, bzip2, xz) ---------------------
def _stream(
    new: Callable[[], Any], data: BytesLike, size: int, what: str, *, members: bool
) -> bytes:
    """Run ``new()`` decompressors over ``data`` (several concatenated streams if
    ``members``), producing at most ``size + 1`` bytes; exactly ``size`` is accepted."""
    import lzma

    pieces: list[bytes] = []
    total = 0
    pending: BytesLike = data
    while True:
        decoder = new()
        try:
            out = decoder.decompress(pending, size - total + 1)
        except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as e:
            raise N5BlockError(f"corrupt {what} payload: {e}") from None
        total += len(out)
        pieces.append(out)
        if total > size:
            raise N5BlockError(
                f"{what} payload decompresses to more than the {size} bytes its header shape needs"
            )
        if not decoder.eof:
            raise N5BlockError(f"truncated {what} payload (the compressed stream ends early)")
        pending = decoder.unused_data
        if not pending:
            break
        if not members:
            raise N5BlockError(f"{len(pending)} stray bytes after the {what} stream")
    result = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    return _exact(result, size, what)


def gzip_decompress(data: BytesLike, size: int) -> BytesLike:
    """gzip (RFC 1952, possibly several members) or zlib (RFC 1950; N5 ``useZlib``)."""
    import deflate

    view = memoryview(data).cast("B")
    if bytes(view[:2]) == GZIP_MAGIC:
        # libdeflate (~2x zlib, releases the GIL) allocates what the ISIZE trailer says and
        # refuses any other output size: use it only when ISIZE is exactly the bound. Like
        # zstd's decoder (and n5-java, which reads only the bytes a block needs), it ignores
        # bytes after a complete first member of exactly the right size.
        if len(view) >= 18 and int.from_bytes(view[-4:], "little") == size % (1 << 32):
            try:
                out = deflate.gzip_decompress(view)
            except (ValueError, deflate.DeflateError):
                out = None  # multi-member or corrupt: the bounded zlib path decides and says
            if out is not None:
                return _exact(out, size, "gzip")
        return _stream(lambda: zlib.decompressobj(31), view, size, "gzip", members=True)
    try:  # libdeflate with an output buffer of exactly ``size``: cannot write past it
        out = deflate.zlib_decompress(view, size)
    except (ValueError, deflate.DeflateError):
        # corrupt, or a writer that mixes the headers: the bounded zlib path decides and says
        return _stream(lambda: zlib.decompressobj(47), view, size, "gzip/zlib", members=True)
    return _exact(out, size, "zlib")


def bzip2_decompress(data: BytesLike, size: int) -> bytes:
    import bz2

    return _stream(bz2.BZ2Decompressor, data, size, "bzip2", members=True)


def xz_decompress(data: BytesLike, size: int) -> bytes:
    import lzma

    new = lambda: lzma.LZMADecompressor(lzma.FORMAT_AUTO, memlimit=XZ_MEMLIMIT)  # noqa: E731
    return _stream(new, data, size, "xz", members=True)


# -- zstd: the frame header declares the content size ----------------------------------
_ZSTD = threading.local()  # ZstdDecompressor instances are not thread safe


def zstd_decompress(data: BytesLike, size: int) -> bytes:
    import zstandard

    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as e:
        raise N5BlockError(f"corrupt zstd payload: {e}") from None
    if declared >= 0 and declared != size:
        raise N5BlockError(f"zstd frame declares {declared} bytes, the header shape needs {size}")
    decompressor = getattr(_ZSTD, "d", None)
    if decompressor is None:
        decompressor = _ZSTD.d = zstandard.ZstdDecompressor()
    try:  # max_output_size bounds frames without a content size (older tensorstore)
        out = decompressor.decompress(data, max_output_size=max(size, 1))
    except zstandard.ZstdError as e:
        raise N5BlockError(f"corrupt zstd payload: {e}") from None
    return _exact(out, size, "zstd")


# -- lz4: lz4-java's LZ4Block stream, or the bare block z5py / numcodecs write ----------
def lz4_decompress(data: BytesLike, size: int) -> BytesLike:
    """n5-java's LZ4Block stream; also the bare LZ4 block z5py writes and numcodecs' framing
    (4-byte little-endian size + block, zarr-python 2), which carry no magic."""
    import lz4.block

    from napari_n5zarr.n5 import lz4block

    view = memoryview(data).cast("B")
    if bytes(view[:8]) == lz4block.MAGIC:
        return lz4block.decompress(view, max_size=size, exact=True)
    try:
        if len(view) >= 4 and int.from_bytes(view[:4], "little") == size:
            try:
                return _exact(lz4.block.decompress(view[4:], uncompressed_size=size), size, "lz4")
            except lz4.block.LZ4BlockError:
                pass
        # uncompressed_size bounds the output buffer: the decoder cannot write past it
        return _exact(lz4.block.decompress(view, uncompressed_size=size), size, "lz4")
    except lz4.block.LZ4BlockError as e:
        raise N5BlockError(f"corrupt lz4 payload: {e}") from None


# -- blosc: check the 16-byte header before c-blosc trusts it ----------------------------
_BLOSC_HEADER = struct.Struct("<BBBBIII")
BLOSC_MEMCPYED = 0x02


def check_blosc_header(data: BytesLike, size: int) -> None:
    """Refuse a blosc chunk whose header does not match the payload and ``size``.

    Written by hand because numcodecs' ``blosc.decompress`` calls c-blosc's
    ``blosc_decompress``, which takes no source length: it trusts ``cbytes`` and reads past a
    short buffer (SIGSEGV or garbage on a truncated block), and allocates what ``nbytes`` says.
    With ``cbytes`` == the real length, c-blosc's own bounds checks hold.
    Layout: version, versionlz, flags, typesize (u8 each), nbytes, blocksize, cbytes (u32 LE).
    """
    view = memoryview(data).cast("B")
    if len(view) < _BLOSC_HEADER.size:
        raise N5BlockError(
            f"blosc payload of {len(view)} bytes is shorter than the 16-byte blosc header"
        )
    version, _, flags, typesize, nbytes, blocksize, cbytes = _BLOSC_HEADER.unpack_from(view, 0)
    if version not in (1, 2):
        raise N5BlockError(f"blosc header has format version {version} (c-blosc 1 writes 1 or 2)")
    if cbytes != len(view):
        raise N5BlockError(
            f"blosc header declares {cbytes} compressed bytes, block has {len(view)}"
        )
    if nbytes != size:
        raise N5BlockError(
            f"blosc header declares {nbytes} decompressed bytes, the header shape needs {size}"
        )
    if typesize == 0 or (size and not 0 < blocksize <= nbytes):
        raise N5BlockError(
            f"blosc header is corrupt (typesize {typesize}, blocksize {blocksize}, nbytes {nbytes})"
        )
    if flags & BLOSC_MEMCPYED:
        if cbytes != nbytes + _BLOSC_HEADER.size:
            raise N5BlockError(
                f"blosc header declares a stored copy of {nbytes} bytes, block has {cbytes - 16}"
            )
        return
    if not size:
        return
    nblocks = -(-nbytes // blocksize)
    table_end = _BLOSC_HEADER.size + 4 * nblocks
    if table_end > cbytes:
        raise N5BlockError(
            f"blosc payload of {cbytes} bytes is too short for its {nblocks}-block table"
        )
    starts = np.frombuffer(view, dtype="<u4", count=nblocks, offset=_BLOSC_HEADER.size)
    if nblocks and (int(starts.min()) < table_end or int(starts.max()) >= cbytes):
        raise N5BlockError("blosc block table points outside the payload (corrupt block)")


def blosc_decompress(data: BytesLike, size: int) -> BytesLike:
    import numcodecs.blosc

    check_blosc_header(data, size)
    try:
        out = numcodecs.blosc.decompress(data)
    except RuntimeError as e:
        raise N5BlockError(f"corrupt blosc payload: {e}") from None
    return _exact(out, size, "blosc")


def raw_check(data: BytesLike, size: int) -> BytesLike:
    """``raw``: the payload is the data, exactly ``size`` bytes."""
    if len(data) != size:
        raise N5BlockError(f"raw payload holds {len(data)} bytes, the header shape needs {size}")
    return data
