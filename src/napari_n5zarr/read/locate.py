"""What a path or URL holds, and which node to open for it.

* :func:`resolve`: the node to open for what a user named (a folder, a metadata file, a
  ``.zip``, a URL, or a BigDataViewer ``.xml``, whose N5 folder is opened with the XML's
  voxel sizes), as a :class:`Source`; :func:`require` the same, raising for an XML that
  cannot be followed (the CLI's commands and :func:`~napari_n5zarr.write.convert.convert.convert`).
* :func:`is_n5`: does it hold N5 or Zarr v3 data? Cheap: a few metadata reads, never blocks.
* BigDataViewer XML lookup: :func:`bdv_xml_target`, :func:`sibling_bdv_xml`.

Parsing of the text itself is :mod:`napari_n5zarr.storage.location`'s (the one parser).
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napari_n5zarr.n5.constants import CODEC_NAME, N5_JSON, ZARR_JSON
from napari_n5zarr.storage.location import (
    METADATA_FILES,
    display_name,
    is_url,
    local_path,
    node_location,
    suffix,
)

if TYPE_CHECKING:
    from napari_n5zarr.spatial import BdvSetup

__all__ = [
    "Source",
    "bdv_xml_target",
    "display_name",
    "is_n5",
    "require",
    "resolve",
    "sibling_bdv_xml",
]

ANCESTOR_LEVELS = 16
"""How many folders above a path are searched for the container's attributes.json."""
CHILDREN_SNIFFED = 256
"""Most entries of a folder looked at for a child with N5 metadata."""
XML_MAX_FILES = 32
"""Most ``*.xml`` files next to a container read to find its BigDataViewer XML."""
XML_MAX_BYTES = 8 * 2**20
"""Larger XML files are not BigDataViewer XML (not read)."""
ZARR_JSON_MAX_BYTES = 2**20
"""Larger zarr.json files are not sniffed."""

_N5_URL = re.compile(r"\.n5(/|$)", re.IGNORECASE)


@dataclass(frozen=True)
class Source:
    """What to open for a location a user named."""

    location: str
    """As given (``file://`` and all)."""
    target: str
    """The node to open: a folder, ``.zip`` or URL (an XML's N5 folder; a metadata file's folder)."""
    bdv_setups: dict[int, BdvSetup] | None = None
    """Voxel sizes of a BigDataViewer XML that names ``target`` (given, or found beside it)."""

    @property
    def name(self) -> str:
        """Display name of the target (``data.n5``)."""
        return display_name(self.target)


def resolve(location: str | os.PathLike[str]) -> Source:
    """The :class:`Source` for ``location``; never raises (an unusable location gives a
    target that fails to open with a clear message)."""
    given = os.fspath(location)
    target = node_location(given)
    if is_url(target):
        return Source(given, target)
    path = Path(target)
    if suffix(target) == ".xml" and (found := bdv_xml_target(path)):
        return Source(given, found[0], found[1])
    return Source(given, target, sibling_bdv_xml(path))


def require(location: str | os.PathLike[str]) -> Source:
    """:func:`resolve`, but a local ``.xml`` must be a BigDataViewer N5 XML whose N5 folder
    exists.

    Raises
    ------
    NodeNotFoundError
        For a missing XML file, or an XML naming a folder that does not exist.
    N5FormatError
        For an XML file that is no BigDataViewer XML with an N5 image loader (``bdv.n5``).
    """
    from napari_n5zarr.errors import N5FormatError, NodeNotFoundError

    text = node_location(location)
    if is_url(text) or suffix(text) != ".xml":
        return resolve(location)
    path = Path(text)
    if path.is_dir():  # a folder named *.xml is a folder
        return resolve(location)
    if not path.exists():
        raise NodeNotFoundError(f"no such file: {path}")
    found = bdv_xml_target(path)
    if found is None:
        raise N5FormatError(f"{path}: not a BigDataViewer XML with an N5 image loader (bdv.n5)")
    if not Path(found[0]).is_dir():
        raise NodeNotFoundError(f"{path} points at {found[0]}, which does not exist")
    return Source(os.fspath(location), found[0], found[1])


# ---------------------------------------------------------------------------
# BigDataViewer XML
# ---------------------------------------------------------------------------


