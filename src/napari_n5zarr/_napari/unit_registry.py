"""pint's application registry (napari's units) built from a disk cache of its definitions.

napari gives every layer pint units, so the first layer of a session builds pint's
application registry: parsing pint's definition files takes ~0.3 s, a third of the time
to a first frame. pint can cache the parsed definitions on disk (``cache_folder``, its own
feature, invalidated by pint's version and the files' contents); later sessions then build
the same registry in ~0.03 s. (pint 0.26 stores the registry's unit cache there too but
does not use it when loading: :func:`_cached_registry_class` does, or the gain would be a
quarter.) napari does not ask for it, so the reader does, once, before
its first unit lookup: when the application registry is still pint's untouched lazy one
(nobody has used units yet, so no unit or quantity of another registry exists), it is
replaced by an identical registry built with the cache (``pint.set_application_registry``).

The cache lives in the user's cache folder (``napari-n5zarr/pint``); ``N5ZARR_PINT_CACHE``
names another folder, or ``0`` to leave pint alone. Any failure (unwritable folder, a cache
file cut short by a concurrent writer) leaves pint's registry as it was and clears the
cache: pint then parses its files as usual.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

CACHE_ENV = "N5ZARR_PINT_CACHE"
"""Environment variable: a folder for the cache, or ``0`` to never touch pint's registry."""

_tried: list[bool] = []  # once per process
_lock = threading.Lock()  # readers may run in threads (the N5 browser)


def cache_folder() -> Path | None:
    """Where the parsed definitions are kept (None: turned off)."""
    setting = os.environ.get(CACHE_ENV, "").strip()
    if setting == "0":
        return None
    if setting:
        return Path(setting)
    import platformdirs  # a dependency of pint

    return platformdirs.user_cache_path("napari-n5zarr", appauthor=False) / "pint"


def use_cached_registry() -> bool:
    """Replace pint's untouched lazy application registry by the same registry built from
    the disk cache (see the module docstring). True when it did; never raises."""
    with _lock:
        if _tried:
            return False
        _tried.append(True)
        return _replace()


def _replace() -> bool:
    try:
        import pint
        from pint.registry import LazyRegistry

        current = pint.get_application_registry().get()
        if type(current) is not LazyRegistry:  # built already (units in use) or set by someone
            return False
        folder = cache_folder()
        if folder is None:
            return False
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            return False
        args, kwargs = current.__dict__["params"]  # what the lazy registry would be built with
        kwargs = {**kwargs, "on_redefinition": "raise", "cache_folder": folder}  # as LazyRegistry does
    except Exception:  # noqa: BLE001 (pint internals moved, no cache folder: pint as usual)
        return False
    try:
        registry = _cached_registry_class()(*args, **kwargs)
        registry.Unit("micrometer")  # it answers (a bad cache usually fails while building)
    except Exception:  # noqa: BLE001 (a cache file cut short or unreadable: start it again)
        shutil.rmtree(folder, ignore_errors=True)
        return False
    pint.set_application_registry(registry)
    return True


def _cached_registry_class() -> type:
    """``pint.UnitRegistry`` that uses the unit cache it finds on disk: pint 0.26 saves it
    after a full build but, finding it, keeps an empty one (then e.g.
    ``get_compatible_units`` answers nothing). With the loaded cache the registry answers
    as a freshly built one."""
    import pint

    class CachedUnitRegistry(pint.UnitRegistry):
        def _build_cache(self, loaded_files: object = None) -> None:
            disk = self._diskcache
            if loaded_files and disk:
                cache, _ = disk.load(loaded_files, "build_cache")
                if cache is not None:
                    self._cache = cache
                    self._caches[()] = cache  # as pint's context facet does after a build
                    return
            super()._build_cache(loaded_files)

    return CachedUnitRegistry
