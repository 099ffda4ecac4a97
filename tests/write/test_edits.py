"""write_region(): edits written back block by block, every level checked against export
of the edited array; untouched files byte-identical with their mtime; edge conventions;
every compression; tensorstore datasets; kill -9 during a save; the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from format_cases import COMPRESSION_TYPES

import napari_n5zarr
from napari_n5zarr import export, write_region
from napari_n5zarr.cli import main
from napari_n5zarr.errors import DestinationBusyError, NotEditableError
from napari_n5zarr.write.edit import journal as save_journal
from napari_n5zarr.write.edit import save as edits
from napari_n5zarr.write.safe_destination import DestinationLock

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (21, 37, 50)  # napari order: odd extents, edge blocks at every level
BLOCK = 8


def labels(shape=SHAPE, dtype="uint64") -> np.ndarray:
    """Blobby labels (mode downsampling has real votes to count)."""
    rng = np.random.default_rng(7)
    coarse = rng.integers(0, 6, size=tuple(-(-n // 3) for n in shape)).astype(dtype)
    return np.kron(coarse, np.ones((3,) * len(shape), dtype=dtype))[
        tuple(slice(0, n) for n in shape)
    ]


def make(tmp_path: Path, data: np.ndarray, name="a.n5", **kw) -> Path:
    dest = tmp_path / name
    export(data, dest, labels=True, chunks=BLOCK, **kw)
    return dest


def levels_of(dest: Path) -> list[np.ndarray]:
    """Every level, napari order, read by zarr-python through the Zarr v3 side."""
    names = sorted(
        (p.name for p in dest.iterdir() if p.name.startswith("s")), key=lambda n: int(n[1:])
    )
    return [np.asarray(napari_n5zarr.open(dest / n)[...]).T for n in names]


def snapshot(dest: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for root, _, names in os.walk(dest):
        for name in names:
            p = Path(root) / name
            out[os.path.relpath(p, dest)] = (p.read_bytes(), p.stat().st_mtime_ns)
    return out


def check_against_export(tmp_path: Path, dest: Path, edited: np.ndarray, **kw) -> None:
    ref = make(tmp_path, edited, name="ref.n5", **kw)
    got, want = levels_of(dest), levels_of(ref)
    assert len(got) == len(want) > 2
    for level, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_array_equal(g, w, err_msg=f"level s{level}")


def edit(data: np.ndarray, offset, shape, value) -> tuple[np.ndarray, np.ndarray]:
    patch = np.full(shape, value, dtype=data.dtype)
    patch[::2] = data[tuple(slice(o, o + n) for o, n in zip(offset, shape, strict=True))][
        ::2
    ]  # partly unchanged
    edited = data.copy()
    edited[tuple(slice(o, o + n) for o, n in zip(offset, shape, strict=True))] = patch
    return patch, edited


@pytest.mark.parametrize("boundary", ["truncate", "pad"])
def test_every_level_equals_export_of_the_edited_array_and_nothing_else_changes(tmp_path, boundary):
    data = labels()
    dest = make(tmp_path, data, boundary=boundary)
    before = snapshot(dest)
    patch, edited = edit(data, (3, 30, 40), (9, 7, 10), 77)  # reaches the edge blocks
    result = write_region(dest, patch, (3, 30, 40))
    after = snapshot(dest)
    check_against_export(tmp_path, dest, edited, boundary=boundary)
    assert set(after) == set(before)  # no journal, no staged file left
    changed = {k for k in before if before[k][0] != after[k][0]}
    assert len(changed) == result.total_blocks > 0
    assert result.blocks[0] > 0
    assert all(n > 0 for n in result.blocks)
    assert result.bytes_written == sum(len(after[k][0]) for k in changed)
    for key in set(before) - changed:
        assert before[key] == after[key], key  # same bytes, same mtime
    assert not any(k.endswith(("attributes.json", "zarr.json")) for k in changed)
    # every rewritten block kept its edge convention (header shape)
    for key in changed:
        assert before[key][0][:16] == after[key][0][:16], key


def test_unchanged_values_write_nothing(tmp_path):
    data = labels()
    dest = make(tmp_path, data)
    before = snapshot(dest)
    result = write_region(dest, data[2:9, 5:30, 7:40], (2, 5, 7))
    assert result.total_blocks == 0
    assert result.bytes_written == 0
    assert snapshot(dest) == before


def test_new_blocks_where_none_were_follow_the_edge_convention(tmp_path):
    data = np.zeros(SHAPE, dtype="uint32")
    data[0, 0, 0] = 1  # the rest: missing blocks
    for boundary in ("truncate", "pad"):
        dest = make(
            tmp_path, data, name=f"{boundary}.n5", boundary=boundary, write_empty_blocks=True
        )
        for p in (dest / "s0" / "6" / "4").iterdir():  # x block 6 (the edge) of y 4, z 0..2
            p.unlink()
        edges = dest / "s0" / "6" / "4" / "2"
        patch, edited = edit(data, (17, 33, 48), (4, 4, 2), 5)
        write_region(dest, patch, (17, 33, 48))
        header = np.frombuffer(edges.read_bytes()[4:16], dtype=">u4")
        assert tuple(header) == ((8, 8, 8) if boundary == "pad" else (2, 5, 5))
        (tmp_path / boundary).mkdir()
        check_against_export(tmp_path / boundary, dest, edited, boundary=boundary)


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_every_compression_keeps_its_own(tmp_path, compression):
    data = labels(dtype="uint16")
    dest = make(tmp_path, data, compression=compression)
    comp = json.loads((dest / "s0" / "attributes.json").read_text())["compression"]
    patch, edited = edit(data, (0, 10, 12), (5, 12, 9), 3)
    write_region(dest, patch, (0, 10, 12))
    check_against_export(tmp_path, dest, edited, compression=compression)
    assert json.loads((dest / "s0" / "attributes.json").read_text())["compression"] == comp


def test_a_padded_dataset_written_by_tensorstore(tmp_path):
    ts = pytest.importorskip("tensorstore")
    data = labels(dtype="uint32")
    spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(tmp_path / "ts.n5")},
            "metadata": {"dimensions": list(data.shape[::-1]), "blockSize": [BLOCK] * 3, "dataType": "uint32",
                         "compression": {"type": "gzip"}}, "create": True}  # fmt: skip
    ts.open(spec).result().write(data.T).result()
    block = tmp_path / "ts.n5" / "6" / "4" / "2"
    assert tuple(np.frombuffer(block.read_bytes()[4:16], dtype=">u4")) == (
        8,
        8,
        8,
    )  # tensorstore pads
    patch, edited = edit(data, (15, 30, 41), (6, 7, 9), 9)
    result = write_region(tmp_path / "ts.n5", patch, (15, 30, 41))
    assert result.blocks == [result.total_blocks]
    assert result.total_blocks > 0
    assert tuple(np.frombuffer(block.read_bytes()[4:16], dtype=">u4")) == (8, 8, 8)
    read = (
        ts.open({k: v for k, v in spec.items() if k not in ("create", "metadata")})
        .result()
        .read()
        .result()
    )
    np.testing.assert_array_equal(np.asarray(read).T, edited)


def test_tensorstore_reads_our_pyramid_after_a_save(tmp_path):
    ts = pytest.importorskip("tensorstore")
    data = labels()
    dest = make(tmp_path, data)
    patch, edited = edit(data, (4, 4, 4), (10, 10, 10), 12)
    write_region(dest, patch, (4, 4, 4))
    want = levels_of(make(tmp_path, edited, name="ref.n5"))
    for n, level in enumerate(want):
        got = (
            ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(dest / f"s{n}")}})
            .result()
            .read()
            .result()
        )
        np.testing.assert_array_equal(np.asarray(got).T, level)


def test_refused_while_another_saver_holds_the_lock(tmp_path):
    dest = make(tmp_path, labels())
    with (
        DestinationLock(dest.resolve(), "someone"),
        pytest.raises(DestinationBusyError, match=f"pid {os.getpid()}"),
    ):
        write_region(dest, np.ones((2, 2, 2), dtype="uint64"), (0, 0, 0))


def test_what_cannot_be_edited_says_why(tmp_path):
    export(np.zeros((4, 8, 8), dtype="float32"), tmp_path / "f.n5", chunks=4)
    with pytest.raises(NotEditableError, match="float32"):
        write_region(tmp_path / "f.n5", np.zeros((1, 1, 1), dtype="float32"))
    with pytest.raises(NotEditableError, match="n5zarr convert"):
        write_region("https://example.org/x.n5", np.zeros((1, 1, 1), dtype="uint8"))
    with pytest.raises(NotEditableError, match="n5zarr convert"):
        write_region(tmp_path / "x.zip", np.zeros((1, 1, 1), dtype="uint8"))


CRASH_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    from napari_n5zarr import write_region
    patch = np.load(sys.argv[2])
    write_region(sys.argv[1], patch, (3, 30, 40))
""")


