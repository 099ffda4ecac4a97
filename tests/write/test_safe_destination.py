"""export() never loses data: overwrite writes beside the old node and swaps it in, only
replaces what an export wrote, locks the destination, stays inside it, survives a full disk
and kill -9 (real subprocesses, a real tmpfs, a quota-limited store)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from zarr.storage import WrapperStore

import napari_n5zarr
from napari_n5zarr import access, export
from napari_n5zarr.storage.foreign import foreign_entries
from napari_n5zarr.write.export.exporter import INCOMPLETE_MARKER, ExportCancelled
from napari_n5zarr.write.safe_destination import LOCK_SUFFIX

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (16, 48, 48)  # napari order; blocks of 8: s0 2x6x6, s1 1x3x3 = 81 blocks
OPTS = {"chunks": 8, "levels": 2, "compression": "raw"}
SRC = Path(__file__).resolve().parents[2] / "src"


def old_data() -> np.ndarray:
    return np.random.default_rng(1).integers(1, 4000, size=SHAPE).astype("uint16")


def new_data() -> np.ndarray:
    return (old_data()[::-1] + 5000).astype("uint16")


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def levels_of(dest: Path) -> list[np.ndarray]:
    root = napari_n5zarr.open(dest)
    return [np.asarray(root[f"s{k}"][...]).T for k in range(2)]


def expected_levels(data: np.ndarray, tmp: Path) -> list[np.ndarray]:
    export(data, tmp, **OPTS)
    return levels_of(tmp)


def assert_levels(dest: Path, expected: list[np.ndarray]) -> None:
    got = levels_of(dest)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)


def siblings(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir())


@pytest.fixture
def old(tmp_path):
    """A container written by export (old data) and its levels."""
    dest = tmp_path / "data.n5"
    export(old_data(), dest, **OPTS)
    return dest, levels_of(dest)


# -- replace only after the new node is complete ------------------------------------------


def test_old_data_stays_readable_until_the_swap(old, tmp_path):
    dest, before = old
    seen = []

    def check_old(block):
        assert_levels(dest, before)  # mid-export, the destination still reads the old data
        seen.append(1)
        return block

    data = da.from_array(new_data(), chunks=8).map_blocks(
        check_old, dtype="uint16", meta=np.array((), "uint16")
    )
    export(data, dest, overwrite=True, **OPTS)
    assert len(seen) == 2 * 6 * 6
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))
    assert siblings(dest) == ["data.n5", "ref.n5"]  # no staging folder, no old copy, no lock left


def test_failed_overwrite_keeps_the_old_data(old):
    dest, _before = old
    files = snapshot(dest)

    def boom(block, block_info=None):
        if block_info[None]["chunk-location"] == (1, 2, 3):
            raise RuntimeError("source failed")
        return block

    data = da.from_array(new_data(), chunks=8).map_blocks(boom, dtype="uint16")
    with pytest.raises(RuntimeError, match="source failed"):
        export(data, dest, overwrite=True, **OPTS)
    assert snapshot(dest) == files
    assert siblings(dest) == ["data.n5"]


def test_cancelled_overwrite_keeps_the_old_data(old):
    dest, _ = old
    files = snapshot(dest)
    cancel = threading.Event()
    with pytest.raises(ExportCancelled):
        export(
            new_data(),
            dest,
            overwrite=True,
            progress=lambda d, t: cancel.set(),
            cancel=cancel,
            **OPTS,
        )
    assert snapshot(dest) == files
    assert siblings(dest) == ["data.n5"]


# -- only replace what an export wrote ---------------------------------------------------


def test_overwrite_refuses_unrelated_files_and_lists_them(old):
    dest, _ = old
    (dest / "README.md").write_text("my notes")
    (dest / "analysis").mkdir()
    (dest / "analysis" / "results.csv").write_text("a,b\n1,2\n")
    (dest / "s0" / "0" / "notes.txt").write_text("inside a block tree")
    files = snapshot(dest)
    with pytest.raises(FileExistsError) as info:
        export(new_data(), dest, overwrite=True, **OPTS)
    message = str(info.value)
    for name in ("README.md", "analysis/ (2 entries)", "s0/0/notes.txt", "nothing was deleted"):
        assert name in message
    assert message.count(",") == 2
    assert "4 entries" in message
    assert snapshot(dest) == files
    assert siblings(dest) == ["data.n5"]


@pytest.mark.parametrize("stray", ["zarr.json", "attributes.json", INCOMPLETE_MARKER])
def test_overwrite_refuses_a_parent_folder_with_a_stray_marker(tmp_path, stray):
    parent = tmp_path / "projects"
    for name in ("a.n5", "b.n5"):
        export(old_data()[:8], parent / name, **OPTS)
    for i in range(30):
        (parent / f"image_{i:02d}.tif").write_bytes(b"II*\0" + bytes(i))
    (parent / stray).write_text(
        '{"zarr_format": 3, "node_type": "group"}' if stray == "zarr.json" else "{}"
    )
    files = snapshot(parent)
    with pytest.raises(FileExistsError, match="refusing to overwrite") as info:
        export(new_data(), parent, overwrite=True, **OPTS)
    message = str(info.value)
    assert "a.n5/ (another container)" in message
    assert "image_00.tif" in message
    assert "and 22 more" in message  # first 10 of 32 listed
    assert snapshot(parent) == files


def test_overwrite_replaces_a_container_of_exported_pyramids(tmp_path):
    dest = tmp_path / "sample.n5"
    export(old_data(), dest, path="raw", **OPTS)
    export(old_data() % 3, dest, path="labels", labels=True, **OPTS)
    assert foreign_entries(dest) == ([], 0)
    export(new_data(), dest, overwrite=True, **OPTS)
    assert sorted(p.name for p in dest.iterdir()) == ["attributes.json", "s0", "s1", "zarr.json"]
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))


def test_overwrite_replaces_an_unfinished_export(tmp_path):
    dest = tmp_path / "unfinished.n5"
    (dest / "s0" / "0" / "1").mkdir(parents=True)
    (dest / "s0" / "0" / "1" / "2").write_bytes(b"\0\0\0\3")
    (dest / INCOMPLETE_MARKER).write_text("{}")
    export(new_data(), dest, overwrite=True, **OPTS)
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))


def test_overwrite_refuses_a_symlink_in_the_old_container(old, tmp_path):
    dest, _ = old
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep")
    (dest / "s1" / "0" / "link").symlink_to(elsewhere)
    with pytest.raises(FileExistsError, match=r"s1/0/link \(symbolic link\)"):
        export(new_data(), dest, overwrite=True, **OPTS)
    assert (elsewhere / "precious.txt").read_text() == "keep"


@pytest.mark.parametrize("where", ["memory", "zip"])
def test_stores_that_cannot_rename_refuse_overwrite(tmp_path, where):
    dest = (
        f"memory://{tmp_path.name}-safety.n5" if where == "memory" else str(tmp_path / "d.n5.zip")
    )
    export(old_data(), dest, **OPTS)
    with pytest.raises(
        FileExistsError, match="cannot rename" if where == "memory" else "cannot delete"
    ):
        export(new_data(), dest, overwrite=True, **OPTS)
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest)["s0"][...]).T, old_data())


# -- re-compressing in place -------------------------------------------------------------


@pytest.mark.parametrize("path", ["", "raw"])
def test_recompress_in_place_keeps_the_data(tmp_path, path):
    dest = tmp_path / "in_place.n5"
    export(old_data(), dest, path=path, chunks=8, levels=2, compression="gzip")
    node = napari_n5zarr.open(dest / path if path else dest)
    lazy = da.from_zarr(node["s0"]).T  # reads the destination itself
    export(lazy, dest, path=path, overwrite=True, chunks=16, levels=2, compression="zstd")
    node = napari_n5zarr.open(dest / path if path else dest)
    assert node["s0"].chunks == (16, 16, 16)
    s0 = (dest / path / "s0") if path else dest / "s0"
    assert json.loads((s0 / "attributes.json").read_text())["compression"]["type"] == "zstd"
    np.testing.assert_array_equal(np.asarray(node["s0"][...]).T, old_data())
    ref = expected_levels(old_data(), tmp_path / "ref.n5")
    np.testing.assert_array_equal(np.asarray(node["s1"][...]).T, ref[1])


# -- group paths stay inside the destination ---------------------------------------------


@pytest.mark.parametrize("path", ["../x", "..", "/abs", "a/../../b", "a/./b", "a//b", "a\\..\\b"])
def test_group_paths_that_leave_the_destination_are_refused(old, path):
    dest, _ = old
    before = snapshot(dest.parent)
    with pytest.raises(ValueError, match="group path"):
        export(new_data(), dest, path=path, overwrite=True, **OPTS)
    assert snapshot(dest.parent) == before


def test_symlinked_subfolder_leading_outside_is_refused(tmp_path):
    dest, outside = tmp_path / "c.n5", tmp_path / "outside"
    export(old_data(), dest, path="raw", **OPTS)
    outside.mkdir()
    (dest / "linked").symlink_to(outside)
    with pytest.raises(ValueError, match="outside the destination"):
        export(new_data(), dest, path="linked/img", **OPTS)
    assert list(outside.iterdir()) == []


# -- locking -----------------------------------------------------------------------------

SCRIPT = """
import os, shutil, signal, sys, time
import dask.array as da, numpy as np
from napari_n5zarr import export
from napari_n5zarr.write import safe_destination
dest, how, arg, value = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

