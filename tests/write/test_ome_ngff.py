"""OME-NGFF 0.5 in the Zarr side of every dual dataset this package writes (issue 30, item 1).

The ``ome`` block is in the pyramid group's ``zarr.json`` only, with axes in the Zarr (= N5)
order; ``attributes.json`` keeps the N5 Viewer keys. Validated by yaozarrs and
ome-zarr-models; opened by ome-zarr-py and napari-ome-zarr in a fresh process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr.write.convert.zarr_metadata import add_zarr_metadata

SRC = str(Path(__file__).resolve().parents[2] / "src")
SCALE, TRANSLATE = (4.0, 0.5, 0.25), (100.0, -2.0, 3.5)
UNITS = ("micrometer", "micrometer", "nanometer")


def doc(path: Path, name: str) -> dict:
    return json.loads((path / name).read_text())


def volume() -> np.ndarray:
    return (np.arange(20 * 48 * 64) % 251).astype("uint16").reshape(20, 48, 64)


def exported(tmp_path: Path, **kwargs) -> Path:
    dest = tmp_path / "cal.n5"
    options = {
        "chunks": 16,
        "levels": 3,
        "scale": SCALE,
        "translate": TRANSLATE,
        "units": UNITS,
    } | kwargs
    export(volume(), dest, **options)
    return dest


def reader_view(dest: Path) -> tuple[np.ndarray, np.ndarray]:
    """Level 0 scale and translate as this package's napari reader shows them (napari order)."""
    from napari_n5zarr._napari.reader import read_path

    [(_, kwargs, _)] = read_path(dest)
    return np.array(kwargs["scale"]), np.array(kwargs["translate"])


def test_export_writes_valid_ome_ngff_0_5_matching_the_reader(tmp_path):
    import yaozarrs
    import zarr
    from ome_zarr_models.v05.image import Image

    dest = exported(tmp_path)
    ome = doc(dest, "zarr.json")["attributes"]["ome"]
    assert ome["version"] == "0.5"
    [ms] = ome["multiscales"]
    # Zarr order is N5 order (x, y, z); mixed units are written in the finest one, as N5 has them
    assert ms["axes"] == [
        {"name": n, "type": "space", "unit": "nanometer"} for n in ("x", "y", "z")
    ]
    scale0, translate0 = reader_view(dest)
    for k, dataset in enumerate(ms["datasets"]):
        assert dataset["path"] == f"s{k}"
        factors = np.array(doc(dest / f"s{k}", "attributes.json")["downsamplingFactors"])
        [scale, translation] = dataset["coordinateTransformations"]
        assert scale["type"] == "scale"
        assert translation["type"] == "translation"
        # the reader's level 0 (napari order reversed), times the level's factors; the coarse
        # level's pixel centre moves by half its extra size (the N5 Viewer rule)
        assert scale["scale"] == pytest.approx(scale0[::-1] * factors)
        assert translation["translation"] == pytest.approx(
            translate0[::-1] + 0.5 * (factors - 1) * scale0[::-1]
        )
    assert any(f != 1 for f in doc(dest / "s2", "attributes.json")["downsamplingFactors"])
    yaozarrs.validate_zarr_store(str(dest))  # the metadata and its arrays (shapes, dimensions)
    Image.from_zarr(zarr.open_group(dest, mode="r"))


def test_the_n5_side_and_the_reader_are_unchanged(tmp_path):
    dest = exported(tmp_path)
    for node in (dest, dest / "s0", dest / "s2"):
        attrs = doc(node, "attributes.json")
        assert "ome" not in attrs
        assert "dimension_names" not in attrs
    assert doc(dest, "attributes.json")["offset"] == [3.5, -2000.0, 100000.0]
    scale0, translate0 = reader_view(dest)
    assert scale0 == pytest.approx((4000.0, 500.0, 0.25))
    assert translate0 == pytest.approx((100000.0, -2000.0, 3.5))


