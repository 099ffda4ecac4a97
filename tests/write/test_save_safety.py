"""Proofreading saves as a hostile or unlucky user meets them: files planted at every name
the save path uses (links, hard links, folders, FIFOs, devices, bombs), other writers
(a second editor, another tool, an export of an enclosing group), kill -9 at every step
followed by another process's write, values that do not fit. Each case checks that no
byte outside the dataset changed and no other writer's voxel was lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export, write_region
from napari_n5zarr.cli import main
from napari_n5zarr.errors import (
    DestinationBusyError,
    NotEditableError,
    PlantedFileError,
    StaleLayerError,
    ValuesDoNotFitError,
)
from napari_n5zarr.write.edit import journal as save_journal
from napari_n5zarr.write.edit import save as edits
from napari_n5zarr.write.edit.editable import EditableLevel, editable_reason, open_editable
from napari_n5zarr.write.safe_destination import DestinationLock

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (21, 37, 50)
BLOCK = 8
SRC = str(Path(edits.__file__).parents[2])


def labels(shape=SHAPE, dtype="uint64") -> np.ndarray:
    rng = np.random.default_rng(7)
    coarse = rng.integers(1, 6, size=tuple(-(-n // 3) for n in shape)).astype(dtype)
    return np.kron(coarse, np.ones((3,) * len(shape), dtype=dtype))[
        tuple(slice(0, n) for n in shape)
    ]


@pytest.fixture
def world(tmp_path):
    """A container ``C.n5`` holding a labels pyramid, and an ``outside`` folder of victims."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"precious")
    (outside / "folder" / "0").mkdir(parents=True)
    (outside / "folder" / "0" / "0.n5zarr-staged").write_bytes(b"staged-looking, not ours")
    container = tmp_path / "C.n5"
    data = labels()
    export(data, container, path="labels", labels=True, chunks=BLOCK)
    return container, container / "labels", data, outside


def tree_state(folder: Path) -> dict[str, tuple[str, bytes | str, int]]:
    """Every entry under ``folder``: kind, bytes (or link target), mtime."""
    out: dict[str, tuple[str, bytes | str, int]] = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            p = Path(root) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p.relative_to(folder))] = ("link", os.readlink(p), st.st_mtime_ns)
            elif p.is_file():
                out[str(p.relative_to(folder))] = ("file", p.read_bytes(), st.st_mtime_ns)
            elif not p.is_dir():
                out[str(p.relative_to(folder))] = ("special", "", st.st_mtime_ns)
    return out


def s0(dest: Path) -> np.ndarray:
    return np.asarray(napari_n5zarr.open(dest / "s0")[...]).T


def levels_of(dest: Path) -> list[np.ndarray]:
    names = sorted(
        (p.name for p in dest.iterdir() if p.name[:1] == "s" and p.name[1:].isdigit()),
        key=lambda n: int(n[1:]),
    )
    return [np.asarray(napari_n5zarr.open(dest / n)[...]).T for n in names]


def block_file(dest: Path, level: int, index=(0, 0, 0)) -> Path:
    return dest.joinpath(f"s{level}", *(str(i) for i in reversed(index)))


def a_patch(data: np.ndarray) -> np.ndarray:
    return (data[:4, :4, :4] % 5) + 10


# -- planted files ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_link_at_the_journal_temporary_is_refused_and_its_target_untouched(world, kind):
    _, dest, data, outside = world
    victim = outside / "victim.txt"
    (os.symlink if kind == "symlink" else os.link)(victim, dest / save_journal.JOURNAL_TMP)
    before_out, before_in = tree_state(outside), tree_state(dest)
    with pytest.raises(PlantedFileError, match=r"\.n5zarr-save-journal\.tmp"):
        write_region(dest, a_patch(data), (0, 0, 0))
    assert tree_state(outside) == before_out
    assert tree_state(dest) == before_in


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("level", [0, 2])
def test_a_link_at_a_staged_name_is_refused_and_the_block_stays_a_file(world, kind, level):
    _, dest, data, outside = world
    victim = outside / "victim.txt"
    staged = block_file(dest, level).with_name("0" + save_journal.STAGED_SUFFIX)
    (os.symlink if kind == "symlink" else os.link)(victim, staged)
    before_out, before_in = tree_state(outside), tree_state(dest)
    with pytest.raises(PlantedFileError, match=str(staged)):
        write_region(dest, a_patch(data), (0, 0, 0))
    assert tree_state(outside) == before_out
    assert tree_state(dest) == before_in
    assert not block_file(dest, level).is_symlink()
    np.testing.assert_array_equal(s0(dest), data)


