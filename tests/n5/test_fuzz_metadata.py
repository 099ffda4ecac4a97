"""Fuzz: mutated attributes.json (seeded) through ``napari_n5zarr.open()`` and a read.

Every case must end in a clean N5MetadataError naming the attributes.json (or another
N5FormatError naming the dataset), or in a correct open: right shape, dtype and block size,
exactly the original data when the mutation left the dataset's meaning intact, and for
other changes a bounded read that succeeds or refuses the blocks with an N5BlockError.

The cases run in a child process with a 3 GiB address-space limit, so a crash, a memory
blow-up or a hang fails this test instead of taking pytest down. Default: 2,000 cases
(~10-40 s); ``N5ZARR_FUZZ=long`` runs 20,000 on three seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SRC = HERE.parents[1] / "src"
LONG = os.environ.get("N5ZARR_FUZZ", "").lower() == "long"
RUNS = [(20261130, 2000)] if not LONG else [(20261130, 20000), (1, 20000), (2, 20000)]
MEMORY_LIMIT = 3 << 30


@pytest.mark.skipif(sys.platform == "win32", reason="needs resource.RLIMIT_AS")
@pytest.mark.parametrize(("seed", "count"), RUNS)
def test_mutated_attributes_json_end_in_a_named_error_or_a_correct_open(
    tmp_path: Path, seed: int, count: int
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "PYTHONWARNINGS": "ignore"}  # fmt: skip
    for name in ("N5ZARR_MAX_METADATA_BYTES", "N5ZARR_MAX_BLOCK_BYTES"):
        env.pop(name, None)
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / "fuzz_metadata_child.py"), str(tmp_path), str(seed), str(count),
             str(MEMORY_LIMIT)],
            capture_output=True, text=True, env=env, timeout=60 + count * 0.25,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        current = (
            (tmp_path / "current-case.json").read_text()
            if (tmp_path / "current-case.json").exists()
            else "?"
        )
        pytest.fail(f"the fuzz run hangs; case under way: {current}")
    if done.returncode != 0:
        current = (
            (tmp_path / "current-case.json").read_text()
            if (tmp_path / "current-case.json").exists()
            else "?"
        )
        pytest.fail(
            f"the child died (exit {done.returncode}) during case {current}\n{done.stderr[-3000:]}"
        )
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["cases"] == count
    assert summary["failed"] == 0, json.dumps(summary["failures"][:5], indent=1)
    outcomes = summary["outcomes"]
    assert sum(outcomes.values()) == count
    # the mutations reach every kind of end, so the run is not trivially refusing everything
    for outcome in (
        "refused: metadata",
        "opened: same data",
        "opened: group",
        "opened: read",
        "opened: blocks refused",
    ):
        assert outcomes.get(outcome, 0) > 0, outcomes
    print(f"seed {seed}: {count} cases: {outcomes}")
