"""Every dataset of the corpus (real N5 from other writers) reads exactly, or is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

import napari_n5zarr
from napari_n5zarr.errors import N5FormatError

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())["datasets"]


def _expected(record: dict) -> np.ndarray:
    file = record["expected"]["file"].split(" ")[0]
    expected = np.load(CORPUS / file)
    # our view keeps N5 order: the reversed-axis files are transposes of it
    return expected.T if record["expected"]["axis_order"] == "reversed" else expected


@pytest.mark.parametrize("record", MANIFEST, ids=[r["path"] for r in MANIFEST])
def test_corpus_dataset_reads_exactly(record: dict) -> None:
    arr = napari_n5zarr.open(CORPUS / record["path"])
    assert isinstance(arr, zarr.Array)
    assert list(arr.shape) == record["dimensions"]
    assert str(arr.dtype) == record["dataType"]
    expected = _expected(record)
    data = arr[...]
    assert data.dtype == expected.dtype
    np.testing.assert_array_equal(data, expected)


def test_corpus_covers_every_compression_and_boundary() -> None:
    types = {
        r["compression"].get("type") or r["compression"].get("legacy compressionType")
        for r in MANIFEST
    }
    assert {"raw", "gzip", "bzip2", "xz", "lz4", "blosc", "zstd"} <= types
    assert {"padded", "truncated"} <= {r["boundary"] for r in MANIFEST}


def test_java_lz4_reads() -> None:
    arr = napari_n5zarr.open(CORPUS / "zarr_implementations/data/n5-java.n5/lz4")
    assert arr.metadata.codecs[0].compressor.to_dict()["name"] == "n5zarr.lz4block"
    expected = np.load(CORPUS / "expected_derived/zarr_implementations_reference_image.npy")
    np.testing.assert_array_equal(arr[...], expected.T)


def test_partial_region_of_truncated_dataset() -> None:
    arr = napari_n5zarr.open(CORPUS / "zarrs_n5/data/uneven_chunk_truncated.n5")
    expected = np.load(CORPUS / "zarrs_n5/data/raw.npy")
    np.testing.assert_array_equal(arr[150:256, 90:128], expected[150:256, 90:128])


@pytest.mark.parametrize(
    "path",
    [
        "saalfeldlab-n5/experimental_wip_commit_765a7b4/src/test/resources/shardExamples/test.n5/mid_sharded",
        "saalfeldlab-n5/experimental_wip_commit_765a7b4/src/test/resources/shardExamples/writeReadBlockTest.n5/shard",
    ],
)
def test_sharded_experimental_is_refused_clearly(path: str) -> None:
    with pytest.raises(N5FormatError, match="sharding"):
        napari_n5zarr.open(CORPUS / path)


def test_sibling_of_unreadable_child_still_listed(tmp_path: Path) -> None:
    shards = (
        CORPUS
        / "saalfeldlab-n5/experimental_wip_commit_765a7b4/src/test/resources/shardExamples/test.n5"
    )
    shutil.copytree(shards, tmp_path / "c.n5")
    shutil.copytree(
        CORPUS / "tensorstore/tensorstore/driver/n5/testdata/raw", tmp_path / "c.n5/good"
    )
    group = napari_n5zarr.open(tmp_path / "c.n5")
    with pytest.warns(UserWarning, match="sharding"):
        members = dict(group.members())
    assert list(members) == ["good"]
    np.testing.assert_array_equal(
        members["good"][...], napari_n5zarr.open(tmp_path / "c.n5/good")[...]
    )


def test_url_attributes_groups_and_user_attributes() -> None:
    root = napari_n5zarr.open(CORPUS / "saalfeldlab-n5/src/test/resources/url/urlAttributes.n5")
    assert isinstance(root, zarr.Group)
    raw = json.loads(
        (
            CORPUS / "saalfeldlab-n5/src/test/resources/url/urlAttributes.n5/attributes.json"
        ).read_text()
    )
    assert root.attrs.asdict() == {k: v for k, v in raw.items() if k != "n5"}
    aaa = root["a/aa/aaa"]
    assert isinstance(aaa, zarr.Group)
    names = {name for name, _ in root.members(max_depth=None)}
    assert {"a", "a/aa", "a/aa/aaa", "objs"} <= names
    assert "attributes.json" not in " ".join(names)


def test_container_without_root_attributes_is_an_implicit_group() -> None:
    root = napari_n5zarr.open(CORPUS / "tensorstore/tensorstore/driver/n5/testdata")
    assert isinstance(root, zarr.Group)
    assert set(root.array_keys()) == {"raw", "gzip", "bzip2", "xz", "blosc"}
    # block folders inside an array are never groups
    with pytest.raises(KeyError):
        root["raw/0"]


def test_spec_example_translates_both_ways() -> None:
    from napari_n5zarr.n5.metadata import attributes_to_zarr, zarr_to_attributes

    example = CORPUS / "zarr-extensions-n5_default/codecs/n5_default/examples/zstd_array"
    attributes = json.loads((example / "attributes.json").read_text())
    zarr_json = json.loads((example / "zarr.json").read_text())
    translated = attributes_to_zarr(attributes)
    assert translated == {**zarr_json, "attributes": {}}
    assert zarr_to_attributes(zarr_json) == attributes
    # and zarr-python accepts the example as it is
    arr = zarr.open_array(example, mode="r")
    assert arr.shape == (256, 128)
    assert (arr[...] == 0).all()
