"""N5 metadata: typed (:class:`N5DatasetMetadata`, :class:`N5GroupMetadata`) and as dicts
(``attributes.json`` <-> ``zarr.json``: :func:`attributes_to_zarr`, :func:`zarr_to_attributes`).

N5 order is kept: zarr ``shape`` == N5 ``dimensions`` and the chunk key ``i/j/k`` is the N5
block path; the ``n5_default`` codec's transpose makes the bytes F order.

One frozen dataclass per node kind, validated in one place (the dataset's constructor), read
from and written to both documents: N5's ``attributes.json`` (``from_json``/``to_json``) and
the Zarr v3 ``zarr.json`` that the N5 Default Store shows (``from_zarr_json``/``to_zarr_json``).
Everything that is not a reserved N5 key is kept in ``attributes``, as tensorstore's
``N5Metadata::extra_attributes``.

Light on purpose: importing this module imports no codec or compression library (they are
imported when a dataset is built, to check its compression).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING, Any

from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.constants import (
    BLOCK_SIZE,
    CODEC_NAME,
    COMPRESSION,
    DATA_TYPE,
    DIMENSIONS,
    LEGACY_COMPRESSION,
    MAX_BLOCK_BYTES_ENV,
    MAX_DIMENSION,
    N5_DTYPE_SIZES,
    N5_DTYPES,
    N5_VERSION,
    RESERVED_KEYS,
    SHARDING_KEYS,
    VERSION_KEY,
    check_nesting,
    max_block_bytes,
)

if TYPE_CHECKING:
    from typing import Self

    from napari_n5zarr.n5.codec import N5DefaultCodec

JSONDict = dict[str, Any]

__all__ = [
    "GROUP_DOC",
    "N5DatasetMetadata",
    "N5GroupMetadata",
    "attributes_to_zarr",
    "is_dataset",
    "parse_attributes",
    "parse_zarr_json",
    "user_attributes",
    "zarr_to_attributes",
]


def is_dataset(attributes: Mapping[str, Any]) -> bool:
    """True if the attributes describe an N5 dataset (array).

    As in n5-java, a node is a dataset when it has ``dimensions`` and ``dataType``; other
    nodes are groups, whatever else they hold (BigDataViewer setup groups carry a
    ``dataType`` of their own).
    """
    return DIMENSIONS in attributes and DATA_TYPE in attributes


def user_attributes(attributes: Mapping[str, Any]) -> JSONDict:
    """The attributes that belong to the user (all but reserved keys and the version)."""
    return {k: v for k, v in attributes.items() if k not in RESERVED_KEYS and k != VERSION_KEY}


def _prefixed(path: str | None, error: Exception) -> N5MetadataError:
    return N5MetadataError(f"{path}: {error}" if path else str(error))


def _check_document(doc: Any, path: str) -> None:
    """What every ``attributes.json`` must be: a JSON object, not too deep, not sharded."""
    if not isinstance(doc, dict):
        raise N5MetadataError(
            f"{path}: attributes.json must hold a JSON object, got {type(doc).__name__}"
        )
    check_nesting(doc, path)
    if "shardSize" in doc or isinstance(doc.get("codecs"), list):
        raise N5MetadataError(
            f"{path}: N5 datasets with {'/'.join(repr(k) for k in sorted(SHARDING_KEYS))} "
            "(experimental n5-java sharding) are not supported"
        )


def _check_zarr_v3(doc: Any, path: str) -> None:
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
        raise N5MetadataError(f"{path}: only Zarr v3 metadata can be stored as N5")


def _zarr_attributes(doc: JSONDict, path: str) -> Mapping[str, Any]:
    attrs = doc.get("attributes") or {}
    if not isinstance(attrs, Mapping):
        raise N5MetadataError(
            f"{path}: zarr.json 'attributes' must be an object, got {type(attrs).__name__}"
        )
    return attrs


@dataclass(frozen=True)
class N5GroupMetadata:
    """An N5 group: its attributes and, at a container root, the N5 version.

    Parameters
    ----------
    attributes
        Every key of the group's ``attributes.json`` except the version ``"n5"``. Groups may
        hold keys that are reserved in datasets (BigDataViewer setups carry a ``dataType``),
        but not both ``dimensions`` and ``dataType``: N5 would read a dataset.
    version
        The ``"n5"`` version key (``"4.0.0"``), or None where the document has none.

    Raises
    ------
    N5MetadataError
        If ``attributes`` would make the group read as a dataset.
    """

    attributes: Mapping[str, Any] = field(default_factory=dict)
    version: str | None = None

    def __post_init__(self) -> None:
        if is_dataset(self.attributes):
            raise N5MetadataError(
                "a group cannot hold both 'dimensions' and 'dataType' (N5 would read a dataset)"
            )

    @classmethod
    def from_json(cls, doc: Any, path: str = "/") -> Self:
        """The group described by an ``attributes.json`` document.

        Parameters
        ----------
        doc
            The parsed JSON document.
        path
            The document's path or URL, put in front of every error message.

        Returns
        -------
        N5GroupMetadata

        Raises
        ------
        N5MetadataError
            If ``doc`` is not a JSON object, is nested too deeply, uses n5-java's sharding,
            or describes a dataset (use :func:`parse_attributes` to accept either).
        """
        _check_document(doc, path)
        return cls._from_checked(doc, path)

    @classmethod
    def _from_checked(cls, doc: JSONDict, path: str) -> Self:
        try:
            return cls({k: v for k, v in doc.items() if k != VERSION_KEY}, doc.get(VERSION_KEY))
        except N5MetadataError as e:
            raise _prefixed(path, e) from None

    @classmethod
    def from_zarr_json(cls, doc: Any, version: str | None = None, path: str = "/") -> Self:
        """The group a Zarr v3 group document describes, with ``version`` as its N5 version.

        Raises
        ------
        N5MetadataError
            If ``doc`` is no Zarr v3 group document, or its attributes would read as a dataset.
        """
        _check_zarr_v3(doc, path)
        if doc.get("node_type") != "group":
            raise N5MetadataError(f"{path}: not a group (node_type {doc.get('node_type')!r})")
        attrs = {k: v for k, v in _zarr_attributes(doc, path).items() if k != VERSION_KEY}
        try:
            return cls(attrs, version)
        except N5MetadataError as e:
            raise _prefixed(path, e) from None

    def to_json(self) -> JSONDict:
        """The ``attributes.json`` document (the version first, where there is one)."""
        head = {} if self.version is None else {VERSION_KEY: self.version}
        return {**head, **self.attributes}

    def to_zarr_json(self) -> JSONDict:
        """The Zarr v3 group document (the N5 version is not an attribute there)."""
        return {"zarr_format": 3, "node_type": "group", "attributes": dict(self.attributes)}


@dataclass(frozen=True)
class N5DatasetMetadata:
    """An N5 dataset, validated when built (every constructor ends here).

    Per-axis values are in N5 order (index 0 = fastest axis = x), as in ``attributes.json``;
    the Zarr v3 view keeps that order (zarr ``shape`` == N5 ``dimensions``).

    Parameters
    ----------
    dimensions
        The array's shape, N5 order; integers in [0, 2**63) (N5 dimensions are Java longs).
    block_size
        The block (chunk) shape, N5 order; integers in [1, 2**32), one per dimension.
    data_type
        One of :data:`~napari_n5zarr.n5.constants.N5_DTYPES` (``"uint16"``, ...).
    compression
        The N5 compression object (``{"type": "gzip", "level": 6}``); a bare type name is
        accepted (``"raw"``). Default ``{"type": "raw"}``.
    attributes
        The user's attributes (``extra_attributes``): no reserved N5 key among them.
    version
        The ``"n5"`` version key, kept where the dataset is also the container root.

    Raises
    ------
    N5MetadataError
        Naming the field: dimensions or block size that are not integer lists of the same
        length in range, an unknown data type, a block over
        :func:`~napari_n5zarr.n5.constants.max_block_bytes`, a compression this library or zarr
        cannot represent, or reserved keys among ``attributes``.
    """

    dimensions: tuple[int, ...]
    block_size: tuple[int, ...]
    data_type: str
    compression: Mapping[str, Any] = field(default_factory=lambda: {"type": "raw"})
    attributes: Mapping[str, Any] = field(default_factory=dict)
    version: str | None = None
    _compressor: JSONDict | None = field(init=False, repr=False, compare=False)
    """The Zarr v3 bytes->bytes codec (JSON) for ``compression``; None for raw."""
    check_zarr: InitVar[bool] = True
    """Also build zarr's own metadata from it (zarr refuses a few codec parameters N5
    takes); False for readers that never load zarr (they fall back to zarr for those:
    :func:`napari_n5zarr.n5.compression.zarr_refuses`)."""

    def __post_init__(self, check_zarr: bool) -> None:
        dims = _dims(self.dimensions, DIMENSIONS, positive=False)
        block = _dims(self.block_size, BLOCK_SIZE, positive=True)
        if len(dims) != len(block):
            raise N5MetadataError(
                f"'dimensions' {list(dims)} and 'blockSize' {list(block)} differ in length"
            )
        if not dims:
            raise N5MetadataError("N5 dataset with zero dimensions")
        dtype = self.data_type
        if not isinstance(dtype, str) or dtype not in N5_DTYPES:
            raise N5MetadataError(
                f"N5 dataType {dtype!r} is not supported (supported: {', '.join(N5_DTYPES)}; "
                "'object'/'string' datasets hold non-array blocks)"
            )
        block_bytes = math.prod(block) * N5_DTYPE_SIZES[dtype]
        if block_bytes > max_block_bytes():
            raise N5MetadataError(
                f"blockSize {list(block)} makes {block_bytes} bytes per {dtype} block, over the limit of "
                f"{max_block_bytes()} bytes (set {MAX_BLOCK_BYTES_ENV} to raise it)"
            )
        clash = sorted(RESERVED_KEYS.intersection(self.attributes))
        if clash:
            raise N5MetadataError(
                f"attributes {clash} are reserved by N5 and cannot be user attributes"
            )
        object.__setattr__(self, "dimensions", dims)
        object.__setattr__(self, "block_size", block)
        compression = _compression_object(self.compression)
        object.__setattr__(self, "compression", compression)
        object.__setattr__(self, "_compressor", _zarr_compressor(compression))
        if check_zarr:
            check_zarr_accepts(self.to_zarr_json())

    # -- reading --------------------------------------------------------------------------
    @classmethod
    def from_json(cls, doc: Any, path: str = "/") -> Self:
        """The dataset an ``attributes.json`` document describes.

        Parameters
        ----------
        doc
            The parsed JSON document.
        path
            The document's path or URL, put in front of every error message.

        Returns
        -------
        N5DatasetMetadata
            Reserved keys become fields, the version key ``version``, the rest ``attributes``.
            A legacy ``compressionType`` becomes ``compression``.

        Raises
        ------
        N5MetadataError
            If ``doc`` is not a JSON object, is nested too deeply, uses n5-java's sharding,
            lacks ``dimensions``/``dataType``/``blockSize``, or any field is invalid (see the
            class); the message starts with ``path``.
        """
        _check_document(doc, path)
        return cls._from_checked(doc, path)

    @classmethod
    def _from_checked(cls, doc: JSONDict, path: str, check_zarr: bool = True) -> Self:
        missing = [k for k in (DIMENSIONS, DATA_TYPE, BLOCK_SIZE) if k not in doc]
        if missing:
            raise N5MetadataError(f"{path}: N5 dataset attributes lack {missing}")
        compression = doc.get(COMPRESSION)
        if compression is None:
            compression = doc.get(LEGACY_COMPRESSION, "raw")
        try:
            return cls(
                dimensions=doc[DIMENSIONS],
                block_size=doc[BLOCK_SIZE],
                data_type=doc[DATA_TYPE],
                compression=compression,
                attributes=user_attributes(doc),
                version=doc.get(VERSION_KEY),
                check_zarr=check_zarr,
            )
        except N5MetadataError as e:
            raise _prefixed(path, e) from None

    @classmethod
    def from_zarr_json(cls, doc: Any, version: str | None = None, path: str = "/") -> Self:
        """The dataset a Zarr v3 array document describes, if N5 can store it.

        Parameters
        ----------
        doc
            A ``zarr.json`` array document using the ``n5_default`` codec, the ``v2`` chunk
            key encoding with separator ``/``, a regular grid and fill value 0.
        version
            The N5 version to keep (see :attr:`version`).
        path
            Put in front of every error message.

        Raises
        ------
        N5MetadataError
            Naming what N5 cannot represent.
        """
        _check_zarr_v3(doc, path)
        if doc.get("node_type") != "array":
            raise N5MetadataError(f"{path}: unknown node_type {doc.get('node_type')!r}")
        dtype = doc.get("data_type")
        if dtype not in N5_DTYPES:
            raise N5MetadataError(
                f"{path}: data type {dtype!r} has no N5 equivalent ({', '.join(N5_DTYPES)})"
            )
        grid = doc.get("chunk_grid") or {}
        if grid.get("name") != "regular":
            raise N5MetadataError(
                f"{path}: N5 needs a regular chunk grid, got {grid.get('name')!r}"
            )
        cke = doc.get("chunk_key_encoding") or {}
        if cke.get("name") != "v2" or (cke.get("configuration") or {}).get("separator", ".") != "/":
            raise N5MetadataError(f"{path}: N5 needs the v2 chunk key encoding with separator '/'")
        fill = doc.get("fill_value", 0)
        if fill not in (0, 0.0, False):
            raise N5MetadataError(
                f"{path}: N5 has no fill value (missing blocks read as 0); got fill_value {fill!r}"
            )
        codecs = doc.get("codecs") or []
        if (
            len(codecs) != 1
            or not isinstance(codecs[0], dict)
            or codecs[0].get("name") != CODEC_NAME
        ):
            names = [c.get("name") if isinstance(c, dict) else c for c in codecs]
            raise N5MetadataError(
                f"{path}: an N5 array needs exactly the codec [{CODEC_NAME!r}], got {names}"
            )
        inner = (codecs[0].get("configuration") or {}).get("codecs") or []
        if len(inner) > 3:
            raise N5MetadataError(f"{path}: {CODEC_NAME} allows at most one compressor")
        compressor = inner[2] if len(inner) == 3 else None
        if isinstance(compressor, str):
            compressor = {"name": compressor}
        from napari_n5zarr.n5.compression import zarr_to_n5

        attrs = {k: v for k, v in _zarr_attributes(doc, path).items() if k != VERSION_KEY}
        chunk_shape: Any = (grid.get("configuration") or {}).get("chunk_shape")
        try:
            compression = zarr_to_n5(compressor)
            return cls(
                dimensions=doc.get("shape"),
                block_size=chunk_shape,
                data_type=dtype,
                compression=compression,
                attributes=attrs,
                version=version,
            )
        except ValueError as e:  # N5MetadataError, or a compressor configuration N5 cannot take
            raise _prefixed(path, e) from None

    # -- writing --------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.dimensions)

    def to_json(self) -> JSONDict:
        """The ``attributes.json`` document: version, reserved keys, then the user's attributes."""
        head = {} if self.version is None else {VERSION_KEY: self.version}
        return {
            **head,
            DIMENSIONS: list(self.dimensions),
            BLOCK_SIZE: list(self.block_size),
            DATA_TYPE: self.data_type,
            COMPRESSION: dict(self.compression),
            **self.attributes,
        }

    def inner_codecs(self) -> list[JSONDict]:
        """The ``n5_default`` codec's inner chain (JSON): full-reversal ``transpose``,
        big-endian ``bytes``, then the compressor unless the compression is ``raw``."""
        ndim = self.ndim
        chain: list[JSONDict] = [
            {"name": "transpose", "configuration": {"order": list(range(ndim - 1, -1, -1))}},
            {"name": "bytes"}
            if N5_DTYPE_SIZES[self.data_type] == 1
            else {"name": "bytes", "configuration": {"endian": "big"}},
        ]
        compressor = self._compressor
        if compressor is not None:
            chain.append(compressor)
        return chain

    def codec_json(self) -> JSONDict:
        """The ``n5_default`` codec's JSON: its name and ``configuration`` (the inner chain)."""
        return {"name": CODEC_NAME, "configuration": {"codecs": self.inner_codecs()}}

    def to_zarr_json(self) -> JSONDict:
        """The Zarr v3 array document the N5 Default Store answers for this dataset."""
        return {
            "zarr_format": 3,
            "node_type": "array",
            "shape": list(self.dimensions),
            "data_type": self.data_type,
            "chunk_grid": {
                "name": "regular",
                "configuration": {"chunk_shape": list(self.block_size)},
            },
            "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "/"}},
            "fill_value": 0,
            "codecs": [self.codec_json()],
            "attributes": dict(self.attributes),
        }

    def codec(self) -> N5DefaultCodec:
        """The :class:`~napari_n5zarr.n5.codec.N5DefaultCodec` that reads and writes this
        dataset's blocks (imports the codec and compression libraries)."""
        from napari_n5zarr.n5.codec import N5DefaultCodec

        return N5DefaultCodec.from_dict(self.codec_json())


