"""Pyramid planning and 2x downsampling (numpy blocks, lazily over dask).

Everything here is in napari's order (..., z, y, x). A level's pixel centre sits at
``0.5 * (f - 1)`` source pixels (the N5 Viewer convention): a 2x window is averaged
(images) or voted (labels) into one pixel. Odd extents keep their last pixel (output
extent ``ceil(n / 2)``): the last window is replicated, so its mean is the mean of the
pixels that exist.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

import dask.array as da
import numpy as np

Method = Literal["mean", "mode", "nearest"]
SPATIAL_NAMES = ("x", "y", "z")
ANISOTROPY = 1.5
"""An axis is downsampled only while its pixel is at most this many times the finest one."""


def spatial_axes(ndim: int, axis_labels: Sequence[str] | None = None) -> tuple[int, ...]:
    """Axes to downsample: those labelled x, y or z, else the last (up to) three."""
    if axis_labels is not None:
        named = tuple(
            i for i, a in enumerate(axis_labels) if str(a).strip().lower() in SPATIAL_NAMES
        )
        if named:
            return named
    return tuple(range(max(0, ndim - 3), ndim))


def plan(
    shape: Sequence[int],
    block: Sequence[int],
    spatial: Sequence[int],
    scale: Sequence[float] | None = None,
    levels: int | Literal["auto"] = "auto",
) -> list[tuple[int, ...]]:
    """Per-step factors (1 or 2 per axis) from each level to the next.

    ``"auto"`` stops when a level fits one block (on the spatial axes); an integer asks for that many levels in
    all (fewer if nothing is left to downsample). Anisotropic data: an axis whose pixel is
    more than :data:`ANISOTROPY` times the finest is left alone until the others catch up.
    """
    if levels != "auto" and (not isinstance(levels, int) or levels < 1):
        raise ValueError(f"levels must be 'auto' or an integer >= 1, got {levels!r}")
    cur = [int(s) for s in shape]
    spacing = [abs(float(s)) or 1.0 for s in (scale if scale is not None else [1.0] * len(cur))]
    steps: list[tuple[int, ...]] = []
    while True:
        if levels == "auto":
            if all(cur[i] <= block[i] for i in spatial):
                break
        elif len(steps) + 1 >= levels:
            break
        candidates = [i for i in spatial if cur[i] > 1]
        if not candidates:
            break
        finest = min(spacing[i] for i in candidates)
        step = tuple(
            2 if i in candidates and spacing[i] <= ANISOTROPY * finest else 1
            for i in range(len(cur))
        )
        steps.append(step)
        cur = [math.ceil(s / f) for s, f in zip(cur, step, strict=True)]
        spacing = [s * f for s, f in zip(spacing, step, strict=True)]
    return steps


def downsample_block(
    block: np.ndarray, factors: Sequence[int], method: Method = "mean"
) -> np.ndarray:
    """Reduce ``block`` by ``factors`` (each 1 or 2); output extent ``ceil(n / f)``."""
    if all(f == 1 for f in factors):
        return block
    if method == "nearest":
        return block[tuple(slice(None, None, f) for f in factors)]
    pad = [(0, (-n) % f) for n, f in zip(block.shape, factors, strict=True)]
    if any(p for _, p in pad):
        block = np.pad(block, pad, mode="edge")
    if method == "mean" and block.dtype.kind in "iu" and block.dtype.itemsize <= 4:
        return _integer_mean(block, factors)
    # The 2^k pixels of every window, as strided views of the block (no copies).
    offsets = itertools.product(*(range(f) for f in factors))
    views = [
        block[tuple(slice(o, None, f) for o, f in zip(off, factors, strict=True))]
        for off in offsets
    ]
    if method == "mean":
        wide = np.float64 if block.dtype.kind == "f" or block.dtype.itemsize > 4 else np.int64
        total = np.zeros(views[0].shape, dtype=wide)
        for v in views:
            total += v
        mean = total / len(views)
        if block.dtype.kind in "iu":
            return np.rint(mean).astype(block.dtype)
        return mean.astype(block.dtype)
    if method == "mode":
        return _mode(np.stack(views, axis=-1))
    raise ValueError(f"unknown downsampling method {method!r} (mean, mode, nearest)")


def _integer_mean(block: np.ndarray, factors: Sequence[int]) -> np.ndarray:
    """The windows' exact integer sums, one axis at a time (each pass reads half of what
    the one before read: ~2x the block's memory traffic instead of 8x for 2^3 strided
    views), then ``rint(sum / n)`` (half to even) as for any other dtype; native byte order.

    The sums are kept in the narrowest integer type that holds them (:func:`_accumulator`):
    16 bits for 8-bit data, and for 16-bit unsigned data whose values all fit (e.g. 12-bit
    cameras): half the memory traffic of 32 bits, and no casts after the first pass."""
    n = math.prod(factors)
    acc = _accumulator(block, n)
    total: np.ndarray = block
    # Outermost axis in memory first: its even/odd halves keep the inner runs contiguous.
    for axis in sorted(range(block.ndim), key=lambda a: -abs(block.strides[a])):
        if factors[axis] == 2:
            even = tuple(slice(0, None, 2) if a == axis else slice(None) for a in range(block.ndim))
            odd = tuple(slice(1, None, 2) if a == axis else slice(None) for a in range(block.ndim))
            total = np.add(total[even], total[odd], dtype=acc)
    native = block.dtype.newbyteorder("=")
    if n & (n - 1):  # not a power of two (never for 2x steps)
        return np.rint(total / n).astype(native)
    # rint(total / n), half to even, in integers: with total = q * n + r (floor division),
    # q + 1 when r > n / 2, or r == n / 2 and q is odd. Exact for negative sums too.
    shift = n.bit_length() - 1
    up = total >> shift
    up &= 1
    up += n // 2 - 1
    total += up  # no overflow: _accumulator leaves n / 2 of headroom
    total >>= shift
    return total.astype(native, copy=False)


def _accumulator(block: np.ndarray, n: int) -> np.dtype:
    """The integer type for sums of ``n`` values of ``block`` (plus ``n / 2``, rounding)."""
    kind, size = block.dtype.kind, block.dtype.itemsize
    if size == 1 and n <= 128:
        return np.dtype(np.uint16 if kind == "u" else np.int16)
    if kind == "u" and size == 2 and n & (n - 1) == 0:
        # all values below 2^16 / n (the OR of their bits tells): n of them fit in 16 bits
        raw = block.reshape(-1).view(np.uint16) if block.flags.c_contiguous else block
        bits = int(np.bitwise_or.reduce(raw, axis=None)) if raw.size else 0
        if raw is not block and not block.dtype.isnative:
            bits = int.from_bytes(
                bits.to_bytes(2, "little"), "big"
            )  # the raw view read swapped bytes
        if bits < (1 << 16) // n:
            return np.dtype(np.uint16)
    return np.dtype(np.int64 if size == 4 else np.int32)


def _mode(windows: np.ndarray) -> np.ndarray:
    """Most frequent value along the last axis; ties go to the first in window order."""
    w = windows.shape[-1]
    counts = np.zeros(windows.shape, dtype=np.uint8)
    for j in range(w):
        counts[..., j] = (windows == windows[..., j : j + 1]).sum(axis=-1)
    best = counts.argmax(axis=-1)
    return np.take_along_axis(windows, best[..., None], axis=-1)[..., 0]


def downsample(array: da.Array, factors: Sequence[int], method: Method = "mean") -> da.Array:
    """Lazily downsample a dask array. Every chunk but the last along a reduced axis
    must have an even extent (so each output pixel comes from one chunk)."""
    factors = tuple(int(f) for f in factors)
    for axis, (chunks, f) in enumerate(zip(array.chunks, factors, strict=True)):
        if f > 1 and any(c % f for c in chunks[:-1]):
            raise ValueError(f"axis {axis}: chunks {chunks} are not multiples of {f}")
    out_chunks = tuple(
        tuple(math.ceil(c / f) for c in chunks)
        for chunks, f in zip(array.chunks, factors, strict=True)
    )
    return da.map_blocks(
        downsample_block, array, factors, method, chunks=out_chunks, dtype=array.dtype
    )


def level_factor(n0: int, n: int) -> int:
    """The factor that took an extent from ``n0`` to ``n`` (a power of two if one fits)."""
    ratio = n0 / n
    for f in (2 ** round(math.log2(ratio)), round(ratio)):
        if f >= 1 and n in (n0 // f, -(-n0 // f)):
            return f
    return max(1, round(ratio))


def numpy_pyramid(
    array: np.ndarray, steps: Sequence[Sequence[int]], method: Method = "mean"
) -> list[np.ndarray]:
    """All levels of an in-memory array (each level from the previous one)."""
    levels = [array]
    for step in steps:
        levels.append(downsample_block(levels[-1], step, method))
    return levels


def absolute_factors(steps: Sequence[Sequence[int]], ndim: int) -> list[tuple[int, ...]]:
    """Factors of every level relative to level 0 (level 0 first)."""
    out = [(1,) * ndim]
    for step in steps:
        out.append(tuple(a * b for a, b in zip(out[-1], step, strict=True)))
    return out
