"""attributes.json <-> zarr.json on dicts, and the one parser for metadata documents.

N5 order is kept: zarr ``shape`` == N5 ``dimensions`` and the chunk key ``i/j/k`` is the N5
block path; the ``n5_default`` codec's transpose makes the bytes F order. The fields and
their validation live in :mod:`napari_n5zarr.n5.model`; these are its dict-level faces.
"""

from __future__ import annotations

import json
from typing import Any

from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.constants import MAX_JSON_DEPTH, N5_VERSION, VERSION_KEY
from napari_n5zarr.n5.limits import check_metadata_size, check_nesting
from napari_n5zarr.n5.model import N5GroupMetadata, parse_attributes, parse_zarr_json

JSONDict = dict[str, Any]

GROUP_DOC: JSONDict = N5GroupMetadata().to_zarr_json()
"""The document of a group without attributes (an implicit N5 group)."""


def parse_document(raw: bytes, where: str | None) -> Any:
    """The JSON document in ``raw`` (read from ``where``, a path or URL, used as the message
    prefix when given); N5MetadataError if it is too large, not JSON, or nested too deeply.
    The one parser for every metadata document the library reads."""
    prefix = f"{where}: " if where else ""
    check_metadata_size(len(raw), where)
    try:
        doc = json.loads(raw)
    except ValueError as e:  # includes UnicodeDecodeError
        raise N5MetadataError(f"{prefix}not valid JSON ({e})") from None
    except RecursionError:
        raise N5MetadataError(f"{prefix}JSON nested deeper than {MAX_JSON_DEPTH} levels; refused as bad metadata") from None
    check_nesting(doc, where)
    return doc


def attributes_to_zarr(attributes: Any, path: str = "/") -> JSONDict:
    """Translate an N5 ``attributes.json`` document into a Zarr v3 ``zarr.json`` document.

    Raises N5MetadataError (message starting with ``path``) for anything that is not valid N5.
    """
    return parse_attributes(attributes, path).to_zarr_json()


def zarr_to_attributes(doc: Any, existing: JSONDict | None = None, *, root: bool = False, path: str = "/") -> JSONDict:
    """Translate a Zarr v3 ``zarr.json`` document into an N5 ``attributes.json`` document.

    ``existing`` (the current attributes.json) keeps its version key; ``root`` adds
    ``"n5": "4.0.0"`` as N5 requires at the container root.
    """
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    version = (existing or {}).get(VERSION_KEY) or (attrs.get(VERSION_KEY) if isinstance(attrs, dict) else None)
    if root and not version:
        version = N5_VERSION
    return parse_zarr_json(doc, version or None, path).to_json()
