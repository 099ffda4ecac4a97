"""export(format="ome-zarr") / convert --to ome-zarr: a standard OME-Zarr (Zarr v3, OME-NGFF 0.5).

Exact values through zarr-python; the output read in a subprocess that never imports this
package by zarr-python, tensorstore's zarr3 driver and ome-zarr-py; the reader's scale; the
destination's safety; one-line refusals of bad options."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr

from napari_n5zarr import export
from napari_n5zarr.read.images import open_images
from napari_n5zarr.write.convert.convert import convert

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
JAVA_GZIP = CORPUS / "zarr_implementations/data/zarr.n5/gzip"
EXPECTED_JAVA = CORPUS / "expected_derived/zarr_implementations_reference_image.npy"  # napari order
STANDARD_CODECS = {"bytes", "zstd", "gzip", "blosc", "sharding_indexed", "crc32c"}


def _image_3d() -> np.ndarray:
    rng = np.random.default_rng(1)
    return (
        np.arange(19 * 37 * 45).reshape(19, 37, 45) % 1009 + rng.integers(0, 50, (19, 37, 45))
    ).astype("uint16")


def _labels_2d() -> np.ndarray:
    a = np.zeros((50, 61), "uint64")
    a[5:30, 7:40] = 2**40 + 3
    a[31:, 20:] = 7
    return a


def _codec_names(codecs: list[dict]) -> set[str]:
    names = set()
    for c in codecs:
        names.add(c["name"])
        conf = c.get("configuration") or {}
        names |= _codec_names(list(conf.get("codecs", []))) | _codec_names(
            list(conf.get("index_codecs", []))
        )
    return names


def _ome(dest: Path) -> dict:
    return json.loads((dest / "zarr.json").read_text())["attributes"]["ome"]


@pytest.mark.parametrize("compression", ["default", "zstd:7", "gzip", "gzip:9", "blosc", "raw"])
@pytest.mark.parametrize("shards", [None, 2])
@pytest.mark.parametrize("kind", ["image3d", "labels2d"])
def test_round_trip_exact(tmp_path, compression, shards, kind):
    labels = kind == "labels2d"
    a = _labels_2d() if labels else _image_3d()
    dest = tmp_path / "out.ome.zarr"
    export(a, dest, format="ome-zarr", compression=compression, shards=shards, chunks=16, labels=labels,
           scale=[2.0] * (a.ndim - 1) + [0.5], units="micrometer")  # fmt: skip
    group = zarr.open_group(dest, mode="r")
    ome = _ome(dest)
    assert ome["version"] == "0.5"
    paths = [d["path"] for d in ome["multiscales"][0]["datasets"]]
    assert len(paths) > 1
    np.testing.assert_array_equal(group[paths[0]][...], a)
    for path in paths:
        doc = json.loads((dest / path / "zarr.json").read_text())
        assert _codec_names(doc["codecs"]) <= STANDARD_CODECS
        assert doc["dimension_names"] == (["y", "x"] if labels else ["z", "y", "x"])
        assert ("sharding_indexed" in _codec_names(doc["codecs"])) == (shards is not None)
    codecs = _codec_names(json.loads((dest / "s0/zarr.json").read_text())["codecs"])
    want = {
        "default": "zstd",
        "zstd:7": "zstd",
        "gzip": "gzip",
        "gzip:9": "gzip",
        "blosc": "blosc",
        "raw": None,
    }[compression]
    assert codecs - {"bytes", "sharding_indexed", "crc32c"} == ({want} if want else set())
    assert ("image-label" in ome) == labels
    if labels:  # a coarse level holds only labels of the finest (mode downsampling)
        assert set(np.unique(group[paths[1]][...])) <= set(np.unique(a))
    assert [ax["type"] for ax in ome["multiscales"][0]["axes"]] == ["space"] * a.ndim


def test_scale_matches_the_reader_of_the_dual_export(calibrated_pyramid, tmp_path):
    src, _ = calibrated_pyramid
    dest = tmp_path / "out.ome.zarr"
    report = convert(src, dest, to="ome-zarr", shards="1,2,2")
    assert [i.target for i in report.images] == [str(dest)]
    (dual,) = open_images(src).images
    ms = dual.multiscale
    datasets = _ome(dest)["multiscales"][0]["datasets"]
    assert len(datasets) == len(dual.levels)
    for k, d in enumerate(datasets):
        transforms = {t["type"]: t for t in d["coordinateTransformations"]}
        assert transforms["scale"]["scale"] == pytest.approx(list(ms.level_scale(k))[::-1])
        assert transforms["translation"]["translation"] == pytest.approx(
            list(ms.level_translate(k))[::-1]
        )
        np.testing.assert_array_equal(
            zarr.open_array(dest / d["path"], mode="r")[...], np.asarray(dual.levels[k][...])
        )
    axes = _ome(dest)["multiscales"][0]["axes"]
    assert [(ax["name"], ax.get("unit")) for ax in axes] == [
        (n, "micrometer") for n in ("z", "y", "x")
    ]
    # this package's own reader shows the same
    (back,) = open_images(dest).images
    for k in range(len(datasets)):
        assert back.multiscale.level_scale(k) == pytest.approx(ms.level_scale(k))
        assert back.multiscale.level_translate(k) == pytest.approx(ms.level_translate(k))


def test_convert_a_corpus_n5_moves_the_colour_axis_first(tmp_path):
    dest = tmp_path / "java.ome.zarr"
    convert(JAVA_GZIP, dest, to="ome-zarr", compression="gzip:1", shards=2)
    expected = np.load(EXPECTED_JAVA)  # (y, x, rgb) as napari shows it
    axes = _ome(dest)["multiscales"][0]["axes"]
    assert [ax["type"] for ax in axes] == ["channel", "space", "space"]
    np.testing.assert_array_equal(
        zarr.open_array(dest / "s0", mode="r")[...], np.moveaxis(expected, -1, 0)
    )


def test_convert_region_and_level_as_the_dual_checkout(calibrated_pyramid, tmp_path):
    src, _ = calibrated_pyramid
    dest, dual = tmp_path / "crop.ome.zarr", tmp_path / "crop.n5"
    convert(src, dest, to="ome-zarr", region="1:8,2:19,3:30", level=1)
    convert(src, dual, region="1:8,2:19,3:30", level=1)
    (want,) = open_images(dual).images
    (got,) = open_images(dest).images
    assert len(got.levels) == len(want.levels)
    for k in range(len(want.levels)):
        np.testing.assert_array_equal(
            zarr.open_array(dest / f"s{k}", mode="r")[...], np.asarray(want.levels[k][...])
        )
        assert got.multiscale.level_scale(k) == pytest.approx(want.multiscale.level_scale(k))
        assert got.multiscale.level_translate(k) == pytest.approx(
            want.multiscale.level_translate(k)
        )
    assert "n5zarr:checked-out" in json.loads((dest / "zarr.json").read_text())["attributes"]


READ_ELSEWHERE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    dest, expected_file = sys.argv[1], sys.argv[2]
    expected = np.load(expected_file)
    import zarr
    np.testing.assert_array_equal(zarr.open_array(dest + "/s0", mode="r")[...], expected)
    import tensorstore as ts
    t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": dest + "/s0"}}).result()
    np.testing.assert_array_equal(t.read().result(), expected)
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader
    (node,) = list(Reader(parse_url(dest))())[:1]
    np.testing.assert_array_equal(np.asarray(node.data[0]), expected)
    scales = [ct[0]["scale"] for ct in node.metadata["coordinateTransformations"]]
    assert not any(m.startswith("napari_n5zarr") for m in sys.modules), "napari_n5zarr was imported"
    print(json.dumps({"levels": len(node.data), "scales": scales}))
    """
)