progress = None
if how == "at-block":
    progress = lambda done, total: die() if done >= int(arg) else None
elif how == "before-swap":
    safe_destination.swap_in = die
elif how.startswith("after-swap"):  # the new node in place, the old copy not yet marked for deletion
    if how.endswith("fallback"):
        safe_destination._exchange = lambda a, b: False
    safe_destination.mark_deleting = die
elif how == "between-renames":
    safe_destination._exchange = lambda a, b: False
    real_rename = os.rename
    def rename(a, b):
        real_rename(a, b)
        if os.path.abspath(a) == os.path.abspath(dest):
            die()
    os.rename = rename
elif how.startswith("deleting-old"):
    if how.endswith("fallback"):  # no renameat2(RENAME_EXCHANGE): NFS, non-Linux
        safe_destination._exchange = lambda a, b: False
    def rmtree(path, *args, **kwargs):
        for i, p in enumerate(sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)):
            if i % 2:
                os.remove(p)
        die()
    shutil.rmtree = rmtree

def gate(block):
    if how == "gate":
        open(arg + ".entered", "w").close()  # the export is writing blocks (it holds the lock)
        while not os.path.exists(arg):
            time.sleep(0.01)
    return block

rng = np.random.default_rng(1)
data = rng.integers(1, 4000, size=(16, 48, 48)).astype("uint16")
if value:
    data = (data[::-1] + 5000).astype("uint16")
