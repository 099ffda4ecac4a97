"""convert --to ome-zarr --resume: a convert killed mid-way (SIGKILL) is finished exactly by the
same command with --resume, complete shards untouched; refusals are one line, nothing deleted;
an interrupted export (Ctrl-C) keeps what a resume needs; progress counts shards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from napari_n5zarr import export
from napari_n5zarr import open as open_node
from napari_n5zarr.n5.constants import INCOMPLETE_MARKER
from napari_n5zarr.write.convert.convert import convert

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

SHAPE = (40, 64, 64)  # napari order; blocks 16, shards 2 -> 2 x 2 x 2 shards at level 0


def _source(tmp_path: Path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(3)
    z, y, x = np.indices(SHAPE)
    a = ((z * 37 + y * 11 + x * 5) % 3000 + rng.integers(0, 40, SHAPE)).astype("uint16")
    a[:16, :32, :32] = 0  # one all-zero shard: zarr stores nothing, the journal records it
    src = tmp_path / "src.n5"
    export(a, src, chunks=16, levels=3, scale=(2.0, 1.0, 1.0), units="micrometer")
    return src, a


def _levels(src: Path) -> list[np.ndarray]:
    node = open_node(src)
    return [np.asarray(node[f"s{k}"][...]).T for k in range(3)]


def _journal(dest: Path) -> list[str]:
    raw = (dest / INCOMPLETE_MARKER).read_bytes()
    return [line for line in raw.decode().split("\n")[1:-1] if line]


def _shard_file(dest: Path, key: str) -> Path:
    level, index = key.split(" ")
    return dest / level / "c" / Path(*index.split("."))


def _files(root: Path) -> dict[str, tuple[int, int, int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size, p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


SLOW_CONVERT = textwrap.dedent(
    """
    import sys, time
    from napari_n5zarr.write.export import shards
    from napari_n5zarr import cli

    write = shards.write_shard

    def slow(*args):
        write(*args)
        time.sleep(0.3)  # the test kills this process while shards are being written

    shards.write_shard = slow
    sys.exit(cli.main(sys.argv[1:]))
    """
)

ARGS = ["--to", "ome-zarr", "--shards", "2", "--compression", "zstd:5", "--scheduler", "threads"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "napari_n5zarr.cli", *args], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip


def _killed_convert(tmp_path: Path, src: Path, dest: Path, *, shards: int = 3) -> list[str]:
    """Run convert in a subprocess and SIGKILL it once ``shards`` shards are recorded."""
    script = tmp_path / "slow_convert.py"
    script.write_text(SLOW_CONVERT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, str(script), "convert", str(src), str(dest), *ARGS], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (dest / INCOMPLETE_MARKER).exists() and len(_journal(dest)) >= shards:
                break
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    return _journal(dest)


READ_ELSEWHERE = textwrap.dedent(
    """
    import json, sys
    import numpy as np, zarr
    group = zarr.open_group(sys.argv[1], mode="r")
    for k in range(3):
        np.testing.assert_array_equal(group[f"s{k}"][...], np.load(f"{sys.argv[2]}/{k}.npy"))
    assert not any(m.startswith("napari_n5zarr") for m in sys.modules)
    print(json.dumps(group.attrs["ome"]["version"]))
    """
)


def test_a_killed_convert_is_finished_exactly_by_resume(tmp_path):
    src, _ = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"
    journal = _killed_convert(tmp_path, src, dest)
    assert journal, "killed before any shard was recorded"
    assert "ome" not in json.loads((dest / "zarr.json").read_text()).get(
        "attributes", {}
    )  # not published
    stored = [key for key in journal if _shard_file(dest, key).exists()]
    assert stored, journal  # not only the all-zero shard
    before = {
        key: _files(_shard_file(dest, key).parent)[_shard_file(dest, key).name] for key in stored
    }

    again = _cli(
        "convert", str(src), str(dest), *ARGS
    )  # without --resume: refused, nothing deleted
    assert again.returncode == 2, again.stderr
    assert "already exists" in again.stderr
    assert _journal(dest) == journal

    done = _cli("convert", str(src), str(dest), *ARGS, "--resume")
    assert done.returncode == 0, done.stderr
    assert not (dest / INCOMPLETE_MARKER).exists()
    assert not [
        p for p in dest.rglob("*") if p.name.endswith(".partial")
    ]  # zarr's cut-short writes
    for key, (ino, mtime, size, data) in before.items():  # complete shards were not written again
        st = _shard_file(dest, key).stat()
        assert (st.st_ino, st.st_mtime_ns, st.st_size) == (ino, mtime, size), key
        assert _shard_file(dest, key).read_bytes() == data
    expected = _levels(src)
    for k, level in enumerate(expected):
        np.testing.assert_array_equal(zarr.open_array(dest / f"s{k}", mode="r")[...], level)
        np.save(tmp_path / f"{k}.npy", level)
    script = tmp_path / "read.py"
    script.write_text(READ_ELSEWHERE)
    seen = subprocess.run([sys.executable, str(script), str(dest), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path, check=False)  # fmt: skip
    assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout.strip().splitlines()[-1]) == "0.5"


def _interrupted(src: Path, dest: Path, after: int = 2, **options) -> None:
    """A convert interrupted (KeyboardInterrupt, as Ctrl-C) after ``after`` shards."""

    def progress(name: str, done: int, total: int) -> None:
        if done >= after:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        convert(
            src,
            dest,
            to="ome-zarr",
            shards=2,
            progress=progress,
            scheduler="synchronous",
            **options,
        )


def test_ctrl_c_keeps_a_resumable_export_and_progress_counts_resumed_shards(tmp_path):
    src, _ = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"
    _interrupted(src, dest)
    recorded = _journal(dest)
    assert len(recorded) >= 2
    seen: list[tuple[int, int]] = []
    convert(
        src,
        dest,
        to="ome-zarr",
        shards=2,
        resume=True,
        progress=lambda _n, d, t: seen.append((d, t)),
    )
    total = 8 + 2 + 1  # shards of s0 (40x64x64: 2x2x2), s1 (40x32x32: 2x1x1), s2 (one)
    assert seen[0] == (len(recorded), total)  # the shards written before count as done
    assert seen[-1] == (total, total)
    assert [d for d, _ in seen] == list(range(len(recorded), total + 1))  # one step per shard
    for k, level in enumerate(_levels(src)):
        np.testing.assert_array_equal(zarr.open_array(dest / f"s{k}", mode="r")[...], level)


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--compression", "gzip"], "other arguments"),
        (["--shards", "1"], "other arguments"),
        (["--levels", "2"], "other arguments"),
        (["--overwrite"], "--resume and --overwrite"),
    ],
)
def test_resume_with_other_arguments_is_refused_in_one_line(tmp_path, args, culprit):
    src, _ = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"
    _interrupted(src, dest, compression="zstd:5")
    before = _tree(dest)
    base = ["--to", "ome-zarr", "--shards", "2", "--compression", "zstd:5"]
    changed = base + args if args[0] not in base else [*base[:4], *args, *base[6:]]
    done = _cli("convert", str(src), str(dest), *changed, "--resume")
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert culprit in line, line
    assert _tree(dest) == before


def test_resume_refuses_what_is_not_an_unfinished_export_and_starts_afresh_on_nothing(tmp_path):
    src, _ = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"
    fresh = _cli(
        "convert", str(src), str(dest), "--to", "ome-zarr", "--resume"
    )  # nothing there: a convert
    assert fresh.returncode == 0, fresh.stderr
    np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], _levels(src)[0])
    before = _tree(dest)
    done = _cli("convert", str(src), str(dest), "--to", "ome-zarr", "--resume")  # complete: refused
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert "not an unfinished export" in line, line
    assert _tree(dest) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    done = _cli("convert", str(src), str(mine), "--to", "ome-zarr", "--resume")
    assert done.returncode == 2, done.stderr
    assert (mine / "notes.txt").read_text() == "keep"
    dual = _cli("convert", str(src), str(tmp_path / "d.n5"), "--resume")
    assert dual.returncode == 2, dual.stderr
    assert "--resume goes with --to ome-zarr" in dual.stderr
    assert not (tmp_path / "d.n5").exists()


def test_resume_removes_only_zarr_s_cut_short_chunk_writes(tmp_path):
    src, _ = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"
    _interrupted(src, dest)
    leftover = (
        dest / "s0" / "c" / "1" / "1" / f"1.{'ab' * 16}.partial"
    )  # as zarr names its temporary
    leftover.parent.mkdir(parents=True, exist_ok=True)
    leftover.write_bytes(b"cut short")
    convert(src, dest, to="ome-zarr", shards=2, resume=True)
    assert not leftover.exists()
    np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], _levels(src)[0])


def test_an_unfinished_dual_export_is_not_resumed_as_ome_zarr(tmp_path):
    src, _ = _source(tmp_path)
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / INCOMPLETE_MARKER).write_text(
        json.dumps({"pid": 1, "started": 0})
    )  # as the dual export writes
    (dest / "s0").mkdir()
    before = _tree(dest)
    with pytest.raises(FileExistsError, match="cannot be resumed"):
        convert(src, dest, to="ome-zarr", resume=True)
    assert _tree(dest) == before