@pytest.mark.parametrize("shards", [None, "1,2,2"])
def test_read_without_this_package(tmp_path, shards):
    a = _image_3d()
    dest = tmp_path / "out.ome.zarr"
    export(
        a,
        dest,
        format="ome-zarr",
        chunks=16,
        shards=shards,
        scale=[3.0, 1.0, 1.0],
        units="nanometer",
    )
    np.save(tmp_path / "expected.npy", a)
    script = tmp_path / "read.py"
    script.write_text(READ_ELSEWHERE)
    done = subprocess.run([sys.executable, str(script), str(dest), str(tmp_path / "expected.npy")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    (ours,) = open_images(dest).images
    assert seen["levels"] == len(ours.levels)
    for k, scale in enumerate(seen["scales"]):
        assert scale == pytest.approx(list(ours.multiscale.level_scale(k))[::-1])


def test_existing_dest_refused_and_overwrite_replaces(tmp_path):
    a = _image_3d()
    dest = tmp_path / "out.ome.zarr"
    export(a, dest, format="ome-zarr", chunks=16)
    before = sorted(p.relative_to(dest) for p in dest.rglob("*"))
    with pytest.raises(FileExistsError, match="already exists"):
        export(a[:5], dest, format="ome-zarr", chunks=16)
    assert sorted(p.relative_to(dest) for p in dest.rglob("*")) == before
    export(a[:5], dest, format="ome-zarr", chunks=16, overwrite=True, shards=2)  # ours: replaced
    assert zarr.open_array(dest / "s0", mode="r").shape == (5, 37, 45)
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"notes\.txt"):
        export(a, dest, format="ome-zarr", chunks=16, overwrite=True)
    assert (dest / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"compression": "lz4"}, "compression 'lz4'"),
        ({"compression": "zstd:99"}, "zstd level"),
        ({"shards": 0}, "at least 1"),
        ({"shards": "2,2"}, "2 values for 3 axes"),
        ({"format": "zarr2"}, "format 'zarr2'"),
    ],
)
def test_bad_options_leave_nothing(tmp_path, options, message):
    dest = tmp_path / "out.ome.zarr"
    with pytest.raises(ValueError, match=message):
        export(_image_3d(), dest, **{"format": "ome-zarr", **options})
    assert not dest.exists()
    assert list(tmp_path.iterdir()) == []


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "napari_n5zarr.cli", *args], capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["--to", "zarr2"], "argument --to: invalid choice"),
        (["--to", "ome-zarr", "--shards", "0"], "argument --shards"),
        (["--to", "ome-zarr", "--shards", "a,b"], "argument --shards"),
        (["--to", "ome-zarr", "--compression", "lz4"], "--compression: with --to ome-zarr"),
        (["--to", "ome-zarr", "--compression", "zstd:99"], "compression 'zstd:99'"),
        (["--shards", "2"], "--shards goes with --to ome-zarr"),
    ],
)
def test_cli_refuses_in_one_line(calibrated_pyramid, tmp_path, args, culprit):
    src, _ = calibrated_pyramid
    done = _cli("convert", str(src), str(tmp_path / "out.ome.zarr"), *args)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert culprit in line, line
    assert not (tmp_path / "out.ome.zarr").exists()


