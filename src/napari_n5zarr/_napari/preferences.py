"""Make napari's "remember this choice" for one N5 folder apply to every ``*.n5`` folder.

napari offers every dropped folder to each reader that accepts folders (its own reader
too), so the first ``.n5`` folder brings up "Choose reader". Ticking "Remember this
choice" stores that one folder's absolute path (``/data/a.n5/``) in
``settings.plugins.extension2reader``; the next container would ask again. When such an
entry names this plugin, :func:`remember_n5_folders` adds the pattern ``*.n5/`` beside it
(unless the user already chose a reader for ``*.n5/``), so every ``.n5`` folder opens
with this plugin from then on. Preferences > Plugins lists (and removes) it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

PLUGIN = "napari-n5zarr"
N5_FOLDERS = f"*.n5{os.sep}"

_watched: list[Any] = []  # the settings object watched (napari may replace it, e.g. in tests)


def generalize(mapping: dict[str, str]) -> dict[str, str] | None:
    """``mapping`` plus ``*.n5/`` -> this plugin when it maps an absolute ``.n5`` folder to
    this plugin and ``*.n5/`` is not set yet; None when nothing changes."""
    if N5_FOLDERS in mapping:
        return None
    for pattern, plugin in mapping.items():
        folder = pattern.rstrip("/" + os.sep)
        if plugin == PLUGIN and os.path.isabs(pattern) and pattern.endswith(("/", os.sep)) and folder.lower().endswith(".n5"):
            return {**mapping, N5_FOLDERS: PLUGIN}
    return None


def _on_change(event: Any = None) -> None:
    from napari.settings import get_settings

    plugins = get_settings().plugins
    updated = generalize(dict(plugins.extension2reader))
    if updated is None:
        return
    plugins.extension2reader = updated
    try:
        from napari.utils.notifications import show_info

        show_info("napari-n5zarr will open every *.n5 folder from now on (Preferences > Plugins > File extension readers to change it)")
    except Exception:  # noqa: BLE001 (napari's notification API is optional here; the preference is already saved)
        pass


def remember_n5_folders() -> None:
    """Watch napari's reader preferences (once per settings object; only inside napari)."""
    if "napari" not in sys.modules:
        return
    try:
        from napari.settings import get_settings

        settings = get_settings()
        if _watched and _watched[0] is settings:
            return
        settings.plugins.events.extension2reader.connect(_on_change)
        _watched[:] = [settings]
        _on_change()  # a choice remembered in an earlier session
    except Exception:  # noqa: BLE001 (napari settings internals vary by version; the feature is a convenience)
        pass
