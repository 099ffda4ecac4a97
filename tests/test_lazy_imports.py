"""Opening a dataset imports only the compression library it uses, and nothing of the write
side, the CLI or Qt: measured in a fresh interpreter (``sys.modules`` after the read),
so the first open stays cheap and the laziness cannot silently regress."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr

SRC = Path(napari_n5zarr.__file__).resolve().parents[1]
COMPRESSIONS = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip"},
    "zstd": {"type": "zstd", "level": 3},
    "blosc": {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "lz4": {"type": "lz4", "blockSize": 65536},
    "bzip2": {"type": "bzip2"},
}
# compression library modules -> the N5 compression that needs them
LIBRARIES = {
    "deflate": "gzip",
    "lz4.block": "lz4",
    "xxhash": "lz4",
    "numcodecs.blosc": "blosc",
    "zstandard": "zstd",
    "bz2": "bzip2",
}
NEVER = (
    "napari_n5zarr.write",
    "napari_n5zarr.cli",
    "qtpy",
    "PyQt5",
    "PyQt6",
    "PySide6",
    "magicgui",
    "tensorstore",
    "yaozarrs",  # OME-NGFF models: only an OME export needs them (write/ome.py)
    "ome_zarr_models",
    "pydantic",
)

CHILD = r"""
import json, sys
import numpy as np
import zarr  # the baseline: what zarr itself imports is not ours to avoid
how, path = sys.argv[1], sys.argv[2]
if how == "get_reader":  # ...nor what dask imports: napari's layers are dask arrays, and
    import dask.array  # dask's first compute imports distributed (which loads lz4) when
    try:  # it is installed
        import distributed
    except ImportError:
        pass
baseline = set(sys.modules)
if how == "open":
    import napari_n5zarr
    napari_n5zarr.open(path)[...]
else:
    from napari_n5zarr._napari.reader import get_reader
    reader = get_reader(path)
    layers = reader(path)
    data = layers[0][0]
    level = data[0] if isinstance(data, list) else data
    np.asarray(level[(0,) * (level.ndim - 2)])  # decode blocks of a plane
