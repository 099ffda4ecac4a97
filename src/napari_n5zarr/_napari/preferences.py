"""Make napari's "remember this choice" for one N5 folder apply to every ``*.n5`` folder.

napari offers every dropped folder to each reader that accepts folders (its own reader
too), so the first ``.n5`` folder brings up "Choose reader". Ticking "Remember this
choice" stores that one folder's absolute path (``/data/a.n5/``, or ``/data/a.n5/em/``
for a group dropped from inside one) in ``settings.plugins.extension2reader``; the next
container would ask again. When such an entry names this plugin, :func:`remember_n5_folders`
adds the pattern ``*.n5/*`` beside it (unless the user already chose a reader for it), so
every ``.n5`` folder and every group inside one opens with this plugin from then on.
napari matches a dropped folder as its real path plus a separator (``/data/b.n5/em/``) with
``fnmatch``, whose ``*`` also matches separators: ``*.n5/*`` covers the folder itself and
all of its groups, where ``*.n5/`` covered only the folder. Preferences > Plugins lists
(and removes) it.

The pattern is offered once: a file beside napari's settings (:data:`STATE_FILE`) records
that it was, so a person who removes ``*.n5/*`` keeps it removed (in this session and the
next ones).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

PLUGIN = "napari-n5zarr"
N5_FOLDERS = f"*.n5{os.sep}*"
"""An ``.n5`` folder and every group inside it (see the module docstring)."""

STATE_FILE = "napari-n5zarr.json"
"""Beside napari's settings file: ``{"n5_folders_offered": true}`` once ``*.n5/*`` was offered."""

_watched: list[Any] = []  # the settings object watched (napari may replace it, e.g. in tests)
_offered_here: set[str] = set()  # state files marked in this process (or "" without one)


def _state_path(settings: Any) -> Path | None:
    config = getattr(settings, "config_path", None)
    if not config or os.fspath(config) == os.devnull:
        return None
    return Path(config).parent / STATE_FILE


def _offered(settings: Any) -> bool:
    """Whether ``*.n5/*`` was offered already (then the person's choice stands)."""
    path = _state_path(settings)
    if str(path or "") in _offered_here:
        return True
    if path is None:
        return False
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("n5_folders_offered") is True
    except (OSError, ValueError, AttributeError):
        return False


def _mark_offered(settings: Any) -> None:
    path = _state_path(settings)
    _offered_here.add(str(path or ""))
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"n5_folders_offered": True}), encoding="utf-8")
        except OSError:  # a read-only config folder: offered once per session then
            pass


def in_n5_folder(pattern: str) -> bool:
    """``pattern`` is an absolute folder (napari's trailing separator) that is an ``.n5``
    folder or inside one."""
    if not (os.path.isabs(pattern) and pattern.endswith(("/", os.sep))):
        return False
    parts = pattern.replace(os.sep, "/").split("/")
    return any(part.lower().endswith(".n5") for part in parts)


def generalize(mapping: dict[str, str]) -> dict[str, str] | None:
    """``mapping`` plus ``*.n5/*`` -> this plugin when it maps an absolute folder that is (or
    is inside) an ``.n5`` folder to this plugin and ``*.n5/*`` is not set yet; None when
    nothing changes."""
    if N5_FOLDERS in mapping:
        return None
    if any(plugin == PLUGIN and in_n5_folder(pattern) for pattern, plugin in mapping.items()):
        return {**mapping, N5_FOLDERS: PLUGIN}
    return None


def _on_change(event: Any = None) -> None:
    from napari.settings import get_settings

    settings = get_settings()
    plugins = settings.plugins
    mapping = dict(plugins.extension2reader)
    if mapping.get(N5_FOLDERS) == PLUGIN:
        _mark_offered(settings)  # set (by us or the person): removing it later is their choice
        return
    if _offered(settings):
        return  # offered once already: the person removed it, and that stands
    updated = generalize(mapping)
    if updated is None:
        return
    _mark_offered(settings)
    plugins.extension2reader = updated
    try:
        from napari.utils.notifications import show_info

        show_info(
            "napari-n5zarr will open every *.n5 folder and the groups in it from now on (Preferences > Plugins to change it)"
        )
    except Exception:
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
    except Exception:
        pass
