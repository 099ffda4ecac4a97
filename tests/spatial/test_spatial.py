"""spatial: metadata conventions on attribute dicts (the walk over nodes: tests/read/test_pyramid_walk.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from napari_n5zarr import spatial as sp
from napari_n5zarr.n5.metadata import N5DatasetMetadata
from napari_n5zarr.spatial import ArrayInfo


def info(conventions_dir: Path, read_json, rel: str) -> ArrayInfo:
    meta = N5DatasetMetadata.from_json(read_json(conventions_dir / rel / "attributes.json"))
    return ArrayInfo(meta.attributes, meta.dimensions, meta.data_type)


# --- N5 Viewer single datasets: the values n5-ij's MetadataTests expects --------------------


@pytest.mark.parametrize(
    ("rel", "scale", "offset", "unit"),
    [
        ("n5v_ds", 2.0, 0.5, None),  # downsamplingFactors 2, no resolution
        ("n5v_pr", 1.5, 0.0, "mm"),  # pixelResolution object
        ("n5v_pra", 1.5, 0.0, "um"),  # bare list: um
        ("n5v_pra-ds", 3.0, 0.75, "um"),
        ("n5v_pr-ds", 3.0, 0.75, "mm"),
        ("others/res", 1.0, 0.0, None),  # unknown key "res": no metadata
    ],
)
def test_n5viewer_dataset(conventions_dir, read_json, rel, scale, offset, unit):
    i = info(conventions_dir, read_json, f"n5-ij/test.n5/{rel}")
    cal = sp.calibrate(i.attrs, 3, name=rel)
    assert cal.scale == (scale,) * 3
    assert cal.translate == (offset,) * 3
    assert cal.units == (unit,) * 3
    assert cal.axes == ("x", "y", "z")


def test_n5viewer_name_gives_factor_only_with_resolution():
    assert sp.calibrate({}, 3, name="s2").scale == (1.0, 1.0, 1.0)
    cal = sp.calibrate({"pixelResolution": [1, 2, 3]}, 3, name="s2")
    assert cal.scale == (4.0, 8.0, 12.0)
    assert cal.translate == (1.5, 3.0, 4.5)


def test_n5viewer_inherits_group_resolution_and_dataset_wins():
    group = {"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}
    assert sp.calibrate({}, 3, inherited=group).scale == (4.0, 4.0, 40.0)
    own = {"pixelResolution": {"unit": "um", "dimensions": [1, 1, 1]}}
    assert sp.calibrate(own, 3, inherited=group).units == ("um",) * 3


# --- COSEM ------------------------------------------------------------------------------


def test_cosem_c_order(conventions_dir, read_json):
    i = info(conventions_dir, read_json, "n5-ij/test.n5/cosem")
    cal = sp.cosem(i.attrs, 3)
    assert cal == sp.Calibration((64.0,) * 3, (28.0,) * 3, ("nm",) * 3, ("x", "y", "z"), "cosem")


def test_cosem_fortran_order_key(conventions_dir, read_json):
    i = info(conventions_dir, read_json, "n5-ij/test.n5/cosem_F")  # "ordering": "F"
    cal = sp.cosem(i.attrs, 3)
    assert cal.scale == (32.0, 64.0, 128.0)
    assert cal.translate == (28.0, 29.0, 30.0)


def test_cosem_anisotropic_c_order_is_reversed():
    t = {
        "transform": {
            "axes": ["z", "y", "x"],
            "scale": [40, 8, 4],
            "translate": [3, 2, 1],
            "units": ["nm"] * 3,
        }
    }
    cal = sp.cosem(t, 3)
    assert cal.scale == (4.0, 8.0, 40.0)
    assert cal.translate == (1.0, 2.0, 3.0)
    assert cal.axes == ("x", "y", "z")


def test_cosem_wins_over_n5viewer_keys(conventions_dir, read_json):
    # c0/s0 has both a transform listed x, y, z (no order key) and pixelResolution 1.5
    i = info(conventions_dir, read_json, "n5-ij/test.n5/c0/s0")
    cal = sp.calibrate(i.attrs, 3)
    assert (cal.scale, cal.translate, cal.convention) == (
        (7.0, 11.0, 13.0),
        (2.0, 3.0, 5.0),
        "cosem",
    )


def test_cosem_pyramid_from_dataset_transforms(conventions_dir, read_json):
    children = {
        n: info(conventions_dir, read_json, f"n5-ij/test.n5/cosem_ms/{n}")
        for n in ("s0", "s1", "s2")
    }
    ms = sp.n5viewer_pyramid({}, children)
    assert ms.paths == ("s0", "s1", "s2")
    assert ms.scale == (32.0, 32.0, 32.0)
    assert ms.translate == (21.0, 21.0, 21.0)
    assert ms.downsampling == ((1.0,) * 3, (2.0,) * 3, (4.0,) * 3)
    assert ms.shapes == ((512, 512, 260), (256, 256, 129), (128, 128, 65))
    assert ms.convention == "cosem"


def test_openorganelle_group_conventions_agree(conventions_dir, read_json):
    attrs = read_json(conventions_dir / "n5-ij/ngff.n5/ngff_grpAttributes/attributes.json")
    children = {f"s{k}": ArrayInfo({}, (800 >> k, 600 >> k, 400 >> k), "uint8") for k in range(6)}
    by_cosem = sp.cosem_pyramid(attrs, children)
    by_n5viewer = sp.n5viewer_pyramid(attrs, children)
    for ms in (by_cosem, by_n5viewer):
        assert ms.scale == (4.0, 4.0, 5.24)
        assert ms.translate == (0.0, 0.0, 0.0)
        assert ms.units == ("nm",) * 3
        assert ms.downsampling[5] == (32.0, 32.0, 32.0)
        assert len(ms.paths) == 6
    assert by_cosem.convention == "cosem"
    assert (
        by_n5viewer.convention == "n5viewer-old"
    )  # pixelResolution + scales: N5 Viewer's keys (axes/units beside them)
    # the group's explicit s1 translate is the N5 Viewer half-pixel rule
    assert by_cosem.level_translate(1) == pytest.approx((2.0, 2.0, 2.62))


def test_cosem_pyramid_skips_missing_levels():
    attrs = {
        "multiscales": [
            {
                "datasets": [
                    {"path": "s0", "transform": {"scale": [2, 1], "axes": ["y", "x"]}},
                    {"path": "gone"},
                ]
            }
        ]
    }
    ms = sp.cosem_pyramid(attrs, {"s0": ArrayInfo({}, (10, 20), "uint8")})
    assert ms.paths == ("s0",)
    assert ms.scale == (1.0, 2.0)


# --- neuroglancer / tensorstore ---------------------------------------------------------------


@pytest.mark.parametrize("variant", ["deprecated", "modern"])
def test_neuroglancer_multiscale(conventions_dir, read_json, variant):
    root = conventions_dir / f"neuroglancer/n5_viewer_multiscale_{variant}"
    children = {
        n: info(conventions_dir, read_json, f"neuroglancer/n5_viewer_multiscale_{variant}/{n}")
        for n in ("s0", "s1", "s2")
    }
    ms = sp.n5viewer_pyramid(read_json(root / "attributes.json"), children)
    assert ms.scale == (10.0, 20.0)
    assert ms.units == ("nm", "s")
    assert ms.axes == ("x", "y")
    assert ms.downsampling == ((1.0, 1.0), (2.0, 2.0), (4.0, 4.0))
    assert ms.shapes == ((10, 20), (5, 10), (3, 5))
    assert ms.dtype == "uint16"
    assert ms.convention == "neuroglancer"


def test_tensorstore_dataset_keys():
    attrs = {"axes": ["x", "y", "z"], "resolution": [4, 4, 40], "units": ["nm", "nm", "4nm"]}
    cal = sp.calibrate(attrs, 3)
    assert cal.scale == (4.0, 4.0, 160.0)
    assert cal.units == ("nm", "nm", "nm")
    assert cal.axes == ("x", "y", "z")


def test_n5viewer_old_scales():
    group = {
        "scales": [[1, 1, 1], [2, 2, 1], [4, 4, 2]],
        "pixelResolution": {"unit": "um", "dimensions": [0.1, 0.1, 0.5]},
    }
    children = {f"s{k}": ArrayInfo({}, (64 >> k, 64 >> k, 8 >> (k // 2))) for k in range(3)}
    ms = sp.n5viewer_pyramid(group, children)
    assert ms.convention == "n5viewer-old"
    assert ms.downsampling == ((1.0, 1.0, 1.0), (2.0, 2.0, 1.0), (4.0, 4.0, 2.0))
    assert ms.level_translate(2) == pytest.approx((0.15, 0.15, 0.25))


def test_n5viewer_default_power_of_two_and_sorting():
    children = {name: ArrayInfo({}, (100, 100)) for name in ("s10", "s2", "s0", "s1", "mask")}
    ms = sp.n5viewer_pyramid({}, children)
    assert ms.paths == ("s0", "s1", "s2", "s10")
    assert ms.downsampling[3] == (1024.0, 1024.0)
    assert ms.scale == (1.0, 1.0)


# --- OME-NGFF ------------------------------------------------------------------------------


def _ngff(version: str) -> dict:
    ms = {
        "version": version,
        "axes": [
            {"name": "c", "type": "channel"},
            {"name": "z", "type": "space", "unit": "micrometer"},
            {"name": "y", "type": "space", "unit": "micrometer"},
            {"name": "x", "type": "space", "unit": "micrometer"},
        ],
        "datasets": [
            {
                "path": "0",
                "coordinateTransformations": [
                    {"type": "scale", "scale": [1, 2.0, 0.5, 0.5]},
                    {"type": "translation", "translation": [0, 1, 0, 0]},
                ],
            },
            {
                "path": "1",
                "coordinateTransformations": [
                    {"type": "scale", "scale": [1, 2.0, 1.0, 1.0]},
                    {"type": "translation", "translation": [0, 1, 0.25, 0.25]},
                ],
            },
        ],
        "coordinateTransformations": [
            {"type": "scale", "scale": [1, 1, 10, 10]},
            {"type": "translation", "translation": [0, 0, 100, 0]},
        ],
    }
    return (
        {"multiscales": [ms]}
        if version == "0.4"
        else {"ome": {"version": version, "multiscales": [ms]}}
    )


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ngff(version):
    children = {
        "0": ArrayInfo({}, (64, 64, 10, 2), "uint16"),
        "1": ArrayInfo({}, (32, 32, 10, 2), "uint16"),
    }
    ms = sp.ngff_pyramid(_ngff(version), children)
    assert ms.paths == ("0", "1")
    assert ms.axes == ("x", "y", "z", "c")
    assert ms.scale == (5.0, 5.0, 2.0, 1.0)
    assert ms.translate == (0.0, 100.0, 1.0, 0.0)
    assert ms.units == ("micrometer",) * 3 + (None,)
    assert ms.downsampling == ((1.0, 1.0, 1.0, 1.0), (2.0, 2.0, 1.0, 1.0))
    assert ms.channel_axis == 3
    assert ms.convention == f"ngff-{version}"


def test_ngff_listed_in_n5_order_is_not_reversed():
    attrs = {
        "multiscales": [
            {
                "axes": ["x", "y"],
                "datasets": [
                    {
                        "path": "s0",
                        "coordinateTransformations": [{"type": "scale", "scale": [3, 4]}],
                    }
                ],
            }
        ]
    }
    ms = sp.ngff_pyramid(attrs, {"s0": ArrayInfo({}, (5, 6))})
    assert ms.scale == (3.0, 4.0)
    assert ms.axes == ("x", "y")


# --- ImageJ ------------------------------------------------------------------------------------


def test_imagej_xyczt():
    attrs = {
        "pixelWidth": 0.0885,
        "pixelHeight": 0.0885,
        "pixelDepth": 0.25,
        "pixelUnit": "µm",
        "xOrigin": 1.0,
        "yOrigin": 2.0,
        "zOrigin": 3.0,
        "frameInterval": 2.0,
        "numChannels": 2,
        "numSlices": 5,
        "numFrames": 51,
    }
    cal = sp.imagej(attrs, 5)
    assert cal.axes == ("x", "y", "c", "z", "t")
    assert cal.scale == (0.0885, 0.0885, 1.0, 0.25, 2.0)
    assert cal.translate == (1.0, 2.0, 0.0, 3.0, 0.0)
    assert cal.units == ("µm", "µm", None, "µm", "sec")


def test_imagej_drops_singletons():
    attrs = {
        "pixelWidth": 2.0,
        "pixelHeight": 3.0,
        "pixelDepth": 4.0,
        "pixelUnit": "micron",
        "numChannels": 1,
        "numSlices": 7,
        "numFrames": 1,
    }
    cal = sp.calibrate(attrs, 3)
    assert (cal.axes, cal.scale, cal.convention) == (("x", "y", "z"), (2.0, 3.0, 4.0), "imagej")


# --- BigDataViewer -----------------------------------------------------------------------------


def _bdv_timepoints(n: int, shapes=((40, 30, 10), (20, 15, 10))):
    levels = {f"s{k}": ArrayInfo({}, s, "uint16") for k, s in enumerate(shapes)}
    return {f"timepoint{t}": ({}, levels) for t in range(n)}


def test_bdv_setup_time_axis():
    setup = {"downsamplingFactors": [[1, 1, 1], [2, 2, 1]], "dataType": "uint16"}
    ms = sp.bdv_setup(setup, _bdv_timepoints(3))
    assert ms.paths == ("timepoint0/s0", "timepoint0/s1")
    assert ms.time_paths == tuple((f"timepoint{t}/s0", f"timepoint{t}/s1") for t in range(3))
    assert ms.axes == ("x", "y", "z", "t")
    assert ms.downsampling == ((1.0, 1.0, 1.0, 1.0), (2.0, 2.0, 1.0, 1.0))
    assert ms.shapes == ((40, 30, 10, 3), (20, 15, 10, 3))
    assert ms.convention == "bdv"


def test_bdv_single_timepoint_and_paintera_resolution():
    tps = {
        "timepoint0": (
            {"multiScale": True, "resolution": [0.5, 0.5, 2.0]},
            _bdv_timepoints(1)["timepoint0"][1],
        )
    }
    ms = sp.bdv_setup({"downsamplingFactors": [[1, 1, 1], [2, 2, 1]]}, tps)
    assert ms.time_paths == ()
    assert ms.scale == (0.5, 0.5, 2.0)
    assert ms.level_translate(1) == pytest.approx((0.25, 0.25, 2.0 * 0))


def test_bdv_timepoints_of_other_shape_are_not_stacked():
    tps = _bdv_timepoints(2)
    tps["timepoint1"] = ({}, {"s0": ArrayInfo({}, (41, 30, 10), "uint16")})
    ms = sp.bdv_setup({}, tps)
    assert ms.time_paths == ()
    assert ms.ndim == 3


def test_bdv_xml():
    text = """<SpimData version="0.2"><SequenceDescription>
      <ImageLoader format="bdv.n5" version="1.0"><n5 type="relative">dataset.n5</n5></ImageLoader>
      <ViewSetups><ViewSetup><id>3</id><name>ch 3</name><voxelSize><unit>um</unit><size>0.5 0.5 2</size></voxelSize></ViewSetup>
      <ViewSetup><id>x</id></ViewSetup><ViewSetup><id>4</id></ViewSetup></ViewSetups></SequenceDescription></SpimData>"""
    n5, setups = sp.bdv_xml(text)
    assert n5 == "dataset.n5"
    assert setups == {
        3: sp.BdvSetup("ch 3", (0.5, 0.5, 2.0), "um"),
        4: sp.BdvSetup(None, None, None),
    }
    assert sp.bdv_xml(text.replace("bdv.n5", "bdv.hdf5")) == (None, {})
    assert sp.bdv_xml("<broken") == (None, {})
    ms = sp.bdv_setup({"downsamplingFactors": [[1, 1, 1], [2, 2, 2]]}, _bdv_timepoints(2))
    calibrated = sp.with_bdv_setup(ms, setups[3])
    assert calibrated.scale == (0.5, 0.5, 2.0, 1.0)
    assert calibrated.units == ("um", "um", "um", None)
    assert calibrated.level_translate(1) == (0.25, 0.25, 1.0, 0.0)
    assert sp.with_bdv_setup(ms, setups[4]) is ms


# --- robustness ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"pixelResolution": "abc"},
        {"pixelResolution": {"unit": 3, "dimensions": ["a"]}},
        {"transform": {"scale": "x"}},
        {"transform": {"scale": [1, float("nan"), 1]}},
        {"downsamplingFactors": [True, 2]},
        {"axes": "xyz", "units": 5, "resolution": None},
        {"pixelWidth": "wide"},
    ],
)
def test_bad_metadata_gives_a_calibration(attrs):
    cal = sp.calibrate(attrs, 3, name="s1")
    assert len(cal.scale) == len(cal.translate) == len(cal.units) == len(cal.axes) == 3
    assert len(set(cal.axes)) == 3


def test_axes_fitted_and_unique():
    cal = sp.calibrate({"axes": ["x", "x"], "resolution": [1, 2]}, 4)
    assert cal.axes == ("x", "y", "z", "t")
    assert cal.scale == (1.0, 2.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("name", "attrs", "dtype", "expected"),
    [
        ("neuron_labels", {}, "uint64", True),
        ("volumes/segmentation", {}, "uint32", True),
        ("raw", {}, "uint64", False),
        ("labels", {}, "float32", False),
        ("cells", {"image-label": {}}, "int32", True),
        ("cells", {"ome": {"image-label": {}}}, "uint16", True),
        ("data", {"painteraData": {"type": "label"}}, "uint64", True),
        ("labels", {"painteraData": {"type": "raw"}}, "uint16", False),
        ("c/raw_Labels3", {}, "uint8", True),
        ("unlabeled_brain", {}, "uint16", False),
        ("Segura_lab_em", {}, "uint16", False),
        ("presegmentation_raw", {}, "uint16", False),
        ("tmpsegr1234-copy", {}, "uint16", False),
        ("labels.n5", {}, "uint16", False),
        ("seg.zarr", {}, "uint16", False),
    ],
)
def test_is_labels(name, attrs, dtype, expected):
    assert sp.is_labels(name, attrs, dtype) is expected


def test_normalize_unit():
    assert [
        sp.normalize_unit(u) for u in ("um", "µm", "micron", "nm", "sec", "", None, "parsec")
    ] == [
        "micrometer",
        "micrometer",
        "micrometer",
        "nanometer",
        "second",
        None,
        None,
        "parsec",
    ]
