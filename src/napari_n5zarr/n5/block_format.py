"""An N5 block on its own: the header, THE block decoder, the checks a block must pass, and
the first block of a dataset found by listing.

* Header (N5 spec 4.0.0): u16 BE mode, u16 BE ndim, ndim x u32 BE shape (N5 order), and for
  varlength mode one more u32 BE element count. Object mode is mode + u32 count (no dims).
* Decoding: one stored block -> its values, a view of the decompressed bytes (numpy, the
  header parser and the bounded decompressors only). :class:`~napari_n5zarr.n5.codec.N5DefaultCodec`
  decodes through :func:`decode_block` too (one implementation); the N5 Default Store caps
  every stored block at :func:`stored_block_limit` and applies :func:`check_block_header`
  (one set of checks, one wording).
* The first block (:func:`first_block_mode`): for decisions about a whole dataset before
  anything is written (``n5zarr add-zarr-metadata`` refuses a dataset whose blocks are not
  in default mode: :func:`require_default_mode` is the one block-mode check).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from napari_n5zarr.errors import N5BlockError, located
from napari_n5zarr.n5 import bounded
from napari_n5zarr.n5.constants import ReadLimit

if TYPE_CHECKING:
    from zarr.abc.store import Store


MODE_DEFAULT = 0
MODE_VARLENGTH = 1
MODE_OBJECT = 2
MODE_NAMES = {MODE_DEFAULT: "default", MODE_VARLENGTH: "varlength", MODE_OBJECT: "object"}


class BlockHeader(NamedTuple):
    mode: int
    shape: tuple[int, ...]
    """Block shape in N5 order (fastest axis first)."""
    num_elements: int | None
    """Element count stored by varlength/object blocks, else None."""
    size: int
    """Length of the header in bytes; the payload starts here."""


def require_default_mode(mode: int) -> None:
    """THE block-mode check: only default-mode blocks hold array data (N5BlockError else).

    The codec owns it (it calls this on every block it decodes): the codec is the one part
    that sees every block, whatever store serves it (zarr pairs ``n5_default`` with any
    store, e.g. a plain LocalStore opened from a zarr.json). The N5 store only names the
    block on the buffer so the codec's error says which one; ``n5zarr add-zarr-metadata``
    reads one block's mode to refuse a dataset before writing its zarr.json.
    """
    if mode != MODE_DEFAULT:
        raise N5BlockError(
            f"{MODE_NAMES.get(mode, 'unknown')} mode (mode {mode}); only default-mode (0) blocks hold array data"
        )


def header_size(ndim: int) -> int:
    """Size of a default-mode header for ``ndim`` dimensions."""
    return 4 + 4 * ndim


def parse_header(data: bytes | memoryview | np.ndarray) -> BlockHeader:
    """Parse the header at the start of an N5 block."""
    buf = memoryview(data).cast("B") if not isinstance(data, np.ndarray) else data.data.cast("B")
    if len(buf) < 2:
        raise N5BlockError(f"too short for a header ({len(buf)} bytes)")
    (mode,) = struct.unpack_from(">H", buf, 0)
    if mode == MODE_OBJECT:
        if len(buf) < 6:
            raise N5BlockError("object-mode block too short for its header")
        (count,) = struct.unpack_from(">I", buf, 2)
        return BlockHeader(mode, (), count, 6)
    if mode not in (MODE_DEFAULT, MODE_VARLENGTH):
        raise N5BlockError(f"unknown block mode {mode} (expected 0 default, 1 varlength, 2 object)")
    if len(buf) < 4:
        raise N5BlockError("too short for its header")
    (ndim,) = struct.unpack_from(">H", buf, 2)
    end = header_size(ndim)
    if mode == MODE_VARLENGTH:
        end += 4
    if len(buf) < end:
        raise N5BlockError(f"too short for a {ndim}-dimensional header ({len(buf)} bytes)")
    shape = struct.unpack_from(f">{ndim}I", buf, 4)
    count = struct.unpack_from(">I", buf, 4 + 4 * ndim)[0] if mode == MODE_VARLENGTH else None
    return BlockHeader(mode, tuple(shape), count, end)


def encode_header(shape: tuple[int, ...] | list[int]) -> bytes:
    """Default-mode header for a block of ``shape`` (N5 order)."""
    if len(shape) > 0xFFFF:
        raise N5BlockError(f"N5 blocks hold at most 65535 dimensions, got {len(shape)}")
    if any(not 0 <= s <= 0xFFFFFFFF for s in shape):
        raise N5BlockError(f"N5 block shape {tuple(shape)} does not fit in uint32")
    return struct.pack(f">HH{len(shape)}I", MODE_DEFAULT, len(shape), *shape)


Decompress = Callable[[np.ndarray, int], np.ndarray]
"""``(payload, nbytes) -> exactly nbytes`` (uint8 array), or N5BlockError."""


def validated_header(
    raw: np.ndarray, ndim: int | None, chunk_shape: tuple[int, ...] | None = None
) -> BlockHeader:
    """Parse a block header and refuse what cannot be array data, before any allocation.

    Position-free (the codec never learns which block it decodes): the header shape may not
    exceed the chunk shape on any axis. Where the key is known, :func:`check_block_header`
    checks more.
    """
    header = parse_header(raw)
    require_default_mode(header.mode)
    if ndim is not None and len(header.shape) != ndim:
        raise N5BlockError(f"header has {len(header.shape)} dimensions, the array has {ndim}")
    if any(s == 0 for s in header.shape):
        raise N5BlockError(f"header shape {list(header.shape)} has a zero extent")
    if chunk_shape is not None and any(
        h > c for h, c in zip(header.shape, chunk_shape, strict=True)
    ):
        raise N5BlockError(
            f"header shape {list(header.shape)} exceeds the block size {list(chunk_shape)}"
        )
    return header


def block_values(payload: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The decompressed payload as the block's values (N5 order): a free view, no copy."""
    stored = payload.view(dtype.newbyteorder(">") if dtype.itemsize > 1 else dtype)
    # C order of the reversed shape == F order of the N5 shape: .T is a free view.
    return stored.reshape(shape[::-1]).T


