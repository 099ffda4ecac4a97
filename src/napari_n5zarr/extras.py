"""Which optional extra a missing module belongs to, in one line a person can act on."""

from __future__ import annotations

EXTRAS = {"aiohttp": "http", "requests": "http", "s3fs": "s3", "gcsfs": "gcs", "distributed": "distributed", "napari": "qt"}
"""Missing module -> ``pip install 'napari-n5zarr[EXTRA]'``."""


def missing_extra(exc: BaseException) -> str | None:
    """``"... needs s3fs: pip install 'napari-n5zarr[s3]'"`` when ``exc`` says a backend
    module is missing (ModuleNotFoundError, or fsspec's "Install s3fs to access S3")."""
    if not isinstance(exc, ImportError):
        return None
    name = (getattr(exc, "name", None) or "").split(".")[0]
    text = str(exc).lower()
    for module, extra in EXTRAS.items():
        quoted = (f"'{module}'", f'"{module}"', f"install {module}", f"no module named {module}")
        if name == module or any(q in text for q in quoted):
            return f"this needs {module}, which is not installed: pip install 'napari-n5zarr[{extra}]'"
    return None


def describe(exc: BaseException) -> str:
    """One line for a person: the missing extra, else the error's own message."""
    return missing_extra(exc) or str(exc) or type(exc).__name__
