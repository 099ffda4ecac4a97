"""The codecs are found through the zarr.codecs entry point, in a fresh process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import napari_n5zarr

CORPUS = Path(__file__).parents[1] / "data" / "corpus"


def test_fresh_process_reads_zarr_json_with_n5_default(tmp_path: Path) -> None:
    # a Zarr-only copy (zarr.json, no attributes.json) of n5-java's lz4 dataset
    src = CORPUS / "zarr_implementations/data/n5-java.n5/lz4"
    node = napari_n5zarr.open(src)
    dst = tmp_path / "lz4"
    for f in src.rglob("*"):
        if f.is_file() and f.name != "attributes.json":
            (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (dst / f.relative_to(src)).write_bytes(f.read_bytes())
    from napari_n5zarr.n5.metadata import attributes_to_zarr

    (dst / "zarr.json").write_text(
        json.dumps(attributes_to_zarr(json.loads((src / "attributes.json").read_text())))
    )
    expected = node[...]
    np.save(tmp_path / "expected.npy", expected)
    code = f"""
import sys, numpy as np, zarr
a = zarr.open_array({str(dst)!r}, mode="r")
assert (a[...] == np.load({str(tmp_path / "expected.npy")!r})).all()
print(sorted({{m for m in sys.modules if m.startswith(('napari', 'qtpy', 'PyQt'))}}))
print(type(a.metadata.codecs[0]).__module__)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    # the entry point loaded our codec module lazily; nothing of napari or Qt came along
    assert out[1] == "napari_n5zarr.n5.codec"
    assert all(m.startswith("napari_n5zarr") for m in eval(out[0]))


def test_import_does_not_pull_qt_or_napari() -> None:
    code = "import sys, napari_n5zarr; napari_n5zarr.open; print(sorted(m for m in sys.modules if m.split('.')[0] in ('napari', 'qtpy', 'PyQt5', 'PyQt6', 'PySide2', 'PySide6')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_open_zarr_only_folder_using_n5_default(tmp_path: Path) -> None:
    """A Zarr v3 folder (zarr.json, no attributes.json) whose codec is n5_default opens too."""
    src = CORPUS / "zarrs_n5/data/uneven_chunk_truncated.n5"
    dst = tmp_path / "z"
    dst.mkdir()
    for f in src.rglob("*"):
        if f.is_file() and f.name != "attributes.json":
            (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            (dst / f.relative_to(src)).write_bytes(f.read_bytes())
    from napari_n5zarr.n5.metadata import attributes_to_zarr

    (dst / "zarr.json").write_text(
        json.dumps(attributes_to_zarr(json.loads((src / "attributes.json").read_text())))
    )
    arr = napari_n5zarr.open(dst)
    np.testing.assert_array_equal(arr[...], np.load(CORPUS / "zarrs_n5/data/raw.npy"))


def test_public_functions_stay_functions_after_submodule_imports() -> None:
    code = (
        "import napari_n5zarr.access, napari_n5zarr.write.export.exporter, napari_n5zarr as p;"
        "assert callable(p.open) and callable(p.export) and p.open.__name__ == 'open' and p.export.__name__ == 'export'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
