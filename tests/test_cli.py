"""``n5zarr`` tree | info | convert | add-zarr-metadata | view."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.cli import main

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")


def snapshot(path: Path, skip: str = "zarr.json") -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and p.name != skip
    }


def tensorstore_read(path: Path) -> np.ndarray:
    import tensorstore as ts

    return (
        ts.open({"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}})
        .result()
        .read()
        .result()
    )


def zarr_read_subprocess(paths: list[Path], out: Path) -> list[np.ndarray]:
    """Plain zarr-python (no import of napari_n5zarr in the script)."""
    names = [str(p) for p in paths]
    script = f"import numpy as np, zarr; np.savez({str(out)!r}, *[zarr.open_array(p, mode='r')[...] for p in {names!r}])"
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=60)
    with np.load(out) as npz:
        return [npz[f"arr_{i}"] for i in range(len(paths))]


# -- tree / info --------------------------------------------------------------------------


def test_tree(calibrated_pyramid, capsys):
    dest, _ = calibrated_pyramid
    assert main(["tree", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "├── s0  9×20×30 zyx  uint8  blocks 8×8×8  gzip 6" in out  # napari order, N5 names
    assert "N5 only" not in out


def test_tree_marks_n5_only_nodes(corpus_dir, capsys):
    assert (
        main(["tree", str(corpus_dir / "saalfeldlab-n5/src/test/resources/backward/data-2.5.1.n5")])
        == 0
    )
    out = capsys.readouterr().out
    assert "raw  5×7 yx  uint8  blocks 4×5  raw  35 B  (N5 only)" in out


def test_info(calibrated_pyramid, capsys):
    dest, _ = calibrated_pyramid
    assert main(["info", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "image uint8, 3 level(s)" in out
    assert "scale      x=1 y=1 z=3" in out
    assert "translate  x=3 y=2 z=1" in out
    assert "s1         15 x 10 x 9" in out  # z (3 um) waits until x and y reach 2 um
    assert "s2         8 x 5 x 5" in out


def test_commands_do_not_import_napari(calibrated_pyramid, tmp_path):
    dest, _ = calibrated_pyramid
    code = textwrap.dedent(
        f"""
        import sys
        from napari_n5zarr.cli import main
        for argv in (["tree", {str(dest)!r}], ["info", {str(dest)!r}], ["convert", {str(dest)!r}, {str(tmp_path / "c.n5")!r}]):
            assert main(argv) == 0, argv
        print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"napari", "qtpy", "PyQt6", "magicgui"}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


# -- convert -------------------------------------------------------------------------------


def test_convert_keeps_levels_and_metadata(calibrated_pyramid, tmp_path, capsys):
    src, _a = calibrated_pyramid
    dest = tmp_path / "out.n5"
    assert main(["convert", str(src), str(dest), "--compression", "zstd:3"]) == 0
    for k in range(3):
        np.testing.assert_array_equal(
            tensorstore_read(dest / f"s{k}"), tensorstore_read(src / f"s{k}")
        )
        assert json.loads((dest / f"s{k}/attributes.json").read_text())["compression"] == {
            "type": "zstd",
            "level": 3,
        }
    attrs = json.loads((dest / "attributes.json").read_text())
    assert attrs["resolution"] == [1.0, 1.0, 3.0]
    assert attrs["offset"] == [3.0, 2.0, 1.0]
    assert attrs["units"] == ["um"] * 3
    assert json.loads((dest / "s2/attributes.json").read_text())["blockSize"] == [
        8,
        5,
        5,
    ]  # the source's blocks


def test_convert_rebuilds_levels_and_chunks(calibrated_pyramid, tmp_path):
    src, a = calibrated_pyramid
    dest = tmp_path / "out.n5"
    assert (
        main(
            [
                "convert",
                str(src),
                str(dest),
                "--levels",
                "3",
                "--chunks",
                "8,16,16",
                "--boundary",
                "pad",
            ]
        )
        == 0
    )
    assert json.loads((dest / "s0/attributes.json").read_text())["blockSize"] == [16, 16, 8]
    assert sorted(p.name for p in dest.iterdir() if p.is_dir()) == ["s0", "s1", "s2"]
    np.testing.assert_array_equal(tensorstore_read(dest / "s0"), a.T)
    # padded: every block of s0 holds the full 16x16x8 header, the edge block (z 8..9) too
    raw = (dest / "s0/1/1/1").read_bytes()
    assert struct.unpack(">HH3I", raw[:16]) == (0, 3, 16, 16, 8)


