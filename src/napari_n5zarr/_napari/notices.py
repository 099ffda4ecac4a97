"""What the napari face tells people in words, shared by the layer builder and the
proofreading widgets (so neither imports the other for it): notifications, the read-only
labels notice, the unsaved-edits marker on layer names."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from napari_n5zarr import spatial

UNSAVED_MARKER = " *"
"""Appended to a labels layer's name while it holds unsaved edits (see :mod:`~napari_n5zarr._napari.proofread`)."""


def plain_name(name: str) -> str:
    """A layer's name without the :data:`UNSAVED_MARKER` (what is saved or exported under it)."""
    return name[: -len(UNSAVED_MARKER)] if name.endswith(UNSAVED_MARKER) else name


def unused_destination(folder: Path, name: str, tag: str, fallback: str) -> Path:
    """``<folder>/<name>-<tag>.n5`` for a new container named after a layer (the name made
    folder-safe, ``fallback`` when nothing is left), ``-<tag>-2.n5``... while taken."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or fallback
    candidate, n = folder / f"{stem}-{tag}.n5", 2
    while candidate.exists():
        candidate, n = folder / f"{stem}-{tag}-{n}.n5", n + 1
    return candidate


READ_ONLY_CAUSES = (
    ("label multiset", "Paintera label multisets"),
    ("not a local folder", "not a local folder"),
    ("is read-only", "a read-only folder"),
    ("not integer", "not integer labels"),
    ("time series", "a time series"),
)
"""(words in the reason, the short cause the notice names); anything else is "not editable in place"."""
NOT_IN_PLACE = "not editable in place"


CHECK_OUT_CAUSES = ("not a local folder", "a read-only folder")
"""Causes a region check-out (``n5zarr convert --region``) cures: the data are fine, only not here."""


def refused_message(
    name: str, reason: str, *, location: str | None = None, region: str | None = None
) -> str:
    """The one notice of a first paint on read-only labels: a short sentence (napari's
    notification shows one line of about 300 px until expanded), then how to edit a copy:
    with the pyramid's ``location`` and the ``region`` in view, the check-out command."""
    short = next((cause for words, cause in READ_ONLY_CAUSES if words in reason), NOT_IN_PLACE)
    first = f"{name.rsplit('/', 1)[-1] or 'This layer'} is read-only ({short})."
    detail = f"{reason.rstrip('. ')}. " if short == NOT_IN_PLACE and reason else ""
    if location and region and short in CHECK_OUT_CAUSES:
        copy = f"{plain_name(name).rsplit('/', 1)[-1] or 'labels'}-region.n5"
        return f"{first}\nTo edit this view, check it out: `n5zarr convert {location} {copy} --region {region}`, then open {copy}."
    return f"{first}\n{detail}To edit it, open a copy made with `n5zarr convert`."


def refused_notice(name: str) -> Callable[[str], None]:
    return lambda reason: notify_napari("warning", refused_message(name, reason))


def notify_napari(level: str, message: str) -> None:
    """A napari notification (falls back to a warning outside napari)."""
    try:
        from napari.utils import notifications
    except ImportError:
        import warnings

        warnings.warn(message, spatial.SkippedNodeWarning, stacklevel=3)
        return
    show = {"error": notifications.show_error, "info": notifications.show_info}.get(
        level, notifications.show_warning
    )
    show(message)


def in_gui_thread(call: Callable[[], None]) -> None:
    """``call()`` now on napari's thread, queued to it from another (dropped without Qt)."""
    import threading

    if threading.current_thread() is threading.main_thread():
        call()
        return
    from qtpy.QtCore import QCoreApplication
    from superqt.utils import ensure_main_thread

    if QCoreApplication.instance() is not None:
        ensure_main_thread(call)()
