"""A local N5 folder read without zarr (read/local.py) gives exactly what the zarr path gives:
the same layer tuples (kwargs, level types, every value), the same notices (missing
blocks -> fill value, truncated and padded edge blocks, corrupt blocks -> fill value and one
notice naming the block); anything unusual goes through zarr as before."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from format_cases import COMPRESSIONS as ALL_COMPRESSIONS
from format_cases import sample, write_blockwise
from zarr.storage import LocalStore

import napari_n5zarr
import napari_n5zarr._napari.layers as layers_mod
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.read import block_cache as bc
from napari_n5zarr.read.local import LocalNode, open_local

DATA = Path(__file__).parents[1] / "data"
LOCAL_LAYERS = layers_mod._local_layers
ROOTS = sorted(
    {p.parent for d in ("corpus", "conventions") for p in (DATA / d).rglob("attributes.json")}, key=lambda p: p.as_posix()
)
FALLBACK = ("shardExamples", "urlAttributes.n5", "ngff_grpAttributes")
"""Corpus folders zarr must open: experimental sharding (refused), no dataset at all."""

COMPRESSIONS = {**ALL_COMPRESSIONS, "legacy": "gzip"}  # + compressionType, N5 before 1.0


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(bc, "_cache", bc.BlockCache(bc.default_cache_bytes()))


# -- writing test folders ---------------------------------------------------------------
def write_dataset(root: Path, path: str, data: np.ndarray, block, compression, *, boundary="truncate", skip=(), attrs=None):
    """``data`` (N5 order) block by block: edge blocks truncated, padded (with 99) or
    mixed (:func:`write_blockwise`); blocks in ``skip`` absent; a ``str`` compression
    is written in the legacy form (``compressionType``)."""
    given = {"type": compression} if isinstance(compression, str) else compression
    write_blockwise(root, path, data, block, given, boundary=boundary, skip=skip, attrs=attrs)
    if isinstance(compression, str):  # the legacy form: {"compressionType": "gzip"}
        doc_path = root / path / "attributes.json"
        doc = json.loads(doc_path.read_text())
        del doc["compression"]
        doc["compressionType"] = compression
        doc_path.write_text(json.dumps(doc))
        (root / path / "zarr.json").unlink(missing_ok=True)


def write_pyramid(root: Path, data: np.ndarray, block, compression, *, levels=3, boundary="truncate",
                  skip=(), group_attrs=None, name=lambda k: f"s{k}") -> None:  # fmt: skip
    """A pyramid of ``data`` (N5 order): level k every 2**k-th value; ``skip`` blocks absent in every level."""
    group = napari_n5zarr.open(root, mode="a")
    group.attrs.update(group_attrs if group_attrs is not None else {"pixelResolution": {"unit": "um", "dimensions": [0.5, 0.5, 2.0][: data.ndim]}})
    for k in range(levels):
        level = data[(slice(None, None, 2**k),) * data.ndim]
        write_dataset(root, name(k), np.ascontiguousarray(level), block, compression, boundary=boundary, skip=skip,
                      attrs={"downsamplingFactors": [2**k] * data.ndim})  # fmt: skip


# -- reading both ways ------------------------------------------------------------------
def materialize(layers):
    """Every level of every layer read whole, a plane, a region and a strided preview."""
    out = []
    for data, _kwargs, _kind in layers:
        levels = data if isinstance(data, list) else [data]
        reads = []
        for level in levels:
            whole = np.asarray(level)
            mid = tuple(n // 2 for n in level.shape[:-2])
            reads.append((type(level).__name__, level.shape, str(level.dtype), whole, np.asarray(level[mid]),
                          np.asarray(level[..., 1:-1, 2:]), np.asarray(level[..., ::2, ::3])))  # fmt: skip
        out.append(reads)
    return out


def read_both(path: Path, monkeypatch, *, light: bool = True):
    """(layers, reads, notices) through the zarr-free path (asserted used when ``light``),
    then through zarr (the zarr-free path switched off)."""
    used = []
    original = LOCAL_LAYERS

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        used.append(result is not None)
        return result

    results = []
    for attempt in (spy, lambda *a, **k: None):
        monkeypatch.setattr(layers_mod, "_local_layers", attempt)
        notices: list[tuple[str, str]] = []
        got = read_path(path, lambda level, message, notices=notices: notices.append((level, message)))
        results.append((got, materialize(got), notices))
    assert used == [light], f"zarr-free path used: {used}, expected {light}"
    return results


def assert_same(path: Path, monkeypatch, *, light: bool = True) -> list:
    (new, new_reads, new_notes), (old, old_reads, old_notes) = read_both(path, monkeypatch, light=light)
    assert [(kind, kwargs) for _, kwargs, kind in new] == [(kind, kwargs) for _, kwargs, kind in old]
    assert len(new_reads) == len(old_reads)
    for layer_new, layer_old in zip(new_reads, old_reads, strict=True):
        assert len(layer_new) == len(layer_old)
        for level_new, level_old in zip(layer_new, layer_old, strict=True):
            assert level_new[:3] == level_old[:3]  # reader type, shape, dtype
            for a, b in zip(level_new[3:], level_old[3:], strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    assert sorted(new_notes) == sorted(old_notes)
    return new_notes


# -- the corpus: every writer, every compression -------------------------------------------
@pytest.mark.parametrize("root", ROOTS, ids=[p.relative_to(DATA).as_posix() for p in ROOTS])
def test_every_corpus_folder_reads_the_same_without_zarr(root: Path, monkeypatch) -> None:
    assert_same(root, monkeypatch, light=not any(part in root.as_posix() for part in FALLBACK))


# -- written here: compressions, dtypes, boundaries, missing and corrupt blocks ----------
@pytest.mark.parametrize("compression", list(COMPRESSIONS))
@pytest.mark.parametrize("boundary", ["truncate", "pad", "mixed"])
def test_pyramid_with_missing_and_edge_blocks(tmp_path, monkeypatch, compression: str, boundary: str) -> None:
    data = sample((21, 18, 11), "uint16")  # N5 order: x, y, z
    write_pyramid(tmp_path / "p.n5", data, (8, 8, 4), COMPRESSIONS[compression], boundary=boundary, skip={(1, 0, 0)})
    assert assert_same(tmp_path / "p.n5", monkeypatch) == []


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint32", "int32", "uint64", "int64", "float32", "float64"])
def test_every_dtype(tmp_path, monkeypatch, dtype: str) -> None:
    write_pyramid(tmp_path / "p.n5", sample((13, 10, 6), dtype), (4, 4, 4), COMPRESSIONS["zstd"], boundary="mixed", skip={(0, 1, 1)})
    assert_same(tmp_path / "p.n5", monkeypatch)


def test_2d_rgb_labels_channels_and_several_images(tmp_path, monkeypatch) -> None:
    root = tmp_path / "c.n5"
    napari_n5zarr.open(root, mode="w").attrs.update({"resolution": [2.0, 3.0, 4.0], "units": ["nm", "nm", "nm"]})
    write_dataset(root, "plane", sample((30, 20), "float32"), (16, 16), COMPRESSIONS["gzip"])
    write_dataset(root, "rgb", sample((3, 12, 10), "uint8"), (3, 8, 8), COMPRESSIONS["raw"])
    write_dataset(root, "labels", sample((9, 8, 7), "uint64") % 5, (4, 4, 4), COMPRESSIONS["blosc"])
    write_dataset(root, "stack", sample((9, 8, 3, 5), "uint16"), (4, 4, 1, 5), COMPRESSIONS["lz4"],
                  attrs={"axes": ["x", "y", "c", "z"]})  # fmt: skip
    for c in range(2):
        write_pyramid(root / "ch" / f"c{c}", sample((12, 10, 8), "uint16", c), (8, 8, 8), COMPRESSIONS["gzip"], levels=2)
    assert assert_same(root, monkeypatch) == []
    write_dataset(root, "line", sample((9,), "uint8"), (4,), COMPRESSIONS["raw"])  # 1-D: skipped, said so...
    notes = assert_same(root, monkeypatch, light=False)  # ...by zarr's path: a skipped image reads it all there
    assert [m for _, m in notes if "skipped" in m] == ["napari-n5zarr: skipped line: 1-D data cannot be shown as an image"]


def test_calibration_conventions_and_inherited_attributes(tmp_path, monkeypatch) -> None:
    outer = tmp_path / "project"
    outer.mkdir()
    (outer / "attributes.json").write_text(json.dumps({"n5": "4.0.0", "pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}))
    root = outer / "volume"  # inherits the resolution of the container root above it
    write_pyramid(root, sample((16, 16, 8), "uint8"), (8, 8, 8), COMPRESSIONS["raw"], group_attrs={})
    assert_same(root, monkeypatch)
    cosem = tmp_path / "cosem.n5"
    transform = {"axes": ["z", "y", "x"], "units": ["nm"] * 3, "scale": [8.0, 4.0, 4.0], "translate": [1.0, 2.0, 3.0]}
    write_pyramid(cosem, sample((16, 16, 8), "uint16"), (8, 8, 8), COMPRESSIONS["zstd"], levels=2, group_attrs={
        "multiscales": [{"datasets": [{"path": f"s{k}", "transform": {**transform, "scale": [v * 2**k for v in transform["scale"]]}} for k in range(2)]}]})  # fmt: skip
    assert_same(cosem, monkeypatch)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_attributes_json_above_the_container_blocks_neither_path(tmp_path) -> None:
    """Inherited attributes are read from the folders above the container: a FIFO there
    must read as "no attributes", not wait for a writer forever (both paths; in a
    subprocess, so a regression fails on the timeout instead of hanging the suite)."""
    import subprocess
    import sys

    outer = tmp_path / "project"
    outer.mkdir()
    os.mkfifo(outer / "attributes.json")
    root = outer / "volume"
    write_pyramid(root, sample((16, 16, 8), "uint8"), (8, 8, 8), COMPRESSIONS["raw"], levels=2)
    code = f"""
