"""The read wing's one entry (read/images.py: ``open_images``): a location -> its pyramids with
lazy levels, the problems, the hidden pyramids and the too-many verdict, all through the store
chain. Exact values against what was written (missing, truncated, padded and corrupt blocks),
what a broken folder shows, and the napari reader's notices for the same cases."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from format_cases import COMPRESSIONS, sample, write_blockwise

import napari_n5zarr
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.read import block_cache as bc
from napari_n5zarr.read.images import MAX_CHILDREN, Images, open_images


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(bc, "_cache", bc.BlockCache(bc.default_cache_bytes()))


def write_pyramid(
    root: Path,
    data: np.ndarray,
    block,
    compression,
    *,
    levels=2,
    boundary="truncate",
    skip=(),
    group_attrs=None,
) -> None:
    """``data`` (N5 order) as ``s0..``: level k every 2**k-th value; ``skip`` blocks absent in every level."""
    group = napari_n5zarr.open(root, mode="a")
    group.attrs.update(
        group_attrs
        if group_attrs is not None
        else {"pixelResolution": {"unit": "um", "dimensions": [0.5, 0.5, 2.0][: data.ndim]}}
    )
    for k in range(levels):
        level = np.ascontiguousarray(data[(slice(None, None, 2**k),) * data.ndim])
        write_blockwise(
            root,
            f"s{k}",
            level,
            block,
            compression,
            boundary=boundary,
            skip=skip,
            attrs={"downsamplingFactors": [2**k] * data.ndim},
        )


def expected_level(data: np.ndarray, k: int, skip=(), block=None) -> np.ndarray:
    """Level k of :func:`write_pyramid`, napari order, skipped blocks zero."""
    level = data[(slice(None, None, 2**k),) * data.ndim].copy()
    for cell in skip:
        level[tuple(slice(c * b, (c + 1) * b) for c, b in zip(cell, block, strict=True))] = 0
    return level.T


def only(found: Images) -> list[np.ndarray]:
    assert found.error is None, found
    assert found.too_many is None, found
    assert not found.hidden, found
    (image,) = found.images
    return [np.asarray(level) for level in image.levels]


@pytest.mark.parametrize("compression", ["raw", "gzip", "zstd", "blosc", "lz4"])
@pytest.mark.parametrize("boundary", ["truncate", "pad", "mixed"])
def test_levels_hold_exactly_what_was_written(tmp_path, compression, boundary):
    data = sample((21, 18, 11), "uint16")  # N5 order: x, y, z
    block, skip = (8, 8, 4), {(1, 0, 0)}
    write_pyramid(
        tmp_path / "p.n5", data, block, COMPRESSIONS[compression], boundary=boundary, skip=skip
    )
    reports: list[str] = []
    found = open_images(tmp_path / "p.n5", limit=32, report=reports.append)
    levels = only(found)
    assert found.problems == []
    assert reports == []
    for k, level in enumerate(levels):
        np.testing.assert_array_equal(level, expected_level(data, k, skip, block))
    image = found.images[0]
    assert image.multiscale.paths == ("s0", "s1")
    assert image.contrast_limits == (float(levels[-1].min()), float(levels[-1].max()))
    level = image.levels[0]  # a plane, a region and a strided preview
    np.testing.assert_array_equal(np.asarray(level[5]), levels[0][5])
    np.testing.assert_array_equal(np.asarray(level[..., 1:-1, 2:]), levels[0][..., 1:-1, 2:])
    np.testing.assert_array_equal(np.asarray(level[..., ::2, ::3]), levels[0][..., ::2, ::3])


def test_corpus_dataset_matches_the_manifest(corpus_dir):
    record = next(
        r
        for r in json.loads((corpus_dir / "MANIFEST.json").read_text())["datasets"]
        if r["path"].startswith("zarrs_n5/data/gzip.n5")
    )
    expected = np.load(corpus_dir / record["expected"]["file"].split(" ")[0])
    expected = expected if record["expected"]["axis_order"] == "reversed" else expected.T
    (level,) = only(open_images(corpus_dir / record["path"]))
    np.testing.assert_array_equal(level, expected)


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
def test_a_corrupt_block_reads_as_fill_value_and_is_named_once(tmp_path, how):
    root = tmp_path / "p.n5"
    data = sample((16, 16, 8), "uint16") | 1
    write_pyramid(root, data, (8, 8, 4), COMPRESSIONS["gzip"])
    corrupt(root / "s1" / "0" / "0" / "0", how)  # the coarsest level: read for the contrast limits
    corrupt(root / "s0" / "1" / "0" / "1", how)
    notes: list[tuple[str, str]] = []
    (layer,) = read_path(root, lambda level, message: notes.append((level, message)))
    s0 = np.asarray(layer[0][0])
    assert s0[4:8, 0:8, 8:16].max() == 0
    assert s0[0:4].min() > 0  # fill value there only
    np.asarray(layer[0][0][5])  # read again: not named again
    assert len(notes) == 2, notes
    assert all(
        level == "warning" and str(root) in m and "(shown as fill value)" in m for level, m in notes
    ), notes
    assert sorted("s1/0/0/0" in m for _, m in notes) == [False, True]
    assert any("s0/1/0/1" in m for _, m in notes)


def test_too_many_entries_or_images_builds_nothing(tmp_path):
    root = tmp_path / "many.n5"
    napari_n5zarr.open(root, mode="w")
    for i in range(5):
        write_blockwise(root, f"d{i}", sample((4, 4), "uint8"), (4, 4), COMPRESSIONS["raw"])
    found = open_images(root, limit=4)
    assert found.too_many == "more than 4 images"
    assert found.images == []
    assert len(open_images(root, limit=5).images) == 5
    notes: list[tuple[str, str]] = []
    assert read_path(root, lambda *note: notes.append(note), max_layers=4) == []
    assert len(notes) == 1
    assert "holds more than 4 images; no layers were added" in notes[0][1]
    for i in range(MAX_CHILDREN):
        (root / f"f{i}").write_text("")
    found = open_images(root, limit=32)
    assert found.too_many == f"more than {MAX_CHILDREN} entries"
    assert found.images == []
    assert len(open_images(root).images) == 5  # no limit: walked


def test_a_broken_folder_says_what_and_shows_the_rest(tmp_path):
    root = tmp_path / "broken.n5"
    data = sample((8, 8, 8), "uint8")
    write_pyramid(root / "good", data, (4, 4, 4), COMPRESSIONS["raw"], levels=1)
    (root / "bad").mkdir()
    (root / "bad" / "attributes.json").write_text("{not json")
    write_blockwise(root, "refused", sample((4, 4), "uint8"), (4, 4), COMPRESSIONS["zstd"])
    doc = json.loads((root / "refused" / "attributes.json").read_text())
    (root / "refused" / "attributes.json").write_text(
        json.dumps({**doc, "compression": {"type": "zstd", "level": 23}})
    )
    (root / "refused" / "zarr.json").unlink(missing_ok=True)
    write_blockwise(root, "line", sample((9,), "uint8"), (4,), COMPRESSIONS["raw"])
    found = open_images(root, limit=32)
    assert [image.multiscale.name for image in found.images] == ["good"]
    np.testing.assert_array_equal(np.asarray(found.images[0].levels[0]), data.T)
    assert any(p.startswith("bad") and "JSON" in p for p in found.problems), found.problems
    assert any("refused" in p and "less than or equal to 22" in p for p in found.problems), (
        found.problems
    )
    assert "line: 1-D data cannot be shown as an image" in found.problems
    notes: list[tuple[str, str]] = []
    assert len(read_path(root, lambda *note: notes.append(note))) == 1
    assert ("warning", "napari-n5zarr: skipped line: 1-D data cannot be shown as an image") in notes
    assert len(notes) == 3


def test_what_cannot_be_opened_is_one_line(tmp_path):
    found = open_images(tmp_path / "nothing-here.n5")
    assert found.images == []
    assert found.error is not None
    assert "nothing-here.n5" in found.error
    (tmp_path / "empty").mkdir()
    found = open_images(tmp_path / "empty")
    assert found.error is not None or (found.images == [] and found.problems == [])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_attributes_json_above_the_container_does_not_block(tmp_path):
    """Inherited attributes are read from the folders above the container: a FIFO there
    reads as "no attributes" (in a subprocess: a regression fails on the timeout, not a hang)."""
    import subprocess
    import sys

    outer = tmp_path / "project"
    outer.mkdir()
    os.mkfifo(outer / "attributes.json")
    root = outer / "volume"
    write_pyramid(root, sample((16, 16, 8), "uint8"), (8, 8, 8), COMPRESSIONS["raw"])
    code = f"""
