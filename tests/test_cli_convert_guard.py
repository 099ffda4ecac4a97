"""``n5zarr convert``: the block sizes the export widget refuses are refused, for the same
reason (issue 18 item 9); long jobs draw a progress bar on a terminal and stay quiet when
piped; ``--help`` says what a location can be (item 13)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr._napari.export_widget import check_block_size
from napari_n5zarr.cli import ExitCode, main
from napari_n5zarr.write.export.plan import MIN_BLOCK, block_edge_problem


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src.n5"
    export(np.arange(32 * 32, dtype="uint16").reshape(32, 32), src, chunks=16, levels=1)
    return src


@pytest.mark.parametrize("chunks", ["1", "4", "16,4", "7,64"])
def test_convert_refuses_the_block_sizes_the_widget_refuses(source, tmp_path, capsys, chunks):
    dest = tmp_path / "out.n5"
    code = main(["convert", str(source), str(dest), "--chunks", chunks])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    [line] = err.strip().splitlines()
    small = min(int(c) for c in chunks.split(","))
    assert line.startswith(
        f"n5zarr: error: --chunks: block size {small} is too small (at least {MIN_BLOCK}"
    ), line
    assert not dest.exists()  # refused before anything was written
    assert block_edge_problem(small) in check_block_size(
        10, 100, small
    )  # the widget's reason, the same words


def test_a_channel_axis_of_1_is_allowed(tmp_path, capsys):
    src = tmp_path / "c.n5"
    export(np.zeros((2, 16, 16), "uint8"), src, axis_labels=["c", "y", "x"], chunks=8, levels=1)
    assert main(["convert", str(src), str(tmp_path / "out.n5"), "--chunks", "1,8,8"]) == 0, (
        capsys.readouterr().err
    )


def test_progress_bar_on_a_terminal_quiet_when_piped(source, tmp_path, capsys, monkeypatch):
    assert main(["convert", str(source), str(tmp_path / "piped.n5"), "--chunks", "8"]) == 0
    assert capsys.readouterr().err == ""  # pytest's stderr is no terminal: quiet, as when piped

    monkeypatch.setenv("N5ZARR_PROGRESS", "1")  # as on a terminal
    assert main(["convert", str(source), str(tmp_path / "tty.n5"), "--chunks", "8"]) == 0
    err = capsys.readouterr().err
    assert "\r" in err
    assert "[" + "#" * 30 + "]" in err
    assert "blocks" in err
    assert err.endswith("\n")  # the finished bar ends its line


def help_text(command: str, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_help_says_what_a_location_can_be(capsys):
    for command, names in (("tree", ["path"]), ("info", ["path"]), ("convert", ["src", "dest"]), ("view", ["path"]),
                           ("add-zarr-metadata", ["path"])):  # fmt: skip
        text = help_text(command, capsys)
        for name in names:
            assert re.search(rf"^  {name} +\S", text, re.M), (
                command,
                name,
            )  # a help text beside the name
        if command != "add-zarr-metadata":
            flat = " ".join(text.split())
            for form in (".zip", "BigDataViewer .xml", "s3://", "http://", "https://"):
                assert form in flat, (command, form)