@pytest.mark.parametrize(
    "point", ["journal", "staged:0", "staged:5", "committing", "replaced:0", "replaced:4"]
)
def test_kill_9_during_a_save_leaves_old_or_new_blocks_and_the_next_save_finishes(
    tmp_path, point, capsys
):
    data = labels()
    dest = make(tmp_path, data)
    patch, edited = edit(data, (3, 30, 40), (9, 7, 10), 77)
    np.save(tmp_path / "patch.npy", patch)
    old_levels = levels_of(dest)
    new_levels = levels_of(make(tmp_path, edited, name="ref.n5"))
    env = {
        **os.environ,
        save_journal.CRASH_ENV: point,
        "PYTHONPATH": str(Path(edits.__file__).parents[3]),  # src
    }
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(dest), str(tmp_path / "patch.npy")],
        env=env,
        check=False,
    )
    assert proc.returncode == -9
    state = save_journal.unfinished_save(dest)
    assert state == ("staging" if point in ("journal", "staged:0", "staged:5") else "committing")
    assert main(["info", str(dest)]) == 0
    assert f"unfinished save of label edits ({state})" in capsys.readouterr().out
    # every block, at every level, is the old one or the new one (never torn)
    for got, old, new in zip(levels_of(dest), old_levels, new_levels, strict=True):
        for z in range(0, got.shape[0], BLOCK):
            for y in range(0, got.shape[1], BLOCK):
                for x in range(0, got.shape[2], BLOCK):
                    sl = np.s_[z : z + BLOCK, y : y + BLOCK, x : x + BLOCK]
                    assert np.array_equal(got[sl], old[sl]) or np.array_equal(got[sl], new[sl])
    result = write_region(dest, np.zeros((0, 0, 0), dtype="uint64"), (0, 0, 0))  # the next save
    assert result.recovered is not None
    assert save_journal.unfinished_save(dest) is None
    want = old_levels if state == "staging" else new_levels
    for g, w in zip(levels_of(dest), want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert not [
        p
        for p in dest.rglob("*")
        if p.name.endswith(save_journal.STAGED_SUFFIX) or p.name == save_journal.JOURNAL
    ]


def test_an_editable_open_finishes_an_interrupted_save(tmp_path):
    from napari_n5zarr.write.edit.editable import open_editable

    data = labels()
    dest = make(tmp_path, data)
    patch, edited = edit(data, (3, 30, 40), (9, 7, 10), 77)
    np.save(tmp_path / "patch.npy", patch)
    env = {
        **os.environ,
        save_journal.CRASH_ENV: "replaced:1",
        "PYTHONPATH": str(Path(edits.__file__).parents[3]),  # src
    }
    subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(dest), str(tmp_path / "patch.npy")],
        env=env,
        check=False,
    )
    assert save_journal.unfinished_save(dest) == "committing"
    level = open_editable(dest)
    assert save_journal.unfinished_save(dest) is None
    np.testing.assert_array_equal(level[...], edited)


