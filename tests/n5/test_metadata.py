"""attributes.json <-> zarr.json on dicts."""

from __future__ import annotations

import pytest

from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.metadata import attributes_to_zarr, zarr_to_attributes

DTYPES = [
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float32",
    "float64",
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dataset_round_trip(dtype: str) -> None:
    attrs = {
        "dimensions": [5, 4, 3],
        "blockSize": [2, 2, 2],
        "dataType": dtype,
        "compression": {"type": "xz", "preset": 4},
        "pixelResolution": {"unit": "um", "dimensions": [1, 1, 2]},
        "downsamplingFactors": [1, 1, 1],
    }
    doc = attributes_to_zarr(attrs)
    assert doc["shape"] == [5, 4, 3]
    assert doc["data_type"] == dtype
    assert doc["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [2, 2, 2]}}
    assert doc["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "/"}}
    assert doc["fill_value"] == 0
    inner = doc["codecs"][0]["configuration"]["codecs"]
    assert inner[0] == {"name": "transpose", "configuration": {"order": [2, 1, 0]}}
    assert inner[1] == (
        {"name": "bytes"}
        if dtype.endswith("int8")
        else {"name": "bytes", "configuration": {"endian": "big"}}
    )
    assert doc["attributes"] == {
        "pixelResolution": {"unit": "um", "dimensions": [1, 1, 2]},
        "downsamplingFactors": [1, 1, 1],
    }
    assert zarr_to_attributes(doc) == attrs


def test_group_round_trip_and_version_key() -> None:
    attrs = {"n5": "4.0.0", "scales": [[1, 1], [2, 2]], "axes": ["x", "y"]}
    doc = attributes_to_zarr(attrs)
    assert doc == {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"scales": [[1, 1], [2, 2]], "axes": ["x", "y"]},
    }
    assert zarr_to_attributes(doc, root=True) == attrs
    assert zarr_to_attributes(doc) == {"scales": [[1, 1], [2, 2]], "axes": ["x", "y"]}
    assert zarr_to_attributes(doc, existing={"n5": "2.1.0"}) == {"n5": "2.1.0", **doc["attributes"]}


def test_root_dataset_keeps_version_in_same_file() -> None:
    attrs = {
        "n5": "4.0.0",
        "dimensions": [4],
        "blockSize": [4],
        "dataType": "uint8",
        "compression": {"type": "raw"},
    }
    doc = attributes_to_zarr(attrs)
    assert "n5" not in doc["attributes"]
    assert zarr_to_attributes(doc, root=True) == attrs


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"data_type": "complex64"}, "no N5 equivalent"),
        ({"fill_value": 7}, "fill value"),
        ({"chunk_grid": {"name": "rectilinear", "configuration": {}}}, "regular"),
        ({"chunk_key_encoding": {"name": "default"}}, "v2"),
        ({"codecs": [{"name": "bytes"}]}, "n5_default"),
        ({"attributes": {"dataType": "x"}}, "reserved"),
        ({"attributes": {"compression": {"type": "raw"}}}, "reserved"),
        ({"node_type": "thing"}, "node_type"),
        ({"zarr_format": 2}, "Zarr v3"),
    ],
)
def test_unrepresentable_zarr_metadata(change: dict, match: str) -> None:
    doc = attributes_to_zarr({"dimensions": [4], "blockSize": [4], "dataType": "uint8"})
    with pytest.raises(N5MetadataError, match=match):
        zarr_to_attributes({**doc, **change})


def test_attributes_must_be_an_object() -> None:
    with pytest.raises(N5MetadataError, match="JSON object"):
        attributes_to_zarr([1, 2])


def test_groups_may_hold_some_reserved_keys_like_bigdataviewer_setups() -> None:
    setup = {"dataType": "uint16", "downsamplingFactors": [[1, 1, 1], [2, 2, 1]]}
    doc = attributes_to_zarr(setup)
    assert doc == {"zarr_format": 3, "node_type": "group", "attributes": setup}
    assert zarr_to_attributes(doc) == setup
    assert attributes_to_zarr({"dimensions": [3]})["node_type"] == "group"


def test_group_that_would_read_as_a_dataset_is_refused() -> None:
    with pytest.raises(N5MetadataError, match="would read a dataset"):
        zarr_to_attributes(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {"dimensions": [2], "dataType": "uint8"},
            }
        )


# -- hostile documents: every refusal names the attributes.json --------------------------------
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import napari_n5zarr  # noqa: E402
from napari_n5zarr.n5.constants import MAX_JSON_DEPTH, check_nesting  # noqa: E402

