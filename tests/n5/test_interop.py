"""Independent writers and readers: tensorstore's n5 driver and z5py."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import zarr
from format_cases import TENSORSTORE_COMPRESSIONS as TS_COMPRESSIONS

import napari_n5zarr


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# Each tool's tests skip on their own without it (one missing tool must not hide the other's).
ts = _optional("tensorstore")
z5py = _optional("z5py")
needs_tensorstore = pytest.mark.skipif(ts is None, reason="tensorstore is not installed")
needs_z5py = pytest.mark.skipif(z5py is None, reason="z5py is not installed")

Z5_COMPRESSIONS = ["raw", "gzip", "bzip2", "xz", "blosc", "zstd"]
DTYPES = ["uint8", "int16", "uint32", "int64", "float32", "float64"]


def data_for(dtype: str, shape=(37, 21, 9)) -> np.ndarray:
    rng = np.random.default_rng(7)
    return (rng.normal(size=shape) * 100).astype(dtype)


def ts_n5(path: Path, **extra):
    spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}, **extra}
    return ts.open(spec).result()


def write_ours(
    path: Path, data: np.ndarray, compression: dict, block=(8, 8, 4), *, dual: bool = True
) -> None:
    """Write ``data`` as the N5 dataset ``path`` (its parent becomes the container)."""
    from zarr.storage import LocalStore

    from napari_n5zarr.n5.stores import N5DefaultStore

    parent = zarr.open_group(
        N5DefaultStore(LocalStore(path.parent), write_zarr_json=dual), mode="a"
    )
    arr = napari_n5zarr.create_dataset(
        parent, path.name, shape=data.shape, dtype=data.dtype, chunks=block, compression=compression
    )
    arr[...] = data


@needs_tensorstore
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", TS_COMPRESSIONS)
def test_tensorstore_writes_we_read(tmp_path: Path, name: str, dtype: str) -> None:
    data = data_for(dtype)
    t = ts_n5(
        tmp_path / "t.n5",
        create=True,
        metadata={
            "dimensions": list(data.shape),
            "blockSize": [8, 8, 4],
            "dataType": dtype,
            "compression": TS_COMPRESSIONS[name],
        },
    )
    t[...] = data
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "t.n5")[...], data)


@needs_tensorstore
@pytest.mark.parametrize("dual", [True, False], ids=["dual", "n5-only"])
@pytest.mark.parametrize("name", TS_COMPRESSIONS)
def test_we_write_tensorstore_reads(tmp_path: Path, name: str, dual: bool) -> None:
    data = data_for("uint16")
    write_ours(tmp_path / "o.n5", data, TS_COMPRESSIONS[name], dual=dual)
    np.testing.assert_array_equal(ts_n5(tmp_path / "o.n5").read().result(), data)


@needs_tensorstore
def test_tensorstore_reads_our_truncated_blocks(tmp_path: Path) -> None:
    from test_roundtrip import write_blocks  # same folder
    from zarr.storage import LocalStore

    data = data_for("float32", (19, 10, 3))
    write_blocks(
        LocalStore(tmp_path / "c"), "d", data, (8, 4, 2), {"type": "gzip", "level": 6}, "mixed"
    )
    np.testing.assert_array_equal(ts_n5(tmp_path / "c/d").read().result(), data)


@needs_z5py
@pytest.mark.parametrize("name", Z5_COMPRESSIONS)
def test_z5py_writes_we_read(tmp_path: Path, name: str) -> None:
    data = data_for("int32")  # z5py is C order: its array is the transpose of ours
    f = z5py.File(str(tmp_path / "z.n5"), "w")
    ds = f.create_dataset(
        "d", shape=data.T.shape, chunks=(3, 5, 7), dtype="int32", compression=name
    )
    ds[:] = data.T
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "z.n5" / "d")[...], data)


@needs_z5py
def test_z5py_lz4_bare_block_reads(tmp_path: Path) -> None:
    """z5py's lz4 is a bare LZ4 block, not lz4-java framing: still read."""
    data = data_for("uint16")
    f = z5py.File(str(tmp_path / "z.n5"), "w")
    f.create_dataset("d", data=data.T, chunks=(3, 5, 7), compression="lz4")
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "z.n5" / "d")[...], data)


@needs_z5py
@pytest.mark.parametrize("name", Z5_COMPRESSIONS)
def test_we_write_z5py_reads(tmp_path: Path, name: str) -> None:
    data = data_for("float64")
    comp = dict(TS_COMPRESSIONS[name])
    write_ours(tmp_path / "c.n5/d", data, comp, dual=False)
    np.testing.assert_array_equal(z5py.File(str(tmp_path / "c.n5"), "r")["d"][:], data.T)


@needs_z5py
def test_z5py_refuses_dual_folders_so_we_offer_n5_only(tmp_path: Path) -> None:
    """Documents a z5py 3 limitation the README mentions."""
    data = data_for("uint8")
    write_ours(tmp_path / "c.n5/d", data, {"type": "raw"}, dual=True)
    with pytest.raises(RuntimeError, match="not both supported"):
        z5py.File(str(tmp_path / "c.n5"), "r")["d"]
    shutil.copytree(
        tmp_path / "c.n5", tmp_path / "copy.n5", ignore=shutil.ignore_patterns("zarr.json")
    )
    np.testing.assert_array_equal(z5py.File(str(tmp_path / "copy.n5"), "r")["d"][:], data.T)
