"""Round trips through every compression, dtype, boundary style and dimensionality."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import zarr
from format_cases import COMPRESSIONS, DTYPES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from zarr.storage import LocalStore, MemoryStore

import napari_n5zarr
from napari_n5zarr.n5.block_format import parse_header
from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.n5.stores import ImplicitGroupStore, N5DefaultStore


def sample(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is None:
        return rng.normal(size=shape).astype(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def write_blocks(
    store, path: str, data: np.ndarray, block: tuple[int, ...], compression: dict, boundary: str
) -> None:
    """Write ``data`` (N5 order) as an N5 dataset block by block (boundary blocks padded,
    truncated or mixed); named apart from the ``write_n5`` fixture, which writes through zarr."""
    group = zarr.open_group(N5DefaultStore(store), mode="a")
    arr = napari_n5zarr.create_dataset(
        group, path, shape=data.shape, dtype=data.dtype, chunks=block, compression=compression
    )
    codec: N5DefaultCodec = arr.metadata.codecs[0]
    grid = [math.ceil(s / b) for s, b in zip(data.shape, block, strict=True)]
    for n, pos in enumerate(itertools.product(*map(range, grid))):
        region = tuple(
            slice(p * b, min((p + 1) * b, s))
            for p, b, s in zip(pos, block, data.shape, strict=True)
        )
        piece = data[region]
        edge = piece.shape != tuple(block)
        if edge and (boundary == "pad" or (boundary == "mixed" and n % 2 == 0)):
            padded = np.zeros(block, dtype=data.dtype)
            padded[tuple(slice(0, s) for s in piece.shape)] = piece
            piece = padded
        key = f"{path}/" + "/".join(map(str, pos))
        zarr.core.sync.sync(
            store.set(key, zarr.core.buffer.cpu.Buffer.from_bytes(codec.encode_block(piece)))
        )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", COMPRESSIONS)
def test_every_compression_and_dtype(tmp_path: Path, name: str, dtype: str) -> None:
    data = sample((13, 7, 5), dtype)
    write_blocks(LocalStore(tmp_path), "d", data, (4, 4, 3), COMPRESSIONS[name], "truncate")
    arr = napari_n5zarr.open(tmp_path / "d")
    out = arr[...]
    assert out.dtype == data.dtype
    np.testing.assert_array_equal(out, data)


BOUNDARIES = ["pad", "truncate", "mixed"]


def _check_round_trip(
    data: np.ndarray, block: tuple[int, ...], name: str, boundary: str, sel: tuple[slice, ...]
) -> None:
    """Write ``data`` with N5 blocks, read it back through the store stack: exactly equal
    (bit for bit: NaN payloads, signed zeros), whole and over ``sel``."""
    store = MemoryStore()
    write_blocks(store, "d", data, block, COMPRESSIONS[name], boundary)
    arr = zarr.open_array(ImplicitGroupStore(N5DefaultStore(store)), path="d", mode="r")
    out = arr[...]
    assert out.dtype == data.dtype
    assert out.shape == data.shape
    np.testing.assert_array_equal(out, data)
    assert out.tobytes() == data.tobytes()
    np.testing.assert_array_equal(arr[sel], data[sel])


@st.composite
def round_trip_cases(
    draw: st.DrawFn,
) -> tuple[np.ndarray, tuple[int, ...], str, str, tuple[slice, ...]]:
    """compression x dtype x boundary style x 1..5D x shape x block x data x a region."""
    ndim = draw(st.integers(1, 5))
    most = {1: 40, 2: 12, 3: 7, 4: 5, 5: 4}[ndim]  # at most ~1,600 elements
    shape = tuple(draw(st.integers(1, most)) for _ in range(ndim))
    block = tuple(draw(st.integers(1, n + 2)) for n in shape)  # blocks beyond the extent too
    dtype = draw(st.sampled_from(DTYPES))
    data = draw(hnp.arrays(dtype, shape))
    sel = []
    for n in shape:
        start = draw(st.integers(0, n - 1))
        sel.append(slice(start, draw(st.integers(start + 1, n))))
    return (
        data,
        block,
        draw(st.sampled_from(sorted(COMPRESSIONS))),
        draw(st.sampled_from(BOUNDARIES)),
        tuple(sel),
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=round_trip_cases())
def test_round_trip_property(case) -> None:
    """Any compression, dtype, boundary style, 1D..5D shape and block size round-trips exactly."""
    _check_round_trip(*case)


# Hand-picked corners, always run (the property samples; these must never be missed).
CORNERS = [
    pytest.param("raw", "uint8", (1,), (1,), "truncate", id="one-element"),
    pytest.param("gzip", "int16", (5, 3), (8, 8), "truncate", id="block-beyond-array-truncated"),
    pytest.param("gzip", "int16", (5, 3), (8, 8), "pad", id="block-beyond-array-padded"),
    pytest.param("zstd", "uint32", (8, 4), (4, 2), "mixed", id="no-edge-blocks"),
    pytest.param("lz4", "float64", (3, 3, 3), (1, 1, 1), "truncate", id="unit-blocks"),
    *(
        pytest.param(
            name, dtype, (11, 6, 5, 3, 2), (4, 4, 2, 2, 1), "mixed", id=f"5d-mixed-{name}-{dtype}"
        )
        for name, dtype in zip(
            sorted(COMPRESSIONS), itertools.cycle(["int64", "float32", "uint16", "int8"])
        )
    ),
]


@pytest.mark.parametrize(("name", "dtype", "shape", "block", "boundary"), CORNERS)
def test_round_trip_corners(
    name: str, dtype: str, shape: tuple[int, ...], block: tuple[int, ...], boundary: str
) -> None:
    data = sample(shape, dtype, seed=len(shape))
    if data.dtype.kind in "iu":  # the extremes of the type at the first and last element
        data.flat[0], data.flat[-1] = np.iinfo(dtype).min, np.iinfo(dtype).max
    else:
        data.flat[0], data.flat[-1] = np.nan, -np.inf
    sel = tuple(slice(1, s - 1) if s > 2 else slice(None) for s in shape)
    _check_round_trip(data, block, name, boundary, sel)


def test_truncated_blocks_really_are_truncated(tmp_path: Path) -> None:
    data = sample((10, 7), "int32")
    write_blocks(LocalStore(tmp_path), "d", data, (4, 4), {"type": "raw"}, "truncate")
    assert parse_header((tmp_path / "d/2/1").read_bytes()).shape == (2, 3)
    write_blocks(LocalStore(tmp_path), "p", data, (4, 4), {"type": "raw"}, "pad")
    assert parse_header((tmp_path / "p/2/1").read_bytes()).shape == (4, 4)


@pytest.mark.parametrize("name", COMPRESSIONS)
def test_zarr_write_path_round_trip(tmp_path: Path, name: str) -> None:
    """Writing through zarr (padded blocks) and reading back through open()."""
    data = sample((9, 6, 4), "float32")
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    arr = napari_n5zarr.create_dataset(
        root,
        "a",
        shape=data.shape,
        dtype=data.dtype,
        chunks=(4, 4, 4),
        compression=COMPRESSIONS[name],
        attributes={"note": [1, 2]},
    )
    arr[...] = data
    arr[2:5, 1:3, 0] = -1.0  # partial update of existing blocks
    data[2:5, 1:3, 0] = -1.0
    back = napari_n5zarr.open(tmp_path / "c.n5")["a"]
    np.testing.assert_array_equal(back[...], data)
    assert back.attrs["note"] == [1, 2]
    assert (tmp_path / "c.n5/a/attributes.json").exists()
    assert (tmp_path / "c.n5/a/zarr.json").exists()


@pytest.mark.parametrize("name", ["zstd", "gzip", "gzip-zlib", "lz4", "blosc"])
def test_many_blocks_decoded_concurrently(name: str) -> None:
    """Decoding runs in threads: shared decompressor state must not corrupt anything."""
    from concurrent.futures import ThreadPoolExecutor

    data = sample((64, 64, 32), "uint16", seed=3)
    store = MemoryStore()
    write_blocks(store, "d", data, (16, 16, 8), COMPRESSIONS[name], "truncate")
    arr = zarr.open_array(ImplicitGroupStore(N5DefaultStore(store)), path="d", mode="r")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: arr[...], range(8)))
    for out in results:
        np.testing.assert_array_equal(out, data)
