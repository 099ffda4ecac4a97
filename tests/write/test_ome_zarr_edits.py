"""Label edits saved into a standard OME-Zarr (Zarr v3, standard codecs, with and without
sharding) with the N5 path's guarantees: every level equals export of the edited array (the
coarse levels mode-downsampled), only touched chunks/shards rewritten (the others keep their
bytes and mtime), another writer's change to the same shard kept, kill -9 recovered; zarr-python
without this package and tensorstore's zarr3 driver read the result exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

from napari_n5zarr import export, write_region
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.edit import journal as save_journal
from napari_n5zarr.write.edit import save as edits
from napari_n5zarr.write.edit.editable import open_editable

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (21, 37, 50)  # odd extents: edge chunks and shards at every level
CHUNK = 8
SRC = str(Path(edits.__file__).parents[3])
LAYOUTS = [
    pytest.param({"shards": None, "compression": "raw"}, id="chunks-raw"),
    pytest.param({"shards": None, "compression": "gzip"}, id="chunks-gzip"),
    pytest.param({"shards": 2, "compression": "zstd"}, id="shards-zstd"),
    pytest.param({"shards": 2, "compression": "blosc"}, id="shards-blosc"),
    pytest.param({"shards": 2, "compression": "raw"}, id="shards-raw"),
]


def labels(shape=SHAPE, dtype="uint32") -> np.ndarray:
    rng = np.random.default_rng(3)
    coarse = rng.integers(0, 6, size=tuple(-(-n // 3) for n in shape)).astype(dtype)
    return np.kron(coarse, np.ones((3,) * len(shape), dtype=dtype))[
        tuple(slice(0, n) for n in shape)
    ]


def make(where: Path, data: np.ndarray, name="seg.ome.zarr", **kw) -> Path:
    dest = where / name
    export(data, dest, format="ome-zarr", labels=True, chunks=CHUNK, **kw)
    return dest


def level_names(dest: Path) -> list[str]:
    ome = json.loads((dest / "zarr.json").read_text())["attributes"]["ome"]
    return [d["path"] for d in ome["multiscales"][0]["datasets"]]


def levels_of(dest: Path) -> list[np.ndarray]:
    return [np.asarray(zarr.open_array(dest / n, mode="r")[...]) for n in level_names(dest)]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            p = Path(root) / name
            out[os.path.relpath(p, folder)] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def edit(data: np.ndarray, offset, shape, value) -> tuple[np.ndarray, np.ndarray]:
    region = tuple(slice(o, o + n) for o, n in zip(offset, shape, strict=True))
    patch = np.full(shape, value, dtype=data.dtype)
    patch[::2] = data[region][::2]  # partly unchanged
    edited = data.copy()
    edited[region] = patch
    return patch, edited


ZARR_ALONE = textwrap.dedent("""
    import json, sys
    import numpy as np, zarr
    dest, names, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    np.savez(out, *[np.asarray(zarr.open_array(f"{dest}/{n}", mode="r")[...]) for n in names])
    assert not [m for m in sys.modules if m.startswith("napari_n5zarr")]
""")


def read_by_zarr_alone(dest: Path, tmp: Path) -> list[np.ndarray]:
    """Every level read by zarr-python in a fresh process that never imports this package."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = tmp / "zarr_alone.npz"
    subprocess.run(
        [sys.executable, "-c", ZARR_ALONE, str(dest), json.dumps(level_names(dest)), str(out)],
        env=env, check=True, cwd=tmp,
    )  # fmt: skip
    with np.load(out) as f:
        return [f[f"arr_{i}"] for i in range(len(f.files))]


def read_by_tensorstore(dest: Path) -> list[np.ndarray]:
    ts = pytest.importorskip("tensorstore")
    return [
        np.asarray(
            ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(dest / n)}})
            .result()
            .read()
            .result()
        )
        for n in level_names(dest)
    ]


