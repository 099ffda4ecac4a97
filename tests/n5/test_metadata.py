"""attributes.json <-> zarr.json on dicts."""

from __future__ import annotations

import pytest

from napari_n5zarr.n5.errors import N5MetadataError
from napari_n5zarr.n5.metadata import attributes_to_zarr, zarr_to_attributes

DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32", "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_dataset_round_trip(dtype: str) -> None:
    attrs = {"dimensions": [5, 4, 3], "blockSize": [2, 2, 2], "dataType": dtype, "compression": {"type": "xz", "preset": 4},
             "pixelResolution": {"unit": "um", "dimensions": [1, 1, 2]}, "downsamplingFactors": [1, 1, 1]}
    doc = attributes_to_zarr(attrs)
    assert doc["shape"] == [5, 4, 3] and doc["data_type"] == dtype
    assert doc["chunk_grid"] == {"name": "regular", "configuration": {"chunk_shape": [2, 2, 2]}}
    assert doc["chunk_key_encoding"] == {"name": "v2", "configuration": {"separator": "/"}}
    assert doc["fill_value"] == 0
    inner = doc["codecs"][0]["configuration"]["codecs"]
    assert inner[0] == {"name": "transpose", "configuration": {"order": [2, 1, 0]}}
    assert inner[1] == ({"name": "bytes"} if dtype.endswith("int8") else {"name": "bytes", "configuration": {"endian": "big"}})
    assert doc["attributes"] == {"pixelResolution": {"unit": "um", "dimensions": [1, 1, 2]}, "downsamplingFactors": [1, 1, 1]}
    assert zarr_to_attributes(doc) == attrs


def test_group_round_trip_and_version_key() -> None:
    attrs = {"n5": "4.0.0", "scales": [[1, 1], [2, 2]], "axes": ["x", "y"]}
    doc = attributes_to_zarr(attrs)
    assert doc == {"zarr_format": 3, "node_type": "group", "attributes": {"scales": [[1, 1], [2, 2]], "axes": ["x", "y"]}}
    assert zarr_to_attributes(doc, root=True) == attrs
    assert zarr_to_attributes(doc) == {"scales": [[1, 1], [2, 2]], "axes": ["x", "y"]}
    assert zarr_to_attributes(doc, existing={"n5": "2.1.0"}) == {"n5": "2.1.0", **doc["attributes"]}


def test_root_dataset_keeps_version_in_same_file() -> None:
    attrs = {"n5": "4.0.0", "dimensions": [4], "blockSize": [4], "dataType": "uint8", "compression": {"type": "raw"}}
    doc = attributes_to_zarr(attrs)
    assert "n5" not in doc["attributes"]
    assert zarr_to_attributes(doc, root=True) == attrs


@pytest.mark.parametrize(
    "change,match",
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
        zarr_to_attributes({"zarr_format": 3, "node_type": "group", "attributes": {"dimensions": [2], "dataType": "uint8"}})
