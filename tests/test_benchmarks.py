"""benchmarks/speed.py runs: tiny sizes, the non-napari rows, no timing assertions."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorstore")

SPEED = Path(__file__).resolve().parents[1] / "benchmarks" / "speed.py"


@pytest.fixture(scope="module")
def speed():
    spec = importlib.util.spec_from_file_location("bench_speed", SPEED)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_speed"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_speed"]


def test_rows_plane_reads_and_limit(speed, tmp_path: Path) -> None:
    """Rows b, c, d, g on tiny data: every row measured, ours and tensorstore read the same data."""
    rows = speed.main(["--selftest", "--rows", "bcdg", "--workdir", str(tmp_path)])
    keys = {r.key for r in rows}
    assert {"b", "g-plane"} <= keys
    for name in speed.COMPRESSIONS:
        assert {f"c-{name}", f"d-{name}", f"g-{name}"} <= keys
    for r in rows:
        assert r.ours > 0
        if not r.key.startswith("g"):
            assert r.ts is not None
            assert r.ts > 0
            assert r.ratio > 0
    assert all(r.limit is not None and r.limit > 0 for r in rows if r.key[0] in "bcd")
    assert "| one z-plane of level 0" in speed.table(rows)


def test_http_row_reads_over_a_slow_local_server(speed, tmp_path: Path) -> None:
    """Row f: the 20 ms-per-request server on 127.0.0.1 serves the pyramid to both readers."""
    cfg = speed.Config(pyramid=64, array=64, repeat=1, workdir=tmp_path)
    pyr = tmp_path / "pyramid.n5"
    assert speed.write_pyramid(pyr, 64) == 1
    row, opening = speed.row_http(cfg, pyr)
    # the delay is really added
    assert row.ours >= speed.HTTP_DELAY_S
    assert row.ts >= speed.HTTP_DELAY_S
    assert opening.key == "f-open"
    assert opening.ts is None
    assert (
        opening.ours >= 4 * speed.HTTP_DELAY_S
    )  # root metadata, listing, levels, a block: one after another


def test_chart_is_a_png(speed, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = [
        speed.Row("b", "a plane", 0.1, 0.2, limit=0.05),
        speed.Row("e-pyr-raw", "ratio", 1.1, None, unit="x"),
    ]
    out = tmp_path / "speed.png"
    speed.chart(rows, out, "test")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_rows(speed, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Row e through the command line's argument parsing: the table has every compression."""
    rows = speed.main(["--selftest", "--rows", "e", "--workdir", str(tmp_path)])
    out = capsys.readouterr().out
    for name in speed.COMPRESSIONS:
        assert f"| export level 0 (64^3), {name} |" in out
        pyramid_over_s0 = next(r for r in rows if r.key == f"e-pyr-{name}")
        assert np.isfinite(pyramid_over_s0.ours)
        assert pyramid_over_s0.ts is None


def test_plain_decoder_matches_ours(speed, tmp_path: Path) -> None:
    """The fallback decode limit (if our codec's API moves) decodes the same blocks to the same arrays."""
    data = speed.sample(64)[:, :40, :].copy()  # an edge block: tensorstore pads it to 64^3
    for name, comp in speed.COMPRESSIONS.items():
        path = tmp_path / f"{name}.n5"
        speed.ts_write(path, data, comp)
        raw = (path / "0/0/0").read_bytes()
        np.testing.assert_array_equal(
            speed.plain_block_decoder(path)(raw), speed.block_decoder(path)(raw)
        )
        np.testing.assert_array_equal(speed.block_decoder(path)(raw)[:, :40, :], data)


def run_script(name: str, *args: str, **env: str) -> str:
    """``benchmarks/NAME`` run with ``args`` in a child (this checkout's ``src`` first on its
    path, ``env`` added); its standard output."""
    src = Path(__file__).resolve().parents[1] / "src"
    path = f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return subprocess.run([sys.executable, str(SPEED.parent / name), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path, **env}, timeout=300, check=True).stdout  # fmt: skip


def test_read_throughput_runs_every_compression(tmp_path: Path) -> None:
    """benchmarks/read_throughput.py on a tiny array: a row per compression, every reader checked equal."""
    out = run_script("read_throughput.py", "--size", "24", "--depth", "10", "--block", "8", "--repeat", "1",
                     TMPDIR=str(tmp_path))  # fmt: skip
    rows = [line.split()[0] for line in out.splitlines()[2:]]
    assert rows == ["raw", "gzip", "zstd", "blosc", "zlib", "bzip2", "xz", "lz4"]


def test_issue28_prints_every_read_row_and_the_multiset_row(tmp_path: Path) -> None:
    """benchmarks/issue28.py on tiny data: a row per tensorstore compression and the multiset
    row (each row checks ours against tensorstore / the uint64 labels before printing)."""
    out = run_script("issue28.py", "--rows", "read,multiset", "--size", "24", "--depth", "10", "--plane", "80",
                     "--repeat", "1", "--workdir", str(tmp_path))  # fmt: skip
    rows = [line.split("|")[0].strip() for line in out.splitlines()[2:]]
    assert rows == [
        f"read {name}" for name in ("raw", "gzip", "zstd", "blosc", "zlib", "bzip2", "xz")
    ] + ["multiset plane"]


def test_sharded_labels_save_runs_and_checks_the_stroke(tmp_path: Path) -> None:
    """benchmarks/sharded_labels_save.py on a tiny sharded pyramid: every row printed (the
    script itself checks that the stroke reached the shard)."""
    out = run_script("sharded_labels_save.py", "--shape", "16,32,32", "--chunks", "8", "--shards", "2",
                     "--repeat", "1", "--workdir", str(tmp_path / "work"))  # fmt: skip
    assert "ours: save" in out
    assert "tensorstore: read + rewrite" in out
    assert "ratio tensorstore / ours" in out


def test_remote_planes_prints_every_row_and_the_trace(tmp_path: Path) -> None:
    """benchmarks/remote_planes.py on a 128^3 pyramid: local, HTTP and tensorstore rows, the
    ratios and a trace of a cold HTTP plane (no napari, no S3 here)."""
    out = run_script(
        "remote_planes.py", "--size", "128", "--repeat", "1", "--trace", "--workdir", str(tmp_path)
    )
    for row in ("ours local", "ours HTTP", "tensorstore HTTP", "ours HTTP / ours local"):
        assert row in out, out
    assert "4 requests issued" in out, out


def test_ome_zarr_convert_compares_with_tensorstore(tmp_path: Path) -> None:
    """benchmarks/ome_zarr_convert.py on a tiny pyramid: both copies made, checked equal, the
    ratio printed; ``--floor`` writes every block of every level once."""
    out = run_script("ome_zarr_convert.py", "--size", "48", "--block", "16", "--shards", "2", "--repeat", "1",
                     "--workdir", str(tmp_path), "--floor")  # fmt: skip
    assert "napari-n5zarr" in out
    assert "tensorstore" in out
    assert "ratio tensorstore / ours" in out
    assert "ratio tensorstore / codecs+writes alone" in out, out
    blocks = [
        p
        for p in (tmp_path / "src-48-16.n5").rglob("*")
        if p.is_file() and not p.name.endswith(".json")
    ]
    assert len(list((tmp_path / "floor.ome.zarr").iterdir())) == len(blocks) > 27
