"""Fault campaign on export destinations (issue 19, items 1-4), real files throughout:

* planted lock files (symbolic links, hard links, FIFOs, folders, files of other content)
  for every way to name a lock (a container, a group in it, a zip);
* one node spelled several ways (``C`` + ``path="g"``, ``C/g``, a symlink to ``C``, ``./``)
  takes one lock; recovery leaves alone what a live export or a stranger owns;
* ``open(mode="w")`` and zip destinations refuse what is not ours.

Every case ends in a refusal that changes nothing, or in the right data.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.errors import DestinationLockError, N5FormatError, NodeExistsError
from napari_n5zarr.n5.constants import INCOMPLETE_MARKER
from napari_n5zarr.write import safe_destination
from napari_n5zarr.write.export.publish import Destination
from napari_n5zarr.write.safe_destination import LOCK_SUFFIX, DestinationBusyError

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

OPTS = {"chunks": 8, "levels": 2, "compression": "raw"}
SRC = Path(__file__).resolve().parents[2] / "src"
PRECIOUS = b"my thesis, 900 bytes of it " * 33


def data(value: int = 0) -> np.ndarray:
    return (np.random.default_rng(3).integers(1, 4000, size=(16, 32, 32)) + value).astype("uint16")


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# -- 1. a lock file that is not ours is refused, never written -----------------------------

PLANTS = ["symlink to a file", "hard link", "dangling symlink", "symlink to a folder", "fifo", "folder",
          "file of other content"]  # fmt: skip
LOCKS = ["container", "group", "zip"]


def dest_and_lock(tmp_path: Path, where: str) -> tuple[Path, str, Path]:
    if where == "container":
        return tmp_path / "c.n5", "", tmp_path / f".c.n5{LOCK_SUFFIX}"
    if where == "group":
        (tmp_path / "c.n5").mkdir()
        return tmp_path / "c.n5", "g", tmp_path / "c.n5" / f".g{LOCK_SUFFIX}"
    return tmp_path / "c.zip", "", tmp_path / f".c.zip{LOCK_SUFFIX}"


def plant(lock: Path, how: str, user_file: Path) -> None:
    user_file.write_bytes(PRECIOUS)
    if how == "symlink to a file":
        lock.symlink_to(user_file)
    elif how == "hard link":
        os.link(user_file, lock)
    elif how == "dangling symlink":
        lock.symlink_to(user_file.parent / "nothing-here")
    elif how == "symlink to a folder":
        lock.symlink_to(user_file.parent)
    elif how == "fifo":
        os.mkfifo(lock)
    elif how == "folder":
        lock.mkdir()
        (lock / "inside.txt").write_bytes(PRECIOUS)
    elif how == "file of other content":
        lock.write_bytes(PRECIOUS)


@pytest.mark.parametrize("where", LOCKS)
@pytest.mark.parametrize("how", PLANTS)
def test_planted_lock_file_is_refused_and_left_alone(tmp_path, where, how):
    dest, path, lock = dest_and_lock(tmp_path, where)
    user_file = tmp_path / "thesis.docx"
    plant(lock, how, user_file)
    before = snapshot(tmp_path)
    with pytest.raises(DestinationLockError) as info:
        export(data(), dest, path=path, **OPTS)
    message = str(info.value)
    assert "\n" not in message
    assert str(lock) in message
    assert "nothing was changed" in message
    assert snapshot(tmp_path) == before
    assert user_file.read_bytes() == PRECIOUS
    assert not dest.exists() or where == "group"
    assert os.path.lexists(lock)


def test_a_lock_left_by_a_killed_export_is_still_taken_over(tmp_path):
    dest = tmp_path / "c.n5"
    lock = tmp_path / f".c.n5{LOCK_SUFFIX}"
    lock.write_text('{"pid": 999999999, "host": "x", "started": 0, "dest": "c.n5"}')
    export(data(), dest, **OPTS)
    assert not lock.exists()
    lock.write_text("")  # killed between creating the lock and writing it
    export(data(1), dest, overwrite=True, **OPTS)
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest)["s0"][...]).T, data(1))


# -- 2. one node, one lock -----------------------------------------------------------------

SPELLINGS = ["C path=g", "C/g", "link-to-C/g", "C/./g/", "C/a/../g"]


def spelled(tmp_path: Path, how: str) -> tuple[str, str]:
    c = tmp_path / "C"
    if how == "C path=g":
        return str(c), "g"
    if how == "link-to-C/g":
        link = tmp_path / "link-to-C"
        if not link.exists():
            link.symlink_to(c)
        return str(link / "g"), ""
    if how == "C/a/../g":
        (c / "a").mkdir(parents=True, exist_ok=True)
    return str(c) + how[1:], ""


@pytest.mark.parametrize("second", SPELLINGS)
@pytest.mark.parametrize("first", ["C path=g", "C/g"])
def test_one_node_spelled_two_ways_takes_one_lock(tmp_path, first, second):
    (tmp_path / "C").mkdir()
    export(data(), tmp_path / "C", path="g", **OPTS)
    before = snapshot(tmp_path / "C")
    dest1, path1 = spelled(tmp_path, first)
    dest2, path2 = spelled(tmp_path, second)
    with (
        Destination(dest1, safe_destination.group_prefix(path1), True, None),
        pytest.raises(DestinationBusyError, match="being written by pid"),
    ):
        export(data(1), dest2, path=path2, overwrite=True, **OPTS)
    assert snapshot(tmp_path / "C") == before


@pytest.mark.parametrize("inner", ["C path=g", "C/g"])
def test_a_node_inside_one_being_exported_is_refused(tmp_path, inner):
    """export(C, overwrite=True) replaces C whole: writing C/g meanwhile would be lost."""
    (tmp_path / "C").mkdir()
    export(data(), tmp_path / "C", path="g", **OPTS)
    before = snapshot(tmp_path / "C")
    dest, path = spelled(tmp_path, inner)
    with (
        Destination(tmp_path / "C", "", True, None),
        pytest.raises(DestinationBusyError, match=r"inside .*C, which pid"),
    ):
        export(data(1), dest, path=path, overwrite=True, **OPTS)
    # and the other way round
    with (
        Destination(dest, safe_destination.group_prefix(path), True, None),
        pytest.raises(FileExistsError, match=r"refusing to overwrite .*\.g\.n5zarr-lock"),
    ):
        export(data(1), tmp_path / "C", overwrite=True, **OPTS)
    assert snapshot(tmp_path / "C") == before


HOLD_STAGING = """
import sys, time
from pathlib import Path
from napari_n5zarr.write.safe_destination import staging_folder
folder = staging_folder(Path(sys.argv[1]))
(folder / "s0").mkdir()
(folder / "s0" / "block").write_bytes(b"being written")
print(folder, flush=True)
time.sleep(600)
"""


def test_recovery_leaves_a_live_exports_staging_folder_alone(tmp_path):
    dest = tmp_path / "d.n5"
    export(data(), dest, **OPTS)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_STAGING, str(dest)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        staging = Path(proc.stdout.readline().strip())
        assert staging.is_dir()
        export(data(1), dest, overwrite=True, **OPTS)  # recovers first: must not touch the live one
        assert (staging / "s0" / "block").read_bytes() == b"being written"
    finally:
        proc.kill()
        proc.wait()
    export(data(2), dest, overwrite=True, **OPTS)  # now its owner is dead: removed
    assert not staging.exists()
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest)["s0"][...]).T, data(2))


# -- 3. recovery acts only on folders whose marker proves they are ours ---------------------


@pytest.mark.parametrize("tag", ["new", "old", "deleting"])
@pytest.mark.parametrize("target_exists", [True, False])
def test_recovery_leaves_unproven_lookalike_folders_alone(tmp_path, tag, target_exists):
    dest = tmp_path / "d.n5"
    if target_exists:
        export(data(), dest, **OPTS)
    lookalike = tmp_path / f".d.n5.n5zarr-{tag}-{os.getpid()}-0123abcd"
    (lookalike / "s0").mkdir(parents=True)
    (lookalike / "attributes.json").write_text('{"n5": "4.0.0"}')
    (lookalike / "s0" / "notes.txt").write_bytes(PRECIOUS)
    before = snapshot(lookalike)
    export(data(1), dest, overwrite=True, **OPTS)
    assert snapshot(lookalike) == before  # neither restored nor deleted
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest)["s0"][...]).T, data(1))


def test_a_copy_marked_deleting_is_never_restored(tmp_path):
    dest = tmp_path / "d.n5"
    export(data(), dest, **OPTS)
    stale = tmp_path / f".d.n5.n5zarr-old-{999999999}-0123abcd"
    os.rename(dest, stale)
    stale = safe_destination.mark_deleting(stale, "999999999-0123abcd")
    (stale / "s0" / "0" / "0" / "0").unlink()  # half deleted
    export(data(1), dest, **OPTS)  # no "already exists": the stale copy is not put back
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(dest)["s0"][...]).T, data(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.n5"]


# -- 4. writing into things that are not ours -------------------------------------------------


@pytest.mark.parametrize("mode", ["w"])
@pytest.mark.parametrize("content", ["thesis only", "node and thesis", "nested container"])
def test_open_w_refuses_a_folder_that_is_not_ours(tmp_path, mode, content):
    folder = tmp_path / "work"
    if content == "thesis only":
        folder.mkdir()
    else:
        export(data(), folder / ("inner.n5" if content == "nested container" else ""), **OPTS)
        if content == "nested container":
            (folder / "attributes.json").write_text('{"n5": "4.0.0"}')
    (folder / "thesis.docx").write_bytes(PRECIOUS)
    before = snapshot(folder)
    with pytest.raises(NodeExistsError, match=r"thesis\.docx") as info:
        napari_n5zarr.open(folder, mode=mode)
    assert "\n" not in str(info.value)
    assert "nothing was deleted" in str(info.value)
    assert snapshot(folder) == before


@pytest.mark.parametrize("content", ["empty", "missing", "exported node", "unfinished export"])
def test_open_w_still_replaces_what_is_ours(tmp_path, content):
    folder = tmp_path / "work.n5"
    if content == "empty":
        folder.mkdir()
    elif content == "exported node":
        export(data(), folder, **OPTS)
    elif content == "unfinished export":
        (folder / "s0" / "0").mkdir(parents=True)
        (folder / "s0" / "0" / "1").write_bytes(b"\0")
        (folder / INCOMPLETE_MARKER).write_text("{}")
    group = napari_n5zarr.open(folder, mode="w")
    group.attrs["fresh"] = True
    assert sorted(p.name for p in folder.iterdir() if p.name != "zarr.json") == ["attributes.json"]


NOT_ZIPS = {
    "png": b"\x89PNG\r\n\x1a\n" + PRECIOUS,
    "truncated zip": b"PK\x03\x04" + PRECIOUS,
    "text": PRECIOUS,
}


@pytest.mark.parametrize("kind", list(NOT_ZIPS))
@pytest.mark.parametrize("how", ["export", "export overwrite", "open a", "open w", "open r+"])
def test_a_zip_that_is_not_a_zip_is_refused(tmp_path, kind, how):
    target = tmp_path / "download.zip"
    target.write_bytes(NOT_ZIPS[kind])

    def attempt() -> None:
        if how.startswith("export"):
            export(data(), target, overwrite=how.endswith("overwrite"), **OPTS)
        else:
            napari_n5zarr.open(target, mode=how.split()[1])

    # r+ opens what is there (add-zarr-metadata): a file that is no zip is invalid data, exit 5
    refusal = (N5FormatError,) if how == "open r+" else (NodeExistsError, FileNotFoundError)
    with pytest.raises(refusal) as info:
        attempt()
    assert "\n" not in str(info.value)
    assert target.read_bytes() == NOT_ZIPS[kind]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["download.zip"]


def test_an_empty_zip_file_is_written(tmp_path):
    target = tmp_path / "new.zip"
    target.touch()
    export(data(), target, **OPTS)
    np.testing.assert_array_equal(np.asarray(napari_n5zarr.open(target)["s0"][...]).T, data())
