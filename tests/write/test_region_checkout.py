"""``n5zarr convert SRC DEST --region Z0:Z1,Y0:Y1,X0:X1 [--level N]`` and
``convert(..., region=, level=)`` (issue 29, item 4): a local dual pyramid of just that
region, exact values, overlaying the source in napari, its origin recorded; labels editable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.read.images import open_images
from napari_n5zarr.write.convert.convert import convert
from napari_n5zarr.write.convert.region import REGION_ATTRIBUTE, Region

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
EXPECTED_JAVA = np.load(
    CORPUS / "expected_derived/zarr_implementations_reference_image.npy"
)  # napari order


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "napari_n5zarr.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip


def _image(location: Path | str, level: int = 0):
    found = open_images(location)
    assert found.error is None, found.error
    (image,) = found.images
    return image, np.asarray(image.levels[level][...])


def _world(image, level: int, index) -> np.ndarray:
    """The world coordinates (napari order) of voxel ``index`` of ``level`` as the reader places it."""
    ms = image.multiscale
    scale = np.asarray(ms.level_scale(level))[::-1]
    translate = np.asarray(ms.level_translate(level))[::-1]
    return translate + np.asarray(index) * scale


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, np.ndarray]:
    a = (np.arange(24 * 40 * 52).reshape(24, 40, 52) % 65521).astype("uint16")
    dest = tmp_path / "src.n5"
    napari_n5zarr.export(
        a,
        dest,
        chunks=8,
        levels=3,
        scale=(4.0, 2.0, 2.0),
        units="nanometer",
        translate=(10.0, 20.0, 30.0),
    )
    return dest, a


def test_region_of_level_0_is_exact_and_overlays_the_source(source, tmp_path: Path) -> None:
    src, a = source
    report = convert(src, tmp_path / "crop.n5", region="3:17,5:29,40:52")
    assert [i.target for i in report.images] == [str(tmp_path / "crop.n5")]
    crop, values = _image(tmp_path / "crop.n5")
    np.testing.assert_array_equal(values, a[3:17, 5:29, 40:52])
    whole, _ = _image(src)
    np.testing.assert_allclose(_world(crop, 0, (0, 0, 0)), _world(whole, 0, (3, 5, 40)))
    np.testing.assert_allclose(_world(crop, 0, (13, 23, 11)), _world(whole, 0, (16, 28, 51)))
    assert crop.multiscale.units == whole.multiscale.units
    record = json.loads((tmp_path / "crop.n5/attributes.json").read_text())[REGION_ATTRIBUTE]
    assert record == {"source": str(src), "level": 0, "region": [[3, 17], [5, 29], [40, 52]],
                      "level_region": [[3, 17], [5, 29], [40, 52]]}  # fmt: skip


def test_region_of_a_coarser_level(source, tmp_path: Path) -> None:
    src, _ = source
    whole, level1 = _image(src, level=1)
    convert(src, tmp_path / "crop1.n5", region="4:15,8:31,10:50", level=1)
    crop, values = _image(tmp_path / "crop1.n5")
    # level 1 halves y and x only (z is already coarser): 8:31 -> 4:16, 10:50 -> 5:25 (rounded outwards)
    assert tuple(whole.multiscale.downsampling[1]) == (2, 2, 1)  # N5 order
    np.testing.assert_array_equal(values, level1[4:15, 4:16, 5:25])
    np.testing.assert_allclose(
        crop.multiscale.scale[::-1], np.asarray(whole.multiscale.level_scale(1))[::-1]
    )
    np.testing.assert_allclose(_world(crop, 0, (0, 0, 0)), _world(whole, 1, (4, 4, 5)))
    record = json.loads((tmp_path / "crop1.n5/attributes.json").read_text())[REGION_ATTRIBUTE]
    assert record["level"] == 1
    assert record["level_region"] == [[4, 15], [4, 16], [5, 25]]


def test_labels_crop_opens_editable(tmp_path: Path) -> None:
    from napari_n5zarr.write.edit.editable import editable_reason

    labels = np.random.default_rng(3).integers(0, 9, size=(16, 32, 32), dtype=np.uint32)
    napari_n5zarr.export(labels, tmp_path / "seg.n5", chunks=8, levels=2, labels=True)
    convert(tmp_path / "seg.n5", tmp_path / "seg-crop.n5", region="0:8,8:24,8:24")
    crop, values = _image(tmp_path / "seg-crop.n5")
    assert crop.multiscale.is_labels
    np.testing.assert_array_equal(values, labels[0:8, 8:24, 8:24])
    assert editable_reason(tmp_path / "seg-crop.n5") is None


def test_cli_region_over_a_public_s3_bucket(public_s3, no_credentials, tmp_path: Path) -> None:
    env = {**no_credentials, "AWS_ENDPOINT_URL": public_s3}
    done = _cli(
        "convert",
        "s3://pub/java.n5/gzip",
        str(tmp_path / "crop.n5"),
        "--region",
        "100:130,200:209,1:3",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    _, values = _image(tmp_path / "crop.n5")
    np.testing.assert_array_equal(values, EXPECTED_JAVA[100:130, 200:209, 1:3])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--region", "3:17,5,0:4"], "expected start:stop per axis"),
        (["--region", "5:5,0:4,0:4"], "stop must be past start"),
        (["--region=-1:4,0:4,0:4"], "expected start:stop per axis"),
        (["--region", "0:25,0:4,0:4"], "outside the array (level-0 shape (24, 40, 52))"),
        (["--region", "0:4,0:4,0:4,0:4"], "has 4 axes, the array 3"),
        (["--region", "0:4,0:4,0:4", "--level", "7"], "has levels 0 to 2"),
        (["--region", "0:4,0:4,0:4", "--level", "-1"], "a level number"),
        (["--level", "1"], "--level goes with --region"),
    ],
)
def test_bad_regions_are_refused_in_one_line_and_write_nothing(
    source, tmp_path: Path, args, says
) -> None:
    src, _ = source
    done = _cli("convert", str(src), str(tmp_path / "out.n5"), *args)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "out.n5").exists()


def test_region_parse_forms() -> None:
    assert Region.parse("0:4, 2:9,1:3").bounds == ((0, 4), (2, 9), (1, 3))
    assert Region.parse([slice(0, 4), (2, 9)]).bounds == ((0, 4), (2, 9))
    assert str(Region.parse([(1, 2)])) == "1:2"
    # leading axes (channels, time) are kept whole; a coarse level rounds outwards
    assert Region.parse("1:3,5:7").crop((2, 8, 8), (2, 4, 4), (1, 2, 2)) == (
        slice(None),
        slice(0, 2),
        slice(2, 4),
    )
