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
    shape = (7, 93, 1011)  # a shape no other test builds
    for _ in range(3):
        meta = N5DatasetMetadata(dimensions=shape, block_size=(8, 8, 8), data_type="uint16", compression={"type": "gzip"})
    assert zarr_checks == [list(shape)]
    N5DatasetMetadata(dimensions=shape, block_size=(8, 8, 8), data_type="uint16", compression={"type": "zstd"})
    assert len(zarr_checks) == 2  # another document: checked
    assert meta.codec() is not None


def test_a_refused_document_is_refused_every_time(zarr_checks):
    for _ in range(2):
        with pytest.raises(N5MetadataError, match="zarr cannot represent"):
            N5DatasetMetadata(dimensions=(5, 1013), block_size=(4, 4), data_type="uint8", compression={"type": "zstd", "level": 99})
    assert len(zarr_checks) == 2