lazy = da.from_array(data, chunks=8).map_blocks(gate, dtype="uint16", meta=np.array((), "uint16"))
export(lazy, dest, overwrite=True, chunks=8, levels=2, compression="raw", progress=progress)
print("exported")
"""


def run_script(
    dest: Path, how: str = "-", arg: str = "-", value: int = 1, **kw
) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(dest), how, arg, str(value)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw,
    )  # fmt: skip


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        threading.Event().wait(0.02)


def test_concurrent_export_is_refused_by_the_lock(old, tmp_path):
    dest, _ = old
    lock, gate_file = dest.parent / f".{dest.name}{LOCK_SUFFIX}", tmp_path / "go"
    first = run_script(dest, "gate", str(gate_file))
    try:
        wait_for(tmp_path / "go.entered", first)
        assert lock.exists()
        second = run_script(dest, value=0)
        _out, err = second.communicate(timeout=120)
        assert second.returncode != 0
        assert f"being written by pid {first.pid}" in err, err
        gate_file.touch()
        _out, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
    finally:
        gate_file.touch()
        first.kill()
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))
    assert not lock.exists()
    assert siblings(dest) == ["data.n5", "go", "go.entered", "ref.n5"]


def test_lock_of_a_killed_export_is_taken_over(old, tmp_path):
    dest, before = old
    lock = dest.parent / f".{dest.name}{LOCK_SUFFIX}"
    proc = run_script(dest, "gate", str(tmp_path / "never"))
    wait_for(tmp_path / "never.entered", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert lock.exists()
    assert_levels(dest, before)  # the killed overwrite left the old data
    export(new_data(), dest, overwrite=True, **OPTS)
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))
    assert siblings(dest) == [
        "data.n5",
        "never.entered",
        "ref.n5",
    ]  # the killed export's staging folder was removed


# -- kill -9 during an overwrite ---------------------------------------------------------

KILL_POINTS = [("at-block", "1"), ("at-block", "40"), ("at-block", "81"), ("before-swap", "-"),
               ("after-swap", "-"), ("after-swap-fallback", "-"), ("deleting-old", "-"),
               ("deleting-old-fallback", "-")]  # fmt: skip


def info_says_incomplete(dest: Path) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from napari_n5zarr.cli import main; main(['info', sys.argv[1]])", str(dest)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, check=True,
    )  # fmt: skip
    return "INCOMPLETE" in out.stdout


def assert_old_or_new(dest: Path, old: list[np.ndarray], new: list[np.ndarray]) -> str:
    got = levels_of(dest)
    for name, want in (("old", old), ("new", new)):
        if all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)):
            return name
    raise AssertionError("the destination reads neither the old nor the new data")


@pytest.mark.parametrize(("how", "arg"), KILL_POINTS)
def test_kill_during_overwrite_leaves_old_or_new(old, tmp_path, how, arg):
    dest, before = old
    after = expected_levels(new_data(), tmp_path / "ref.n5")
    proc = run_script(dest, how, arg)
    proc.communicate(timeout=180)
    assert proc.returncode == -signal.SIGKILL
    state = assert_old_or_new(dest, before, after)
    swapped = how.startswith(("deleting-old", "after-swap"))
    assert state == ("new" if swapped else "old")
    # killed after the swap, before the old copy was marked: the new node still holds its
    # staging marker (reads INCOMPLETE, the safe side) until the next export's recovery
    assert info_says_incomplete(dest) == how.startswith("after-swap")
    assert len(siblings(dest)) > 2  # the lock and a staging folder or old copy are left behind
    export(old_data(), dest, overwrite=True, **OPTS)  # the next export cleans them
    assert siblings(dest) == ["data.n5", "ref.n5"]
    assert_levels(dest, before)


def test_kill_between_the_two_renames_is_recovered(old, tmp_path):
    """Without an atomic exchange, a kill between 'old away' and 'new in' leaves no
    destination (never a half one); the next export puts the old one back."""
    dest, before = old
    proc = run_script(dest, "between-renames")
    proc.communicate(timeout=180)
    assert proc.returncode == -signal.SIGKILL
    assert not dest.exists()
    with pytest.raises(FileNotFoundError):
        napari_n5zarr.open(dest)
    with pytest.raises(FileExistsError, match="already exists"):
        export(new_data(), dest, **OPTS)  # recovers the old one first, then refuses to replace it
    assert_levels(dest, before)
    assert siblings(dest) == ["data.n5"]


def test_kill_at_random_moments_leaves_old_or_new(old, tmp_path):
    dest, before = old
    after = expected_levels(new_data(), tmp_path / "ref.n5")
    rng = random.Random(7)
    states = []
    for attempt in range(4):
        value = attempt % 2  # alternate: overwrite with new, then with old again
        proc = run_script(dest, value=value)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=rng.uniform(1.0, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        states.append(assert_old_or_new(dest, before, after))
        assert not info_says_incomplete(dest)
    export(new_data(), dest, overwrite=True, **OPTS)
    assert_levels(dest, after)
    assert siblings(dest) == ["data.n5", "ref.n5"]


def test_half_deleted_old_copy_is_never_resurrected(old, tmp_path):
    """Without an atomic exchange, a kill while the old copy is being deleted leaves it half
    deleted; after the person removes the destination, the next export writes afresh and
    the stale copy is never put back."""
    dest, _ = old
    proc = run_script(dest, "deleting-old-fallback")
    proc.communicate(timeout=180)
    assert proc.returncode == -signal.SIGKILL
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))
    shutil.rmtree(dest)
    export(old_data() + 1, dest, **OPTS)
    assert_levels(dest, expected_levels(old_data() + 1, tmp_path / "ref2.n5"))
    assert not info_says_incomplete(dest)
    assert siblings(dest) == ["data.n5", "ref.n5", "ref2.n5"]


# -- a full disk -------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A real 2 MiB tmpfs (needs root and mount permission)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if shutil.which("mount") is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"mount not permitted here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_full_tmpfs_keeps_the_old_data_and_cleans_up(small_disk):
    dest = small_disk / "data.n5"
    export(old_data(), dest, **OPTS)  # ~84 KiB
    files = snapshot(dest)
    big = (
        np.random.default_rng(2).integers(0, 2**16, size=(64, 128, 128)).astype("uint16")
    )  # 2 MiB, raw
    with pytest.raises(OSError, match="disk full") as info:
        export(big, dest, overwrite=True, **OPTS)
    assert info.value.errno == errno.ENOSPC
    assert "removed the partial export" in str(info.value)
    assert "not touched" in str(info.value)
    assert snapshot(dest) == files
    assert siblings(dest) == ["data.n5"]
    with pytest.raises(OSError, match="disk full"):  # a new destination: the partial one is removed
        export(big, small_disk / "fresh.n5", **OPTS)
    assert siblings(dest) == ["data.n5"]
    export(new_data(), dest, overwrite=True, **OPTS)  # the space is free again
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest)["s0"][...]).T, new_data())


class QuotaStore(WrapperStore):
    """A store that runs out of space after ``budget[0]`` bytes (shared by every copy)."""

    def __init__(self, store, budget: list[int]) -> None:
        super().__init__(store)
        self.budget = budget

    def _with_store(self, store):
        return type(self)(store, self.budget)

    def _spend(self, n: int) -> None:
        self.budget[0] -= n
        if self.budget[0] < 0:
            raise OSError(errno.ENOSPC, "No space left on device (quota)")

    async def set(self, key, value) -> None:
        self._spend(len(value))
        await self._store.set(key, value)

    def set_sync(self, key, value) -> None:
        self._spend(len(value))
        self._store.set_sync(key, value)


def test_quota_limited_store_keeps_the_old_data_and_cleans_up(old, monkeypatch):
    dest, before = old
    files = snapshot(dest)
    budget = [50_000]  # the new export needs ~84 KiB of blocks
    real = access.base_store
    monkeypatch.setattr(access, "base_store", lambda *a, **k: QuotaStore(real(*a, **k), budget))
    with pytest.raises(OSError, match=r"disk full.*removed the partial export") as info:
        export(new_data(), dest, overwrite=True, **OPTS)
    assert info.value.errno == errno.ENOSPC
    assert budget[0] < 0
    assert snapshot(dest) == files
    assert siblings(dest) == ["data.n5"]
    budget[0] = 50_000
    fresh = dest.parent / "fresh.n5"
    with pytest.raises(OSError, match="disk full"):
        export(new_data(), fresh, **OPTS)
    assert not fresh.exists() or not any(fresh.rglob("*.json"))
    monkeypatch.undo()
    assert_levels(dest, before)


# -- undeletable and immutable folders ---------------------------------------------------


@pytest.fixture
def immutable(tmp_path):
    """chattr +i a folder (undone afterwards); skips where chattr does not work."""
    marked = []

    def mark(path: Path) -> None:
        done = (
            subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
            if shutil.which("chattr")
            else None
        )
        if done is None or done.returncode != 0:
            pytest.skip(
                f"chattr +i not available here: {done.stderr.strip() if done else 'no chattr'}"
            )
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_undeletable_old_block_folder_keeps_the_new_data(old, tmp_path, immutable):
    dest, _ = old
    immutable(dest / "s0" / "0")
    with pytest.warns(UserWarning, match="could not delete the old copy"):
        export(new_data(), dest, overwrite=True, **OPTS)
    assert_levels(dest, expected_levels(new_data(), tmp_path / "ref.n5"))
    leftover = [p for p in dest.parent.iterdir() if ".n5zarr-" in p.name]
    assert len(leftover) == 1
    subprocess.run(["chattr", "-i", str(leftover[0] / "s0" / "0")], check=True)
    export(old_data(), dest, overwrite=True, **OPTS)  # the next export removes the old copy
    assert siblings(dest) == ["data.n5", "ref.n5"]


def test_immutable_destination_keeps_the_old_data(old, immutable):
    dest, before = old
    files = snapshot(dest)
    immutable(dest)
    with pytest.raises(OSError, match=r"cannot swap|Operation not permitted"):
        export(new_data(), dest, overwrite=True, **OPTS)
    assert snapshot(dest) == files
    assert siblings(dest) == ["data.n5"]
    assert_levels(dest, before)


def test_blocks_in_flight_are_not_written_after_the_cleanup(tmp_path, monkeypatch):
    """dask raises the first error while other threads still run: a block computed before
    the error but stored after the cleanup must not leave a partial export behind."""
    from napari_n5zarr.write.export import blocks, publish
    from napari_n5zarr.write.export import levels as levels

    monkeypatch.setattr(
        levels, "REGION_BYTES", 0
    )  # one block per task: the first block is its own task

    release, stored = threading.Event(), threading.Event()
    calls, lock = [], threading.Lock()

    def source(block):
        with lock:
            calls.append(1)
            first = len(calls) == 1
        if not first:
            raise RuntimeError("source failed")
        assert release.wait(60)  # the first block finishes only after the cleanup
        return block

    real_setitem, real_clean_up = blocks.N5Blocks.__setitem__, publish.clean_up

    def setitem(self, key, value):
        try:
            real_setitem(self, key, value)
        finally:
            stored.set()

    def clean_up(*args):
        done = real_clean_up(*args)
        release.set()
        assert stored.wait(60)
        return done

    monkeypatch.setattr(blocks.N5Blocks, "__setitem__", setitem)
    monkeypatch.setattr(publish, "clean_up", clean_up)
    data = da.ones((32, 32), dtype="uint8", chunks=8).map_blocks(
        source, dtype="uint8", meta=np.array((), "uint8")
    )
    with pytest.raises(RuntimeError, match="source failed"):
        export(data, tmp_path / "f.n5", chunks=8, scheduler="threads")
    assert stored.is_set()
    assert not (tmp_path / "f.n5").exists()