def mode_pyramid(level0: np.ndarray, n: int) -> list[np.ndarray]:
    out = [level0]
    while len(out) < n:
        out.append(pyramid.downsample_block(out[-1], (2, 2, 2), "mode"))
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_save_rewrites_only_touched_chunks_and_every_reader_sees_the_edit(tmp_path, layout):
    data = labels()
    (tmp_path / "beside.txt").write_text("not the dataset's")
    dest = make(tmp_path, data, **layout)
    before, around = snapshot(dest), snapshot(tmp_path)
    patch, edited = edit(data, (3, 30, 40), (9, 7, 10), 77)  # reaches the edge chunks
    result = write_region(dest, patch, (3, 30, 40))
    after = snapshot(dest)
    assert set(after) == set(before)  # no journal, no staged file left
    changed = {k for k in before if before[k][0] != after[k][0]}
    assert len(changed) == result.total_blocks > 0
    assert all(n > 0 for n in result.blocks)
    assert result.bytes_written == sum(len(after[k][0]) for k in changed)
    for key in set(before) - changed:
        assert before[key] == after[key], key  # same bytes, same mtime_ns
    assert not any(k.endswith("zarr.json") for k in changed)
    outside = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith(dest.name + "/")}
    assert outside == {k: v for k, v in around.items() if not k.startswith(dest.name + "/")}
    want = levels_of(make(tmp_path, edited, name="ref.ome.zarr", **layout))
    assert len(want) > 2
    for got in (levels_of(dest), read_by_zarr_alone(dest, tmp_path), read_by_tensorstore(dest)):
        for n, (g, w) in enumerate(zip(got, want, strict=True)):
            np.testing.assert_array_equal(g, w, err_msg=f"level {n}")
    # the coarse levels are level 0 mode-downsampled, as for N5
    for n, (g, w) in enumerate(zip(levels_of(dest), mode_pyramid(edited, len(want)), strict=True)):
        np.testing.assert_array_equal(g, w, err_msg=f"level {n}")


def test_untouched_inner_chunks_of_a_rewritten_shard_keep_their_bytes(tmp_path):
    data = labels()
    dest = make(tmp_path, data, shards=2, compression="zstd")
    shard = dest / "s0" / "c" / "0" / "0" / "0"  # inner chunks (0..1, 0..1, 0..1)
    old = shard.read_bytes()
    write_region(dest, np.full((1, 1, 1), 99, "uint32"), (0, 0, 0))  # inner chunk (0, 0, 0)
    new = shard.read_bytes()
    assert new != old

    def inner_chunks(raw: bytes) -> dict[int, bytes]:
        index = np.frombuffer(raw[-(8 * 16 + 4) : -4], "<u8").reshape(8, 2)
        return {n: raw[o : o + s] for n, (o, s) in enumerate(index) if o != 2**64 - 1}

    a, b = inner_chunks(old), inner_chunks(new)
    assert a.keys() == b.keys()
    assert a[0] != b[0]
    assert {n: a[n] for n in a if n} == {n: b[n] for n in b if n}


def test_another_writers_change_to_the_same_shard_survives_a_layers_save(tmp_path):
    data = labels()
    dest = make(tmp_path, data, shards=2, compression="zstd")
    level = open_editable(dest)
    level[2, 3, 4] = 41  # the layer paints in shard (0, 0, 0), inner chunk (0, 0, 0)
    assert level.level.block == (CHUNK,) * 3  # the layer holds inner chunks, not whole shards
    assert level.unsaved_blocks == 1
    theirs = zarr.open_array(dest / "s0", mode="r+")
    theirs[10, 12, 13] = 42  # another writer, same shard, another inner chunk, after the read
    theirs[2, 3, 5] = 43  # ... and another voxel of the same inner chunk
    result = level.save()
    assert result.overwritten == 0
    want = data.copy()
    want[2, 3, 4], want[10, 12, 13], want[2, 3, 5] = 41, 42, 43
    got = levels_of(dest)
    np.testing.assert_array_equal(got[0], want)
    for n, (g, w) in enumerate(zip(got, mode_pyramid(want, len(got)), strict=True)):
        np.testing.assert_array_equal(g, w, err_msg=f"level {n}")
    np.testing.assert_array_equal(level[...], want)  # the layer shows the merged shard


CRASH_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    from napari_n5zarr import write_region
    write_region(sys.argv[1], np.load(sys.argv[2]), (3, 10, 20))