print(json.dumps({"baseline": sorted(baseline), "after": sorted(set(sys.modules))}))
"""


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    root_path = tmp_path_factory.mktemp("lazy") / "c.n5"
    root = napari_n5zarr.open(root_path, mode="w")
    data = (np.arange(20 * 24 * 28) % 251).astype("uint16").reshape(20, 24, 28)
    for name, compression in COMPRESSIONS.items():
        arr = napari_n5zarr.create_dataset(
            root, name, shape=data.shape, dtype="uint16", chunks=(8, 8, 8), compression=compression
        )
        napari_n5zarr.open(root_path / name, mode="r+")[...] = data
        del arr
    return {name: root_path / name for name in COMPRESSIONS}


def imported(how: str, path: Path, tmp_path: Path) -> tuple[set[str], set[str]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "NAPARI_CONFIG": str(tmp_path / "napari.yaml"),
    }
    command = [sys.executable, "-c", CHILD, how, str(path)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return set(result["baseline"]), set(result["after"])


@pytest.mark.parametrize("how", ["open", "get_reader"])
@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_reading_imports_only_the_library_it_uses(datasets, tmp_path, how: str, name: str) -> None:
    baseline, after = imported(how, datasets[name], tmp_path)
    ours = after - baseline
    for module, needed_by in LIBRARIES.items():
        if needed_by == name and module not in baseline:
            assert module in ours, f"{module} should have been imported to read {name}"
        if needed_by != name:
            assert module not in ours, f"reading {name} imported {module}"
    for prefix in NEVER:
        assert not any(m == prefix or m.startswith(prefix + ".") for m in ours), (
            f"reading imported {prefix}"
        )
    assert (
        "napari_n5zarr.n5.block_format" in after
    )  # the read really went through the block decoder...
    assert (
        "napari_n5zarr.n5.codec" in after
    )  # ...through the store chain and the codec (one reader)


PYRAMID_CHILD = r"""
import json, sys
import numpy as np
from napari_n5zarr._napari.reader import get_reader
path = sys.argv[1]
layers = get_reader(path)(path)
data, kwargs, _ = layers[0]
assert kwargs["multiscale"] and len(data) == 3, kwargs
plane = np.asarray(data[0][5])  # what napari's first frame reads: a plane of a level
print(json.dumps({"modules": sorted(sys.modules), "plane": plane.tolist(), "limits": kwargs["contrast_limits"]}))
"""


def test_napari_open_path_imports_no_dask_array_nor_distributed(tmp_path: Path) -> None:
    """get_reader + read on an N5 Viewer pyramid, then a plane of level 0 (napari's first
    frame): dask.array (~0.5 s) and distributed (imported by a dask compute) stay unloaded."""
    root = napari_n5zarr.open(tmp_path / "p.n5", mode="w")
    root.attrs.update({"pixelResolution": {"unit": "um", "dimensions": [1.0, 1.0, 1.0]}})
    data = (np.arange(20 * 24 * 28) % 251).astype("uint16").reshape(20, 24, 28)  # z, y, x
    for k in range(3):
        level = data[:: 2**k, :: 2**k, :: 2**k]
        napari_n5zarr.create_dataset(
            root,
            f"s{k}",
            shape=level.T.shape,
            dtype="uint16",
            chunks=(8, 8, 8),
            compression={"type": "gzip"},
        )
        napari_n5zarr.open(tmp_path / "p.n5" / f"s{k}", mode="r+")[...] = level.T
        napari_n5zarr.open(tmp_path / "p.n5" / f"s{k}", mode="r+").attrs["downsamplingFactors"] = [
            2**k
        ] * 3
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "NAPARI_CONFIG": str(tmp_path / "napari.yaml"),
    }
    out = subprocess.run(
        [sys.executable, "-c", PYRAMID_CHILD, str(tmp_path / "p.n5")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(
        np.array(result["plane"], dtype="uint16"), data[5]
    )  # the read was real
    coarsest = data[::4, ::4, ::4]
    assert list(result["limits"]) == [
        float(coarsest.min()),
        float(coarsest.max()),
    ]  # from the coarsest level
    for module in ("dask.array", "distributed"):
        assert module not in result["modules"], f"the open path imported {module}"


def test_napari_open_of_a_local_pyramid_reads_through_the_n5_stores(tmp_path: Path) -> None:
    """read_path on a local N5 pyramid (as tensorstore and n5-java write it: N5 only) and a
    plane of level 0 (napari's first frame) read through the one path: the N5 stores and the
    codec's block decoder (issue 20: no zarr-free second reader), and load no dask.array."""
    root = tmp_path / "p.n5"
    root.mkdir()
    (root / "attributes.json").write_text(
        json.dumps({"n5": "4.0.0", "resolution": [1, 1, 2], "units": ["um"] * 3})
    )
    data = (np.arange(20 * 24 * 28) % 251).astype("uint16").reshape(20, 24, 28)  # z, y, x
    for k in range(3):
        level = np.ascontiguousarray(data[:: 2**k, :: 2**k, :: 2**k].T)  # N5 order
        arr = napari_n5zarr.create_dataset(napari_n5zarr.open(root, mode="a"), f"s{k}", shape=level.shape,
                                           dtype="uint16", chunks=(8, 8, 8), compression={"type": "gzip"},
                                           attributes={"downsamplingFactors": [2**k] * 3})  # fmt: skip
        arr[...] = level
        (root / f"s{k}" / "zarr.json").unlink()  # N5 only, as other writers leave it
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
        "NAPARI_CONFIG": str(tmp_path / "napari.yaml"),
    }
    out = subprocess.run(
        [sys.executable, "-c", PYRAMID_CHILD, str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_array_equal(
        np.array(result["plane"], dtype="uint16"), data[5]
    )  # the read was real
    assert "napari_n5zarr.n5.block_format" in result["modules"]
    assert "deflate" in result["modules"]  # decoded here
    assert (
        "napari_n5zarr.n5.stores" in result["modules"]
    )  # metadata and blocks came through the N5 stores
    assert "dask.array" not in result["modules"], "the open path imported dask.array"