def decode_block(
    data: bytes | memoryview | np.ndarray,
    dtype: Any,
    ndim: int | None,
    where: str | None,
    decompress: Decompress,
) -> np.ndarray:
    """One whole stored block (header and payload) at its own (header) shape, N5 order: a
    view of the decompressed bytes (big endian, F order). N5BlockError naming ``where``
    if it is not a default-mode block of ``ndim`` dimensions or does not decompress to
    exactly what its header shape needs."""
    raw = (
        np.frombuffer(data, dtype=np.uint8)
        if not isinstance(data, np.ndarray)
        else data.view(np.uint8).ravel()
    )
    dtype = np.dtype(dtype)
    try:
        header = validated_header(raw, ndim)
        nbytes = math.prod(header.shape) * dtype.itemsize
        return block_values(decompress(raw[header.size :], nbytes), header.shape, dtype)
    except N5BlockError as e:
        raise located(e, where) from None


def raw_payload(payload: np.ndarray, nbytes: int) -> np.ndarray:
    """N5 ``raw``: the payload is the data, exactly ``nbytes``."""
    bounded.raw_check(payload.data, nbytes)
    return payload


@dataclass(frozen=True)
class CheckedDecompress:
    """A :data:`Decompress` from a bounded decompression of the compression table (or an
    inner codec's): any other failure than N5BlockError says ``cannot decompress (name)``."""

    name: str | None
    decompress: Callable[[memoryview, int], Any]

    def __call__(self, payload: np.ndarray, nbytes: int) -> np.ndarray:
        try:
            return np.frombuffer(self.decompress(payload.data, nbytes), dtype=np.uint8)
        except N5BlockError:
            raise
        except Exception as e:  # corrupt data: say so, not a deep library traceback
            raise N5BlockError(f"cannot decompress ({self.name}): {e}") from None


def n5_decompress(compression: dict[str, Any]) -> Decompress:
    """The :data:`Decompress` of an N5 compression object (through the compression table)."""
    from napari_n5zarr.n5.compression import n5_decompressor

    name, decompress = n5_decompressor(compression)
    if name is None or decompress is None:
        return raw_payload
    return CheckedDecompress(name, decompress)


