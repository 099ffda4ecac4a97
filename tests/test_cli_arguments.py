"""The CLI's argparse converters, its one-line usage errors, and -v/-q logging."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import warnings

import numpy as np
import pytest

from napari_n5zarr import cli, export
from napari_n5zarr.cli import chunks_arg, compression_arg, levels_arg, main, scheduler_arg


def test_chunks_arg():
    assert chunks_arg("64") == 64
    assert chunks_arg("4,16, 16") == (4, 16, 16)
    for bad in ("a,b", "0", "-4", "4,,4", "", "4.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive whole number"):
            chunks_arg(bad)


def test_levels_arg():
    assert levels_arg("auto") == "auto"
    assert levels_arg("3") == 3
    for bad in ("many", "0", "-1", "2.0"):
        with pytest.raises(argparse.ArgumentTypeError, match="'auto' or a positive whole number"):
            levels_arg(bad)


def test_compression_arg():
    assert compression_arg("zstd:3") == {"type": "zstd", "level": 3}
    assert compression_arg('{"type": "gzip", "level": 2}')["level"] == 2
    for bad, why in (("zstd:abc", "must be a whole number"), ("nonsense", "unknown N5 compression"),
                     ("raw:3", "takes no level"), ("{bad json", "Expecting property name")):  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            compression_arg(bad)


def test_scheduler_arg():
    for good in ("threads", "synchronous", "processes", "tcp://127.0.0.1:8786", "127.0.0.1:8786"):
        assert scheduler_arg(good) == good
    with pytest.raises(argparse.ArgumentTypeError, match="scheduler address"):
        scheduler_arg("nonsense")


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (
            ["convert", "a", "b", "--chunks", "a,b"],
            "argument --chunks: expected a positive whole number",
        ),
        (["convert", "a", "b", "--levels", "0"], "argument --levels: expected 'auto'"),
        (
            ["convert", "a", "b", "--compression", "zstd:x"],
            "argument --compression: the level in 'zstd:x'",
        ),
        (["convert", "a", "b", "--scheduler", "nowhere"], "argument --scheduler: expected threads"),
        (
            ["convert", "a", "b", "--boundary", "wrap"],
            "argument --boundary: invalid choice: 'wrap'",
        ),
        (["tree"], "the following arguments are required: path"),
        (["nonsense"], "argument command: invalid choice: 'nonsense'"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args, culprit, capsys):
    with pytest.raises(SystemExit) as caught:
        main(args)
    assert caught.value.code == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"n5zarr: error: {culprit}"), line
    assert line.endswith("--help')"), line
    assert captured.out == ""


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "napari_n5zarr.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_verbose_shows_debug_log_on_stderr(tmp_path):
    export(np.ones((4, 6), "uint8"), tmp_path / "c.n5", levels=1, zarr_json=False)
    quiet = run_cli("add-zarr-metadata", "--dry-run", str(tmp_path / "c.n5"))
    loud = run_cli("-v", "add-zarr-metadata", "--dry-run", str(tmp_path / "c.n5"))
    assert quiet.returncode == loud.returncode == 0
    assert quiet.stdout == loud.stdout
    assert "would write s0/zarr.json" in loud.stdout  # the report is the same
    assert quiet.stderr == ""
    assert "DEBUG napari_n5zarr.write.convert.zarr_metadata: adding zarr.json under" in loud.stderr
    assert (
        "DEBUG napari_n5zarr.write.convert.zarr_metadata: would write s0/zarr.json" in loud.stderr
    )


def _noisy_command(args: argparse.Namespace) -> int:
    logging.getLogger("napari_n5zarr.some.module").warning("a logged warning")
    logging.getLogger("napari_n5zarr.some.module").error("a logged error")
    warnings.warn("a python warning", UserWarning, stacklevel=1)
    return 0


@pytest.mark.parametrize(
    ("flags", "shown", "hidden"),
    [
        (
            [],
            [
                "WARNING napari_n5zarr.some.module: a logged warning",
                "a logged error",
                "a python warning",
            ],
            [],
        ),
        (
            ["-q"],
            ["ERROR napari_n5zarr.some.module: a logged error"],
            ["a logged warning", "a python warning"],
        ),
        (["-qq"], [], ["a logged warning", "a logged error", "a python warning"]),
    ],
)
def test_quiet_silences_warnings(monkeypatch, capsys, tmp_path, flags, shown, hidden):
    monkeypatch.setattr(cli, "cmd_tree", _noisy_command)
    package = logging.getLogger("napari_n5zarr")
    before = package.level, list(package.handlers), package.propagate
    with warnings.catch_warnings(record=True) as caught:  # pytest shows warnings its own way
        warnings.simplefilter("always")
        assert main([*flags, "tree", str(tmp_path)]) == 0
    err = capsys.readouterr().err + "".join(str(w.message) for w in caught)
    for text in shown:
        assert text in err
    for text in hidden:
        assert text not in err
    assert (
        package.level,
        list(package.handlers),
        package.propagate,
    ) == before  # restored after the command
