"""The seam to zarr's internals works on the installed zarr (the floor run checks 3.3.0):
each name it wraps is exercised on a real zarr object, and the byte-range spans that
replaced zarr's private ``_normalize_byte_range_index`` slice as zarr's stores do."""

from __future__ import annotations

import importlib
import zipfile

import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.storage import ZipStore

from napari_n5zarr import zarr_internals
from napari_n5zarr.byte_ranges import byte_span
from napari_n5zarr.n5.codec import CODEC_NAME, N5DefaultCodec, ensure_codecs_registered

DATA = bytes(range(10))


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (None, DATA),
        (RangeByteRequest(2, 5), DATA[2:5]),
        (RangeByteRequest(8, 50), DATA[8:]),
        (RangeByteRequest(20, 30), b""),
        (RangeByteRequest(5, 2), b""),
        (OffsetByteRequest(3), DATA[3:]),
        (OffsetByteRequest(12), b""),
        (SuffixByteRequest(4), DATA[-4:]),
        (SuffixByteRequest(40), DATA),
        (SuffixByteRequest(0), b""),
    ],
)
def test_byte_span_slices_as_zarrs_stores_do(request_, expected):
    start, end = byte_span(request_, len(DATA))
    assert 0 <= start <= end <= len(DATA)
    assert DATA[start:end] == expected
    # and as zarr's own MemoryStore answers the same request
    store = zarr.storage.MemoryStore()
    buf = zarr.buffer.default_buffer_prototype()
    zarr_internals.sync(store.set("k", buf.buffer.from_bytes(DATA)))
    assert zarr_internals.sync(store.get("k", buf, request_)).to_bytes() == expected


def test_byte_span_refuses_what_is_no_byte_request():
    with pytest.raises(TypeError, match="Unexpected byte_range"):
        byte_span((1, 2), 10)  # type: ignore[arg-type]


def test_zip_archive_opens_a_zip_store_nobody_opened(tmp_path):
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("x/attributes.json", "{}")
    store = ZipStore(path, mode="r", read_only=True)
    archive = zarr_internals.zip_archive(store)
    assert isinstance(archive, zipfile.ZipFile)
    assert archive.namelist() == ["x/attributes.json"]
    assert zarr_internals.zip_archive(store) is archive
    store.close()


def test_codec_registry_lists_our_codec():
    ensure_codecs_registered()
    registry = zarr_internals.codec_registry(CODEC_NAME)
    registry.lazy_load()
    assert N5DefaultCodec in registry.values()


@pytest.mark.parametrize(("cls", "name"), zarr_internals.OVERRIDDEN)
def test_overridden_private_hooks_exist(cls, name):
    module, _, attr = cls.rpartition(".")
    assert callable(getattr(getattr(importlib.import_module(module), attr), name))


def test_every_name_the_seam_exports_exists():
    assert all(hasattr(zarr_internals, name) for name in zarr_internals.__all__)
