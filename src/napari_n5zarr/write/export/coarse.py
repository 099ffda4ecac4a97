"""The coarse pyramid levels, kept in memory while level 0 is written, each block written
as soon as all of it is known.

Level ``first`` is filled by the level-0 regions as they are written (each region's last
level downsampled once more, see :class:`~napari_n5zarr.write.export.levels.PyramidRegions`); a
block of it is handed to a worker once every voxel of it has arrived, which downsamples it
into the next level (whose blocks are written the same way), then encodes and writes it.
So the coarse levels are written while level 0 still is, not one after another at its
end: what is left when the last region lands is a block or two per level, not whole
levels, and the last block of a level is encoded while the next level's is.

A block downsamples on its own exactly as its whole level would when its extents are
multiples of the step (or it spans the whole axis): then each block feeds the next level
as soon as it is complete. Otherwise (an odd block size on a halved axis) the next level is
computed from the whole level once its last block is in.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from napari_n5zarr.block_grid import block_ranges, bounds
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export.blocks import N5Blocks

__all__ = ["CoarseLevels", "blockwise"]

Submit = Callable[..., None]


def blockwise(shape: Sequence[int], block: Sequence[int], step: Sequence[int]) -> bool:
    """True when every block of a level of ``shape`` downsamples by ``step`` on its own
    exactly as the whole level does (each window of ``step`` lies inside one block)."""
    return all(f == 1 or b >= n or b % f == 0 for n, b, f in zip(shape, block, step, strict=True))


class CoarseLevels:
    """Levels ``targets`` (consecutive, each ``steps[k]`` coarser than the one before it),
    in memory. :meth:`add` puts a piece of the first; finished blocks go to ``submit``
    (``submit(fn, *args)`` runs ``fn(*args)`` on a worker thread)."""

    def __init__(
        self,
        targets: Sequence[N5Blocks],
        steps: Sequence[Sequence[int]],
        method: pyramid.Method,
        submit: Submit,
    ) -> None:
        if len(steps) != len(targets) - 1:
            raise ValueError("one step between consecutive coarse levels")
        self.targets = list(targets)
        self.steps = [tuple(s) for s in steps]
        self.method = method
        self.submit = submit
        # no zeros: every voxel is filled (once, counted in _missing) before its block is read
        self.arrays = [np.empty(t.shape, dtype=t.dtype) for t in self.targets]
        # voxels still missing per block of each level; blocks not yet fed to the next level
        self._missing = [self._block_sizes(t) for t in self.targets]
        self._unfed = [t.nblocks for t in self.targets]
        self._lock = threading.Lock()

    @staticmethod
    def _block_sizes(t: N5Blocks) -> np.ndarray:
        edges = [
            np.minimum(b, n - np.arange(0, n, b)) for n, b in zip(t.shape, t.block, strict=True)
        ]
        sizes = np.ones(t.grid, dtype=np.int64)
        for axis, e in enumerate(edges):
            sizes = sizes * e.reshape([-1 if a == axis else 1 for a in range(len(edges))])
        return sizes

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)

    def add(self, start: Sequence[int], value: np.ndarray) -> None:
        """Put ``value`` at ``start`` of the first level (each voxel exactly once)."""
        self._fill(0, tuple(start), value)

    def _fill(self, k: int, start: tuple[int, ...], value: np.ndarray) -> None:
        target = self.targets[k]
        region = tuple(slice(s, s + n) for s, n in zip(start, value.shape, strict=True))
        self.arrays[k][region] = value
        ranges = block_ranges(
            start, [s + n for s, n in zip(start, value.shape, strict=True)], target.block
        )
        complete = []
        with self._lock:
            missing = self._missing[k]
            for index in itertools.product(*ranges):
                lo = [max(s, i * b) for s, i, b in zip(start, index, target.block, strict=True)]
                hi = [
                    min(s + n, (i + 1) * b)
                    for s, n, i, b in zip(start, value.shape, index, target.block, strict=True)
                ]
                missing[index] -= math.prod(h - low for low, h in zip(lo, hi, strict=True))
                if missing[index] == 0:
                    complete.append(index)
                elif missing[index] < 0:
                    raise RuntimeError(
                        f"{target.prefix}: block {index} filled twice"
                    )  # a bug, never data
        for index in complete:
            self.submit(self._write_block, k, index)

    def _write_block(self, k: int, index: tuple[int, ...]) -> None:
        """Feed block ``index`` of level ``k`` to level ``k + 1``, then encode and write it:
        the next level's block, once complete, is written by another thread meanwhile (the
        last blocks of the pyramid are not written one after another)."""
        target = self.targets[k]
        region = bounds(index, target.block, target.shape)
        value = self.arrays[k][region]
        if k + 1 < len(self.targets):
            self._feed(k, region, value)
        target[region] = value

    def _feed(self, k: int, region: tuple[slice, ...], value: np.ndarray) -> None:
        """Level ``k + 1`` from block ``region`` (``value``) of level ``k``, or from all of
        level ``k`` once its last block is in when blocks do not downsample on their own."""
        target, step = self.targets[k], self.steps[k]
        if blockwise(target.shape, target.block, step):
            start = tuple(r.start // f for r, f in zip(region, step, strict=True))
            self._fill(k + 1, start, pyramid.downsample_block(value, step, self.method))
            return
        with self._lock:
            self._unfed[k] -= 1
            last = self._unfed[k] == 0
        if last:  # every block of the level is in (each was complete when handed out)
            self._fill(
                k + 1,
                (0,) * target.ndim,
                pyramid.downsample_block(self.arrays[k], step, self.method),
            )

    def done(self) -> bool:
        """True when every block of every level was handed to ``submit``."""
        with self._lock:
            return all(not m.any() for m in self._missing)

    def describe(self) -> dict[str, Any]:  # for error messages of a bug, never data
        return {t.prefix: int(m.sum()) for t, m in zip(self.targets, self._missing, strict=True)}
