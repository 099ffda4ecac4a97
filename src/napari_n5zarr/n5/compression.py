"""The ONE table mapping N5 ``compression`` objects to Zarr v3 bytes->bytes codecs.

Both directions (reading attributes.json, writing it from zarr.json) go through
:data:`COMPRESSIONS`. Each row also names the ``decompress`` the ``n5_default`` codec uses:
from :mod:`.bounded`, it decodes to exactly the size the block header needs or refuses the
block, never allocating more (avoids copies; reads zstd frames without a content size,
which numcodecs' Zstd refuses).
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.n5 import bounded, lz4block

JSONDict = dict[str, Any]

_SHUFFLE_NAMES = ("noshuffle", "shuffle", "bitshuffle")
ZSTD_MAX_LEVEL = 22
"""zarr's zstd codec refuses higher levels (the N5 side takes any integer)."""
_BLOSC_CNAMES = ("blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd")


def _int(params: JSONDict, key: str, default: int) -> int:
    value = params.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and not math.isfinite(value))
        or int(value) != value
    ):
        raise N5FormatError(f"N5 compression parameter {key!r} must be an integer, got {value!r}")
    return int(value)


def _gzip_level(params: JSONDict) -> int:
    level = _int(params, "level", -1)
    if level == -1:  # java.util.zip default; zarr's gzip codec rejects -1
        return 6
    if not 0 <= level <= 9:
        raise N5FormatError(f"gzip level must be -1..9, got {level}")
    return level


def _gzip_compress(data: memoryview, config: JSONDict) -> bytes | bytearray:
    import deflate  # imported on first use: opening a dataset loads only what it uses

    return deflate.gzip_compress(data.cast("B"), int(config.get("level", 6)))


def _zlib_compress(data: memoryview, config: JSONDict) -> bytes | bytearray:
    import deflate

    return deflate.zlib_compress(data.cast("B"), int(config.get("level", 6)))


_local = threading.local()


def _zstd_compress(data: memoryview, config: JSONDict) -> bytes | bytearray:
    """zstandard (releases the GIL: both cores compress); one compressor per thread and
    level, since a ``ZstdCompressor`` must not be shared between threads."""
    import zstandard

    level = int(config.get("level", 0))
    cache = _local.__dict__.setdefault("zstd", {})
    compressor = cache.get(level)
    if compressor is None:
        checksum = bool(config.get("checksum"))
        compressor = cache[level] = zstandard.ZstdCompressor(level=level, write_checksum=checksum)
    return compressor.compress(data.cast("B"))


@functools.lru_cache(maxsize=32)
def _blosc(cname: str, clevel: int, shuffle: int, blocksize: int, typesize: int) -> Any:
    from numcodecs import Blosc

    return Blosc(
        cname=cname, clevel=clevel, shuffle=shuffle, blocksize=blocksize, typesize=typesize
    )


def _blosc_compress(data: memoryview, config: JSONDict) -> bytes | bytearray:
    """numcodecs' Blosc (what zarr's codec calls, the same bytes) with the element size
    of ``data`` as typesize, without zarr's per-block codec and buffer objects."""
    import numpy as np

    shuffle = config.get("shuffle", "noshuffle")
    shuffle_n = _SHUFFLE_NAMES.index(shuffle) if isinstance(shuffle, str) else int(shuffle)
    codec = _blosc(config.get("cname", "blosclz"), int(config.get("clevel", 6)), shuffle_n,
                   int(config.get("blocksize", 0)), data.itemsize)  # fmt: skip
    return codec.encode(np.frombuffer(data.cast("B"), dtype=np.uint8))


def _blosc_to_zarr(p: JSONDict) -> JSONDict:
    cname = p.get("cname", "blosclz")
    if cname not in _BLOSC_CNAMES:
        raise N5FormatError(f"unknown blosc cname {cname!r}")
    shuffle = _int(p, "shuffle", 0)
    if shuffle not in (0, 1, 2):
        raise N5FormatError(f"blosc shuffle must be 0, 1 or 2, got {shuffle}")
    return {
        "cname": cname,
        "clevel": _int(p, "clevel", 6),
        "shuffle": _SHUFFLE_NAMES[shuffle],
        "blocksize": _int(p, "blocksize", 0),
    }


