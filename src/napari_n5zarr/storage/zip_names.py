"""Member names of a zip archive that name one place inside it, or an error.

A member named ``/x/attributes.json`` (absolute), ``../x`` or ``./x`` (a step out or in
place), ``x\\y`` (a Windows separator) or ``x//y`` (an empty part) has no single place in
a hierarchy: zarr's ZipStore lists ``/x`` under the root as a child named ``""``, which
made the root its own child (``tree`` recursed until Python gave up, the reader added
copies of one dataset). Such an archive is refused in one line naming the member.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from napari_n5zarr.errors import N5FormatError


def odd_part(name: str) -> str | None:
    """Why ``name`` names no place in the archive (None: a plain relative path; a
    trailing ``/`` marks a folder entry)."""
    if "\\" in name:
        return "a backslash"
    if name.startswith("/"):
        return "an absolute path"
    parts = name[:-1].split("/") if name.endswith("/") else name.split("/")
    if "" in parts:
        return "an empty part"
    if ".." in parts:
        return "a '..' part"
    if "." in parts:
        return "a '.' part"
    return None


def check_member_names(names: Iterable[str], archive: str | os.PathLike[str]) -> None:
    """Raise :class:`~napari_n5zarr.errors.N5FormatError` naming the first member whose
    name is no plain relative path (see :func:`odd_part`)."""
    for name in names:
        why = odd_part(name)
        if why is not None:
            shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)
            raise N5FormatError(
                f"{os.fspath(archive)}: zip member '{shown}' has {why}; not a valid N5/Zarr zip (nothing read)"
            )
