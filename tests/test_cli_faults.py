"""The CLI on broken input: add-zarr-metadata on bad attributes.json files, tree and info
against a failing HTTP server. One line naming the culprit, the documented exit status, no
traceback, siblings still processed."""

import json
import os
import subprocess
import sys

import numpy as np

from napari_n5zarr import export


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "napari_n5zarr.cli", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip


def assert_no_traceback(run: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in run.stderr and "Traceback" not in run.stdout


# -- add-zarr-metadata --------------------------------------------------------------------


def test_add_zarr_metadata_refuses_bad_attributes_and_goes_on(tmp_path):
    root = tmp_path / "c.n5"
    export(np.arange(12, dtype="uint16").reshape(3, 4), root / "good", levels=1, zarr_json=False)
    deep = root / "deep"
    deep.mkdir()
    (deep / "attributes.json").write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    broken = root / "broken"
    broken.mkdir()
    (broken / "attributes.json").write_text("this is not JSON")
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')

    run = run_cli("add-zarr-metadata", str(root))
    assert run.returncode == 1, run.stderr  # 1: done, something skipped (see --help)
    assert_no_traceback(run)
    lines = run.stdout.splitlines()
    [deep_line] = [line for line in lines if line.startswith("cannot express deep:")]
    [broken_line] = [line for line in lines if line.startswith("cannot express broken:")]
    assert str(deep / "attributes.json") in deep_line and "nested deeper" in deep_line
    assert str(broken / "attributes.json") in broken_line and "not valid JSON" in broken_line
    assert "2 node(s) cannot be expressed" in run.stdout
    assert not (deep / "zarr.json").exists() and not (broken / "zarr.json").exists()
    # The siblings were still processed.
    assert json.loads((root / "good" / "s0" / "zarr.json").read_text())["node_type"] == "array"
    assert json.loads((root / "zarr.json").read_text())["node_type"] == "group"
    assert "exit status" in run_cli("add-zarr-metadata", "--help").stdout