def test_a_tensorstore_reader_looping_during_saves_sees_old_or_new_blocks(tmp_path):
    import threading

    ts = pytest.importorskip("tensorstore")
    a = labels()
    b = (a + 1) % 6
    dest = make(tmp_path, a)
    blocks = [
        (z, y, x)
        for z in range(0, SHAPE[0], BLOCK)
        for y in range(0, SHAPE[1], BLOCK)
        for x in range(0, SHAPE[2], BLOCK)
    ]
    stop, bad, reads = threading.Event(), [], [0]

    def reader() -> None:
        spec = {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(dest / "s0")},
            "recheck_cached_data": False,
        }
        while not stop.is_set():
            got = np.asarray(ts.open(spec).result().read().result()).T
            reads[0] += 1
            for z, y, x in blocks:
                sl = np.s_[z : z + BLOCK, y : y + BLOCK, x : x + BLOCK]
                if not (np.array_equal(got[sl], a[sl]) or np.array_equal(got[sl], b[sl])):
                    bad.append((z, y, x))

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


def test_a_pyramid_the_reader_knows_by_its_multiscales_metadata_is_edited_whole(tmp_path):
    """The save path finds its pyramid as the read wing does: a COSEM ``multiscales`` group
    whose levels are not named ``s0..sN`` (the old finder knew those names only) is edited,
    every level recomputed, the metadata left alone."""
    data = labels()
    dest = make(tmp_path, data)
    names = sorted(
        (p.name for p in dest.iterdir() if p.name.startswith("s")), key=lambda n: int(n[1:])
    )
    for name in names:
        (dest / name).rename(dest / f"level{name[1:]}")
    attrs = json.loads((dest / "attributes.json").read_text())
    attrs["multiscales"] = [{"datasets": [{"path": f"level{n[1:]}"} for n in names]}]
    (dest / "attributes.json").write_text(json.dumps(attrs))
    (dest / "zarr.json").unlink()
    patch, edited = edit(data, (3, 30, 40), (9, 7, 10), 77)
    result = write_region(dest, patch, (3, 30, 40))
    assert len(result.blocks) == len(names)
    assert all(result.blocks)
    for name in names:
        (dest / f"level{name[1:]}").rename(dest / name)
    check_against_export(tmp_path, dest, edited)


