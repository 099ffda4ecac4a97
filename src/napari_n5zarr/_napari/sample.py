"""Sample data: a small multiscale 3D image + labels in N5, built locally (no download).

The container is written once with :func:`napari_n5zarr.export` under the user cache
folder (``$NAPARI_N5ZARR_CACHE`` or ``$XDG_CACHE_HOME/napari-n5zarr``, by default
``~/.cache/napari-n5zarr``) and opened through the reader like any other N5. Its labels open
editable, so saved edits stay in it: ``n5zarr view --reset-sample`` rebuilds it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from napari_n5zarr.n5.constants import N5_JSON

SAMPLE_NAME = "blobs-v1.n5"
SHAPE = (32, 192, 256)  # napari order: z, y, x
SCALE = (1.0, 0.25, 0.25)  # micrometer
CHUNKS = (16, 64, 64)


def cache_dir() -> Path:
    """Where the sample lives."""
    if os.environ.get("NAPARI_N5ZARR_CACHE"):
        return Path(os.environ["NAPARI_N5ZARR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "napari-n5zarr"


def blobs(
    shape: tuple[int, ...] = SHAPE, n: int = 40, seed: int = 7
) -> tuple[np.ndarray, np.ndarray]:
    """(image uint16, labels uint32) of ``n`` Gaussian blobs, napari order, deterministic."""
    rng = np.random.default_rng(seed)
    image = np.zeros(shape, np.float32)
    best = np.zeros(shape, np.float32)
    labels = np.zeros(shape, np.uint32)
    anisotropy = np.array([0.25, 1.0, 1.0])[-len(shape) :]
    for i in range(n):
        centre = rng.uniform(0, shape)
        sigma = rng.uniform(5, 16) * anisotropy
        box = tuple(
            slice(max(0, int(c - 4 * s)), min(d, int(c + 4 * s) + 1))
            for c, s, d in zip(centre, sigma, shape, strict=True)
        )
        grids = np.ogrid[box]
        blob = np.exp(
            -0.5 * sum(((g - c) / s) ** 2 for g, c, s in zip(grids, centre, sigma, strict=True))
        )
        blob = blob.astype(np.float32)
        image[box] += blob * rng.uniform(0.5, 1.0)
        mine = (blob > 0.5) & (blob > best[box])
        labels[box][mine] = i + 1
        np.maximum(best[box], blob, out=best[box])
    image += rng.normal(0, 0.02, shape).astype(np.float32)
    return np.clip(image * 20000, 0, 65535).astype(np.uint16), labels


def make_sample(folder: Path | None = None, *, reset: bool = False) -> Path:
    """The sample container (built on first use, then atomically moved into place). With
    ``reset``, rebuilt: labels edited and saved into it are back as built (``n5zarr view --reset-sample``)."""
    from napari_n5zarr.write.export.exporter import export

    folder = folder or cache_dir()
    path = folder / SAMPLE_NAME
    if (path / N5_JSON).is_file() and not reset:
        return path
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".blobs-", dir=folder))
    try:
        image, labels = blobs()
        common: dict[str, Any] = {
            "scale": SCALE,
            "units": "micrometer",
            "axis_labels": ("z", "y", "x"),
            "chunks": CHUNKS,
            "levels": 3,
        }
        export(image, tmp / SAMPLE_NAME, path="raw", **common)
        export(labels, tmp / SAMPLE_NAME, path="labels", labels=True, **common)
        if reset and (path.exists() or path.is_symlink()):
            path.rename(
                tmp / "replaced"
            )  # removed with tmp (a link itself, never what it points to)
        try:
            (tmp / SAMPLE_NAME).rename(path)
        except OSError:  # built meanwhile by another process
            if not (path / N5_JSON).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def sample_blobs() -> list[tuple]:
    """npe2 sample-data command: the blobs sample through the reader."""
    from napari_n5zarr._napari.reader import read

    return read(
        make_sample()
    )  # as a dropped folder: the viewer gets the save shortcut and close guard
