"""``convert --to ome-zarr`` from every kind of source the reader opens (issue 30, item 2):
Paintera groups (as uint64 segments), BigDataViewer setups (channels as an axis), the
metadata conventions of other tools, a zip and an HTTP URL. Values equal what this
package's reader shows for the source; zarr-python alone reads the result."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr
from paintera_multiset import ASSIGNMENT, write_paintera_container

import napari_n5zarr
from napari_n5zarr.read.images import open_images
from napari_n5zarr.write.convert.convert import convert

CONVENTIONS = Path(__file__).parents[1] / "data" / "conventions"

READ_ALONE = """
import json, sys
import numpy as np, zarr
root = zarr.open_group(sys.argv[1], mode="r")
out = {}
def walk(group, prefix=""):
    for name, node in group.members():
        if isinstance(node, zarr.Array):
            out[prefix + name] = [str(node.dtype), int(np.asarray(node[...]).astype("float64").sum())]
        else:
            walk(node, prefix + name + "/")
walk(root)
assert "napari_n5zarr" not in sys.modules
print(json.dumps(out))
"""


def _alone(dest: Path) -> dict[str, list]:
    out = subprocess.run([sys.executable, "-c", READ_ALONE, str(dest)], capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _same_as_the_reader(src: str | Path, dest: Path) -> list[str]:
    """Every image of ``src`` (as this reader shows it) equals its OME-Zarr copy, level by level."""
    seen = []
    for image in open_images(src).images:
        name = image.multiscale.name or ""
        group = (
            dest / name.replace("/", "_")
            if name and (dest / name.replace("/", "_")).exists()
            else dest / name
        )
        for k, level in enumerate(image.levels):
            got = zarr.open_array(group / f"s{k}", mode="r")[...]
            np.testing.assert_array_equal(got, np.asarray(level[...]))
        seen.append(name)
    return seen


def test_paintera_fragments_become_uint64_segment_labels(tmp_path):
    src = write_paintera_container(tmp_path / "p.n5", assignment=True)
    dest = tmp_path / "p.ome.zarr"
    convert(src, dest, to="ome-zarr", shards=2)
    names = _same_as_the_reader(src, dest)
    assert len(names) == 2
    labels = [
        p for p in dest.rglob("zarr.json") if "image-label" in json.dumps(json.loads(p.read_text()))
    ]
    assert len(labels) == 1
    s0 = zarr.open_array(labels[0].parent / "s0", mode="r")
    assert s0.dtype == np.uint64
    assert any(v in ASSIGNMENT.values() for v in np.unique(s0[...]))  # segments, not fragments
    assert all(dtype in ("uint8", "uint64") for dtype, _ in _alone(dest).values())


def test_bigdataviewer_setups_become_one_ome_image_each(tmp_path):
    """Setups are separate sources in BigDataViewer (and layers here): one OME image each,
    their time points as a time axis."""
    root = napari_n5zarr.open(tmp_path / "bdv.n5", mode="w")
    for c in range(2):
        setup = root.create_group(f"setup{c}", attributes={"downsamplingFactors": [[1, 1, 1], [2, 2, 2]],
                                                              "dataType": "uint16"})  # fmt: skip
        for t in range(2):
            tp = setup.create_group(
                f"timepoint{t}", attributes={"multiScale": True, "resolution": [1.0, 1.0, 2.0]}
            )
            for k in range(2):
                shape = (24 >> k, 16 >> k, 8 >> k)
                a = napari_n5zarr.create_dataset(tp, f"s{k}", shape=shape, dtype="uint16", chunks=(8, 8, 4),
                                                 attributes={"downsamplingFactors": [2**k] * 3})  # fmt: skip
                a[...] = (
                    np.arange(np.prod(shape)).reshape(shape) * (c + 3) * (t + 1) % 5000
                ).astype("uint16")
    dest = tmp_path / "bdv.ome.zarr"
    convert(tmp_path / "bdv.n5", dest, to="ome-zarr")
    assert len(_same_as_the_reader(tmp_path / "bdv.n5", dest)) == 2
    for group in {p.parent for p in dest.glob("*/zarr.json")}:
        ms = json.loads((group / "zarr.json").read_text())["attributes"]["ome"]["multiscales"][0]
        assert [ax["type"] for ax in ms["axes"]] == ["time", "space", "space", "space"]


@pytest.mark.parametrize(
    "source",
    ["neuroglancer/n5_viewer_multiscale_modern", "neuroglancer/n5_viewer_multiscale_deprecated",
     "n5-ij/test.n5/cosem_ms", "n5-ij/test.n5/cosem_F", "n5-ij/test.n5/n5v_pra-ds"],
)  # fmt: skip
def test_other_tools_conventions_keep_their_scale(tmp_path, source):
    src = tmp_path / "src"
    shutil.copytree(CONVENTIONS / source, src)
    (image,) = open_images(src).images
    dest = tmp_path / "out.ome.zarr"
    convert(src, dest, to="ome-zarr")
    ms = json.loads((dest / "zarr.json").read_text())["attributes"]["ome"]["multiscales"][0]
    datasets = ms["datasets"]  # napari order; the reader's Multiscale is in N5 order
    given = len(image.levels)  # a single dataset gets a pyramid made for it
    for k, dataset in enumerate(datasets[:given]):
        scale = dataset["coordinateTransformations"][0]["scale"]
        assert scale == pytest.approx(list(image.multiscale.level_scale(k))[::-1])
    assert len(datasets) == given or given == 1
    np.testing.assert_array_equal(
        zarr.open_array(dest / "s0", mode="r")[...], np.asarray(image.levels[0][...])
    )


def test_a_zip_and_a_url_convert_exactly(tmp_path, counting_http):
    a = (np.arange(20 * 30 * 40) % 1000).reshape(20, 30, 40).astype("uint16")
    napari_n5zarr.export(a, tmp_path / "z.n5", chunks=16, compression="zstd")
    shutil.make_archive(str(tmp_path / "z"), "zip", tmp_path / "z.n5")
    base, state = counting_http(tmp_path, latency=0.0)
    for src, dest in ((tmp_path / "z.zip", tmp_path / "from-zip.ome.zarr"),
                      (f"{base}/z.n5", tmp_path / "from-url.ome.zarr")):  # fmt: skip
        convert(src, dest, to="ome-zarr", shards=2)
        np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], a)
        assert _alone(dest)["s0"] == ["uint16", int(a.astype("float64").sum())]
    assert state["gets"], "the URL was read over HTTP"
