"""write/convert.convert as a library function: exact arrays, its report, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import export
from napari_n5zarr.write.convert.convert import (
    ConvertedImage,
    NothingToConvertError,
    convert,
)

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")


def snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def test_keeps_the_source_levels_exactly(calibrated_pyramid, tmp_path):
    src, a = calibrated_pyramid
    dest = tmp_path / "out.n5"
    report = convert(src, dest, compression="zstd:3")
    assert report.dest == str(dest)
    assert report.skipped == []
    [image] = report.images
    assert image == ConvertedImage("", str(dest), False, image.convention)
    assert image.convention != "none"
    source, converted = napari_n5zarr.open(src), napari_n5zarr.open(dest)
    np.testing.assert_array_equal(converted["s0"][...], a.T)
    for k in range(3):
        np.testing.assert_array_equal(converted[f"s{k}"][...], source[f"s{k}"][...])
        assert json.loads((dest / f"s{k}/attributes.json").read_text())["compression"] == {
            "type": "zstd",
            "level": 3,
        }
    assert json.loads((dest / "attributes.json").read_text())["resolution"] == [1.0, 1.0, 3.0]


def test_levels_chunks_and_progress(calibrated_pyramid, tmp_path):
    src, a = calibrated_pyramid
    dest = tmp_path / "out.n5"
    seen: list[tuple[str, int, int]] = []
    convert(
        src, dest, levels=2, chunks=(4, 16, 16), n5_only=True, progress=lambda *p: seen.append(p)
    )
    assert sorted(p.name for p in dest.iterdir() if p.is_dir()) == ["s0", "s1"]
    assert json.loads((dest / "s0/attributes.json").read_text())["blockSize"] == [16, 16, 4]
    assert not list(dest.rglob("zarr.json"))
    np.testing.assert_array_equal(napari_n5zarr.open(dest / "s0")[...], a.T)
    assert seen
    assert {name for name, _, _ in seen} == {"export"}
    assert seen[-1][1] == seen[-1][2]


def test_several_images_and_skipped_nodes(tmp_path):
    root = tmp_path / "c.n5"
    a, b = np.arange(24, dtype="uint8").reshape(4, 6), np.arange(15, dtype="uint16").reshape(3, 5)
    export(a, root, path="a", levels=1)
    export(b, root, path="b/c", levels=1)
    (root / "broken").mkdir()
    bad = {
        "dimensions": [4],
        "blockSize": [2],
        "dataType": "uint8",
        "compression": {"type": "snappy"},
    }
    (root / "broken" / "attributes.json").write_text(json.dumps(bad))
    dest = tmp_path / "out.n5"
    report = convert(root, dest)
    assert [(i.name, i.target) for i in report.images] == [
        ("a", f"{dest}/a"),
        ("b/c", f"{dest}/b_c"),
    ]
    [skipped] = report.skipped
    assert skipped.startswith("broken: ")
    assert "snappy" in skipped
    np.testing.assert_array_equal(napari_n5zarr.open(dest / "a" / "s0")[...], a.T)
    np.testing.assert_array_equal(napari_n5zarr.open(dest / "b_c" / "s0")[...], b.T)


def test_nothing_to_convert_lists_what_was_skipped(tmp_path):
    root = tmp_path / "c.n5"
    (root / "broken").mkdir(parents=True)
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')
    (root / "broken" / "attributes.json").write_text("not JSON")
    with pytest.raises(
        NothingToConvertError, match="no image or labels arrays to convert"
    ) as caught:
        convert(root, tmp_path / "out.n5")
    assert [s.split(":")[0] for s in caught.value.skipped] == ["broken"]
    assert not (tmp_path / "out.n5").exists()


def test_refuses_overlap_and_an_existing_destination(calibrated_pyramid, tmp_path):
    src, _ = calibrated_pyramid
    before = snapshot(src)
    for dest in (src, src / "inner.n5"):
        with pytest.raises(ValueError, match="src and dest overlap"):
            convert(src, dest)
    other = tmp_path / "other.n5"
    export(np.ones((4, 4), "uint8"), other)
    with pytest.raises(FileExistsError, match="already exists"):
        convert(src, other)
    assert snapshot(src) == before
    convert(src, other, overwrite=True, levels=1)
    np.testing.assert_array_equal(
        napari_n5zarr.open(other / "s0")[...], napari_n5zarr.open(src / "s0")[...]
    )


def test_scheduler_name_is_passed_to_dask(calibrated_pyramid, tmp_path):
    src, a = calibrated_pyramid
    convert(src, tmp_path / "out.n5", levels=1, scheduler="synchronous")
    np.testing.assert_array_equal(napari_n5zarr.open(tmp_path / "out.n5" / "s0")[...], a.T)