def _blosc_to_n5(c: JSONDict) -> JSONDict:
    # No "nthreads": tensorstore rejects unknown keys, and n5-java builds BloscCompression
    # with its no-argument constructor (nthreads = 1) before applying the keys present.
    shuffle = c.get("shuffle", "noshuffle")
    return {
        "cname": c.get("cname", "blosclz"),
        "clevel": int(c.get("clevel", 6)),
        "shuffle": _SHUFFLE_NAMES.index(shuffle) if isinstance(shuffle, str) else int(shuffle),
        "blocksize": int(c.get("blocksize", 0)),
    }


# -- worst-case sizes: the most bytes each compression makes of n bytes ---------------------
# The libraries' own documented bounds (their "compressBound"), so a stored block can be
# capped at what its dataset's block size allows, whoever wrote it.
def _deflate_bound(n: int, wrapper: int) -> int:
    """zlib's ``deflateBound`` for any settings (deflate.c, zlib 1.3: the larger of its
    fixed-code and stored-block bounds) plus the wrapper: 18 bytes gzip, 6 zlib. Covers
    libdeflate's bound (5 bytes per 5,000-byte block) too."""
    fixed = n + (n >> 3) + (n >> 8) + (n >> 9) + 4
    stored = n + (n >> 5) + (n >> 7) + (n >> 11) + 7
    return max(fixed, stored) + wrapper