def bdv_xml_target(xml: Path) -> tuple[str, dict[int, BdvSetup]] | None:
    """(N5 folder, setups) of a BigDataViewer XML with a ``bdv.n5`` loader, else None."""
    from napari_n5zarr.spatial.pyramids import bdv_xml
    from napari_n5zarr.storage.files import read_regular_file

    try:  # a regular file only (a FIFO or a link to /dev/zero named *.xml must not block or fill memory)
        raw = read_regular_file(
            xml, lambda size: (0, size if size <= XML_MAX_BYTES else 0), metadata=False
        )
    except OSError:
        return None
    if not raw:
        return None
    try:
        n5, setups = bdv_xml(raw.decode(errors="replace"))
    except OSError:
        return None
    if n5 is None:
        return None
    path = Path(n5) if Path(n5).is_absolute() else xml.parent / n5
    return str(path), setups


def sibling_bdv_xml(target: Path) -> dict[int, BdvSetup] | None:
    """Setups of a BigDataViewer XML next to the folder ``target`` that points at it."""
    try:
        xmls = sorted(target.parent.glob("*.xml"))[:XML_MAX_FILES] if target.is_dir() else []
        here = target.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symbolic link loop (Python < 3.13)
        return None
    for xml in xmls:
        found = bdv_xml_target(xml)
        if found and Path(found[0]).resolve() == here:
            return found[1]
    return None


# ---------------------------------------------------------------------------
# is it N5 / Zarr v3?
# ---------------------------------------------------------------------------


def is_n5(location: str | os.PathLike[str]) -> bool:
    """True for an N5 container/group/dataset, a path inside one, a ``.n5`` folder, a zip
    holding N5, a BigDataViewer N5 XML, or a Zarr v3 node (plain or ``n5_default``)."""
    text = os.fspath(location)
    p = local_path(text)
    if p is None:
        return _is_n5_url(text)
    if p.name in METADATA_FILES:
        if not p.is_file():
            return False
        p = p.parent
    if p.is_file():
        if p.suffix.lower() == ".xml":
            return bdv_xml_target(p) is not None
        return p.suffix.lower() == ".zip" and zip_holds_n5(p)
    if not p.is_dir():
        return False
    if (p / N5_JSON).is_file() or p.suffix.lower() == ".n5" or _is_zarr_v3(p / ZARR_JSON):
        return True
    if _child_holds_n5(p):
        return True
    return any((a / N5_JSON).is_file() for a in list(p.parents)[:ANCESTOR_LEVELS])


def _is_n5_url(url: str) -> bool:
    if _N5_URL.search(url):
        return True
    try:  # one metadata request
        from napari_n5zarr.access import base_store
        from napari_n5zarr.zarr_internals import sync

        return bool(sync(base_store(url.rstrip("/")).exists(N5_JSON)))
    except Exception:  # a sniffer answers no, whatever the backend raises
        return False


def _zarr_json(path: Path) -> dict[str, Any] | None:
    from napari_n5zarr.storage.files import read_regular_file

    try:  # a regular file only: a FIFO named zarr.json must not block the sniffer
        raw = read_regular_file(
            path, lambda size: (0, size if size <= ZARR_JSON_MAX_BYTES else 0), metadata=False
        )
        doc = json.loads(raw) if raw else None
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _is_zarr_v3(zarr_json: Path) -> bool:
    doc = _zarr_json(zarr_json)
    return (
        doc is not None
        and doc.get("zarr_format") == 3
        and doc.get("node_type") in ("array", "group")
    )


def _uses_n5_codec(zarr_json: Path) -> bool:
    doc = _zarr_json(zarr_json)
    codecs = doc.get("codecs") if doc is not None else None
    return isinstance(codecs, list) and any(
        isinstance(c, dict) and c.get("name") == CODEC_NAME for c in codecs
    )


def _child_holds_n5(p: Path, limit: int = CHILDREN_SNIFFED) -> bool:
    """A container without a root attributes.json: some child folder has N5 metadata."""
    try:
        with os.scandir(p) as entries:
            for n, entry in enumerate(entries):
                if n >= limit:
                    break
                if entry.is_dir() and (
                    os.path.isfile(os.path.join(entry.path, N5_JSON))
                    or _uses_n5_codec(Path(entry.path) / ZARR_JSON)
                ):
                    return True
    except OSError:
        return False
    return False


def zip_holds_n5(p: Path) -> bool:
    """A zip with an attributes.json at its root or up to two folders down."""
    try:
        with zipfile.ZipFile(p) as z:
            return any(
                n == N5_JSON or (n.count("/") <= 2 and n.endswith("/" + N5_JSON))
                for n in z.namelist()
            )
    except (OSError, zipfile.BadZipFile):
        return False