def test_the_editable_layer_takes_its_levels_from_the_readers_arrays(tmp_path, monkeypatch):
    """Opening labels editable builds the save path's levels over the arrays the reader opened
    (their blocks in the reader's cache): the pyramid's metadata is not walked again, neither
    for them nor for the open's journal check (a save walks it afresh)."""
    from napari_n5zarr.read.block_cache import store_token
    from napari_n5zarr.read.multiscale import find_multiscales, level_arrays
    from napari_n5zarr.read.pyramid_walk import place
    from napari_n5zarr.write.edit import editable, label_pyramid

    dest = make(tmp_path, labels())
    node = place(napari_n5zarr.open(dest))
    (ms,) = find_multiscales(node).multiscales
    arrays = level_arrays(node, ms)
    with monkeypatch.context() as patched:
        patched.setattr(
            label_pyramid,
            "find_multiscales",
            lambda *a, **k: pytest.fail("the pyramid was walked again"),
        )
        found, reason = editable.pyramid_root(str(dest), ms.paths, arrays)
        assert reason is None
        assert found is not None
        layer = editable.open_editable(
            found[0], levels=found[1]
        )  # its journal check: no walk either
    assert found[0] == dest.resolve()
    assert [level.key for level in found[1]] == list(ms.paths)
    assert {level.source.token for level in found[1]} == {store_token(node[0].store)}
    layer[0, 0, 0] = 99
    assert layer.save().blocks[0] == 1