# -- checks where the block's key (position) is known -------------------------------------
def block_name(key: str, container: str) -> str:
    """How errors name a block: ``N5 block s0/1/2/3 in /data/x.n5``."""
    return f"N5 block {key} in {container}"


FRAMING_SLACK = 4096
"""Bytes allowed past a compression's documented bound: optional header fields (a gzip
file name, a zstd dictionary id) and the block framing of streaming writers."""


def stored_block_limit(block: tuple[int, ...], payload: int, codec_json: dict[str, Any] | None, *,
                       varlength: bool = False, what: str = "") -> ReadLimit | None:  # fmt: skip
    """The most bytes one stored block of a dataset may take: its header (default mode, or
    varlength with its element count) plus the compression's worst case
    (:func:`~napari_n5zarr.n5.compression.compressed_bound`) of ``payload`` decoded bytes,
    plus :data:`FRAMING_SLACK`; ``what`` says what ``payload`` is, for messages. None for a
    compression the table does not know (the global cap applies)."""
    from napari_n5zarr.n5.compression import compressed_bound

    bound = compressed_bound(codec_json, payload)
    if bound is None:
        return None
    worst, name = bound
    header = header_size(len(block)) + (4 if varlength else 0)
    return ReadLimit(
        header + worst + FRAMING_SLACK,
        f"{what or f'{payload} bytes'}, {name}'s worst case and the header",
    )


def check_block_header(
    head: np.ndarray,
    index: tuple[int, ...],
    grid: tuple[tuple[int, ...], tuple[int, ...]] | None,
    where: str,
) -> None:
    """Refuse (N5BlockError naming ``where``) a block whose header shape its position makes
    impossible (``grid``: the array's shape and block size, N5 order; None: not known).
    O(header). The mode is not checked here: the codec does (:func:`validated_header`)."""
    try:
        header = parse_header(head)
        if (
            header.mode == MODE_DEFAULT
            and grid is not None
            and len(header.shape) == len(index) == len(grid[0])
        ):
            check_position(header.shape, index, grid[0], grid[1])
    except N5BlockError as e:
        raise located(e, where) from None


def check_position(
    header: tuple[int, ...], index: tuple[int, ...], shape: tuple[int, ...], block: tuple[int, ...]
) -> None:
    """Only edge blocks may be truncated, and only to the array's extent (all axes at once,
    as n5-java and z5py write them); any other header shape is corrupt."""
    if header == block:
        return
    inside = tuple(max(0, min(b, n - i * b)) for i, n, b in zip(index, shape, block, strict=True))
    if header == inside:
        return
    if inside == block:
        raise N5BlockError(
            f"header shape {list(header)} in an interior block; it must be the block size {list(block)}"
        )
    raise N5BlockError(
        f"header shape {list(header)} is neither the block size {list(block)} nor the "
        f"array's extent in this edge block {list(inside)}"
    )


def first_block_key(store: Store, prefix: str, ndim: int) -> str | None:
    """Key of the first block (lowest index along every axis present) under the dataset at
    ``prefix``, or None if it has no blocks. One listing per dimension."""
    from napari_n5zarr.zarr_internals import sync

    async def names(path: str) -> list[str]:
        return sorted([k async for k in store.list_dir(path)])

    path = prefix.rstrip("/")
    for _ in range(ndim):
        entries = [e for e in sync(names(path)) if e.isdigit()]
        if not entries:
            return None
        path = f"{path}/{entries[0]}" if path else entries[0]
    return path


def first_block_mode(
    store: Store, prefix: str, ndim: int, name: Callable[[str], str] = str
) -> int | None:
    """Mode of the first block found (None if the dataset has no blocks); N5BlockError
    naming the block (``name(key)``: its path or URL) when it has no N5 header."""
    from zarr.buffer import default_buffer_prototype

    from napari_n5zarr.zarr_internals import sync

    key = first_block_key(store, prefix, ndim)
    if key is None:
        return None
    raw = sync(store.get(key, default_buffer_prototype()))
    try:
        return None if raw is None else parse_header(raw.to_bytes()).mode
    except N5BlockError as e:
        raise located(e, name(key)) from None