def test_cli_converts_to_ome_zarr(calibrated_pyramid, tmp_path):
    src, a = calibrated_pyramid
    dest = tmp_path / "out.ome.zarr"
    done = _cli(
        "convert",
        str(src),
        str(dest),
        "--to",
        "ome-zarr",
        "--shards",
        "2",
        "--compression",
        "blosc",
    )
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], a)
    assert not (dest / "attributes.json").exists()
    again = _cli("convert", str(src), str(dest), "--to", "ome-zarr")
    assert again.returncode == 2
    assert "already exists" in again.stderr


def test_convert_time_stacked_bigdataviewer(tmp_path):
    import napari_n5zarr

    root = napari_n5zarr.open(tmp_path / "b.n5", mode="w")
    setup = root.create_group(
        "setup0", attributes={"downsamplingFactors": [[1, 1, 1], [2, 2, 2]], "dataType": "uint16"}
    )
    stack = []
    for t in range(3):
        tp = setup.create_group(
            f"timepoint{t}", attributes={"multiScale": True, "resolution": [1.0, 1.0, 2.0]}
        )
        for k in range(2):
            shape = (21 >> k, 17 >> k, 9 >> k)
            a = napari_n5zarr.create_dataset(tp, f"s{k}", shape=shape, dtype="uint16", chunks=(8, 8, 4),
                                             compression={"type": "gzip"}, attributes={"downsamplingFactors": [2**k] * 3})  # fmt: skip
            a[...] = (np.arange(np.prod(shape)).reshape(shape) * (t + 1) % 60000).astype("uint16")
            if k == 0:
                stack.append(np.asarray(a[...]).T)
    dest = tmp_path / "b.ome.zarr"
    convert(tmp_path / "b.n5", dest, to="ome-zarr", shards=2)
    axes = _ome(dest)["multiscales"][0]["axes"]
    assert [ax["type"] for ax in axes] == ["time", "space", "space", "space"]
    np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], np.stack(stack))
    (back,) = open_images(tmp_path / "b.n5").images
    scale = _ome(dest)["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"]
    assert scale == pytest.approx(list(back.multiscale.level_scale(0))[::-1])


def test_cancel_between_levels_removes_the_partial_output(tmp_path):
    from napari_n5zarr.errors import ExportCancelled

    calls = []

    def cancel() -> bool:
        calls.append(1)
        return len(calls) > 1  # after level 0 was written

    dest = tmp_path / "out.ome.zarr"
    with pytest.raises(ExportCancelled):
        export(_image_3d(), dest, format="ome-zarr", chunks=16, cancel=cancel)
    assert not dest.exists()
    with pytest.raises(ValueError, match="zarr_json=False"):
        export(_image_3d(), dest, format="ome-zarr", zarr_json=False)