def _bzip2_bound(n: int, config: JSONDict) -> int:
    """bzip2's manual (``BZ2_bzBuffToBuffCompress``): at most 1% more, plus 600 bytes."""
    return n + -(-n // 100) + 600


def _xz_bound(n: int, config: JSONDict) -> int:
    """liblzma's ``lzma_stream_buffer_bound``: LZMA2 stores incompressible data in chunks of
    64 KiB with a 3-byte header; plus block header (<= 1024), check (<= 64), padding,
    stream header and footer and index (rounded up to 2 KiB)."""
    return n + 3 * -(-n // 65536) + 2048


def _lz4_bound(n: int, config: JSONDict) -> int:
    """The larger of lz4-java's LZ4Block stream (a 21-byte header per ``blockSize`` piece,
    stored raw when it does not shrink, and a 21-byte end mark) and lz4's
    ``LZ4_compressBound`` (n + n/255 + 16; z5py's bare block, +4 for numcodecs' size prefix)."""
    piece = max(int(config.get("blockSize", lz4block.DEFAULT_BLOCK_SIZE)), lz4block.MIN_BLOCK_SIZE)
    stream = n + lz4block.PIECE_HEADER * (-(-n // piece) + 1)
    return max(stream, n + n // 255 + 16 + 4)


def _blosc_bound(n: int, config: JSONDict) -> int:
    """c-blosc's ``BLOSC_MAX_OVERHEAD``: n + 16 (blosc.h; numcodecs, jblosc, z5py and
    tensorstore all compress into a buffer of that size, so no chunk is larger)."""
    return n + 16


def _zstd_bound(n: int, config: JSONDict) -> int:
    """zstd's ``ZSTD_COMPRESSBOUND`` (zstd.h)."""
    small = (128 * 1024 - n) >> 11 if n < 128 * 1024 else 0
    return n + (n >> 8) + small


@dataclass(frozen=True)
class Compression:
    """One row: an N5 compression type and its Zarr v3 codec."""

    n5_type: str
    zarr_name: str | None
    """Zarr v3 codec name; None for raw (no bytes->bytes codec)."""
    to_zarr: Callable[[JSONDict], JSONDict]
    """N5 parameters -> zarr codec configuration."""
    to_n5: Callable[[JSONDict], JSONDict]
    """zarr codec configuration -> N5 parameters (without "type")."""
    matches_n5: Callable[[JSONDict], bool] = lambda p: True
    """Tells this row from another with the same N5 type (gzip vs gzip+useZlib)."""
    decompress: Callable[[memoryview, int], Any] | None = None
    """Bounded decompression to exactly the given size (see :mod:`.bounded`)."""
    compress: Callable[[memoryview, JSONDict], bytes | bytearray] | None = None
    """Optional fast compression given the zarr codec configuration: ``data`` is the
    big-endian payload, its ``itemsize`` the element size (blosc's typesize)."""
    worst_case: Callable[[int, JSONDict], int] = lambda n, c: n
    """The most bytes this compression makes of ``n`` bytes (zarr configuration ``c``):
    the library's documented bound. Caps what a stored block may take."""
    zarr_refuses: Callable[[JSONDict], bool] = lambda c: False
    """True for a zarr configuration (from ``to_zarr``) that the zarr codec refuses, though
    N5 and the bounded decompression accept it: readers that skip zarr fall back to it
    for those (so zarr's own message reports them). Checked against zarr in the tests."""


COMPRESSIONS: tuple[Compression, ...] = (
    Compression("raw", None, lambda p: {}, lambda c: {}, decompress=bounded.raw_check),
    Compression(
        "gzip",
        "gzip",
        lambda p: {"level": _gzip_level(p)},
        lambda c: {"level": int(c.get("level", 6)), "useZlib": False},
        matches_n5=lambda p: not p.get("useZlib", False),
        decompress=bounded.gzip_decompress,
        compress=_gzip_compress,
        worst_case=lambda n, c: _deflate_bound(n, 18),
    ),
    Compression(
        "gzip",
        "numcodecs.zlib",
        lambda p: {"level": _gzip_level(p)},
        lambda c: {"level": int(c.get("level", 6)), "useZlib": True},
        matches_n5=lambda p: bool(p.get("useZlib", False)),
        decompress=bounded.gzip_decompress,
        compress=_zlib_compress,
        worst_case=lambda n, c: _deflate_bound(n, 6),
    ),
    Compression(
        "bzip2",
        "numcodecs.bz2",
        lambda p: {"level": min(max(_int(p, "blockSize", 9), 1), 9)},
        lambda c: {"blockSize": int(c.get("level", 9))},
        decompress=bounded.bzip2_decompress,
        worst_case=_bzip2_bound,
    ),
    Compression(
        "xz",
        "numcodecs.lzma",
        lambda p: {"preset": _int(p, "preset", 6), "format": 1, "check": -1},
        lambda c: {"preset": int(c["preset"]) if c.get("preset") is not None else 6},
        decompress=bounded.xz_decompress,
        worst_case=_xz_bound,
    ),
    Compression(
        "lz4",
        lz4block.CODEC_NAME,
        # z5py writes blockSize 6 (a level, not a size); Java's default is 65536.
        lambda p: {"blockSize": max(_int(p, "blockSize", lz4block.DEFAULT_BLOCK_SIZE), 64)},
        lambda c: {"blockSize": int(c.get("blockSize", lz4block.DEFAULT_BLOCK_SIZE))},
        decompress=bounded.lz4_decompress,
        worst_case=_lz4_bound,
        zarr_refuses=lambda c: (
            not lz4block.MIN_BLOCK_SIZE <= c["blockSize"] <= lz4block.MAX_BLOCK_SIZE
        ),
    ),
    Compression(
        "blosc",
        "blosc",
        _blosc_to_zarr,
        _blosc_to_n5,
        decompress=bounded.blosc_decompress,
        compress=_blosc_compress,
        worst_case=_blosc_bound,
    ),
    Compression(
        "zstd",
        "zstd",
        lambda p: {"level": _int(p, "level", 3), "checksum": False},
        lambda c: {"level": int(c.get("level", 0))},
        decompress=bounded.zstd_decompress,
        compress=_zstd_compress,
        worst_case=_zstd_bound,
        zarr_refuses=lambda c: c["level"] > ZSTD_MAX_LEVEL,
    ),
)

N5_TYPES = tuple(dict.fromkeys(c.n5_type for c in COMPRESSIONS))
"""Every N5 compression type this library reads and writes."""


def _row_for_n5(params: JSONDict) -> Compression:
    n5_type = params.get("type")
    for row in COMPRESSIONS:
        if row.n5_type == n5_type and row.matches_n5(params):
            return row
    raise N5FormatError(
        f"unsupported N5 compression {n5_type!r} (supported: {', '.join(N5_TYPES)})"
    )


def row_for_zarr_name(name: str | None) -> Compression | None:
    """The row whose zarr codec is ``name`` (None -> raw), or None if N5 cannot express it."""
    for row in COMPRESSIONS:
        if row.zarr_name == name:
            return row
    return None


def normalize_n5(attributes: JSONDict) -> JSONDict:
    """The ``compression`` object of a dataset's attributes, legacy ``compressionType`` too."""
    compression = attributes.get("compression")
    if compression is None:
        legacy = attributes.get("compressionType", "raw")
        return {"type": legacy}
    if isinstance(compression, str):  # seen in hand-written files
        return {"type": compression}
    if not isinstance(compression, dict) or "type" not in compression:
        raise N5FormatError(
            f"N5 'compression' must be an object with a 'type', got {compression!r}"
        )
    return compression


def n5_to_zarr(compression: JSONDict) -> JSONDict | None:
    """N5 compression object -> Zarr v3 codec JSON (None for raw). Unknown keys are ignored."""
    row = _row_for_n5(compression)
    if row.zarr_name is None:
        return None
    return {"name": row.zarr_name, "configuration": row.to_zarr(compression)}


def zarr_to_n5(codec: JSONDict | None) -> JSONDict:
    """Zarr v3 codec JSON (None for no codec) -> N5 compression object."""
    name = None if codec is None else codec.get("name")
    row = row_for_zarr_name(name)
    if row is None:
        raise N5FormatError(
            f"zarr codec {name!r} has no N5 equivalent (N5 compressions: {', '.join(N5_TYPES)})"
        )
    config = {} if codec is None else dict(codec.get("configuration") or {})
    return {"type": row.n5_type, **row.to_n5(config)}


def fast_decompressor(zarr_name: str | None) -> Callable[[memoryview, int], Any] | None:
    """The table's bounded decompression for a zarr codec name (None: not an N5 compression)."""
    row = row_for_zarr_name(zarr_name)
    return None if row is None else row.decompress


def n5_decompressor(
    compression: JSONDict,
) -> tuple[str | None, Callable[[memoryview, int], Any] | None]:
    """(zarr codec name, bounded decompression) for an N5 compression object: what the
    ``n5_default`` codec of such a dataset decodes with (the name is None for raw).
    N5FormatError for a compression this table does not know."""
    row = _row_for_n5(compression)
    return row.zarr_name, row.decompress


def zarr_refuses(compression: JSONDict) -> bool:
    """True when zarr's codec would refuse this N5 compression object's zarr configuration
    (see :attr:`Compression.zarr_refuses`); N5FormatError for one the table refuses itself."""
    row = _row_for_n5(compression)
    return row.zarr_refuses(row.to_zarr(compression))


def fast_compressor(codec_json: JSONDict) -> Callable[[memoryview], bytes | bytearray] | None:
    """The table's fast compression for a zarr codec (JSON), if it has one."""
    row = row_for_zarr_name(codec_json.get("name"))
    if row is None or row.compress is None:
        return None
    config = dict(codec_json.get("configuration") or {})
    compress = row.compress
    return lambda data: compress(data, config)


def compressed_bound(codec_json: JSONDict | None, n: int) -> tuple[int, str] | None:
    """(the most bytes the zarr codec ``codec_json`` (None: raw) makes of ``n`` bytes, its
    N5 name), or None for a codec this table does not know."""
    name = None if codec_json is None else codec_json.get("name")
    row = row_for_zarr_name(name)
    if row is None:
        return None
    config = {} if codec_json is None else dict(codec_json.get("configuration") or {})
    return row.worst_case(n, config), row.n5_type