@pytest.mark.parametrize(
    "name",
    [
        save_journal.JOURNAL,
        save_journal.JOURNAL_TMP,
        "s0/0/0/0" + save_journal.STAGED_SUFFIX,
        "s0/0/0/0",
    ],
)
def test_a_folder_at_a_name_the_save_uses_is_refused_in_one_line(world, name):
    _, dest, data, _ = world
    target = dest / name
    if target.exists():
        target.unlink()
    target.mkdir()
    (target / "keep").write_text("someone's")
    with pytest.raises(PlantedFileError, match="a folder") as caught:
        write_region(dest, a_patch(data), (0, 0, 0))
    assert "\n" not in str(caught.value)
    assert (target / "keep").read_text() == "someone's"


def test_journal_entries_never_reach_outside(world, tmp_path):
    _, dest, data, outside = world
    os.symlink(
        outside / "folder", dest / "s0" / "9"
    )  # a linked folder where a block folder would be
    before_out = tree_state(outside)
    for key in [
        "../outside/victim.txt",
        "",
        "s0/9/0",
        "s0/0/0/0/../../../../x",
        "/etc/passwd",
        "s0/0/0/99",
        "s7/0/0/0",
    ]:
        doc = {
            "version": 2,
            "state": "staging",
            "blocks": [{"key": key, "before": None, "after": "0" * 64}],
        }
        (dest / save_journal.JOURNAL).write_text(json.dumps(doc))
        with pytest.raises(PlantedFileError, match="names no block of this dataset"):
            write_region(dest, a_patch(data), (0, 0, 0))
    # a valid key whose folder on the way is a link: refused, the staged-looking file outside kept
    os.unlink(dest / "s0" / "9")
    real = dest / "s0" / "1"
    os.rename(real, tmp_path / "moved")
    os.symlink(outside / "folder", real)
    doc = {
        "version": 2,
        "state": "staging",
        "blocks": [{"key": "s0/1/0/0", "before": None, "after": "0" * 64}],
    }
    (dest / save_journal.JOURNAL).write_text(json.dumps(doc))
    with pytest.raises(PlantedFileError, match="symbolic link"):
        write_region(dest, a_patch(data), (0, 0, 0))
    assert tree_state(outside) == before_out