import json, sys
import napari_n5zarr._napari.layers as layers
from napari_n5zarr._napari.reader import read_path
out = []
for zarr_free in (True, False):
    if not zarr_free:
        layers._local_layers = lambda *a, **k: None  # the zarr path
    found = read_path({str(root)!r}, notify=lambda level, message: out.append(message))
    out.append([len(found), list(found[0][1]["scale"]), "zarr" in sys.modules])
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    zarr_free, through_zarr = json.loads(done.stdout)
    assert zarr_free == [1, [2.0, 0.5, 0.5], False]  # the container's own pixelResolution, no zarr loaded
    assert through_zarr[:2] == zarr_free[:2]


def test_a_single_dataset_and_a_dataset_at_a_pyramid_level(tmp_path, monkeypatch, calibrated_pyramid) -> None:
    folder, _ = calibrated_pyramid
    assert_same(folder, monkeypatch)  # this package's own export (attributes.json and zarr.json)
    assert_same(folder / "s1", monkeypatch)
    assert_same(folder / "s0" / "attributes.json", monkeypatch)  # a metadata file names its folder


def corrupt(path: Path, how: str) -> None:
    if how == "garbage":
        path.write_bytes(path.read_bytes()[:12] + b"\x00not gzip at all")
    elif how == "interior header":  # a truncated header in an interior block
        raw = bytearray(path.read_bytes())
        raw[4:8] = (3).to_bytes(4, "big")
        path.write_bytes(bytes(raw))
    elif how == "huge file":  # far larger than any encoding of the block (sparse)
        with open(path, "r+b") as f:
            f.truncate(1 << 24)
    elif how == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif how == "object mode":
        raw = bytearray(path.read_bytes())
        raw[0:2] = (2).to_bytes(2, "big")
        path.write_bytes(bytes(raw))