def test_convert_container_with_several_datasets(corpus_dir, tmp_path, capsys):
    src = corpus_dir / "tensorstore/tensorstore/driver/n5/testdata"
    dest = tmp_path / "ts.n5"
    assert main(["convert", str(src), str(dest), "--levels", "1"]) == 0
    expected = np.load(corpus_dir / "expected_derived/tensorstore_testdata.npy")
    for name in ("raw", "gzip", "bzip2", "xz", "blosc"):
        np.testing.assert_array_equal(tensorstore_read(dest / name / "s0"), expected.T)
    assert json.loads((dest / "attributes.json").read_text()) == {"n5": "4.0.0"}


def test_convert_plain_zarr_source(tmp_path):
    import zarr

    a = (np.arange(6 * 10 * 14).reshape(6, 10, 14) % 200).astype("int16")
    src = zarr.create_array(
        tmp_path / "plain.zarr", shape=a.shape, chunks=(3, 5, 7), dtype=a.dtype
    )  # C order
    src[...] = a
    dest = tmp_path / "from_zarr.n5"
    assert main(["convert", str(tmp_path / "plain.zarr"), str(dest), "--levels", "1"]) == 0
    np.testing.assert_array_equal(tensorstore_read(dest / "s0"), a.T)
    assert json.loads((dest / "s0/attributes.json").read_text())["blockSize"] == [7, 5, 3]
    assert json.loads((dest / "attributes.json").read_text())["axes"] == ["x", "y", "z"]