def parse_attributes(
    doc: Any, path: str = "/", *, check_zarr: bool = True
) -> N5DatasetMetadata | N5GroupMetadata:
    """The dataset or group an ``attributes.json`` document describes (see :func:`is_dataset`).

    Parameters
    ----------
    doc
        The parsed JSON document.
    path
        The document's path or URL, put in front of every error message.
    check_zarr
        See :attr:`N5DatasetMetadata.check_zarr`.

    Raises
    ------
    N5MetadataError
        If the document is not valid N5 metadata (see the two classes).
    """
    _check_document(doc, path)
    if is_dataset(doc):
        return N5DatasetMetadata._from_checked(doc, path, check_zarr)
    return N5GroupMetadata._from_checked(doc, path)


def parse_zarr_json(
    doc: Any, version: str | None = None, path: str = "/"
) -> N5DatasetMetadata | N5GroupMetadata:
    """The dataset or group a Zarr v3 ``zarr.json`` document describes, if N5 can store it.

    Raises
    ------
    N5MetadataError
        Naming what N5 cannot represent.
    """
    _check_zarr_v3(doc, path)
    if doc.get("node_type") == "group":
        return N5GroupMetadata.from_zarr_json(doc, version, path)
    return N5DatasetMetadata.from_zarr_json(doc, version, path)


