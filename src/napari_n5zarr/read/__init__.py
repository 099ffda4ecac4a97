"""Reading: path/URL -> node -> pyramid -> lazy levels; the one hierarchy walker.

The entry is :func:`open_images` (:mod:`napari_n5zarr.read.images`), loaded on first use so
that importing a sibling (the tree walker, the CLI's ``info``) does not load the levels.
"""

from typing import Any

__all__ = ["open_images"]


def __getattr__(name: str) -> Any:
    if name == "open_images":
        from napari_n5zarr.read.images import open_images

        return open_images
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
