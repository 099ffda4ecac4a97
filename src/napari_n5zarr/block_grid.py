"""A region of an array on its block grid, the one definition read and write share: the
grid's size (:func:`grid`), a block's pixels (:func:`bounds`), the blocks a region reaches
(:func:`block_ranges`) and where a block and a region meet (:func:`overlap`). Pure:
standard library only."""

from __future__ import annotations

from collections.abc import Sequence


def grid(shape: Sequence[int], block: Sequence[int]) -> tuple[int, ...]:
    """Blocks per axis of an array of ``shape`` cut into blocks of ``block``."""
    return tuple(-(-n // b) for n, b in zip(shape, block, strict=True))


def bounds(
    index: Sequence[int],
    block: Sequence[int],
    shape: Sequence[int],
    held: Sequence[int] | None = None,
) -> tuple[slice, ...]:
    """The pixels of the block at grid ``index`` inside the array (``held``: the extent the
    stored block holds, its header's, when it may be shorter than its grid cell)."""
    held = block if held is None else held
    return tuple(
        slice(i * b, min(i * b + h, n))
        for i, b, h, n in zip(index, block, held, shape, strict=True)
    )


def block_ranges(lo: Sequence[int], hi: Sequence[int], block: Sequence[int]) -> list[range]:
    """Per axis, the grid indices of the blocks that pixels ``[lo, hi)`` reach (an empty
    region reaches none)."""
    return [
        range(a // b, -(-e // b)) if e > a else range(0)
        for a, e, b in zip(lo, hi, block, strict=True)
    ]


def overlap(
    index: Sequence[int],
    block: Sequence[int],
    lo: Sequence[int],
    hi: Sequence[int],
    held: Sequence[int] | None = None,
) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """(in the block, in the region ``[lo, hi)``) slices of the pixels that the block at grid
    ``index`` and the region share (``held``: the extent the stored block holds, its
    header's, when it may be shorter than its grid cell); empty slices, ``stop <= start``,
    where they do not meet. One pass per axis: the read wing calls it for every block of a
    plane."""
    inner: list[slice] = []
    outer: list[slice] = []
    for i, b, h, a, e in zip(index, block, block if held is None else held, lo, hi, strict=True):
        first = i * b
        start, stop = max(a, first), min(e, first + h)
        inner.append(slice(start - first, stop - first))
        outer.append(slice(start - a, stop - a))
    return tuple(inner), tuple(outer)