@pytest.mark.parametrize("how", ["garbage", "interior header", "huge file", "fifo", "object mode"])
def test_a_corrupt_block_reads_as_fill_value_and_is_named_once(tmp_path, monkeypatch, how: str) -> None:
    root = tmp_path / "p.n5"
    write_pyramid(root, sample((16, 16, 8), "uint16"), (8, 8, 4), COMPRESSIONS["gzip"], levels=2)
    corrupt(root / "s1" / "0" / "0" / "0", how)  # the coarsest level: read for the contrast limits
    corrupt(root / "s0" / "1" / "0" / "1", how)
    notes = assert_same(root, monkeypatch)
    assert len(notes) == 2 and all("s1/0/0/0" in m or "s0/1/0/1" in m for _, m in notes), notes  # naming the block
    assert all(str(root) in m and "(shown as fill value)" in m for _, m in notes), notes


def test_too_many_entries_or_images_is_said_the_same(tmp_path, monkeypatch) -> None:
    root = tmp_path / "many.n5"
    napari_n5zarr.open(root, mode="w")
    for i in range(layers_mod.MAX_LAYERS + 1):
        write_dataset(root, f"d{i}", sample((4, 4), "uint8"), (4, 4), COMPRESSIONS["raw"])
    (new, _, new_notes), (old, _, old_notes) = read_both(root, monkeypatch)
    assert new == old == [] and new_notes == old_notes and "more than 32 images" in new_notes[0][1]
    for i in range(layers_mod.MAX_CHILDREN):
        (root / f"f{i}").write_text("")
    (new, _, new_notes), (old, _, old_notes) = read_both(root, monkeypatch)
    assert new == old == [] and new_notes == old_notes and "more than 256 entries" in new_notes[0][1]