def test_convert_refuses_existing_and_overlapping(calibrated_pyramid, tmp_path, capsys):
    src, _ = calibrated_pyramid
    before = snapshot(src, skip="")
    assert main(["convert", str(src), str(src)]) == 2
    assert main(["convert", str(src), str(src / "inner.n5")]) == 2
    other = tmp_path / "other.n5"
    export(np.ones((4, 4), "uint8"), other)
    assert main(["convert", str(src), str(other)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert snapshot(src, skip="") == before
    assert main(["convert", str(src), str(other), "--overwrite"]) == 0


def test_convert_on_a_distributed_cluster(calibrated_pyramid, tmp_path):
    from distributed import LocalCluster

    src, a = calibrated_pyramid
    local, remote = tmp_path / "local.n5", tmp_path / "cluster.n5"
    assert main(["convert", str(src), str(local), "--levels", "auto", "--chunks", "8"]) == 0
    with LocalCluster(
        processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        argv = [
            "convert",
            str(src),
            str(remote),
            "--levels",
            "auto",
            "--chunks",
            "8",
            "--scheduler",
            cluster.scheduler_address,
        ]
        assert main(argv) == 0
    assert snapshot(remote, skip="") == snapshot(local, skip="")
    np.testing.assert_array_equal(napari_n5zarr.open(remote)["s0"][...], a.T)


def test_convert_on_a_cluster_that_loses_its_workers(calibrated_pyramid, tmp_path, capsys):
    """Every block task kills its worker: one line naming the cause (not the clean-up's
    "Directory not empty"), exit 4, nothing left behind, so a re-run is not refused."""
    import dask
    from distributed import Client, LocalCluster, WorkerPlugin

    class KillOnStore(WorkerPlugin):  # defined here: pickled by value for the workers
        def transition(self, key, start, finish, **kwargs):
            name = key[0] if isinstance(key, tuple) else str(key)
            if finish == "executing" and "store" in name:
                os._exit(1)

    src, _ = calibrated_pyramid
    dest = tmp_path / "cluster.n5"
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            processes=True,
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        Client(cluster) as client,
    ):
        client.register_plugin(KillOnStore())
        argv = [
            "convert",
            str(src),
            str(dest),
            "--chunks",
            "8",
            "--scheduler",
            cluster.scheduler_address,
        ]
        assert main(argv) == 4  # cannot write: the cluster failed
    err = capsys.readouterr().err.strip()
    assert err.startswith("n5zarr: error: a dask worker died while running task"), err
    assert "allowed-failures" in err, err
    assert "\n" not in err
    assert "Directory not empty" not in err
    assert not dest.exists()


def test_convert_without_workers_stops_after_worker_timeout(calibrated_pyramid, tmp_path, capsys):
    from distributed import LocalCluster

    src, _ = calibrated_pyramid
    dest = tmp_path / "cluster.n5"
    with LocalCluster(
        processes=True, n_workers=0, dashboard_address=None, host="127.0.0.1"
    ) as cluster:
        argv = [
            "convert",
            str(src),
            str(dest),
            "--scheduler",
            cluster.scheduler_address,
            "--worker-timeout",
            "0.5",
        ]
        assert main(argv) == 4
    err = capsys.readouterr().err.strip()
    assert err.startswith("n5zarr: error: the dask cluster at tcp://127.0.0.1:"), err
    assert "no worker for 0.5 s (--worker-timeout)" in err, err
    assert "\n" not in err
    assert not dest.exists()


# -- add-zarr-metadata ------------------------------------------------------------------------


@pytest.mark.parametrize("writer", ["n5-java", "pyn5", "z5py", "zarr"])
def test_add_zarr_metadata_to_foreign_containers(corpus_dir, tmp_path, writer, capsys):
    src = corpus_dir / f"zarr_implementations/data/{writer}.n5"
    dest = shutil.copytree(src, tmp_path / f"{writer}.n5")
    before = snapshot(dest)
    assert main(["add-zarr-metadata", str(dest)]) == 0
    assert snapshot(dest) == before  # attributes.json and blocks untouched
    names = sorted(p.name for p in dest.iterdir() if p.is_dir())
    assert all((dest / n / "zarr.json").is_file() for n in names)
    assert (dest / "zarr.json").is_file()
    expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
    for name, got in zip(
        names, zarr_read_subprocess([dest / n for n in names], tmp_path / "z.npz"), strict=True
    ):
        np.testing.assert_array_equal(got, expected.T, err_msg=name)
    capsys.readouterr()
    assert main(["add-zarr-metadata", str(dest)]) == 0  # idempotent
    assert "wrote 0 zarr.json" in capsys.readouterr().out


def test_add_zarr_metadata_reports_what_cannot_be_expressed(tmp_path, capsys):
    root = tmp_path / "mixed.n5"
    export(np.arange(12, dtype="uint16").reshape(3, 4), root / "good", levels=1, zarr_json=False)
    (root / "group" / "good2").mkdir(parents=True)  # implicit group 'group' (no attributes.json)
    export(np.ones((2, 2), "int32"), root / "group" / "good2", levels=1, zarr_json=False)

    def dataset(name: str, **attrs) -> Path:
        path = root / name
        path.mkdir(parents=True)
        base = {
            "dimensions": [4],
            "blockSize": [4],
            "dataType": "uint8",
            "compression": {"type": "raw"},
        }
        (path / "attributes.json").write_text(json.dumps({**base, **attrs}))
        return path

    dataset("objects", dataType="object")
    dataset("snappy", compression={"type": "snappy"})
    dataset("sharded", shardSize=[8])
    var = dataset("varlength")
    (var / "0").write_bytes(struct.pack(">HHII", 1, 1, 4, 4) + bytes(4))
    (root / "attributes.json").write_text('{"n5": "2.5.1"}')
    before = snapshot(root)

    assert main(["add-zarr-metadata", str(root)]) == 1
    out = capsys.readouterr().out
    for name in ("objects", "snappy", "sharded", "varlength"):
        assert f"cannot express {name}:" in out
        assert not (root / name / "zarr.json").exists()
    assert "varlength mode" in out
    assert "snappy" in out
    assert "4 node(s) cannot be expressed" in out
    assert snapshot(root) == before
    [good, _good2] = zarr_read_subprocess(
        [root / "good" / "s0", root / "group" / "good2" / "s0"], tmp_path / "z.npz"
    )
    np.testing.assert_array_equal(good, np.arange(12).reshape(3, 4).T)
    assert json.loads((root / "group" / "zarr.json").read_text())["node_type"] == "group"
    assert json.loads((root / "zarr.json").read_text()) == {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {},
    }


def test_add_zarr_metadata_dry_run(corpus_dir, tmp_path, capsys):
    dest = shutil.copytree(
        corpus_dir / "saalfeldlab-n5/src/test/resources/backward/data-1.5.0.n5", tmp_path / "old.n5"
    )
    assert main(["add-zarr-metadata", "--dry-run", str(dest)]) == 0
    assert not list(dest.rglob("zarr.json"))
    assert "would write raw/zarr.json" in capsys.readouterr().out
    assert main(["add-zarr-metadata", str(dest)]) == 0
    [got] = zarr_read_subprocess([dest / "raw"], tmp_path / "z.npz")
    np.testing.assert_array_equal(
        got, np.load(corpus_dir / "expected_derived/saalfeldlab-n5_backward_raw.npy").T
    )


def test_add_zarr_metadata_without_n5(tmp_path, capsys):
    assert main(["add-zarr-metadata", str(tmp_path)]) == 3  # not found
    assert "no N5 attributes.json" in capsys.readouterr().err


# -- view -----------------------------------------------------------------------------------


def test_view_calls_the_launcher(monkeypatch, calibrated_pyramid):
    from napari_n5zarr._napari import viewer_launch

    seen = []
    monkeypatch.setattr(
        viewer_launch, "view", lambda path, screenshot=None, **_: seen.append((path, screenshot))
    )
    assert main(["view", str(calibrated_pyramid[0])]) == 0
    assert seen == [(str(calibrated_pyramid[0]), None)]


def test_view_without_napari(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "napari", None)  # as if napari were not installed
    assert main(["view"]) == 6  # a needed package is missing
    assert "needs napari" in capsys.readouterr().err


def test_view_command_headless_screenshot(tmp_path, calibrated_pyramid):
    """The real console script, in its own process, on Xvfb (DISPLAY from pytest-xvfb)."""
    import os

    from PIL import Image

    exe = Path(sys.executable).with_name("n5zarr")
    env = {**os.environ, "NAPARI_N5ZARR_CACHE": str(tmp_path / "cache")}
    for target, png in (
        (None, tmp_path / "sample.png"),
        (str(calibrated_pyramid[0]), tmp_path / "data.png"),
    ):
        cmd = [str(exe), "view", *([target] if target else []), "--screenshot", str(png)]
        subprocess.run(cmd, check=True, capture_output=True, timeout=180, env=env)
        pixels = np.asarray(Image.open(png).convert("L"))
        assert pixels.shape == (720, 1280)
        assert pixels.std() > 5  # the first screen the README describes


def test_console_script_is_installed():
    exe = Path(sys.executable).with_name("n5zarr")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    for command in ("tree", "info", "convert", "add-zarr-metadata", "view"):
        assert command in out.stdout


# -- errors and exit codes ------------------------------------------------------------------


def run_cli(*args: str, env: dict | None = None, stdin=None) -> subprocess.CompletedProcess:
    import os

    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "napari_n5zarr.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=full_env,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["view", "MISSING"], 3),  # not found
        (["view", "MISSING.n5"], 3),
        (["convert", "MISSING", "out.n5"], 3),
        (["add-zarr-metadata", "MISSING"], 3),
        (["convert", "{pyr}", "{tmp}/out.n5", "--compression", "zstd:abc"], 2),  # usage
        (["convert", "{pyr}", "{tmp}/out.n5", "--compression", "nonsense"], 2),
        (["convert", "{pyr}", "{tmp}/out.n5", "--levels", "many"], 2),
        (["convert", "{pyr}", "{tmp}/out.n5", "--chunks", "a,b"], 2),
    ],
)
def test_user_errors_give_one_line_and_their_exit_status(
    calibrated_pyramid, tmp_path, args, status
):
    args = [a.format(pyr=calibrated_pyramid[0], tmp=tmp_path) for a in args]
    run = run_cli(*args)
    assert run.returncode == status, (run.stdout, run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("n5zarr: error: "), run.stderr
    assert "Traceback" not in run.stderr


def test_existing_destination_says_what_to_do(calibrated_pyramid, tmp_path):
    export(np.zeros((4, 4), "uint8"), tmp_path / "out.n5")
    run = run_cli("convert", str(calibrated_pyramid[0]), str(tmp_path / "out.n5"))
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "--overwrite" in run.stderr


def test_every_subcommand_documents_exit_codes():
    for command in ("tree", "info", "convert", "add-zarr-metadata", "view"):
        out = run_cli(command, "--help").stdout
        assert "exit status:" in out, command
        assert "0  all good" in out, command
        assert "2  usage error" in out, command
    assert "exit status:" in run_cli("--help").stdout


def test_missing_remote_extra_is_named(tmp_path):
    """As if s3fs / aiohttp were not installed (the README's plain install)."""
    block = tmp_path / "block"
    block.mkdir()
    for module in ("s3fs", "aiohttp"):
        (block / f"{module}.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{module}'\", name='{module}')\n"
        )
    import os

    env = {
        "PYTHONPATH": os.pathsep.join([str(block), *filter(None, [os.environ.get("PYTHONPATH")])])
    }
    for url, extra in (("s3://bucket/data.n5", "s3"), ("https://127.0.0.1:9/data.n5", "http")):
        for command in ("info", "view", "convert"):
            args = [command, url] + ([str(tmp_path / "o.n5")] if command == "convert" else [])
            run = run_cli(*args, env=env)
            assert run.returncode == 6, (command, url, run.stderr)  # a needed package is missing
            assert f"pip install 'napari-n5zarr[{extra}]'" in run.stderr, run.stderr
            assert "Traceback" not in run.stderr, run.stderr


def test_reader_names_the_missing_extra(monkeypatch):
    import importlib

    from napari_n5zarr._napari.reader import read_path

    registry = importlib.import_module("fsspec.registry")._registry
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed...
    monkeypatch.delitem(registry, "s3", raising=False)  # ...nor loaded before
    notes = []
    assert read_path("s3://bucket/data.n5", notify=lambda level, msg: notes.append(msg)) == []
    assert len(notes) == 1
    assert "pip install 'napari-n5zarr[s3]'" in notes[0]


def test_default_install_reads_http():
    """aiohttp and requests are core dependencies: http(s) URLs work without an extra."""
    import tomllib

    deps = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]
    assert any(d.startswith("aiohttp") for d in deps)
    assert any(d.startswith("requests") for d in deps)


