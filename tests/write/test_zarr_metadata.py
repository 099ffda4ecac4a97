"""write/zarr_metadata.add_zarr_metadata as a library function: its report, dry runs, stores."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.write.convert.zarr_metadata import ZarrMetadataStep, add_zarr_metadata


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.fixture
def mixed(tmp_path) -> Path:
    """good/ (a pyramid), group/ (implicit) with good2/, objects/ (object dtype), varlength/."""
    root = tmp_path / "mixed.n5"
    export(np.arange(12, dtype="uint16").reshape(3, 4), root / "good", levels=1, zarr_json=False)
    (root / "group" / "good2").mkdir(parents=True)
    export(np.ones((2, 2), "int32"), root / "group" / "good2", levels=1, zarr_json=False)
    base = {
        "dimensions": [4],
        "blockSize": [4],
        "dataType": "uint8",
        "compression": {"type": "raw"},
    }
    for name, extra in (("objects", {"dataType": "object"}), ("varlength", {})):
        (root / name).mkdir()
        (root / name / "attributes.json").write_text(json.dumps({**base, **extra}))
    (root / "varlength" / "0").write_bytes(struct.pack(">HHII", 1, 1, 4, 4) + bytes(4))
    (root / "attributes.json").write_text('{"n5": "2.5.1"}')
    return root


EXPECTED_WRITTEN = [
    "good/s0/zarr.json",
    "good/zarr.json",
    "group/good2/s0/zarr.json",
    "group/good2/zarr.json",
    "group/zarr.json",
    "zarr.json",
]


def test_report_lists_written_unchanged_and_skipped(mixed):
    report = add_zarr_metadata(mixed)
    assert report.location == str(mixed)
    assert not report.dry_run
    assert report.written == EXPECTED_WRITTEN
    assert report.unchanged == []
    assert [path for path, _ in report.skipped] == ["objects", "varlength"]
    reasons = dict(report.skipped)
    assert "object" in reasons["objects"]
    assert "varlength mode" in reasons["varlength"]
    assert all((mixed / key).is_file() for key in report.written)
    assert not (mixed / "objects" / "zarr.json").exists()
    assert not (mixed / "varlength" / "zarr.json").exists()
    np.testing.assert_array_equal(
        napari_n5zarr.open(mixed / "good" / "s0")[...], np.arange(12).reshape(3, 4).T
    )

    again = add_zarr_metadata(mixed)  # idempotent: everything up to date, same nodes skipped
    assert again.written == []
    assert again.unchanged == EXPECTED_WRITTEN
    assert again.skipped == report.skipped


def test_dry_run_writes_nothing_and_reports_the_same(mixed):
    before = snapshot(mixed)
    dry = add_zarr_metadata(mixed, dry_run=True)
    assert snapshot(mixed) == before
    assert dry.dry_run
    assert dry.written == EXPECTED_WRITTEN
    assert len(dry.skipped) == 2
    assert add_zarr_metadata(mixed).steps == dry.steps


def test_a_different_zarr_json_is_replaced(mixed):
    add_zarr_metadata(mixed)
    (mixed / "group" / "zarr.json").write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": {"a": 1}}'
    )
    (mixed / "zarr.json").write_text("not JSON")
    report = add_zarr_metadata(mixed)
    assert [s for s in report.steps if s.kind == "written"] == [
        ZarrMetadataStep("written", "group/zarr.json", replaced=True),
        ZarrMetadataStep("written", "zarr.json", replaced=True),
    ]
    assert json.loads((mixed / "zarr.json").read_text()) == {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {},
    }


def test_accepts_a_store(mixed):
    from napari_n5zarr.access import base_store

    report = add_zarr_metadata(base_store(mixed, "r+"))
    assert report.written == EXPECTED_WRITTEN
    assert report.location.rstrip("/") == str(mixed)


def test_no_n5_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no N5 attributes\.json found"):
        add_zarr_metadata(tmp_path / "empty")
    assert list((tmp_path / "empty").iterdir()) == []
