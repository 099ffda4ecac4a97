"""zarr's check of a dataset document runs once per distinct document: an export builds
each level's metadata twice (plan, publish). Refused documents are refused every time."""

from __future__ import annotations

import pytest
from zarr.core.metadata import v3

from napari_n5zarr.errors import N5MetadataError
from napari_n5zarr.n5.metadata import N5DatasetMetadata


@pytest.fixture
def zarr_checks(monkeypatch):
    calls = []
    real = v3.ArrayV3Metadata.from_dict.__func__

    def counting(cls, data):
        calls.append(data["shape"])
        return real(cls, data)

    monkeypatch.setattr(v3.ArrayV3Metadata, "from_dict", classmethod(counting))
    return calls


def test_the_same_document_is_checked_by_zarr_once(zarr_checks):
    blocks = (3, 7, 11)  # blocks no other test builds
    for _ in range(3):
        meta = N5DatasetMetadata(
            dimensions=(7, 93, 1011),
            block_size=blocks,
            data_type="uint16",
            compression={"type": "gzip"},
        )
    assert zarr_checks == [[7, 93, 1011]]
    N5DatasetMetadata(
        dimensions=(7, 93, 1011),
        block_size=blocks,
        data_type="uint16",
        compression={"type": "zstd"},
    )
    assert len(zarr_checks) == 2  # another document: checked
    assert meta.codec() is not None


def test_datasets_that_differ_in_extent_only_are_checked_once(zarr_checks):
    """A listing meets thousands of datasets that differ in their extent: one check (the
    tree's rows and the N5 store's translations share this one cache)."""
    blocks = (5, 13, 17)  # blocks no other test builds
    for n in range(1, 4):
        N5DatasetMetadata(
            dimensions=(n, 2 * n, 3 * n),
            block_size=blocks,
            data_type="uint8",
            compression={"type": "raw"},
        )
    assert len(zarr_checks) == 1
    from napari_n5zarr.n5.metadata import check_zarr_accepts

    doc = N5DatasetMetadata(
        dimensions=(9, 9, 9), block_size=blocks, data_type="uint8", compression={"type": "raw"}
    ).to_zarr_json()
    check_zarr_accepts({**doc, "attributes": {"anything": 1}})
    assert len(zarr_checks) == 1


def test_a_refused_document_is_refused_every_time(zarr_checks):
    for _ in range(2):
        with pytest.raises(N5MetadataError, match="zarr cannot represent"):
            N5DatasetMetadata(
                dimensions=(5, 1013),
                block_size=(4, 4),
                data_type="uint8",
                compression={"type": "zstd", "level": 99},
            )
    assert len(zarr_checks) == 2