""")


@pytest.mark.parametrize("point", ["journal", "staged:1", "committing", "replaced:0", "replaced:2"])
def test_kill_9_during_a_sharded_save_leaves_old_or_new_shards_and_the_next_save_finishes(
    tmp_path, point
):
    data = labels()
    dest = make(tmp_path, data, shards=2, compression="zstd")
    patch, edited = edit(data, (3, 10, 20), (14, 20, 25), 77)  # several shards, every level
    np.save(tmp_path / "patch.npy", patch)
    old = levels_of(dest)
    new = mode_pyramid(edited, len(old))
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(dest), str(tmp_path / "patch.npy")],
        env={**os.environ, save_journal.CRASH_ENV: point, "PYTHONPATH": SRC},
        check=False,
    )  # fmt: skip
    assert proc.returncode == -9
    state = save_journal.unfinished_save(dest)
    assert state == ("staging" if point in ("journal", "staged:1") else "committing")
    shard = CHUNK * 2
    for got, o, w in zip(levels_of(dest), old, new, strict=True):  # each shard old or new
        for z in range(0, got.shape[0], shard):
            for y in range(0, got.shape[1], shard):
                for x in range(0, got.shape[2], shard):
                    sl = np.s_[z : z + shard, y : y + shard, x : x + shard]
                    assert np.array_equal(got[sl], o[sl]) or np.array_equal(got[sl], w[sl])
    level = open_editable(dest)  # an editable open finishes the save first
    assert save_journal.unfinished_save(dest) is None
    want = old if state == "staging" else new
    for n, (g, w) in enumerate(zip(levels_of(dest), want, strict=True)):
        np.testing.assert_array_equal(g, w, err_msg=f"level {n}")
    np.testing.assert_array_equal(level[...], want[0])
    assert not [
        p
        for p in dest.rglob("*")
        if p.name.endswith(save_journal.STAGED_SUFFIX) or p.name == save_journal.JOURNAL
    ]


def test_new_labels_created_as_ome_zarr_are_saved_chunk_by_chunk(tmp_path):
    from napari_n5zarr import create_labels

    dest = Path(create_labels(tmp_path / "new.ome.zarr", shape=SHAPE, dtype="uint16",
                              chunks=CHUNK, format="ome-zarr"))  # fmt: skip
    assert not [p for p in dest.rglob("*") if p.is_file() and p.name != "zarr.json"]
    patch = np.full((1, 3, 4), 5, "uint16")
    write_region(dest, patch, (20, 34, 46))  # the far corner: edge chunks only
    want = np.zeros(SHAPE, "uint16")
    want[20:, 34:, 46:] = 5
    got = levels_of(dest)
    for n, (g, w) in enumerate(zip(got, mode_pyramid(want, len(got)), strict=True)):
        np.testing.assert_array_equal(g, w, err_msg=f"level {n}")
    for g, t in zip(got, read_by_tensorstore(dest), strict=True):
        np.testing.assert_array_equal(g, t)


@pytest.mark.parametrize("shards", [None, (8, 8)], ids=["chunks", "shards"])
def test_missing_chunks_read_as_the_arrays_fill_value(tmp_path, shards):
    """A Zarr v3 array whose fill value is not 0: a missing chunk or shard is that value, and a
    save into it keeps it around the edit."""
    dest = tmp_path / "fill.zarr"
    zarr.create_array(dest, shape=(10, 12), chunks=(4, 4), shards=shards, dtype="uint8",
                      fill_value=7)  # fmt: skip
    result = write_region(dest, np.full((1, 2), 3, "uint8"), (5, 5))
    assert result.blocks == [1]
    want = np.full((10, 12), 7, "uint8")
    want[5, 5:7] = 3
    np.testing.assert_array_equal(zarr.open_array(dest, mode="r")[...], want)
    assert write_region(dest, np.full((2, 2), 7, "uint8"), (0, 0)).total_blocks == 0


def test_a_save_is_refused_while_another_saver_holds_the_lock(tmp_path):
    from napari_n5zarr.errors import DestinationBusyError
    from napari_n5zarr.write.safe_destination import DestinationLock

    dest = make(tmp_path, labels(), shards=2)
    before = snapshot(dest)
    with (
        DestinationLock(dest.resolve(), "someone"),
        pytest.raises(DestinationBusyError, match=f"pid {os.getpid()}"),
    ):
        write_region(dest, np.ones((2, 2, 2), dtype="uint32"), (0, 0, 0))
    assert snapshot(dest) == before


def test_a_tensorstore_reader_looping_during_saves_sees_whole_old_or_new_shards(tmp_path):
    import threading

    ts = pytest.importorskip("tensorstore")
    a = labels()
    b = (a + 1) % 6
    dest = make(tmp_path, a, shards=2, compression="zstd")
    shard = 2 * CHUNK
    cells = [np.s_[z : z + shard, y : y + shard, x : x + shard]
             for z in range(0, SHAPE[0], shard) for y in range(0, SHAPE[1], shard)
             for x in range(0, SHAPE[2], shard)]  # fmt: skip
    stop, bad, reads = threading.Event(), [], [0]

    def reader() -> None:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(dest / "s0")},
                "recheck_cached_data": False}  # fmt: skip
        while not stop.is_set():
            got = np.asarray(ts.open(spec).result().read().result())
            reads[0] += 1
            bad.extend(
                c
                for c in cells
                if not (np.array_equal(got[c], a[c]) or np.array_equal(got[c], b[c]))
            )

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(6):
            write_region(dest, b if n % 2 == 0 else a, (0, 0, 0))
    finally:
        stop.set()
        thread.join()
    assert reads[0] > 0
    assert bad == []