import json
from napari_n5zarr.read.images import open_images
found = open_images({str(root)!r}, limit=32)
print(json.dumps([len(found.images), list(found.images[0].multiscale.scale)]))
"""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [1, [0.5, 0.5, 2.0]]  # the container's own pixelResolution


def test_a_rewritten_folder_opened_again_shows_the_new_values(tmp_path):
    """Each opening has its own cache token: blocks cached for an earlier opening of the
    same files are never shown after the files change."""
    root = tmp_path / "p.n5"
    first = sample((16, 16, 8), "uint16", 1)
    write_pyramid(root, first, (8, 8, 8), COMPRESSIONS["raw"], levels=1)
    (level,) = open_images(root).images[0].levels
    np.testing.assert_array_equal(np.asarray(level[2]), first.T[2])
    shutil.rmtree(root)
    second = sample((16, 16, 8), "uint16", 2)
    write_pyramid(root, second, (8, 8, 8), COMPRESSIONS["raw"], levels=1)
    (again,) = open_images(root).images[0].levels
    np.testing.assert_array_equal(np.asarray(again[2]), second.T[2])
    assert level.source.token != again.source.token


def test_the_store_chain_import_leaves_the_garbage_collector_as_it_found_it(tmp_path):
    """The first open imports zarr with the collector paused (a speed measure): afterwards
    it is on again, and a collector the application had turned off stays off."""
    import subprocess
    import sys

    write_pyramid(
        tmp_path / "p.n5", sample((8, 8, 8), "uint8"), (4, 4, 4), COMPRESSIONS["raw"], levels=1
    )
    code = f"""