def test_broken_pipe_is_silent(tmp_path):
    root = napari_n5zarr.open(tmp_path / "wide.n5", mode="w")
    for i in range(120):
        g = root.create_group(f"group_with_a_long_name_{i:04d}")
        for j in range(12):
            g.create_group(f"subgroup_with_a_long_name_{j:03d}")
    script = f"{sys.executable} -m napari_n5zarr.cli tree {tmp_path / 'wide.n5'} | head -1"
    run = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.stderr == "", run.stderr
    assert len(run.stdout.splitlines()) == 1


@pytest.mark.napari
def test_view_fits_the_data_in_the_visible_canvas(make_napari_viewer, tmp_path, monkeypatch, qtbot):
    """With the docks in place, the data is fitted to the canvas that is left."""
    from napari_n5zarr._napari import viewer_launch

    wide = np.full((100, 1000), 200, "uint8")
    wide[:2] = 0  # contrast limits 0..200: the data is bright on a black canvas
    export(wide, tmp_path / "wide.n5", levels=1)
    made = []

    def viewer_factory(*args, **kwargs):
        kwargs.pop("title", None)
        made.append(make_napari_viewer(show=True))
        return made[-1]

    monkeypatch.setattr("napari.Viewer", viewer_factory)
    viewer = viewer_launch.view(str(tmp_path / "wide.n5"), block=False)
    viewer.window._qt_window.resize(1000, 700)
    qtbot.wait(300)
    shot = viewer.screenshot(canvas_only=True, flash=False)[..., :3].mean(axis=-1)
    bright = np.argwhere(shot > 100)
    (_top, left), (_bottom, right) = bright.min(axis=0), bright.max(axis=0)
    _height, width = shot.shape
    assert left > 0, (left, right, width)
    assert right < width - 1, (left, right, width)  # not cut off at the sides
    assert (right - left) > 0.6 * width  # and fitted, not tiny
