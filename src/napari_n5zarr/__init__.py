"""napari-n5zarr: N5 as a first-class citizen of Zarr v3 and napari.

The public API is imported lazily so that ``import napari_n5zarr`` never imports
Qt or napari (and stays cheap).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "N5DefaultCodec": "napari_n5zarr.n5.codec",
    "LZ4BlockCodec": "napari_n5zarr.n5.lz4block",
    "N5DefaultStore": "napari_n5zarr.n5.stores",
    "ImplicitGroupStore": "napari_n5zarr.n5.stores",
    "N5FormatError": "napari_n5zarr.errors",
    "open": "napari_n5zarr.access",
    "create_dataset": "napari_n5zarr.access",
    "export": "napari_n5zarr.write.export.exporter",
    "write_region": "napari_n5zarr.write.edit.save",
    "save_edits": "napari_n5zarr.write.edit.editable",
    "create_labels": "napari_n5zarr.write.edit.new_labels",
}

__all__ = [*_LAZY, "__version__"]

if TYPE_CHECKING:
    from napari_n5zarr.access import create_dataset, open
    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.n5.lz4block import LZ4BlockCodec
    from napari_n5zarr.n5.stores import ImplicitGroupStore, N5DefaultStore
    from napari_n5zarr.write.edit.editable import save_edits
    from napari_n5zarr.write.edit.new_labels import create_labels
    from napari_n5zarr.write.edit.save import write_region
    from napari_n5zarr.write.export.exporter import export


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'napari_n5zarr' has no attribute {name!r}")
