"""Fault campaign, the small ones (issue 19 item 8): BigDataViewer voxel sizes of 0 or
NaN, a full disk under add-zarr-metadata, a dual folder whose documents disagree, a dead
dask scheduler."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr._napari.reader import read_path

BDV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<SpimData version="0.2"><BasePath type="relative">.</BasePath><SequenceDescription>
<ImageLoader format="bdv.n5" version="1.0"><n5 type="relative">c.n5</n5></ImageLoader>
<ViewSetups><ViewSetup><id>0</id><name>0</name><size>8 8 8</size>
<voxelSize><unit>nm</unit><size>{size}</size></voxelSize></ViewSetup></ViewSetups>
</SequenceDescription></SpimData>
"""


def bdv_container(tmp_path: Path, size: str) -> Path:
    root = tmp_path / "c.n5"
    export(np.ones((8, 8, 8), "uint16"), root, path="setup0/timepoint0", levels=1, zarr_json=False)
    (root / "setup0" / "attributes.json").write_text(
        json.dumps({"downsamplingFactors": [[1, 1, 1]], "dataType": "uint16"})
    )
    xml = tmp_path / "dataset.xml"
    xml.write_text(BDV_XML.format(size=size))
    return xml


@pytest.mark.parametrize("size", ["0 4 40", "NaN 4 40", "4 -1 inf"])
def test_bdv_voxel_size_of_zero_or_nan_falls_back_to_one(tmp_path: Path, size: str) -> None:
    xml = bdv_container(tmp_path, size)
    notes: list[str] = []
    layers = read_path(str(xml), lambda level, text: notes.append(text))
    [(_, meta, _)] = layers
    assert all(math.isfinite(s) and s > 0 for s in meta["scale"]), meta["scale"]
    assert any("voxel size" in n and size in n for n in notes), notes


def run_py(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NAPARI_CONFIG": os.devnull}, check=False)  # fmt: skip


def test_add_zarr_metadata_on_a_full_disk_leaves_no_truncated_file_and_names_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "c.n5"
    export(np.ones((8, 8), "uint16"), root, levels=1, zarr_json=False)
    # A full disk, simulated: files may not grow past 64 bytes (EFBIG; SIGXFSZ ignored).
    run = run_py(f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
        from napari_n5zarr.cli import main
        sys.exit(main(["add-zarr-metadata", {str(root)!r}]))
    """)
    assert run.returncode == 4, run.stdout + run.stderr  # 4: cannot write
    assert "Traceback" not in run.stderr
    [line] = [ln for ln in run.stderr.splitlines() if ln.startswith("n5zarr: error:")]
    assert "zarr.json" in line, line
    assert str(root) in line, line
    left = [
        p for p in root.rglob("*") if "zarr.json" in p.name
    ]  # no truncated zarr.json, no temporary file
    assert not left, left


def test_dual_folder_whose_documents_disagree_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from napari_n5zarr.cli import main
    from napari_n5zarr.read.tree import open_tree

    root = tmp_path / "dual.n5"
    export(np.full((8, 8), 40000, "uint16"), root, path="d", levels=1, zarr_json=True)
    doc_path = root / "d" / "s0" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["data_type"] = "int16"  # zarr-python would read -25536 where attributes.json says 40000
    doc_path.write_text(json.dumps(doc))
    node = open_tree(root).find("d/s0")
    assert node.dtype == "uint16"  # attributes.json wins (README: which document the reader uses)
    assert "zarr.json disagrees" in node.kind_text  # the browser's kind column
    assert "uint16 vs int16" in (node.warning or "")
    main(["tree", str(root)])
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if "s0" in ln]
    assert "! zarr.json disagrees" in line
    assert "uint16 vs int16" in line
    main(["info", str(root / "d" / "s0")])
    assert "! zarr.json disagrees" in capsys.readouterr().out
    # documents that agree are not flagged
    export(np.ones((8, 8), "uint16"), tmp_path / "ok.n5", levels=1, zarr_json=True)
    assert open_tree(tmp_path / "ok.n5").find("s0").warning is None


def test_dead_scheduler_address_is_one_line_exit_4(tmp_path: Path) -> None:
    import socket

    pytest.importorskip("distributed")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = tmp_path / "src.n5"
    export(np.ones((8, 8), "uint16"), src, levels=1, zarr_json=False)
    address = f"tcp://127.0.0.1:{port}"
    run = run_py(
        f"""
        import sys
        from napari_n5zarr.cli import main
        sys.exit(main(["convert", {str(src)!r}, {str(tmp_path / "out.n5")!r}, "--scheduler", {address!r}]))
    """,
        timeout=25,
    )  # dask's own connect timeout is 30 s: this fails if it is still in charge
    assert run.returncode == 4, run.stdout + run.stderr
    [line] = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"n5zarr: error: cannot connect to the dask scheduler at {address}"), (
        run.stderr
    )
