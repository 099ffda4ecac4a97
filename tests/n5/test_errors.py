"""Bad input is refused with a clear error naming what is wrong, never a deep traceback."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.errors import N5BlockError, N5FormatError, N5MetadataError
from napari_n5zarr.n5.block_format import encode_header


def make_dataset(root: Path, attrs: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    base = {
        "dimensions": [4, 3],
        "blockSize": [4, 3],
        "dataType": "uint16",
        "compression": {"type": "raw"},
    }
    (root / "attributes.json").write_text(json.dumps({**base, **(attrs or {})}))
    return root


def put_block(root: Path, data: bytes, key: str = "0/0") -> None:
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(data)


@pytest.mark.parametrize(("mode", "name"), [(1, "varlength"), (2, "object")])
def test_non_default_block_modes_refused_with_key_and_mode(
    tmp_path: Path, mode: int, name: str
) -> None:
    ds = make_dataset(tmp_path / "d")
    if mode == 1:
        block = struct.pack(">HHIII", 1, 2, 4, 3, 12) + bytes(24)
    else:
        block = struct.pack(">HI", 2, 24) + bytes(24)
    put_block(ds, block)
    with pytest.raises(
        N5BlockError, match=rf"^N5 block 0/0 in {re.escape(str(ds))}: {name} mode \(mode {mode}\)"
    ):
        napari_n5zarr.open(ds)[...]


def test_codec_alone_names_the_mode(tmp_path: Path) -> None:
    """Through zarr without our store (a Zarr-only n5_default array) the codec still refuses."""
    import zarr

    ds = make_dataset(tmp_path / "d")
    napari_n5zarr.open(ds)  # fine
    from napari_n5zarr.n5.metadata import attributes_to_zarr

    (ds / "zarr.json").write_text(
        json.dumps(attributes_to_zarr(json.loads((ds / "attributes.json").read_text())))
    )
    (ds / "attributes.json").unlink()
    put_block(ds, struct.pack(">HHIII", 1, 2, 4, 3, 12) + bytes(24))
    with pytest.raises(N5BlockError, match=r"varlength mode \(mode 1\)"):
        zarr.open_array(ds, mode="r")[...]


@pytest.mark.parametrize(
    ("shape", "match"),
    [
        ((0, 3), r"header shape \[0, 3\]"),
        ((4000000, 3), r"header shape \[4000000, 3\]"),
        ((4, 3, 1), "3 dimensions"),
    ],
)
def test_absurd_headers_refused_before_allocation(tmp_path: Path, shape: tuple, match: str) -> None:
    ds = make_dataset(tmp_path / "d")
    put_block(ds, encode_header(shape) + bytes(24))
    with pytest.raises(N5BlockError, match=rf"^N5 block 0/0 in {re.escape(str(ds))}: .*{match}"):
        napari_n5zarr.open(ds)[...]


def test_short_block_refused(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path / "d")
    put_block(ds, encode_header((4, 3)) + bytes(10))
    with pytest.raises(
        N5BlockError,
        match=r"^N5 block 0/0 in .*: raw payload holds 10 bytes, the header shape needs 24",
    ):
        napari_n5zarr.open(ds)[...]


def test_corrupt_compressed_block_refused(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path / "d", {"compression": {"type": "gzip"}})
    put_block(ds, encode_header((4, 3)) + b"not gzip at all")
    with pytest.raises(N5BlockError, match=r"^N5 block 0/0 in .*: (corrupt|truncated) gzip"):
        napari_n5zarr.open(ds)[...]


def test_lz4_checksum_mismatch_refused(tmp_path: Path) -> None:
    from napari_n5zarr.n5 import lz4block

    ds = make_dataset(tmp_path / "d", {"compression": {"type": "lz4", "blockSize": 65536}})
    stream = bytearray(lz4block.compress(np.arange(12, dtype=">u2").tobytes()))
    stream[17] ^= 0xFF  # checksum field of the first piece
    put_block(ds, encode_header((4, 3)) + bytes(stream))
    with pytest.raises(N5BlockError, match="checksum"):
        napari_n5zarr.open(ds)[...]


@pytest.mark.parametrize(
    ("attrs", "match"),
    [
        ({"dataType": "object"}, "not supported"),
        ({"dataType": "string"}, "not supported"),
        ({"compression": {"type": "jpeg"}}, "unsupported N5 compression 'jpeg'"),
        ({"blockSize": [4]}, "differ in length"),
        ({"blockSize": [0, 3]}, "blockSize"),
        ({"dimensions": "big"}, "dimensions"),
        ({"compression": {"type": "gzip", "level": "high"}}, "integer"),
    ],
)
def test_bad_attributes_refused_clearly(tmp_path: Path, attrs: dict, match: str) -> None:
    ds = make_dataset(tmp_path / "d", attrs)
    with pytest.raises(N5MetadataError, match=match) as info:
        napari_n5zarr.open(ds)
    assert "d" in str(info.value) or "/" in str(info.value)


def test_incomplete_dataset_attributes(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d/attributes.json").write_text('{"dimensions": [3], "dataType": "uint8"}')
    with pytest.raises(N5MetadataError, match="lack"):
        napari_n5zarr.open(tmp_path / "d")


def test_invalid_json(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d/attributes.json").write_text("{not json")
    with pytest.raises(N5FormatError, match="not valid JSON"):
        napari_n5zarr.open(tmp_path / "d")


def test_missing_path_is_an_error_not_an_empty_group(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        napari_n5zarr.open(tmp_path / "nope.n5")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        napari_n5zarr.open(tmp_path / "empty")
    assert list((tmp_path).iterdir()) == [tmp_path / "empty"]  # nothing was created


def test_bad_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        napari_n5zarr.open(".", mode="x")  # type: ignore[arg-type]


def test_unrepresentable_zarr_metadata_refused_on_write(tmp_path: Path) -> None:
    import zarr

    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    with pytest.raises(N5MetadataError, match="chunk key encoding"):
        root.create_array("a", shape=(4,), dtype="uint8")  # zarr's defaults
    with pytest.raises(N5MetadataError, match="n5_default"):
        root.create_array(
            "b", shape=(4,), dtype="uint8", chunk_key_encoding={"name": "v2", "separator": "/"}
        )
    with pytest.raises(N5MetadataError, match="would read a dataset"):
        root.attrs.update({"dimensions": [1], "dataType": "uint8"})
    assert not (tmp_path / "c.n5/a/attributes.json").exists()
    # (zarr applies the update key by key: "dimensions" alone was a legal group attribute)
    assert "dataType" not in json.loads((tmp_path / "c.n5/attributes.json").read_text())
    assert isinstance(napari_n5zarr.open(tmp_path / "c.n5"), zarr.Group)


def test_encode_block_refuses_non_n5_dtypes() -> None:
    from napari_n5zarr.n5.metadata import N5DatasetMetadata

    codec = N5DatasetMetadata(dimensions=(3,), block_size=(3,), data_type="uint8").codec()
    for dtype in ("bool", "complex64", "float16", "<U2"):
        with pytest.raises(N5BlockError, match="data type"):
            codec.encode_block(np.zeros(3, dtype=dtype))
