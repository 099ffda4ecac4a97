"""napari-n5zarr: N5 as a first-class citizen of Zarr v3 and napari.

The public API is imported lazily so that ``import napari_n5zarr`` never imports
Qt or napari (and stays cheap).
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "N5DefaultCodec": "napari_n5zarr.n5.codec",
    "LZ4BlockCodec": "napari_n5zarr.n5.lz4block",
    "N5DefaultStore": "napari_n5zarr.n5.stores",
    "ImplicitGroupStore": "napari_n5zarr.n5.stores",
    "N5FormatError": "napari_n5zarr.n5.errors",
    "open": "napari_n5zarr.open",
    "export": "napari_n5zarr.export",
}

__all__ = [*_LAZY, "__version__"]

if TYPE_CHECKING:
    from napari_n5zarr.export import export
    from napari_n5zarr.n5.codec import N5DefaultCodec
    from napari_n5zarr.n5.errors import N5FormatError
    from napari_n5zarr.n5.lz4block import LZ4BlockCodec
    from napari_n5zarr.n5.stores import ImplicitGroupStore, N5DefaultStore
    from napari_n5zarr.open import open


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'napari_n5zarr' has no attribute {name!r}")


class _Package(ModuleType):
    """Keeps ``open``/``export`` the functions: importing the submodules of the same name
    (``napari_n5zarr.open``, ``napari_n5zarr.export``) would otherwise rebind them to the
    modules (the import system sets the package attribute)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
