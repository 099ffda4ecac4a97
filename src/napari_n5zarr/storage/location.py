"""A path or URL as the user typed it, parsed once: the library's one location parser.

Leaf module (standard library only): :func:`napari_n5zarr.access.base_store` picks a store
with it; the reader, the tree, the browser and the CLI name and compare locations with it.
Rules: ``file://`` is a local path; any other ``scheme://`` is a URL (served by fsspec);
``~`` is expanded for local paths; a metadata file (``attributes.json``/``zarr.json``)
stands for the node (folder) holding it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON

METADATA_FILES = (N5_JSON, ZARR_JSON)
"""The metadata documents of an N5 / Zarr v3 node: pointing at one means its folder."""

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_FILE = "file://"


def is_url(location: str | os.PathLike[str]) -> bool:
    """True for ``scheme://...`` other than ``file://`` (s3, gs, http(s), memory, ...)."""
    text = os.fspath(location)
    return bool(_URL.match(text)) and not text.startswith(_FILE)


def strip_file_scheme(location: str | os.PathLike[str]) -> str:
    """The text without a leading ``file://`` (anything else unchanged)."""
    return os.fspath(location).removeprefix(_FILE)


def local_path(location: str | os.PathLike[str]) -> Path | None:
    """The local path (``~`` expanded, ``file://`` removed), or None for a URL."""
    text = os.fspath(location)
    if is_url(text):
        return None
    return Path(strip_file_scheme(text)).expanduser()


def real_path(location: str | os.PathLike[str]) -> str | None:
    """The canonical local path (symlinks resolved) to compare two locations, or None for
    a URL."""
    path = local_path(location)
    return None if path is None else os.path.realpath(path)


def node_location(location: str | os.PathLike[str]) -> str:
    """The node to open: a URL without its trailing slash; a local path with ``file://``
    removed, ``~`` expanded, and a metadata file replaced by its folder."""
    text = os.fspath(location)
    path = local_path(text)
    if path is None:
        return text.rstrip("/")
    if path.name in METADATA_FILES:
        path = path.parent
    return str(path)


def suffix(location: str | os.PathLike[str]) -> str:
    """Lower-case extension of the last segment (``.zip``, ``.xml``, ``.n5``, or "")."""
    name = os.fspath(location).rstrip("/").rsplit("/", 1)[-1]
    return os.path.splitext(name)[1].lower()


def join(root: str | os.PathLike[str], path: str) -> str:
    """The location of ``path`` (slash-separated, relative) under ``root`` (path or URL)."""
    base = os.fspath(root).rstrip("/")
    return f"{base}/{path}" if path else base


def display_name(location: str | os.PathLike[str]) -> str:
    """Last segment of a path or URL (``data.n5``)."""
    text = os.fspath(location)
    return text.rstrip("/").rsplit("/", 1)[-1] or text