def test_every_level_array_has_dimension_names(tmp_path):
    dest = exported(tmp_path, axis_labels=("z", "y", "x"))
    for k in range(3):
        array = doc(dest / f"s{k}", "zarr.json")
        assert array["dimension_names"] == ["x", "y", "z"]
        assert array["shape"] == doc(dest / f"s{k}", "attributes.json")["dimensions"]


def test_labels_get_image_label(tmp_path):
    import yaozarrs
    from yaozarrs import v05

    dest = tmp_path / "seg.n5"
    export((volume() % 5).astype("uint8"), dest, chunks=16, levels=2, labels=True)
    attrs = doc(dest, "zarr.json")["attributes"]
    assert "image-label" in attrs["ome"]
    model = yaozarrs.validate_ome_object(attrs, v05.OMEAttributes)
    assert isinstance(model.ome, v05.LabelImage)
    yaozarrs.validate_zarr_store(str(dest))


def test_2d_export_and_a_pyramid_inside_a_container(tmp_path):
    import yaozarrs

    dest = tmp_path / "c.n5"
    export(volume()[0], dest, path="em/raw", scale=(2.0, 3.0), units="nm", chunks=16, levels=2)
    [ms] = doc(dest / "em/raw", "zarr.json")["attributes"]["ome"]["multiscales"]
    assert [a["name"] for a in ms["axes"]] == ["x", "y"]
    assert ms["datasets"][0]["coordinateTransformations"][0]["scale"] == [3.0, 2.0]
    assert "ome" not in doc(dest, "zarr.json")["attributes"]  # the container root is no image
    yaozarrs.validate_zarr_store(str(dest / "em/raw"))


def test_axes_ome_ngff_cannot_order_get_no_ome_block(tmp_path):
    """OME-NGFF puts channels before space; the N5 (= Zarr) order puts them after: the
    dataset stays valid N5 + Zarr, without an ``ome`` block."""
    dest = tmp_path / "c.n5"
    export(
        np.zeros((2, 8, 32, 32), "uint8"),
        dest,
        axis_labels=("c", "z", "y", "x"),
        chunks=16,
        levels=1,
    )
    assert "ome" not in doc(dest, "zarr.json")["attributes"]
    assert doc(dest / "s0", "zarr.json")["dimension_names"] == ["x", "y", "z", "c"]


def test_add_zarr_metadata_writes_what_export_writes(tmp_path):
    for zarr_json in (True, False):
        dest = tmp_path / f"{zarr_json}.n5"
        export(
            volume(),
            dest,
            path="raw",
            chunks=16,
            levels=3,
            scale=SCALE,
            translate=TRANSLATE,
            zarr_json=zarr_json,
        )
        export(
            (volume() % 5).astype("uint8"),
            dest,
            path="seg",
            chunks=16,
            levels=2,
            labels=True,
            zarr_json=zarr_json,
        )
    assert not list((tmp_path / "False.n5").rglob("zarr.json"))
    report = add_zarr_metadata(tmp_path / "False.n5")
    assert not report.skipped
    written = sorted(
        p.relative_to(tmp_path / "True.n5") for p in (tmp_path / "True.n5").rglob("zarr.json")
    )
    assert written == sorted(
        p.relative_to(tmp_path / "False.n5") for p in (tmp_path / "False.n5").rglob("zarr.json")
    )
    for rel in written:
        assert doc(tmp_path / "False.n5", str(rel)) == doc(tmp_path / "True.n5", str(rel)), rel
    assert "ome" in doc(tmp_path / "False.n5" / "seg", "zarr.json")["attributes"]
    assert add_zarr_metadata(tmp_path / "True.n5").written == []  # already up to date


