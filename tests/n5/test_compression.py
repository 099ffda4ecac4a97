"""The one N5 <-> zarr compression table, both directions."""

from __future__ import annotations

import pytest

from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.n5.compression import (
    COMPRESSIONS,
    N5_TYPES,
    n5_to_zarr,
    normalize_n5,
    zarr_to_n5,
)

JAVA_DEFAULTS = [
    {"type": "raw"},
    {"type": "gzip", "level": 6, "useZlib": False},
    {"type": "gzip", "level": 3, "useZlib": True},
    {"type": "bzip2", "blockSize": 9},
    {"type": "xz", "preset": 6},
    {"type": "lz4", "blockSize": 65536},
    {"type": "blosc", "cname": "blosclz", "clevel": 6, "shuffle": 0, "blocksize": 0},
    {"type": "zstd", "level": 3},
]


@pytest.mark.parametrize(
    "n5", JAVA_DEFAULTS, ids=lambda c: c["type"] + ("-zlib" if c.get("useZlib") else "")
)
def test_every_row_round_trips(n5: dict) -> None:
    assert zarr_to_n5(n5_to_zarr(n5)) == n5


def test_table_covers_every_n5_compression() -> None:
    assert set(N5_TYPES) == {"raw", "gzip", "bzip2", "xz", "lz4", "blosc", "zstd"}
    zarr_names = [row.zarr_name for row in COMPRESSIONS]
    assert len(zarr_names) == len(set(zarr_names)), "each zarr codec maps back to one N5 row"


def test_java_gzip_default_level_maps_to_zlib_default() -> None:
    assert n5_to_zarr({"type": "gzip", "level": -1}) == {
        "name": "gzip",
        "configuration": {"level": 6},
    }
    assert n5_to_zarr({"type": "gzip"}) == {"name": "gzip", "configuration": {"level": 6}}


def test_unknown_keys_ignored_on_read() -> None:
    z5py_blosc = {
        "type": "blosc",
        "cname": "lz4",
        "clevel": 5,
        "shuffle": 1,
        "blocksize": 0,
        "nthreads": 1,
    }
    zarr2_gzip = {"type": "gzip", "level": 1, "useZlib": False, "id": "gzip"}
    assert n5_to_zarr(z5py_blosc) == {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
    }
    assert n5_to_zarr(zarr2_gzip) == {"name": "gzip", "configuration": {"level": 1}}


def test_blosc_written_without_nthreads() -> None:
    assert "nthreads" not in zarr_to_n5(
        {
            "name": "blosc",
            "configuration": {
                "cname": "zstd",
                "clevel": 3,
                "shuffle": "bitshuffle",
                "typesize": 2,
                "blocksize": 0,
            },
        }
    )


def test_legacy_compression_type() -> None:
    assert normalize_n5({"compressionType": "gzip"}) == {"type": "gzip"}
    assert normalize_n5({}) == {"type": "raw"}
    assert n5_to_zarr(normalize_n5({"compressionType": "bzip2"})) == {
        "name": "numcodecs.bz2",
        "configuration": {"level": 9},
    }


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"type": "jpeg"}, "unsupported N5 compression 'jpeg'"),
        ({"type": "blosc", "cname": "nope"}, "cname"),
        ({"type": "blosc", "shuffle": 7}, "shuffle"),
        ({"type": "gzip", "level": 12}, "level"),
        ({"type": "xz", "preset": "max"}, "integer"),
    ],
)
def test_bad_compression_objects(bad: dict, match: str) -> None:
    with pytest.raises(N5FormatError, match=match):
        n5_to_zarr(bad)


def test_zarr_codec_without_n5_equivalent() -> None:
    with pytest.raises(N5FormatError, match="no N5 equivalent"):
        zarr_to_n5({"name": "numcodecs.lz4", "configuration": {}})


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 1e999])
def test_non_finite_parameter_is_a_format_error(value: float) -> None:
    with pytest.raises(N5FormatError, match="must be an integer"):
        n5_to_zarr({"type": "zstd", "level": value})


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int32", "float64"])
@pytest.mark.parametrize(
    "compression",
    [
        {"type": "blosc", "cname": "lz4", "shuffle": 1},
        {"type": "zstd", "level": 5},
        {"type": "gzip"},
    ],
)
def test_export_compression_round_trips_and_blosc_shuffles_elements(dtype, compression):
    """The fast compression used by export decodes exactly; blosc's typesize is the
    element size (as tensorstore and n5-java write it), so shuffle groups element bytes."""
    import numpy as np

    from napari_n5zarr.access import ensure_codecs_registered
    from napari_n5zarr.n5.metadata import N5DatasetMetadata

    ensure_codecs_registered()
    block = np.random.default_rng(2).integers(0, 100, size=(7, 9, 11)).astype(dtype)
    codec = N5DatasetMetadata((11, 9, 7), (11, 9, 7), dtype, compression, {}).codec()
    stored = codec.encode_block(block)
    np.testing.assert_array_equal(codec.decode_block(stored, dtype, 3), block)
    if compression["type"] == "blosc":
        assert stored[16 + 3] == np.dtype(dtype).itemsize  # blosc header byte 3: typesize


ZARR_EDGE_CASES = [
    *({"type": "zstd", "level": v} for v in (-131072, -1, 0, 3, 22, 23, 99, 2**40)),
    {"type": "zstd", "level": 3, "checksum": True},
    *({"type": "lz4", "blockSize": v} for v in (1, 63, 64, 65536, 2**25, 2**25 + 1, 2**40)),
    *(
        {"type": "blosc", "cname": "lz4", "clevel": v, "blocksize": b}
        for v in (-3, 0, 9, 100)
        for b in (-1, 0, 2**40)
    ),
    *({"type": "xz", "preset": v} for v in (-5, 0, 9, 100)),
    *({"type": "bzip2", "blockSize": v} for v in (-1, 0, 1, 9, 100)),
    *({"type": "gzip", "level": v, "useZlib": z} for v in (-1, 0, 9) for z in (False, True)),
    {"type": "raw"},
]


@pytest.mark.parametrize(
    "compression", ZARR_EDGE_CASES, ids=lambda c: "-".join(map(str, c.values()))
)
def test_zarr_refuses_exactly_what_zarr_refuses(compression: dict) -> None:
    """The zarr-free reader trusts zarr_refuses() instead of building zarr's metadata: it
    must say True exactly where zarr refuses the dataset (then zarr's path reports it)."""
    from napari_n5zarr.errors import N5MetadataError
    from napari_n5zarr.n5.compression import zarr_refuses
    from napari_n5zarr.n5.metadata import N5DatasetMetadata

    fields = {
        "dimensions": (8, 8),
        "block_size": (4, 4),
        "data_type": "uint16",
        "compression": compression,
    }
    N5DatasetMetadata(**fields, check_zarr=False)  # N5's own checks accept every case here
    if zarr_refuses(compression):
        with pytest.raises(N5MetadataError, match="zarr cannot represent"):
            N5DatasetMetadata(**fields)
    else:
        N5DatasetMetadata(**fields)
