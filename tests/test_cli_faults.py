"""The CLI on broken input: add-zarr-metadata on bad attributes.json files, tree and info
against a failing HTTP server. One line naming the culprit, the documented exit status, no
traceback, siblings still processed."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from faulty_http import FaultyServer, serve

from napari_n5zarr import export


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "napari_n5zarr.cli", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}, check=False,
    )  # fmt: skip


def assert_no_traceback(run: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in run.stderr
    assert "Traceback" not in run.stdout


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
    assert str(deep / "attributes.json") in deep_line
    assert "nested deeper" in deep_line
    assert str(broken / "attributes.json") in broken_line
    assert "not valid JSON" in broken_line
    assert "2 node(s) cannot be expressed" in run.stdout
    assert not (deep / "zarr.json").exists()
    assert not (broken / "zarr.json").exists()
    # The siblings were still processed.
    assert json.loads((root / "good" / "s0" / "zarr.json").read_text())["node_type"] == "array"
    assert json.loads((root / "zarr.json").read_text())["node_type"] == "group"
    assert "exit status" in run_cli("add-zarr-metadata", "--help").stdout


# -- remote faults: tree and info over HTTP ---------------------------------------------


FAST = {
    "N5ZARR_RETRIES": "0",
    "N5ZARR_READ_TIMEOUT": "2",
    "N5ZARR_CONNECT_TIMEOUT": "2",
    "N5ZARR_RETRY_BACKOFF": "0.01",
}


@pytest.fixture
def served(tmp_path):
    """A container with groups a, b, c (each one dataset) served on 127.0.0.1."""
    root = tmp_path / "served"
    for name in ("a", "b", "c"):
        export(np.full((4, 6), ord(name), "uint8"), root / "c.n5", path=name, levels=1)
    for server in serve(FaultyServer(root=root)):
        yield server, f"{server.url}/c.n5"


def test_tree_reports_a_failing_child_in_place(served):
    server, url = served
    server.faults["/c.n5/b/attributes.json"] = "500"
    server.faults["/c.n5/b/zarr.json"] = "500"
    run = run_cli("tree", url, env=FAST)
    assert_no_traceback(run)
    assert run.returncode == 1, (run.stdout, run.stderr)  # 1: something unreadable, listed
    names = [
        line.lstrip("│├└─ ").split()[0] if line.strip() else "" for line in run.stdout.splitlines()
    ]
    lines = run.stdout.splitlines()
    a, b, c = names.index("a/"), names.index("b"), names.index("c/")
    assert a < b < c  # b reported in its place among its siblings
    assert "unreadable" in lines[b]
    assert f"{url}/b/attributes.json" in lines[b]
    assert "500" in lines[b]
    assert names[a + 1] == "s0"
    assert names[c + 1] == "s0"  # the siblings' datasets are listed
    assert server.hits["/c.n5/b/attributes.json"] + server.hits["/c.n5/b/zarr.json"] >= 1


def test_info_on_a_failing_root_is_one_line(served):
    server, url = served
    server.faults["/c.n5/attributes.json"] = "500"
    server.faults["/c.n5/zarr.json"] = "500"
    run = run_cli("info", url, env=FAST)
    assert_no_traceback(run)
    assert run.returncode == 4, (
        run.stdout,
        run.stderr,
    )  # 4: unreachable (a server error), one line on stderr
    [line] = run.stderr.strip().splitlines()
    assert url in line
    assert "500" in line
    assert "not found" not in line.lower()  # a 500 is not a 404
