"""Which optional extra a missing module belongs to, in one line a person can act on.

The library raises :class:`~napari_n5zarr.errors.MissingPackageError` carrying that line
(:func:`needs_package`) where it first needs an optional package, so ``napari_n5zarr.open``,
the napari reader and the CLI all say the same ``pip install``.
"""

from __future__ import annotations

from napari_n5zarr.errors import MissingPackageError

EXTRAS = {
    "aiohttp": "http",
    "requests": "http",
    "s3fs": "s3",
    "gcsfs": "gcs",
    "distributed": "distributed",
    "napari": "qt",
}
"""Missing module -> ``pip install 'napari-n5zarr[EXTRA]'``."""


def _missing_module(exc: BaseException) -> str | None:
    """The module of :data:`EXTRAS` that ``exc`` says is missing (ModuleNotFoundError, or
    fsspec's "Install s3fs to access S3"), else None."""
    if not isinstance(exc, ImportError):
        return None
    name = (getattr(exc, "name", None) or "").split(".")[0]
    text = str(exc).lower()
    for module in EXTRAS:
        quoted = (f"'{module}'", f'"{module}"', f"install {module}", f"no module named {module}")
        if name == module or any(q in text for q in quoted):
            return module
    return None


def missing_extra(exc: BaseException, what: str = "this") -> str | None:
    """``"WHAT needs s3fs, which is not installed: pip install 'napari-n5zarr[s3]'"`` when
    ``exc`` says a backend module is missing; the message of a :class:`MissingPackageError`
    as it is; None for any other error."""
    if isinstance(exc, MissingPackageError):
        return str(exc)
    module = _missing_module(exc)
    if module is None:
        return None
    return f"{what} needs {module}, which is not installed: pip install 'napari-n5zarr[{EXTRAS[module]}]'"


def needs_package(exc: ImportError, what: str) -> ImportError:
    """``exc`` as a :class:`MissingPackageError` naming ``what`` needed it and the
    ``pip install`` that adds it; ``exc`` itself when no extra provides the module."""
    module = _missing_module(exc)
    if module is None or isinstance(exc, MissingPackageError):
        return exc
    return MissingPackageError(missing_extra(exc, what), name=module)


def describe(exc: BaseException) -> str:
    """One line for a person: the missing extra, else the error's own message."""
    return missing_extra(exc) or str(exc) or type(exc).__name__