@pytest.mark.parametrize("plant", ["fifo", "dev_zero", "nested", "huge", "not_json"])
def test_a_journal_that_cannot_be_used_never_blocks_a_reader_and_is_refused(world, plant):
    _, dest, data, _ = world
    journal = dest / save_journal.JOURNAL
    if plant == "fifo":
        os.mkfifo(journal)
    elif plant == "dev_zero":
        os.symlink("/dev/zero", journal)
    elif plant == "nested":
        journal.write_text("[" * 200_000 + "]" * 200_000)
    elif plant == "huge":
        with open(journal, "wb") as f:
            f.truncate(300 * 2**20)  # sparse: 300 MB on paper
    else:
        journal.write_text("{not json")
    # the CLI's info answers (a FIFO would block it forever), and says the labels open read-only
    proc = subprocess.run([sys.executable, "-m", "napari_n5zarr.cli", "info", str(dest)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": SRC}, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "read-only" in proc.stdout
    assert save_journal.JOURNAL in proc.stdout
    assert editable_reason(dest) is not None
    assert save_journal.JOURNAL in editable_reason(dest)
    assert save_journal.unfinished_save(dest).startswith("unusable")
    with pytest.raises(PlantedFileError, match=save_journal.JOURNAL) as caught:
        write_region(dest, a_patch(data), (0, 0, 0))
    assert "\n" not in str(caught.value)
    np.testing.assert_array_equal(s0(dest), data)


def test_napari_reader_opens_labels_read_only_beside_a_fifo_journal(world):
    container, dest, _, _ = world
    os.mkfifo(dest / save_journal.JOURNAL)
    script = textwrap.dedent(f"""
        from napari_n5zarr.read import open_images
        from napari_n5zarr._napari.layers import images_layers
        layers = images_layers(open_images({str(container)!r}), lambda level, message: None)
        meta = [l[1].get("metadata", {{}}).get("napari_n5zarr", {{}}) for l in layers if l[2] == "labels"]
        print("READ_ONLY" if meta and all(m.get("read_only") for m in meta) else meta)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": SRC}, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "READ_ONLY" in proc.stdout


# -- other writers -------------------------------------------------------------------------------


def test_a_save_writes_only_the_voxels_the_layer_changed(world):
    _, dest, data, _ = world
    layer = EditableLevel(dest)
    layer[0, 0, 0] = 99  # block (0, 0, 0)
    layer[5, 5, 5] = 98
    # meanwhile another tool writes other voxels of the same block, and one the layer changed too
    other = data[:8, :8, :8].copy()
    other[1:4, 1:4, 1:4] = 77
    other[5, 5, 5] = 55
    write_region(dest, other, (0, 0, 0))
    result = layer.save()
    want = data.copy()
    want[:8, :8, :8] = other
    want[0, 0, 0] = 99
    want[5, 5, 5] = 98  # the layer's value wins where both changed it ...
    assert result.overwritten == 1  # ... and the save says so
    np.testing.assert_array_equal(s0(dest), want)
    np.testing.assert_array_equal(
        layer[:8, :8, :8], want[:8, :8, :8]
    )  # the layer shows the merged block


def test_two_editors_of_one_block_keep_each_others_voxels(world):
    _, dest, data, _ = world
    a, b = EditableLevel(dest), EditableLevel(dest)
    a[2, 2, 2] = 91
    b[2, 2, 2]  # b read the block before a saved
    b[3, 3, 3] = 92
    a.save()
    assert b.save().overwritten == 0
    got = s0(dest)
    assert got[2, 2, 2] == 91
    assert got[3, 3, 3] == 92
    assert np.count_nonzero(got != data) == 2


def test_undo_back_to_the_read_values_leaves_nothing_to_save(world):
    _, dest, _data, _ = world
    layer = EditableLevel(dest)
    seen = []
    layer.subscribe(lambda: seen.append(layer.unsaved_blocks))
    old = layer[0:2, 0:2, 0:2].copy()
    layer[0:2, 0:2, 0:2] = 7
    assert layer.modified
    assert layer.unsaved_blocks == 1
    layer[0:2, 0:2, 0:2] = old  # undo
    assert not layer.modified
    assert layer.unsaved_blocks == 0
    assert layer.save().total_blocks == 0
    assert seen == [1, 0]  # a save with nothing to write tells no one


def test_a_save_and_an_export_of_an_enclosing_group_never_interleave(world):
    container, dest, data, _ = world
    # an export of the container (another process holds its lock): the save refuses as busy
    for node in (container, dest):
        with (
            DestinationLock(node.resolve(), f"exporting {node.name}"),
            pytest.raises(DestinationBusyError),
        ):
            write_region(dest / "s0", a_patch(data), (0, 0, 0))
    np.testing.assert_array_equal(s0(dest), data)
    # a save in progress: an export of the enclosing group refuses as busy
    with save_journal.lock(dest.resolve()):
        with pytest.raises(DestinationBusyError):
            export(
                np.zeros((4, 4, 4), dtype="uint8"),
                container,
                path="labels",
                labels=True,
                overwrite=True,
            )
        with pytest.raises(DestinationBusyError):
            export(np.zeros((4, 4, 4), dtype="uint8"), container, overwrite=True)
    np.testing.assert_array_equal(s0(dest), data)
    # two saves of different datasets of one container run side by side (shared locks above)
    export(labels((5, 6, 7), "uint16"), container, path="other", labels=True, chunks=4)
    with save_journal.lock((container / "other").resolve()):
        write_region(dest, a_patch(data), (0, 0, 0))
    assert not list(container.parent.glob(".*.n5zarr-lock"))
    assert not list(container.glob(".*.n5zarr-lock"))


def test_a_level_path_writes_its_pyramid_and_a_coarse_level_alone_is_refused(world, tmp_path):
    _, dest, data, _ = world
    patch = a_patch(data)
    result = write_region(dest / "s0", patch, (0, 0, 0))
    assert all(n > 0 for n in result.blocks)
    assert len(result.blocks) > 2
    edited = data.copy()
    edited[:4, :4, :4] = patch
    ref = tmp_path / "ref.n5"
    export(edited, ref, labels=True, chunks=BLOCK)
    for got, want in zip(levels_of(dest), levels_of(ref), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(NotEditableError, match="level 1 of the pyramid"):
        write_region(dest / "s1", patch[:2, :2, :2], (0, 0, 0))


# -- kill -9, then another writer, then recovery -------------------------------------------------

CRASH_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    from napari_n5zarr import write_region
    write_region(sys.argv[1], np.load(sys.argv[2]), (0, 0, 0))
""")


@pytest.mark.parametrize("point", ["journal", "staged:0", "committing", "replaced:0"])
def test_kill_9_then_another_write_then_recovery_keeps_the_newer_write(world, tmp_path, point):
    _, dest, data, _ = world
    patch = (data[:16, :16, :16] % 4) + 20  # blocks (0..1)^3 of s0
    np.save(tmp_path / "patch.npy", patch)
    env = {**os.environ, save_journal.CRASH_ENV: point, "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_SCRIPT, str(dest), str(tmp_path / "patch.npy")],
        env=env,
        check=False,
    )
    assert proc.returncode == -9
    # another process writes block (1, 1, 1) of s0 through zarr (not through a save)
    later = np.full((8, 8, 8), 200, dtype="uint64")
    writer = textwrap.dedent(f"""
        import numpy as np, napari_n5zarr
        a = napari_n5zarr.open({str(dest / "s0")!r}, mode="a")
        a[8:16, 8:16, 8:16] = np.full((8, 8, 8), 200, dtype="uint64")
    """)
    subprocess.run(
        [sys.executable, "-c", writer], env={**os.environ, "PYTHONPATH": SRC}, check=True
    )
    message = save_journal.recover_at(dest)
    assert message is not None
    got = s0(dest)
    np.testing.assert_array_equal(got[8:16, 8:16, 8:16], later)  # the newer write survived
    if point in ("committing", "replaced:0"):
        assert "written since" in message
        np.testing.assert_array_equal(
            got[:8, :8, :8], patch[:8, :8, :8]
        )  # the save's other blocks are in
    else:
        np.testing.assert_array_equal(got[:8, :8, :8], data[:8, :8, :8])  # rolled back
    assert not [
        p
        for p in dest.rglob("*")
        if p.name.endswith(save_journal.STAGED_SUFFIX) or p.name.startswith(save_journal.JOURNAL)
    ]


def test_an_old_journal_without_checksums_never_overwrites_a_block(world):
    _, dest, data, _ = world
    key = "s0/0/0/0"
    (dest / (key + save_journal.STAGED_SUFFIX)).write_bytes(b"stale staged bytes")
    (dest / save_journal.JOURNAL).write_text(
        json.dumps({"version": 1, "state": "committing", "blocks": [key]})
    )
    message = save_journal.recover_at(dest)
    assert "left as they are" in message
    np.testing.assert_array_equal(s0(dest), data)
    assert not (dest / (key + save_journal.STAGED_SUFFIX)).exists()


# -- values --------------------------------------------------------------------------------------


def test_values_that_do_not_fit_are_refused_and_those_that_fit_accepted(tmp_path):
    u8 = tmp_path / "u8.n5"
    export(np.zeros((4, 8, 8), dtype="uint8"), u8, labels=True, chunks=4)
    with pytest.raises(
        ValuesDoNotFitError, match=r"1 value do not fit uint8 \(0\.\.255\); they range 0\.\.300"
    ):
        write_region(u8, np.array([[[300, 0]]], dtype="uint16"))
    i64 = tmp_path / "i64.n5"
    export(np.zeros((4, 8, 8), dtype="int64"), i64, labels=True, chunks=4)
    with pytest.raises(ValuesDoNotFitError, match="do not fit int64"):
        write_region(i64, np.array([[[2**63 + 5]]], dtype="uint64"))
    u16 = tmp_path / "u16.n5"
    export(np.zeros((4, 8, 8), dtype="uint16"), u16, labels=True, chunks=4)
    write_region(u16, np.array([[[65535, 3]]], dtype="int64"))
    write_region(u16, [[[7]]], (1, 1, 1))
    with pytest.raises(ValuesDoNotFitError):
        write_region(u16, [[[-1]]], (1, 1, 1))
    got = np.asarray(napari_n5zarr.open(u16 / "s0")[...]).T
    assert got[0, 0, 0] == 65535
    assert got[0, 0, 1] == 3
    assert got[1, 1, 1] == 7
    layer = EditableLevel(u8)
    with pytest.raises(ValuesDoNotFitError):
        layer[0, 0, 0] = 300
    assert not layer.modified


def test_a_dataset_changed_on_disk_since_the_layer_opened_is_refused(tmp_path):
    dest = tmp_path / "l.n5"
    export(np.zeros((4, 8, 8), dtype="uint16"), dest, labels=True, chunks=4)
    layer = open_editable(dest)
    layer[0, 0, 0] = 300
    export(np.zeros((4, 8, 8), dtype="uint8"), dest, labels=True, chunks=4, overwrite=True)
    with pytest.raises(StaleLayerError, match="changed on disk since the layer opened"):
        layer.save()
    assert layer.modified  # the edit is still there to save elsewhere
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest / "s0")[...]), 0)


def test_info_reports_an_unusable_journal_in_one_line(world, capsys):
    _, dest, _, _ = world
    (dest / save_journal.JOURNAL).mkdir()
    assert main(["info", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "labels open read-only" in out
    assert "a folder" in out


def test_a_block_over_its_datasets_bound_is_refused_before_it_is_read_whole(tmp_path):
    dest = tmp_path / "raw.n5"
    export(
        np.ones((4, 8, 8), dtype="uint8"), dest, labels=True, chunks=4, compression="raw", levels=1
    )
    block = dest / "s0" / "0" / "0" / "0"
    with open(block, "ab") as f:
        f.truncate(64 * 2**20)  # a 64 MiB "block" of a 4x4x4 uint8 dataset (sparse)
    with pytest.raises(PlantedFileError, match=r"over the \d+-byte cap") as caught:
        write_region(dest, np.full((1, 1, 1), 5, dtype="uint8"))
    assert str(block) in str(caught.value)