BAD_DOCUMENTS = {
    "not json": b"{dimensions: [4]",
    "not utf-8": b'{"dimensions": [4], "x": "\xff\xfe"}',
    "a list": b"[1, 2]",
    "dims not ints": b'{"dimensions": ["4"], "blockSize": [4], "dataType": "uint8"}',
    "negative block": b'{"dimensions": [4], "blockSize": [-1], "dataType": "uint8"}',
    "length mismatch": b'{"dimensions": [4, 4], "blockSize": [4], "dataType": "uint8"}',
    "bad dtype": b'{"dimensions": [4], "blockSize": [4], "dataType": "complex64"}',
    "bad compression": b'{"dimensions": [4], "blockSize": [4], "dataType": "uint8", "compression": {"type": "snappy"}}',
    "sharded": b'{"dimensions": [4], "blockSize": [4], "dataType": "uint8", "shardSize": [8]}',
    "too deep": b'{"a": ' + b"[" * 2000 + b"]" * 2000 + b"}",
}


@pytest.mark.parametrize("name", list(BAD_DOCUMENTS))
def test_every_metadata_error_names_the_attributes_json_path(tmp_path: Path, name: str) -> None:
    ds = tmp_path / "c.n5" / "sub" / "d"
    ds.mkdir(parents=True)
    (ds / "attributes.json").write_bytes(BAD_DOCUMENTS[name])
    with pytest.raises(N5MetadataError) as info:
        napari_n5zarr.open(ds)
    assert str(info.value).startswith(f"{ds / 'attributes.json'}: "), str(info.value)
    with pytest.raises(
        N5MetadataError, match=r"sub/d/attributes.json: "
    ):  # opened from the container too
        napari_n5zarr.open(tmp_path / "c.n5")["sub/d"]


def test_metadata_errors_name_the_file_in_a_zip(tmp_path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(tmp_path / "c.n5.zip", "w") as z:
        z.writestr("d/attributes.json", BAD_DOCUMENTS["bad dtype"])
    with pytest.raises(
        N5MetadataError, match=rf"^{tmp_path / 'c.n5.zip'}/d/attributes.json: N5 dataType"
    ):
        napari_n5zarr.open(tmp_path / "c.n5.zip")["d"]


def test_check_nesting_counts_levels_without_recursion() -> None:
    doc: object = 0
    for _ in range(MAX_JSON_DEPTH - 1):
        doc = [doc]
    check_nesting({"a": doc}, "x")  # exactly the limit: 1 object + 99 lists
    with pytest.raises(N5MetadataError, match="x: JSON nested deeper than 100"):
        check_nesting({"a": [doc]}, "x")
    deep: object = 0
    for _ in range(200_000):  # far past the interpreter's recursion limit
        deep = {"k": deep}
    with pytest.raises(N5MetadataError):
        check_nesting(deep, "x")


def test_translation_itself_refuses_deep_user_attributes() -> None:
    attrs = {
        "dimensions": [4],
        "blockSize": [4],
        "dataType": "uint8",
        "a": json.loads("[" * 300 + "]" * 300),
    }
    with pytest.raises(N5MetadataError, match=r"/tmp/d/attributes\.json: JSON nested deeper"):
        attributes_to_zarr(attrs, path="/tmp/d/attributes.json")


def test_block_larger_than_n5_java_can_write_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the fuzz: blockSize [2**32-1] made every read allocate 4 GiB+ (MemoryError)."""
    monkeypatch.delenv("N5ZARR_MAX_BLOCK_BYTES", raising=False)
    attrs = {"dimensions": [5], "blockSize": [2**32 - 1], "dataType": "uint8"}
    with pytest.raises(
        N5MetadataError,
        match=r"d/attributes.json: blockSize \[4294967295\] makes 4294967295 bytes.*N5ZARR_MAX_BLOCK_BYTES",
    ):
        attributes_to_zarr(attrs, path="d/attributes.json")
    ok = {
        "dimensions": [5, 5],
        "blockSize": [2**14, 2**14],
        "dataType": "uint64",
    }  # exactly 2 GiB: refused
    with pytest.raises(N5MetadataError, match="over the limit of 2147483647 bytes"):
        attributes_to_zarr(ok)
    attributes_to_zarr({**ok, "dataType": "uint32"})  # 1 GiB: fine
    monkeypatch.setenv("N5ZARR_MAX_BLOCK_BYTES", str(2**33))
    assert attributes_to_zarr(attrs)["chunk_grid"]["configuration"]["chunk_shape"] == [2**32 - 1]


@pytest.mark.parametrize(
    ("compression", "match"),
    [
        ({"type": "zstd", "level": 1000}, "less than or equal to 22"),
        ({"type": "lz4", "blockSize": 1e999}, "must be an integer, got inf"),
    ],
)
def test_parameters_zarr_refuses_are_metadata_errors_naming_the_file(
    compression: dict, match: str
) -> None:
    """Found by the fuzz: these escaped as a bare ValueError/OverflowError from zarr."""
    attrs = {"dimensions": [4], "blockSize": [4], "dataType": "uint8", "compression": compression}
    with pytest.raises(N5MetadataError, match=rf"^x/attributes.json: .*{match}"):
        attributes_to_zarr(attrs, path="x/attributes.json")
