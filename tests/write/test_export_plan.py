"""The plan step alone: arguments -> ExportPlan, pure (only shapes and dtypes are read),
every bad argument refused before anything is written, with an error naming it."""

import numpy as np
import pytest

from napari_n5zarr.errors import N5FormatError
from napari_n5zarr.write.export.levels import region_depth, region_shape
from napari_n5zarr.write.export.plan import ExportPlan, make_plan


class ShapeOnly:
    """An array-like with a shape and a dtype, and no data: planning must not read it."""

    def __init__(self, shape, dtype="uint16"):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)

    def __getitem__(self, key):
        raise AssertionError("the plan read data")

    def __array__(self, *args, **kwargs):
        raise AssertionError("the plan read data")


def plan_of(shape=(100, 200, 300), dtype="uint16", **kwargs) -> ExportPlan:
    return make_plan([ShapeOnly(shape, dtype)], given_levels=False, **kwargs)


def test_levels_blocks_and_factors_of_a_3d_volume():
    p = plan_of(scale=(2, 1, 1), units="nm", compression="zstd:5")
    assert p.steps == ((1, 2, 2), (2, 2, 2), (2, 2, 2))  # z (2x coarser) waits for y, x
    assert [lv.name for lv in p.levels] == ["s0", "s1", "s2", "s3"]
    assert [lv.shape for lv in p.levels] == [
        (100, 200, 300),
        (100, 100, 150),
        (50, 50, 75),
        (25, 25, 38),
    ]
    assert [lv.block for lv in p.levels] == [(64, 64, 64), (64, 64, 64), (50, 50, 64), (25, 25, 38)]
    assert [lv.factors for lv in p.levels] == [(1, 1, 1), (1, 2, 2), (2, 4, 4), (4, 8, 8)]
    assert p.nblocks == 2 * 4 * 5 + 2 * 2 * 3 + 2 + 1
    assert p.compression == {"type": "zstd", "level": 5}
    assert p.dtype == np.dtype("uint16")
    assert p.axes == ("z", "y", "x")
    assert p.spatial == (0, 1, 2)
    assert p.method == "mean"
    assert p.boundary == "truncate"
    assert p.prefix == ""


def test_metadata_documents_per_level_in_n5_order():
    p = plan_of(scale=(2, 1, 1), translate=(0, 0, 5), units="nm", compression="zstd:5")
    doc = p.levels[1].document
    assert doc["node_type"] == "array"
    assert doc["shape"] == [150, 100, 100]
    assert doc["chunk_grid"]["configuration"]["chunk_shape"] == [64, 64, 64]
    assert doc["codecs"][0]["name"] == "n5_default"
    assert doc["codecs"][0]["configuration"]["codecs"][-1] == {
        "name": "zstd",
        "configuration": {"level": 5, "checksum": False},
    }
    assert doc["attributes"]["downsamplingFactors"] == [2, 2, 1]
    assert doc["attributes"]["resolution"] == [2.0, 2.0, 2.0]
    group = p.group_document
    assert group["node_type"] == "group"
    assert group["attributes"]["pixelResolution"] == {"unit": "nm", "dimensions": [1.0, 1.0, 2.0]}
    assert group["attributes"]["offset"] == [5.0, 0.0, 0.0]


def test_labels_path_and_given_levels():
    p = make_plan(
        [ShapeOnly((64, 64), "uint8"), ShapeOnly((32, 32), "uint8")],
        given_levels=True,
        labels=True,
        path="a/b",
    )
    assert p.given_levels
    assert p.steps == ()
    assert [lv.factors for lv in p.levels] == [(1, 1), (2, 2)]
    assert p.method == "mode"
    assert "image-label" in p.group_document["attributes"]
    assert p.prefix == "a/b/"
    assert p.levels[0].document["data_type"] == "uint8"


def test_bool_and_float16_are_widened():
    assert plan_of(dtype="bool").dtype == np.dtype("uint8")
    assert plan_of(dtype="float16").dtype == np.dtype("float32")
    assert plan_of(dtype=">u2").dtype == np.dtype("uint16")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"boundary": "wrap"}, ValueError, "boundary"),
        ({"downsample": "median"}, ValueError, "median"),
        ({"scale": (1, 1)}, ValueError, "scale has 2 entries for 3"),
        ({"translate": (1, 1, 1, 1)}, ValueError, "translate has 4 entries"),
        ({"units": ("nm", "nm")}, ValueError, "units has 2 entries"),
        ({"chunks": (8, 8)}, ValueError, "chunks .* do not match 3 dimensions"),
        ({"chunks": 0}, ValueError, "block sizes must be >= 1"),
        ({"levels": 0}, ValueError, "levels must be"),
        ({"axis_labels": ("x", "x", "y")}, ValueError, "unique"),
        ({"compression": "snappy"}, N5FormatError, "snappy"),
        ({"compression": "raw:3"}, ValueError, "takes no level"),
        ({"compression": 5}, TypeError, "compression must be"),
        ({"path": "/abs"}, ValueError, "absolute"),
        ({"path": "a/../b"}, ValueError, "'a/../b'"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        plan_of(**kwargs)


@pytest.mark.parametrize(
    ("shape", "dtype", "match"),
    [
        ((0, 5), "uint8", "empty array"),
        ((), "uint8", "empty array"),
        ((4, 4), "complex64", "N5 cannot store complex64"),
    ],
)
def test_bad_data_is_named(shape, dtype, match):
    with pytest.raises((ValueError, TypeError), match=match):
        plan_of(shape=shape, dtype=dtype)


def test_no_data_and_mismatched_levels():
    with pytest.raises(ValueError, match="no data"):
        make_plan([], given_levels=True)
    with pytest.raises(ValueError, match="same number of dimensions"):
        make_plan([ShapeOnly((8, 8)), ShapeOnly((4, 4, 4))], given_levels=True)


def test_regions_hold_whole_blocks_of_every_level_they_compute():
    p = plan_of(shape=(512, 512, 512))
    depth = region_depth(p, threads=2)
    assert depth >= 1
    region = region_shape(p, depth)
    factor = 2**depth
    assert region == (64 * factor,) * 3
    for k in range(depth + 1):  # a region is a whole number of blocks of each level it writes
        f = 2 ** (depth - k)
        assert all(
            (r // 2**k) % b == 0 and r // 2**k == b * f
            for r, b in zip(region, p.levels[k].block, strict=True)
        )
