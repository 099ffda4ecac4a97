"""Every ``n5_default`` codec JSON the library writes or answers validates against the spec's
``schema.json`` (zarr-extensions ``codecs/n5_default``, copied into tests/data/corpus).

Two things stand between that file and a validator, both handled here, offline:

* It refers to the ``transpose`` and ``bytes`` codec schemas by URL; tests run without a
  network, so :data:`_REFERENCED` registers stand-ins under those URLs that state the Zarr v3
  core spec's rules for the two codecs (name, ``order`` a list of distinct non-negative
  integers, ``endian`` little/big; no other keys).
* Its ``items`` (the optional third, compressor, codec) says ``"type": "#/$defs/codec"``, which
  is not a JSON type: the schema itself is invalid (``check_schema`` refuses it, and validation
  of any chain with a compressor raises ``UnknownType``). It plainly means ``"$ref"``;
  :func:`_spec_schema` makes exactly that one-word fix and checks the result is a valid schema.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr
from format_cases import COMPRESSIONS as NAMED_COMPRESSIONS
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore

from napari_n5zarr import N5DefaultStore, N5FormatError, create_dataset, export

# Every N5 compression the library writes (both gzip rows: plain and useZlib).
COMPRESSIONS = list(NAMED_COMPRESSIONS.values())

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

SCHEMA = (
    Path(__file__).parents[1]
    / "data/corpus/zarr-extensions-n5_default/codecs/n5_default/schema.json"
)
_CODECS_URL = (
    "https://raw.githubusercontent.com/zarr-developers/zarr-extensions/refs/heads/main/codecs/"
)
_REFERENCED = {
    _CODECS_URL + "transpose/schema.json": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "name": {"const": "transpose"},
            "configuration": {
                "type": "object",
                "properties": {
                    "order": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 0},
                        "uniqueItems": True,
                    }
                },
                "required": ["order"],
                "additionalProperties": False,
            },
        },
        "required": ["name", "configuration"],
        "additionalProperties": False,
    },
    _CODECS_URL + "bytes/schema.json": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "name": {"const": "bytes"},
            "configuration": {
                "type": "object",
                "properties": {"endian": {"enum": ["little", "big"]}},
                "additionalProperties": False,
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}


def _spec_schema() -> dict[str, Any]:
    schema = json.loads(SCHEMA.read_text())
    fixed = copy.deepcopy(schema)
    items = fixed["properties"]["configuration"]["properties"]["codecs"]["items"]
    if items.get("type") == "#/$defs/codec":  # the spec's typo (see the module docstring)
        items["$ref"] = items.pop("type")
    jsonschema.Draft202012Validator.check_schema(fixed)
    return fixed


@pytest.fixture(scope="module")
def validator() -> Any:
    registry = referencing.Registry().with_resources(
        (url, referencing.Resource.from_contents(doc)) for url, doc in _REFERENCED.items()
    )
    return jsonschema.Draft202012Validator(_spec_schema(), registry=registry)


def _assert_valid(validator: Any, codec: Any, where: str) -> None:
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(codec)
    ]
    assert not errors, f"{where}: {errors}"


def test_spec_example_validates_and_the_validator_can_fail(validator: Any) -> None:
    """The spec's own example passes; chains the spec forbids are caught."""
    example = json.loads((SCHEMA.parent / "examples/zstd_array/zarr.json").read_text())
    codec = example["codecs"][0]
    _assert_valid(validator, codec, "spec example")
    chain = codec["configuration"]["codecs"]
    little = copy.deepcopy(codec)
    little["configuration"]["codecs"][1]["configuration"]["endian"] = "little"
    too_long = copy.deepcopy(codec)
    too_long["configuration"]["codecs"].append(chain[2])
    extra_key = copy.deepcopy(codec)
    extra_key["configuration"]["blockSize"] = [4, 4]
    bad_compressor = copy.deepcopy(codec)
    bad_compressor["configuration"]["codecs"][2]["level"] = 3  # outside "configuration"
    for bad in (little, too_long, extra_key, bad_compressor, {"name": "n5_default"}):
        assert not validator.is_valid(bad), bad


def test_the_spec_schema_file_has_the_items_typo() -> None:
    """Documents why :func:`_spec_schema` patches: when the corpus copy is updated with the
    upstream fix, this fails and the patch can go."""
    with pytest.raises(jsonschema.SchemaError, match="defs/codec"):
        jsonschema.Draft202012Validator.check_schema(json.loads(SCHEMA.read_text()))


@pytest.mark.parametrize("ndim", [1, 2, 3, 5])
@pytest.mark.parametrize(
    "compression", COMPRESSIONS, ids=lambda c: "-".join(str(v) for v in c.values())
)
def test_written_codec_validates(validator: Any, compression: dict[str, Any], ndim: int) -> None:
    """``N5DefaultCodec.to_dict()`` and the ``zarr.json`` create_dataset stores, for every
    compression and 1D..5D."""
    base = MemoryStore()
    root = zarr.open_group(N5DefaultStore(base), mode="w")
    arr = create_dataset(
        root, "d", shape=(3,) * ndim, dtype="uint16", chunks=(2,) * ndim, compression=compression
    )
    # as JSON: to_dict holds tuples (zarr's own TransposeCodec.to_dict does), written as arrays
    as_json = json.loads(json.dumps(arr.metadata.codecs[0].to_dict()))
    _assert_valid(validator, as_json, f"to_dict for {compression}")
    stored = json.loads(sync(base.get("d/zarr.json", default_buffer_prototype())).to_bytes())
    assert [c["name"] for c in stored["codecs"]] == ["n5_default"]
    _assert_valid(validator, stored["codecs"][0], f"stored zarr.json for {compression}")


@pytest.mark.parametrize("compression", ["raw", "gzip", "bzip2", "xz", "lz4", "blosc", "zstd:5"])
def test_exported_zarr_json_validates(validator: Any, tmp_path: Path, compression: str) -> None:
    """Every array ``zarr.json`` of an exported pyramid."""
    dest = tmp_path / "out.n5"
    export(
        np.arange(16 * 12 * 10, dtype="uint16").reshape(16, 12, 10),
        dest,
        compression=compression,
        chunks=8,
        levels=2,
    )
    arrays = [
        doc
        for doc in (json.loads(p.read_text()) for p in sorted(dest.rglob("zarr.json")))
        if doc["node_type"] == "array"
    ]
    assert len(arrays) == 2
    for doc in arrays:
        assert [c["name"] for c in doc["codecs"]] == ["n5_default"]
        _assert_valid(validator, doc["codecs"][0], f"export {compression}")


def test_translated_corpus_metadata_validates(validator: Any, corpus_dir: Path) -> None:
    """The ``zarr.json`` N5DefaultStore answers for every readable dataset of the corpus."""
    checked = 0
    for attributes in sorted(corpus_dir.rglob("attributes.json")):
        if "dataType" not in json.loads(attributes.read_text()):
            continue
        store = N5DefaultStore(LocalStore(attributes.parent, read_only=True))
        try:
            doc = json.loads(sync(store.get("zarr.json", default_buffer_prototype())).to_bytes())
        except N5FormatError:  # e.g. sharded N5: refused with a clear error
            continue
        _assert_valid(validator, doc["codecs"][0], str(attributes))
        checked += 1
    assert checked >= 30