# -- what still goes through zarr ------------------------------------------------------------
def test_unusual_folders_go_through_zarr_as_before(tmp_path, monkeypatch) -> None:
    import zarr

    plain = tmp_path / "plain.zarr"  # a Zarr v3 array: zarr.json only
    zarr.create_array(LocalStore(plain), shape=(6, 5), chunks=(3, 3), dtype="uint8")[...] = np.arange(30, dtype="uint8").reshape(6, 5)
    assert open_local(plain) is None
    assert_same(plain, monkeypatch, light=False)

    broken = tmp_path / "broken.n5"  # one child's metadata is not JSON: zarr says so, the sibling reads
    write_pyramid(broken / "good", sample((8, 8, 8), "uint8"), (4, 4, 4), COMPRESSIONS["raw"], levels=1)
    (broken / "bad").mkdir()
    (broken / "bad" / "attributes.json").write_text("{not json")
    notes = assert_same(broken, monkeypatch, light=False)
    assert any("bad" in m and "JSON" in m for _, m in notes)

    refused = tmp_path / "refused.n5"  # a zstd level zarr refuses: zarr's own message
    write_dataset(refused, "d", sample((4, 4), "uint8"), (4, 4), COMPRESSIONS["zstd"])
    doc = json.loads((refused / "d" / "attributes.json").read_text())
    (refused / "d" / "attributes.json").write_text(json.dumps({**doc, "compression": {"type": "zstd", "level": 23}}))
    notes = assert_same(refused, monkeypatch, light=False)
    assert any("less than or equal to 22" in m for _, m in notes)

    assert open_local(tmp_path / "nothing-here") is None and open_local("https://example.org/x.n5") is None
    (tmp_path / "empty").mkdir()
    assert open_local(tmp_path / "empty") is None


def test_strided_reads_open_zarr_only_when_they_happen(tmp_path) -> None:
    root = tmp_path / "p.n5"
    data = sample((20, 12, 6), "uint16")
    write_pyramid(root, data, (8, 8, 4), COMPRESSIONS["gzip"], levels=1)
    (layer,) = read_path(root, lambda *a: pytest.fail(str(a)))
    level = layer[0]
    assert level._array is None  # the plane napari shows needs no zarr
    np.testing.assert_array_equal(level[3], data.T[3])
    assert level._array is None
    np.testing.assert_array_equal(level[:, ::2, ::3], data.T[:, ::2, ::3])  # strided: zarr's path
    assert level._array is not None and level.array.shape == data.shape
    np.testing.assert_array_equal(np.asarray(level.to_dask()), data.T)


def test_a_rewritten_folder_opened_again_shows_the_new_values(tmp_path) -> None:
    """Each opening has its own cache token: blocks cached for an earlier opening of the
    same files are never shown after the files change."""
    root = tmp_path / "p.n5"
    first = sample((16, 16, 8), "uint16", 1)
    write_pyramid(root, first, (8, 8, 8), COMPRESSIONS["raw"], levels=1)
    (layer,) = read_path(root, print)
    np.testing.assert_array_equal(layer[0][2], first.T[2])
    second = sample((16, 16, 8), "uint16", 2)
    shutil.rmtree(root)
    write_pyramid(root, second, (8, 8, 8), COMPRESSIONS["raw"], levels=1)
    (again,) = read_path(root, print)
    np.testing.assert_array_equal(again[0][2], second.T[2])
    a, b = layer[0].source, again[0].source
    assert a.token != b.token and isinstance(a.layout.get_sync.__self__, LocalNode)
    zarr_level = napari_n5zarr.open(root / "s0")
    from napari_n5zarr.read.fetch import BlockSource

    assert BlockSource.for_array(zarr_level).token not in (a.token, b.token)  # one counter for both kinds
