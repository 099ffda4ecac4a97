"""n5.model: the typed N5 metadata, on every attributes.json of the test corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from zarr.codecs import BloscCodec, BytesCodec, GzipCodec, TransposeCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore

from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.n5.constants import N5_JSON, ZARR_JSON
from napari_n5zarr.n5.metadata import (
    N5DatasetMetadata,
    N5GroupMetadata,
    parse_attributes,
    parse_zarr_json,
)
from napari_n5zarr.n5.stores import N5DefaultStore

DATA = Path(__file__).parents[1] / "data"
DOCUMENTS = sorted(DATA.rglob(N5_JSON))
# The corpus holds three documents this library refuses on purpose (n5-java's experimental
# sharding); every other one must read.
REFUSED = {"shardSize", "codecs"}


def _doc(path: Path) -> dict:
    return json.loads(path.read_text())


def _readable(path: Path) -> bool:
    return not REFUSED.intersection(_doc(path))


def test_corpus_is_there() -> None:
    assert len(DOCUMENTS) > 50
    assert sum(map(_readable, DOCUMENTS)) > 50


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(DATA)))
def test_corpus_round_trips_through_the_model(path: Path) -> None:
    doc = _doc(path)
    if not _readable(path):
        with pytest.raises(N5MetadataError, match=rf"^{path}: .*sharding"):
            parse_attributes(doc, str(path))
        return
    meta = parse_attributes(doc, str(path))
    assert isinstance(
        meta, N5DatasetMetadata if "dimensions" in doc and "dataType" in doc else N5GroupMetadata
    )
    assert type(meta).from_json(meta.to_json()) == meta
    expected = dict(doc)
    if isinstance(meta, N5DatasetMetadata) and not isinstance(doc.get("compression"), dict):
        # legacy ``compressionType`` (or a bare name) becomes a ``compression`` object
        expected.pop("compressionType", None)
        expected["compression"] = {
            "type": doc.get("compression") or doc.get("compressionType", "raw")
        }
    assert meta.to_json() == expected
    # and back from the zarr.json document: the same node (N5 compression parameters come
    # back in their canonical form: gzip level -1 is 6, ...)
    back = parse_zarr_json(meta.to_zarr_json(), meta.version)
    assert type(back) is type(meta)
    assert back.to_zarr_json() == meta.to_zarr_json()
    if isinstance(meta, N5GroupMetadata):
        assert back == meta


@pytest.mark.parametrize(
    "path", [p for p in DOCUMENTS if _readable(p)], ids=lambda p: str(p.relative_to(DATA))
)
def test_to_zarr_json_is_what_the_store_answers(path: Path) -> None:
    meta = parse_attributes(_doc(path), str(path))
    store = N5DefaultStore(LocalStore(path.parent, read_only=True))
    answered = json.loads(sync(store.get(ZARR_JSON, default_buffer_prototype())).to_bytes())
    assert meta.to_zarr_json() == answered


def test_spec_example_is_exactly_the_model() -> None:
    example = DATA / "corpus/zarr-extensions-n5_default/codecs/n5_default/examples/zstd_array"
    meta = N5DatasetMetadata.from_json(_doc(example / N5_JSON))
    assert meta.to_zarr_json() == {**_doc(example / ZARR_JSON), "attributes": {}}
    assert N5DatasetMetadata.from_zarr_json(_doc(example / ZARR_JSON)) == meta


def test_fields_are_typed() -> None:
    meta = N5DatasetMetadata.from_json(
        {"n5": "4.0.0", "dimensions": [5, 4, 3], "blockSize": [2, 2, 2], "dataType": "uint16",
         "compression": {"type": "gzip", "level": -1}, "pixelResolution": {"unit": "um", "dimensions": [1, 1, 2]}}
    )  # fmt: skip
    assert meta.dimensions == (5, 4, 3)
    assert meta.block_size == (2, 2, 2)
    assert meta.ndim == 3
    assert meta.data_type == "uint16"
    assert meta.version == "4.0.0"
    assert meta.compression == {"type": "gzip", "level": -1}
    assert meta.attributes == {"pixelResolution": {"unit": "um", "dimensions": [1, 1, 2]}}
    assert meta.inner_codecs() == [
        {"name": "transpose", "configuration": {"order": [2, 1, 0]}},
        {"name": "bytes", "configuration": {"endian": "big"}},
        {"name": "gzip", "configuration": {"level": 6}},
    ]
    with pytest.raises(AttributeError):
        meta.data_type = "uint8"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("compression", "dtype", "expected"),
    [
        ({"type": "raw"}, "uint8", [TransposeCodec(order=(1, 0)), BytesCodec(endian=None)]),
        ("gzip", "int16", [TransposeCodec(order=(1, 0)), BytesCodec(endian="big"), GzipCodec(level=6)]),
        ({"type": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2}, "float32",
         [TransposeCodec(order=(1, 0)), BytesCodec(endian="big"),
          BloscCodec(cname="zstd", clevel=3, shuffle="bitshuffle", blocksize=0)]),
    ],
)  # fmt: skip
def test_codec_is_the_n5_default_codec_for_the_dataset(
    compression, dtype: str, expected: list
) -> None:
    meta = N5DatasetMetadata(
        dimensions=(10, 7), block_size=(4, 4), data_type=dtype, compression=compression
    )
    codec = meta.codec()
    assert isinstance(codec, N5DefaultCodec)
    assert codec == N5DefaultCodec(codecs=expected)
    assert codec == N5DefaultCodec.from_dict(meta.to_zarr_json()["codecs"][0])


def test_constructor_and_from_json_validate_the_same_way() -> None:
    with pytest.raises(N5MetadataError, match=r"^N5 dataType 'complex64' is not supported"):
        N5DatasetMetadata(dimensions=(4,), block_size=(4,), data_type="complex64")
    with pytest.raises(
        N5MetadataError, match=r"^d/attributes.json: N5 dataType 'complex64' is not supported"
    ):
        N5DatasetMetadata.from_json(
            {"dimensions": [4], "blockSize": [4], "dataType": "complex64"}, "d/attributes.json"
        )


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ([1, 2], "must hold a JSON object, got list"),
        ({"dimensions": [4], "dataType": "uint8"}, r"lack \['blockSize'\]"),
        (
            {"dimensions": ["4"], "blockSize": [4], "dataType": "uint8"},
            "'dimensions' must be a list of integers",
        ),
        (
            {"dimensions": [4], "blockSize": [0], "dataType": "uint8"},
            r"'blockSize' values must be in \[1, 2\*\*32\)",
        ),
        ({"dimensions": [4, 4], "blockSize": [4], "dataType": "uint8"}, "differ in length"),
        ({"dimensions": [], "blockSize": [], "dataType": "uint8"}, "zero dimensions"),
        (
            {"dimensions": [4], "blockSize": [4], "dataType": "uint8", "compression": {"level": 1}},
            "must be an object with a 'type'",
        ),
        (
            {
                "dimensions": [4],
                "blockSize": [4],
                "dataType": "uint8",
                "compression": {"type": "snappy"},
            },
            "unsupported N5 compression 'snappy'",
        ),
        (
            {
                "dimensions": [4],
                "blockSize": [4],
                "dataType": "uint8",
                "compression": {"type": "zstd", "level": 99},
            },
            "zarr cannot represent",
        ),
        ({"dimensions": [4], "blockSize": [4], "dataType": "uint8", "shardSize": [8]}, "sharding"),
        ({"a": json.loads("[" * 120 + "]" * 120)}, "nested deeper"),
    ],
)
def test_bad_documents_name_the_document_and_the_field(doc, match: str) -> None:
    with pytest.raises(N5MetadataError, match=rf"^/data/x.n5/d/attributes.json: .*{match}"):
        parse_attributes(doc, "/data/x.n5/d/attributes.json")


def test_group_refuses_to_be_a_dataset_and_keeps_its_version() -> None:
    with pytest.raises(N5MetadataError, match=r"^g/attributes.json: a group cannot hold both"):
        N5GroupMetadata.from_json({"dimensions": [2], "dataType": "uint8"}, "g/attributes.json")
    setup = N5GroupMetadata.from_json(
        {"n5": "2.5.1", "dataType": "uint16", "downsamplingFactors": [[1, 1]]}
    )
    assert setup.version == "2.5.1"
    assert setup.attributes == {"dataType": "uint16", "downsamplingFactors": [[1, 1]]}
    assert setup.to_zarr_json() == {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": dict(setup.attributes),
    }
    assert N5GroupMetadata.from_zarr_json(setup.to_zarr_json(), "2.5.1") == setup


def test_reserved_user_attributes_are_refused() -> None:
    with pytest.raises(N5MetadataError, match=r"\['compression'\] are reserved"):
        N5DatasetMetadata(
            dimensions=(4,), block_size=(4,), data_type="uint8", attributes={"compression": 1}
        )


def test_the_model_imports_no_codec_or_compression_library() -> None:
    code = (
        "import sys, napari_n5zarr.n5.metadata, napari_n5zarr.n5.constants, napari_n5zarr.errors, napari_n5zarr.spatial\n"
        "heavy = {'zarr', 'numcodecs', 'deflate', 'zstandard', 'lz4', 'xxhash', 'napari_n5zarr.n5.codec',"
        " 'napari_n5zarr.n5.compression'}\n"
        "print(sorted(heavy.intersection(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