import gc, sys
from napari_n5zarr.read.images import open_images
if sys.argv[1] == "off":
    gc.disable()
assert "zarr" not in sys.modules
found = open_images({str(tmp_path / "p.n5")!r})
print(len(found.images), "zarr" in sys.modules, gc.isenabled())
"""
    for given, expected in (("on", "1 True True"), ("off", "1 True False")):
        done = subprocess.run(
            [sys.executable, "-c", code, given], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == expected.split()


PROMOTED = """
import gc, sys
import dask.array, napari.components, napari.layers, pint, scipy.ndimage  # a viewer's heap
pint.get_application_registry().parse_expression("nm")  # napari builds it for its first layer
from napari_n5zarr._napari.reader import read_path
from napari_n5zarr.read.images import open_images
assert "zarr" not in sys.modules
gc.collect()
frozen = gc.get_freeze_count()
opened = ({how})(sys.argv[1])
before = len(gc.get_objects(2))
gc.collect(1)  # the next middle collection: what it promotes counts towards a full one
print(len(opened) > 0, len(gc.get_objects(2)) - before, gc.get_freeze_count() == frozen)
"""


@pytest.mark.napari  # napari's heap and its reader (not in the headless zarr-floor run)
@pytest.mark.parametrize("how", ["read_path", "lambda p: open_images(p).images"])
def test_the_napari_readers_first_open_leaves_nothing_to_promote(tmp_path, how):
    """The napari reader files zarr's import (~25,000 objects) with the old objects, so the
    collections after the first open have little to promote (old code: 13,000 objects on
    the next middle collection). CPython starts a full collection of the whole heap when the
    objects promoted since the last one exceed a quarter of the old ones: in napari that was
    one of 83-121 ms in the first minute after every open. The library alone leaves the
    generations as they are (what was frozen stays frozen: CPython 3.12 freezes a few
    hundred tuples at start, a pre-fork server its heap)."""
    import subprocess
    import sys

    write_pyramid(
        tmp_path / "p.n5", sample((8, 8, 8), "uint8"), (4, 4, 4), COMPRESSIONS["raw"], levels=1
    )
    done = subprocess.run([sys.executable, "-c", PROMOTED.format(how=how), str(tmp_path / "p.n5")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    opened, promoted, frozen_kept = done.stdout.split()
    assert opened == "True"
    if how == "read_path":
        assert int(promoted) < 5000, promoted
    else:
        assert frozen_kept == "True"
        assert int(promoted) > 5000, promoted  # the library's import is promoted as usual