def _run(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


OME_ZARR_PY = """
    import json
    import numpy as np
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Multiscales, Reader
    [node] = [n for n in Reader(parse_url({dest!r}))() if n.load(Multiscales)]
    scales = [t[0]["scale"] for t in node.metadata["coordinateTransformations"]]
    print(json.dumps({{"scales": scales, "shapes": [list(d.shape) for d in node.data],
                      "s0": np.asarray(node.data[0]).tolist()}}))
"""

NAPARI_OME_ZARR = """
    import json
    import numpy as np
    from napari_ome_zarr._reader import napari_get_reader
    [(data, kwargs, kind)] = napari_get_reader({dest!r})({dest!r})
    print(json.dumps({{"scale": list(kwargs["scale"]), "multiscale": isinstance(data, list) and len(data) > 1,
                      "shapes": [list(d.shape) for d in data], "kind": kind, "s0": np.asarray(data[0]).tolist()}}))
"""


def test_ome_zarr_py_opens_the_export_as_a_multiscale(tmp_path):
    dest = exported(tmp_path)
    found = _run(OME_ZARR_PY.format(dest=str(dest)))
    scale0, _ = reader_view(dest)
    assert len(found["scales"]) == 3
    for k, scale in enumerate(found["scales"]):  # their order is the Zarr order
        factors = np.array(doc(dest / f"s{k}", "attributes.json")["downsamplingFactors"])
        assert scale == pytest.approx(scale0[::-1] * factors)
    assert found["shapes"][0] == list(volume().shape[::-1])
    np.testing.assert_array_equal(np.array(found["s0"]), volume().T)


def test_napari_ome_zarr_opens_the_export_as_a_multiscale(tmp_path):
    dest = exported(tmp_path)
    found = _run(NAPARI_OME_ZARR.format(dest=str(dest)))
    scale0, _ = reader_view(dest)
    assert found["multiscale"]
    assert found["kind"] == "image"
    assert found["scale"] == pytest.approx(scale0[::-1])
    assert len(found["shapes"]) == 3
    assert found["shapes"][0] == list(volume().shape[::-1])
    np.testing.assert_array_equal(np.array(found["s0"]), volume().T)


def test_convert_keeps_the_ome_calibration(calibrated_pyramid, tmp_path):
    import yaozarrs

    from napari_n5zarr.write.convert.convert import convert

    src, _ = calibrated_pyramid
    dest = tmp_path / "out.n5"
    convert(src, dest, compression="zstd:3")
    [ms] = doc(dest, "zarr.json")["attributes"]["ome"]["multiscales"]
    assert ms == doc(src, "zarr.json")["attributes"]["ome"]["multiscales"][0]
    assert ms["datasets"][0]["coordinateTransformations"][1]["translation"] == [3.0, 2.0, 1.0]
    yaozarrs.validate_zarr_store(str(dest))


def test_rgb_export_has_a_channel_axis_first(tmp_path):
    import yaozarrs

    dest = tmp_path / "rgb.n5"
    export(np.ones((64, 64, 3), "uint8"), dest, chunks=16, levels=2, axis_labels=("y", "x", "rgb"))
    [ms] = doc(dest, "zarr.json")["attributes"]["ome"]["multiscales"]
    assert [(a["name"], a["type"]) for a in ms["axes"]] == [
        ("rgb", "channel"),
        ("x", "space"),
        ("y", "space"),
    ]
    yaozarrs.validate_zarr_store(str(dest))


def test_save_layers_writes_ome_for_each_layer(tmp_path):
    import yaozarrs

    from napari_n5zarr._napari.writer import write_layers

    dest = tmp_path / "layers.n5"
    meta = {"scale": (2.0, 1.0, 1.0), "translate": (0.0, 5.0, 0.0), "units": ("nanometer",) * 3}
    write_layers(
        str(dest),
        [
            (volume(), {**meta, "name": "em"}, "image"),
            ((volume() % 3).astype("uint8"), {**meta, "name": "cells"}, "labels"),
        ],
    )
    em, cells = (
        doc(dest / "em", "zarr.json")["attributes"]["ome"],
        doc(dest / "cells", "zarr.json")["attributes"]["ome"],
    )
    assert em["multiscales"][0]["name"] == "em"
    assert em["multiscales"][0]["datasets"][0]["coordinateTransformations"][1]["translation"] == [
        0.0,
        5.0,
        0.0,
    ]
    assert "image-label" in cells
    assert "image-label" not in em
    for group in ("em", "cells"):
        yaozarrs.validate_zarr_store(str(dest / group))