def _dims(value: Any, key: str, *, positive: bool) -> tuple[int, ...]:
    """Dimensions are Java longs (up to 2**63 - 1: Paintera's label-to-block-mapping uses
    Long.MAX_VALUE); block sizes are u32 in every block header."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise N5MetadataError(f"N5 {key!r} must be a list of integers, got {value!r}")
    low, high = (1, "2**32") if positive else (0, "2**63")
    if any(v < low or v > (0xFFFFFFFF if positive else MAX_DIMENSION) for v in value):
        raise N5MetadataError(f"N5 {key!r} values must be in [{low}, {high}), got {list(value)}")
    return tuple(int(v) for v in value)


def _compression_object(compression: Any) -> JSONDict:
    """An N5 compression object from what ``attributes.json`` holds (a bare name is a type)."""
    if isinstance(compression, str):  # seen in hand-written files, and legacy compressionType
        return {"type": compression}
    if not isinstance(compression, Mapping) or "type" not in compression:
        raise N5MetadataError(
            f"N5 'compression' must be an object with a 'type', got {compression!r}"
        )
    return dict(compression)


def _zarr_compressor(compression: JSONDict) -> JSONDict | None:
    """The Zarr v3 bytes->bytes codec (JSON) for an N5 compression object; None for raw."""
    from napari_n5zarr.n5.compression import n5_to_zarr

    try:
        return n5_to_zarr(compression)
    except ValueError as e:
        raise N5MetadataError(str(e)) from None
    except (TypeError, OverflowError) as e:  # e.g. a parameter of 1e999 (infinity)
        raise N5MetadataError(f"bad compression parameters {compression!r} ({e})") from None


_ACCEPTED: set[str] = set()
"""Documents zarr accepted (canonical JSON but the attributes and the extent): an export builds
each level's twice (plan, then publish), ~1 ms each, on the export's critical path; a listing
meets thousands of datasets that differ in their extent only."""


def check_zarr_accepts(doc: JSONDict) -> None:
    """Build zarr's own metadata object from the Zarr v3 array document ``doc`` so that
    parameters zarr refuses (a zstd level of 1000, ...) fail here (N5MetadataError) rather
    than later in zarr. One check per distinct document (attributes and extent aside: zarr
    checks neither against the codecs); refused documents are checked every time."""
    import json

    from napari_n5zarr.n5.codec import ensure_codecs_registered
    from napari_n5zarr.zarr_internals import ArrayV3Metadata

    doc = {**doc, "attributes": {}}  # zarr checks all but the attributes
    shape = doc.get("shape")
    try:
        extent = (
            [len(shape), all(isinstance(s, int) and s >= 0 for s in shape)]
            if isinstance(shape, list)
            else shape
        )
        key: str | None = json.dumps({**doc, "shape": extent}, sort_keys=True)
    except (TypeError, ValueError):  # not plain JSON: checked every time
        key = None
    if key in _ACCEPTED:
        return
    ensure_codecs_registered()
    try:
        ArrayV3Metadata.from_dict(doc)
    except N5MetadataError:
        raise
    except (ValueError, TypeError, KeyError, OverflowError, AttributeError) as e:
        raise N5MetadataError(f"zarr cannot represent this dataset: {e}") from None
    if key is not None:
        if len(_ACCEPTED) > 1024:
            _ACCEPTED.clear()
        _ACCEPTED.add(key)


GROUP_DOC: JSONDict = N5GroupMetadata().to_zarr_json()
"""The document of a group without attributes (an implicit N5 group)."""


def attributes_to_zarr(attributes: Any, path: str = "/") -> JSONDict:
    """Translate an N5 ``attributes.json`` document into a Zarr v3 ``zarr.json`` document.

    Raises N5MetadataError (message starting with ``path``) for anything that is not valid N5.
    """
    return parse_attributes(attributes, path).to_zarr_json()


def zarr_to_attributes(
    doc: Any, existing: JSONDict | None = None, *, root: bool = False, path: str = "/"
) -> JSONDict:
    """Translate a Zarr v3 ``zarr.json`` document into an N5 ``attributes.json`` document.

    ``existing`` (the current attributes.json) keeps its version key; ``root`` adds
    ``"n5": "4.0.0"`` as N5 requires at the container root.
    """
    attrs = doc.get("attributes") if isinstance(doc, dict) else None
    version = (existing or {}).get(VERSION_KEY) or (
        attrs.get(VERSION_KEY) if isinstance(attrs, dict) else None
    )
    if root and not version:
        version = N5_VERSION
    return parse_zarr_json(doc, version or None, path).to_json()
