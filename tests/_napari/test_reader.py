"""The napari reader: every metadata convention, the corpus, laziness, errors, the viewer."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr

import napari_n5zarr
from napari_n5zarr._napari import reader, sample
from napari_n5zarr._napari.reader import get_reader, read_path
from napari_n5zarr.read.levels import LevelReader, dask_chunks

SHAPE = (6, 12, 20)  # napari order z, y, x -> N5 dimensions [20, 12, 6]
BLOCK = (8, 8, 4)  # N5 order


class Notes(list):
    """Collects reader notifications."""

    def __call__(self, level: str, message: str) -> None:
        self.append((level, message))


def levels_for(shape=SHAPE, n=3, dtype="uint16", offset=0) -> list[np.ndarray]:
    """Distinct values per level, napari order; level k holds values >= 1000 * k."""
    out = []
    for k in range(n):
        s = tuple(max(1, math.ceil(d / 2**k)) for d in shape)
        out.append(((np.arange(math.prod(s)).reshape(s) % 997) + 1000 * k + offset).astype(dtype))
    return out


def write_levels(write_n5, group, levels, attrs=lambda k: {}, names=lambda k: f"s{k}"):
    for k, a in enumerate(levels):
        n5 = a.T
        write_n5(
            group,
            names(k),
            n5,
            chunks=tuple(min(b, s) for b, s in zip(BLOCK, n5.shape, strict=True)),
            attributes=attrs(k),
        )


def read(path, notes=None) -> list[tuple]:
    notes = Notes() if notes is None else notes
    layers = read_path(path, notify=notes)
    assert notes == [], notes
    return layers


def levels_of(layer) -> list[LevelReader | da.Array]:
    data, kwargs, _ = layer
    return list(data) if kwargs["multiscale"] else [data]


def assert_levels(layer, expected: list[np.ndarray]) -> None:
    got = levels_of(layer)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert isinstance(g, LevelReader | da.Array)  # lazy: readers (channels: dask arrays)
        assert g.shape == e.shape
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(np.asarray(g[-1]), e[-1])  # a slice at the last z
        np.testing.assert_array_equal(np.asarray(g), e)


def spatial(layer) -> tuple:
    kw = layer[1]
    return kw["scale"], kw["translate"], kw["units"], kw["axis_labels"]


@pytest.fixture
def container(tmp_path):
    def make(name="c.n5"):
        return napari_n5zarr.open(tmp_path / name, mode="w"), tmp_path / name

    return make


# --- one test per convention -------------------------------------------------------------------


def test_n5viewer_modern(container, write_n5):
    root, path = container()
    group = root.create_group(
        "raw", attributes={"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}
    )
    levels = levels_for()
    write_levels(write_n5, group, levels, attrs=lambda k: {"downsamplingFactors": [2**k] * 3})
    (layer,) = read(path)
    assert layer[2] == "image"
    assert layer[1]["name"] == "raw"
    assert_levels(layer, levels)
    assert spatial(layer) == (
        (40.0, 4.0, 4.0),
        (0.0, 0.0, 0.0),
        ("nanometer",) * 3,
        ("z", "y", "x"),
    )
    assert layer[1]["contrast_limits"] == (float(levels[-1].min()), float(levels[-1].max()))
    assert layer[1]["metadata"]["napari_n5zarr"]["convention"] == "n5viewer"


def test_n5viewer_old_scales_and_bare_resolution(container, write_n5):
    root, path = container()
    root.attrs.update(
        {"scales": [[1, 1, 1], [2, 2, 2], [4, 4, 4]], "pixelResolution": [0.5, 0.5, 2.0]}
    )
    levels = levels_for()
    write_levels(write_n5, root, levels)
    (layer,) = read(path)
    assert layer[1]["name"] == "c.n5"
    assert_levels(layer, levels)
    assert spatial(layer) == (
        (2.0, 0.5, 0.5),
        (0.0, 0.0, 0.0),
        ("micrometer",) * 3,
        ("z", "y", "x"),
    )


def test_neuroglancer(container, write_n5):
    root, path = container()
    root.attrs.update(
        {
            "axes": ["x", "y", "z"],
            "units": ["nm", "nm", "um"],
            "resolution": [8, 8, 1],
            "scales": [[1, 1, 1], [2, 2, 2]],
        }
    )
    levels = levels_for(n=2)
    write_levels(write_n5, root, levels)
    (layer,) = read(path)
    assert_levels(layer, levels)
    assert spatial(layer) == (
        (1.0, 8.0, 8.0),
        (0.0, 0.0, 0.0),
        ("micrometer", "nanometer", "nanometer"),
        ("z", "y", "x"),
    )


def test_tensorstore_written_dataset(tmp_path):
    ts = pytest.importorskip("tensorstore")
    data = levels_for(n=1)[0]
    store = ts.open(
        {
            "driver": "n5",
            "kvstore": {"driver": "file", "path": str(tmp_path / "ts.n5" / "vol")},
            "metadata": {
                "compression": {"type": "gzip"},
                "dataType": "uint16",
                "dimensions": list(data.T.shape),
                "blockSize": list(BLOCK),
                "axes": ["x", "y", "z"],
                "units": ["nm", "nm", "nm"],
                "resolution": [4, 4, 40],
            },
        },
        create=True,
    ).result()
    store[...] = data.T
    (layer,) = read(tmp_path / "ts.n5")  # a container without root attributes.json
    assert layer[1]["name"] == "vol"
    assert_levels(layer, [data])
    assert spatial(layer) == (
        (40.0, 4.0, 4.0),
        (0.0, 0.0, 0.0),
        ("nanometer",) * 3,
        ("z", "y", "x"),
    )


def test_cosem_multiscale(container, write_n5):
    root, path = container()
    levels = levels_for()

    def transform(k):
        f = 2**k
        return {
            "axes": ["z", "y", "x"],
            "units": ["nm"] * 3,
            "scale": [40.0 * f, 4.0 * f, 4.0 * f],
            "translate": [100.0 + 20 * (f - 1), 2.0 * (f - 1), 2.0 * (f - 1)],
        }

    group = root.create_group(
        "em",
        attributes={
            "multiscales": [
                {
                    "name": "em",
                    "datasets": [{"path": f"s{k}", "transform": transform(k)} for k in range(3)],
                }
            ]
        },
    )
    write_levels(write_n5, group, levels, attrs=lambda k: {"transform": transform(k)})
    (layer,) = read(path)
    assert_levels(layer, levels)
    assert spatial(layer) == (
        (40.0, 4.0, 4.0),
        (100.0, 0.0, 0.0),
        ("nanometer",) * 3,
        ("z", "y", "x"),
    )
    assert layer[1]["metadata"]["napari_n5zarr"]["convention"] == "cosem"


BDV_SETUP_DATATYPE = pytest.param(True, id="setup-dataType")


@pytest.mark.parametrize("setup_datatype", [False, BDV_SETUP_DATATYPE])
def test_bigdataviewer(container, write_n5, setup_datatype):
    root, path = container()
    expected = {}
    for setup in range(2):
        s = root.create_group(
            f"setup{setup}", attributes={"downsamplingFactors": [[1, 1, 1], [2, 2, 2]]}
        )
        per_t = []
        for t in range(3):
            tp = s.create_group(
                f"timepoint{t}", attributes={"multiScale": True, "resolution": [0.5, 0.5, 2.0]}
            )
            levels = levels_for(n=2, offset=100 * t + 10 * setup)
            write_levels(write_n5, tp, levels, attrs=lambda k: {"downsamplingFactors": [2**k] * 3})
            per_t.append(levels)
        expected[f"setup{setup}"] = [np.stack([lv[k] for lv in per_t]) for k in range(2)]
        if setup_datatype:  # what BigDataViewer writes: the setup group names the data type
            doc = path / f"setup{setup}" / "attributes.json"
            doc.write_text(json.dumps({**json.loads(doc.read_text()), "dataType": "uint16"}))
    layers = read(path)
    assert [layer[1]["name"] for layer in layers] == ["setup0", "setup1"]
    for layer in layers:
        assert_levels(layer, expected[layer[1]["name"]])
        assert spatial(layer) == (
            (1.0, 2.0, 0.5, 0.5),
            (0.0,) * 4,
            (None,) * 4,
            ("t", "z", "y", "x"),
        )
        assert layer[1]["blending"] == "additive"
    assert [layer[1]["colormap"] for layer in layers] == ["green", "magenta"]


BDV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<SpimData version="0.2">
  <BasePath type="relative">.</BasePath>
  <SequenceDescription>
    <ImageLoader format="bdv.n5" version="1.0">
      <n5 type="relative">c.n5</n5>
    </ImageLoader>
    <ViewSetups>
      <ViewSetup><id>0</id><name>0</name><size>20 12 6</size>
        <voxelSize><unit>µm</unit><size>0.1 0.2 1.5</size></voxelSize></ViewSetup>
      <ViewSetup><id>1</id><name>1</name><size>20 12 6</size>
        <voxelSize><unit>nm</unit><size>100 200 1500</size></voxelSize></ViewSetup>
    </ViewSetups>
    <Timepoints type="range"><first>0</first><last>2</last></Timepoints>
  </SequenceDescription>
</SpimData>
"""


def test_bigdataviewer_xml_calibrates_setups(container, write_n5, tmp_path):
    root, path = container()
    for setup in range(2):
        s = root.create_group(
            f"setup{setup}", attributes={"downsamplingFactors": [[1, 1, 1], [2, 2, 2]]}
        )
        for t in range(3):
            write_levels(write_n5, s.create_group(f"timepoint{t}"), levels_for(n=2))
    (tmp_path / "dataset.xml").write_text(BDV_XML)
    (tmp_path / "other.xml").write_text("<not-spimdata/>")
    for opened in (
        path,
        tmp_path / "dataset.xml",
    ):  # the container (XML found next to it) or the XML
        assert get_reader(str(opened)) is reader.read
        setup0, setup1 = read(opened)
        assert setup0[1]["name"] == "setup0"
        assert spatial(setup0) == (
            (1.0, 1.5, 0.2, 0.1),
            (0.0,) * 4,
            (None, "micrometer", "micrometer", "micrometer"),
            ("t", "z", "y", "x"),
        )
        assert spatial(setup1)[:3] == (
            (1.0, 1500.0, 200.0, 100.0),
            (0.0,) * 4,
            (None, "nanometer", "nanometer", "nanometer"),
        )
        assert setup0[1]["metadata"]["napari_n5zarr"]["convention"] == "bdv-xml"
    assert (
        get_reader(str(tmp_path / "other.xml")) is reader._decline
    )  # claimed by pattern: declined with a notice


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_ngff(container, write_n5, version):
    root, path = container()
    levels = levels_for(n=2)
    ms = {
        "version": version,
        "axes": [{"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"],
        "datasets": [
            {
                "path": str(k),
                "coordinateTransformations": [
                    {"type": "scale", "scale": [2.0 * 2**k, 0.5 * 2**k, 0.5 * 2**k]},
                    {
                        "type": "translation",
                        "translation": [0.5 * (2**k - 1), 0.25 * (2**k - 1), 0.25 * (2**k - 1)],
                    },
                ],
            }
            for k in range(2)
        ],
    }
    attrs = (
        {"multiscales": [ms]}
        if version == "0.4"
        else {"ome": {"version": version, "multiscales": [ms]}}
    )
    group = root.create_group("img", attributes=attrs)
    write_levels(write_n5, group, levels, names=str)
    (layer,) = read(path)
    assert_levels(layer, levels)
    assert spatial(layer) == (
        (2.0, 0.5, 0.5),
        (0.0, 0.0, 0.0),
        ("micrometer",) * 3,
        ("z", "y", "x"),
    )


def test_imagej_channels_become_layers(container, write_n5):
    root, path = container()
    data = levels_for(shape=(5, 2, 12, 20), n=1)[0]  # z, c, y, x (N5: x, y, c, z)
    attrs = {
        "pixelWidth": 0.2,
        "pixelHeight": 0.3,
        "pixelDepth": 1.5,
        "pixelUnit": "micron",
        "xOrigin": 0.0,
        "yOrigin": 0.0,
        "zOrigin": 0.0,
        "numChannels": 2,
        "numSlices": 5,
        "numFrames": 1,
    }
    write_n5(root, "stack", data.T, chunks=(8, 8, 1, 5), attributes=attrs)
    (layer,) = read(path)
    kw = layer[1]
    assert kw["channel_axis"] == 1
    assert kw["name"] == ["stack [0]", "stack [1]"]
    assert spatial(layer) == (
        (1.5, 0.3, 0.2),
        (0.0, 0.0, 0.0),
        ("micrometer",) * 3,
        ("z", "y", "x"),
    )
    assert kw["contrast_limits"] == [
        (float(data[:, c].min()), float(data[:, c].max())) for c in range(2)
    ]
    np.testing.assert_array_equal(np.asarray(layer[0]), data)


def test_labels_layer(container, write_n5):
    root, path = container()
    labels = (levels_for(n=1, dtype="uint32")[0] // 100).astype("uint32")
    write_n5(root, "neuron_labels", labels.T, chunks=BLOCK)
    raw = levels_for(n=1)[0]
    write_n5(root, "raw", raw.T, chunks=BLOCK)
    layers = read(path)
    assert [(layer[1]["name"], layer[2]) for layer in layers] == [
        ("raw", "image"),
        ("neuron_labels", "labels"),
    ]
    assert "contrast_limits" not in layers[1][1]
    np.testing.assert_array_equal(np.asarray(layers[1][0]), labels)


def test_dataset_without_metadata_has_unit_scale(container, write_n5):
    root, path = container()
    data = levels_for(shape=(12, 20), n=1, dtype="float32")[0]
    write_n5(root, "plain", data.T, chunks=(8, 8))
    (layer,) = read(path / "plain")
    assert layer[1]["multiscale"] is False
    assert spatial(layer) == ((1.0, 1.0), (0.0, 0.0), (None, None), ("y", "x"))
    np.testing.assert_array_equal(np.asarray(layer[0]), data)


def test_dataset_inside_a_container_inherits_group_resolution(container, write_n5):
    root, path = container()
    group = root.create_group(
        "c0", attributes={"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}
    )
    write_levels(
        write_n5, group, levels_for(n=2), attrs=lambda k: {"downsamplingFactors": [2**k] * 3}
    )
    (layer,) = read(path / "c0" / "s1")
    assert layer[1]["name"] == "s1"
    assert spatial(layer) == (
        (80.0, 8.0, 8.0),
        (20.0, 2.0, 2.0),
        ("nanometer",) * 3,
        ("z", "y", "x"),
    )


# --- corpus -------------------------------------------------------------------------------------

CORPUS_CONTAINERS = [
    "zarr_implementations/data/n5-java.n5",
    "zarr_implementations/data/pyn5.n5",
    "zarr_implementations/data/z5py.n5",
    "zarr_implementations/data/zarr.n5",
    "tensorstore/tensorstore/driver/n5/testdata",
    "saalfeldlab-n5/src/test/resources/backward/data-1.5.0.n5",
    "saalfeldlab-n5/src/test/resources/backward/data-2.5.1.n5",
    "saalfeldlab-n5/src/test/resources/backward/data-3.1.3.n5",
    *(
        f"zarrs_n5/data/{n}.n5"
        for n in (
            "blosc",
            "bz2",
            "even_chunk",
            "gzip",
            "single_chunk",
            "uneven_chunk_padded",
            "uneven_chunk_truncated",
            "zstd",
        )
    ),
]


def _corpus_expected(corpus_dir: Path) -> dict[str, np.ndarray]:
    """Dataset path -> expected array in napari order."""
    out = {}
    for record in json.loads((corpus_dir / "MANIFEST.json").read_text())["datasets"]:
        expected = np.load(corpus_dir / record["expected"]["file"].split(" ")[0])
        out[record["path"]] = (
            expected if record["expected"]["axis_order"] == "reversed" else expected.T
        )
    return out


@pytest.mark.parametrize("rel", CORPUS_CONTAINERS)
def test_corpus_container(corpus_dir, rel):
    expected = _corpus_expected(corpus_dir)
    layers = read(corpus_dir / rel)
    datasets = {p: e for p, e in expected.items() if p == rel or p.startswith(rel + "/")}
    assert len(layers) == len(datasets)
    for layer in layers:
        data, kw, kind = layer
        path = (
            rel
            if kw["metadata"]["napari_n5zarr"]["paths"] == [""]
            else f"{rel}/{kw['metadata']['napari_n5zarr']['paths'][0]}"
        )
        assert kind == "image"
        np.testing.assert_array_equal(np.asarray(data), datasets[path])
        if "zarr_implementations" in rel:  # C-order RGB written as N5 [3, 512, 512]
            assert kw["rgb"] is True
            assert kw["axis_labels"] == ("y", "x")


def test_corpus_metadata_only_conventions(corpus_dir):
    layers = read(corpus_dir / "n5-ij/src/test/resources/test.n5")
    by_name = {layer[1]["name"]: layer for layer in layers}
    assert sorted(by_name) == [
        "c0",
        "cosem",
        "cosem_F",
        "cosem_ms",
        "n5v_ds",
        "n5v_pr",
        "n5v_pr-ds",
        "n5v_pra",
        "n5v_pra-ds",
        "others/res",
        "others/resOff",
    ]
    assert spatial(by_name["cosem_ms"])[:2] == ((32.0,) * 3, (21.0,) * 3)
    assert len(levels_of(by_name["cosem_ms"])) == 3
    assert spatial(by_name["cosem_F"])[:2] == ((128.0, 64.0, 32.0), (30.0, 29.0, 28.0))
    assert spatial(by_name["n5v_pr-ds"]) == (
        (3.0,) * 3,
        (0.75,) * 3,
        ("millimeter",) * 3,
        ("z", "y", "x"),
    )
    assert by_name["n5v_ds"][1]["contrast_limits"] == (0.0, 1.0)  # no blocks: fill value only
    (ng,) = read(corpus_dir / "neuroglancer/testdata/datasource/n5/n5_viewer_multiscale_deprecated")
    assert [lv.shape for lv in levels_of(ng)] == [(20, 10), (10, 5), (5, 3)]
    assert spatial(ng) == ((20.0, 10.0), (0.0, 0.0), ("second", "nanometer"), ("y", "x"))


def test_corpus_refused_dataset_is_reported(corpus_dir):
    root = (
        corpus_dir
        / "saalfeldlab-n5/experimental_wip_commit_765a7b4/src/test/resources/shardExamples"
    )
    notes = Notes()
    assert read_path(root / "test.n5", notify=notes) == []
    assert len(notes) == 1
    assert notes[0][0] == "warning"
    assert "mid_sharded" in notes[0][1]
    assert "shard" in notes[0][1]
    notes.clear()
    assert read_path(root / "test.n5" / "mid_sharded", notify=notes) == []
    assert notes[0][0] == "error"
    assert "mid_sharded" in notes[0][1]


# --- errors never hide siblings, never raise --------------------------------------------------


def test_broken_child_is_reported_and_siblings_read(container, write_n5):
    root, path = container()
    good = levels_for(n=1)[0]
    write_n5(root, "good", good.T, chunks=BLOCK)
    (path / "bad").mkdir()
    (path / "bad" / "attributes.json").write_text(
        '{"dimensions": [4, 4], "blockSize": [2, 2], "dataType": "uint8", "compression": {"type": "nonsense"}}'
    )
    (path / "worse").mkdir()
    (path / "worse" / "attributes.json").write_text("{ not json")
    notes = Notes()
    layers = read_path(path, notify=notes)
    assert [layer[1]["name"] for layer in layers] == ["good"]
    np.testing.assert_array_equal(np.asarray(layers[0][0]), good)
    assert sorted(m.split(":")[0] for _, m in notes) == ["napari-n5zarr", "napari-n5zarr"]
    assert any("bad" in m for _, m in notes)
    assert any("worse" in m for _, m in notes)


def test_unreadable_path_gives_an_error_notification(tmp_path):
    (tmp_path / "x.n5").mkdir()
    (tmp_path / "x.n5" / "attributes.json").write_text("[1, 2")
    notes = Notes()
    assert reader.read_path(tmp_path / "x.n5", notify=notes) == []
    assert notes[0][0] == "error"
    assert "x.n5" in notes[0][1]


def test_read_returns_a_claim_when_nothing_is_shown(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "_notify", Notes())
    (tmp_path / "empty.n5").mkdir()
    (tmp_path / "empty.n5" / "attributes.json").write_text('{"n5": "4.0.0"}')
    assert reader.read(str(tmp_path / "empty.n5")) == [(None,)]
    assert reader._notify[0][0] == "warning"


# --- get_reader ----------------------------------------------------------------------------------


def test_get_reader_claims_n5(container, write_n5, tmp_path):
    root, path = container()
    group = root.create_group("g")
    write_n5(group, "d", np.zeros((4, 4), "uint8"), chunks=(2, 2))
    (path / "g" / "implicit").mkdir()
    for p in (
        path,
        path / "attributes.json",
        path / "g" / "d",
        path / "g" / "implicit",
        f"file://{path}",
    ):
        assert get_reader(str(p)) is reader.read, p
    bare = tmp_path / "bare.n5"  # .n5 suffix, no metadata yet
    bare.mkdir()
    assert get_reader(str(bare)) is reader.read
    assert get_reader([str(path), str(path / "g" / "d")]) is reader.read


def test_get_reader_declines_foreign_paths(tmp_path):
    (tmp_path / "image.tif").write_bytes(b"II*\x00")
    (tmp_path / "plain").mkdir()
    zarr.create_array(tmp_path / "v3.zarr", shape=(4,), dtype="uint8")  # ordinary Zarr v3
    zarr.create_array(tmp_path / "v2.zarr", shape=(4,), dtype="uint8", zarr_format=2)
    for p in ("image.tif", "plain", "v2.zarr", "missing", "missing.n5/x"):
        assert get_reader(str(tmp_path / p)) is None, p
    assert get_reader([str(tmp_path / "plain"), str(tmp_path / "v3.zarr")]) is None
    # Zarr v3 is read too (plain arrays in their own C order): see test_plain_zarr_v3_in_c_order
    assert get_reader(str(tmp_path / "v3.zarr")) is reader.read
    assert get_reader(str(tmp_path / "v3.zarr/zarr.json")) is reader.read
    for junk in (None, 42, [], [None], b"bytes"):
        assert get_reader(junk) is None


def test_zarr_json_with_n5_default_codec(container, write_n5):
    root, path = container("z")
    data = levels_for(n=1)[0]
    write_n5(root, "arr", data.T, chunks=BLOCK)
    for p in (path / "arr" / "attributes.json", path / "attributes.json"):  # keep only zarr.json
        p.unlink()
    assert get_reader(str(path)) is reader.read
    assert get_reader(str(path / "arr")) is reader.read
    (layer,) = read(path / "arr")
    np.testing.assert_array_equal(np.asarray(layer[0]), data)


def test_zip_container(container, write_n5, tmp_path):
    root, path = container()
    data = levels_for(n=1)[0]
    write_n5(root, "arr", data.T, chunks=BLOCK)
    zipped = tmp_path / "c.n5.zip"
    with zipfile.ZipFile(zipped, "w") as z:
        for f in sorted(path.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(path).as_posix())
    assert get_reader(str(zipped)) is reader.read
    (layer,) = read(zipped)
    np.testing.assert_array_equal(np.asarray(layer[0]), data)


# --- laziness and chunking ------------------------------------------------------------------------


def test_opening_a_huge_pyramid_reads_metadata_and_the_coarsest_level_only(
    container, write_n5, monkeypatch
):
    root, path = container()
    group = root.create_group(
        "huge", attributes={"pixelResolution": {"unit": "nm", "dimensions": [1, 1, 1]}}
    )
    shapes = [
        (2**17 >> k, 2**17 >> k, 2**12 >> k) for k in range(11)
    ]  # s0: 2**46 voxels, 2**28 blocks
    for k, shape in enumerate(shapes[:-1]):
        group.create_array(
            f"s{k}",
            shape=shape,
            dtype="uint8",
            chunks=(64, 64, 64),
            serializer=_n5_codec("uint8", 3),
            compressors=None,
            chunk_key_encoding={"name": "v2", "separator": "/"},
            fill_value=0,
            attributes={"downsamplingFactors": [2**k] * 3},
        )
    coarsest = (np.arange(math.prod(shapes[-1])).reshape(shapes[-1][::-1]) % 200).astype(
        "uint8"
    )  # napari order
    write_n5(
        group, "s10", coarsest.T, chunks=(64, 64, 4), attributes={"downsamplingFactors": [1024] * 3}
    )
    tile = np.full((64, 64), 9, "uint8")
    group["s3"][2048:2112, 1024:1088, 100] = tile.T  # one block of s3 holds data

    import napari_n5zarr.storage.files as local  # every local read goes through read_regular_file

    reads: list[str] = []
    original = local.read_regular_file

    def counting(p, *args, **kwargs):
        reads.append(Path(p).relative_to(path).as_posix())
        return original(p, *args, **kwargs)

    monkeypatch.setattr(local, "read_regular_file", counting)
    (layer,) = read(path)
    data_reads = [r for r in reads if r.rsplit("/", 1)[-1] not in METADATA_FILES]
    levels = levels_of(layer)
    assert len(levels) == 11
    assert levels[0].shape == (4096, 2**17, 2**17)
    assert sorted(data_reads) == [
        "huge/s10/0/0/0",
        "huge/s10/0/1/0",
        "huge/s10/1/0/0",
        "huge/s10/1/1/0",
    ]
    assert layer[1]["contrast_limits"] == (0.0, 199.0)
    # a 2D tile of a big level reads the one block it shows (dask fuses the slice into the read)
    reads.clear()
    np.testing.assert_array_equal(np.asarray(levels[3][100, 1024:1088, 2048:2112]), tile)
    assert reads == ["huge/s3/32/16/1"], reads


METADATA_FILES = {"attributes.json", "zarr.json", ".zgroup", ".zattrs", ".zarray", ".zmetadata"}


def _n5_codec(dtype: str, ndim: int):
    from napari_n5zarr.n5.metadata import N5DatasetMetadata

    return N5DatasetMetadata(
        dimensions=(1,) * ndim, block_size=(1,) * ndim, data_type=dtype
    ).codec()


@pytest.mark.parametrize(
    ("shape", "blocks", "itemsize", "expected"),
    [
        (
            (1000, 1000, 100),
            (64, 64, 64),
            2,
            (128, 64, 64),
        ),  # 1 MiB: 2 blocks, grown in x and y only
        ((1000, 1000, 100), (32, 32, 32), 1, (256, 128, 32)),
        ((100, 50, 10), (64, 64, 64), 1, (100, 50, 10)),  # whole array smaller than a block
        ((3, 512, 512), (1, 100, 100), 1, (3, 512, 100)),  # grows to the full extent
        ((10**4, 10**4), (512, 512), 8, (512, 512)),  # a 2 MiB block is a task
        (
            (10**6, 10**6),
            (128, 128),
            8,
            (4096, 2048),
        ),  # 7.6M blocks: grown towards <= 2**15 tasks, 64 MiB at most
        (
            (2**17, 2**17, 4096),
            (64, 64, 64),
            1,
            (1024, 1024, 64),
        ),  # ... so still too many: a LevelReader
        ((2**32 - 1, 2**32 - 1), (1, 1), 1, (64, 64)),  # at most 4096 blocks per task
        ((100000, 100000, 20000), (64, 64, 64), 1, (1024, 1024, 64)),
    ],
)
def test_dask_chunks(shape, blocks, itemsize, expected):
    chunks = dask_chunks(shape, blocks, itemsize)
    assert chunks == expected
    per_task = math.prod(math.ceil(c / b) for c, b in zip(chunks, blocks, strict=True))
    assert per_task <= 4096
    assert math.prod(chunks) * itemsize <= 64 * 2**20
    for c, b, s in zip(chunks, blocks, shape, strict=True):
        assert c == s or c % b == 0


def test_levels_are_readers_in_napari_order_with_dask_views(container, write_n5):
    root, path = container()
    write_n5(root, "d", levels_for(n=1)[0].T, chunks=BLOCK)
    (layer,) = read(path / "d")
    data = layer[0]
    assert isinstance(data, LevelReader)  # napari slices the reader: no dask on the open path
    assert data.shape == SHAPE
    view = data.to_dask()
    assert isinstance(view, da.Array)
    assert view.chunksize == (4, 12, 20)  # one block along z; x and y grown to the whole extent
    np.testing.assert_array_equal(view.compute(), levels_for(n=1)[0])


# --- sample ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sample_cache(tmp_path_factory) -> Path:
    """One sample build for the whole session."""
    folder = tmp_path_factory.mktemp("sample-cache")
    sample.make_sample(folder)
    return folder


def test_sample_is_built_once_and_read(sample_cache, monkeypatch):
    monkeypatch.setenv("NAPARI_N5ZARR_CACHE", str(sample_cache))
    stamp = (
        (sample_cache / sample.SAMPLE_NAME / "raw" / "s0" / "attributes.json").stat().st_mtime_ns
    )
    layers = sample.sample_blobs()
    assert (
        sample_cache / sample.SAMPLE_NAME / "raw" / "s0" / "attributes.json"
    ).stat().st_mtime_ns == stamp
    assert [p.name for p in sample_cache.iterdir()] == [sample.SAMPLE_NAME]
    assert [(layer[1]["name"], layer[2]) for layer in layers] == [
        ("raw", "image"),
        ("labels", "labels"),
    ]
    image, labels = sample.blobs()
    raw, lab = levels_of(layers[0]), levels_of(layers[1])
    assert [lv.shape for lv in raw] == [
        (32, 192, 256),
        (32, 96, 128),
        (32, 48, 64),
    ]  # z is already coarse
    np.testing.assert_array_equal(np.asarray(raw[0][10]), image[10])
    np.testing.assert_array_equal(np.asarray(lab[0]), labels)
    assert spatial(layers[0]) == (
        (1.0, 0.25, 0.25),
        (0.0, 0.0, 0.0),
        ("micrometer",) * 3,
        ("z", "y", "x"),
    )
    assert layers[0][1]["contrast_limits"][1] > 10000


def test_sample_build_is_atomic(tmp_path):
    path = sample.make_sample(tmp_path)
    assert path == tmp_path / sample.SAMPLE_NAME
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        sample.SAMPLE_NAME
    ]  # no temporary folder left
    assert get_reader(str(path)) is reader.read


# --- in napari ------------------------------------------------------------------------------------


@pytest.mark.napari
def test_viewer_opens_container_and_draws(make_napari_viewer, sample_cache, monkeypatch):
    monkeypatch.setenv("NAPARI_N5ZARR_CACHE", str(sample_cache))
    viewer = make_napari_viewer(show=True)
    path = sample.make_sample()
    layers = viewer.open(str(path), plugin="napari-n5zarr")
    assert [type(layer).__name__ for layer in layers] == ["Image", "Labels"]
    image = viewer.layers["raw"]
    assert image.multiscale
    assert len(image.data) == 3
    assert tuple(image.scale) == (1.0, 0.25, 0.25)
    assert image.axis_labels == ("z", "y", "x")
    assert str(image.units[0]) == "micrometer"
    assert viewer.dims.range[0].stop >= 31.0
    shot = viewer.screenshot(canvas_only=True)
    assert shot[..., :3].max() > 0
    assert (shot[..., :3].sum(axis=-1) > 0).mean() > 0.05


@pytest.mark.napari
def test_viewer_sample_and_bdv_time_axis(
    make_napari_viewer, container, write_n5, sample_cache, monkeypatch
):
    monkeypatch.setenv("NAPARI_N5ZARR_CACHE", str(sample_cache))
    viewer = make_napari_viewer()
    viewer.open_sample("napari-n5zarr", "blobs")
    assert [layer.name for layer in viewer.layers] == ["raw", "labels"]
    viewer.layers.clear()
    root, path = container("bdv.n5")
    s = root.create_group("setup0", attributes={"downsamplingFactors": [[1, 1, 1]]})
    for t in range(4):
        write_levels(write_n5, s.create_group(f"timepoint{t}"), levels_for(n=1, offset=t))
    viewer.open(str(path), plugin="napari-n5zarr")
    (layer,) = viewer.layers
    assert layer.data.shape == (4, *SHAPE)
    assert viewer.dims.axis_labels == ("t", "z", "y", "x")


def test_manifest_is_valid():
    npe2 = pytest.importorskip("npe2")
    manifest = npe2.PluginManifest.from_file(Path(reader.__file__).parents[1] / "napari.yaml")
    assert manifest.name == "napari-n5zarr"
    assert manifest.contributions.readers[0].command == "napari-n5zarr.get_reader"
    assert manifest.contributions.readers[0].accepts_directories
    assert {c.id for c in manifest.contributions.commands} >= {
        "napari-n5zarr.get_reader",
        "napari-n5zarr.sample_blobs",
    }
    for command in manifest.contributions.commands:
        module, _, attr = command.python_name.partition(":")
        assert callable(getattr(__import__(module, fromlist=[attr]), attr))


@pytest.mark.napari
def test_view_hook_adds_layers_without_napari_preferences(
    make_napari_viewer, container, write_n5, sample_cache, monkeypatch
):
    from napari_n5zarr._napari.viewer_launch import add_to_viewer

    monkeypatch.setenv("NAPARI_N5ZARR_CACHE", str(sample_cache))
    viewer = make_napari_viewer()
    assert [layer.name for layer in add_to_viewer(viewer)] == ["raw", "labels"]  # the sample
    root, path = container()
    data = levels_for(shape=(3, 2, 12, 20), n=1)[0]  # z, c, y, x
    attrs = {
        "pixelWidth": 1.0,
        "pixelHeight": 1.0,
        "pixelDepth": 1.0,
        "pixelUnit": "um",
        "numChannels": 2,
        "numSlices": 3,
        "numFrames": 1,
    }
    write_n5(root, "stack", data.T, chunks=(8, 8, 1, 3), attributes=attrs)
    added = add_to_viewer(viewer, str(path))
    assert [layer.name for layer in added] == ["stack [0]", "stack [1]"]
    np.testing.assert_array_equal(np.asarray(added[1].data), data[:, 1])


def test_http_container_without_listings(container, write_n5):
    """Plain HTTP cannot list folders: pyramid levels are found by name."""
    import functools
    import http.server
    import threading

    root, path = container()
    group = root.create_group(
        "raw", attributes={"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}}
    )
    levels = levels_for()
    write_levels(write_n5, group, levels, attrs=lambda k: {"downsamplingFactors": [2**k] * 3})

    class NoListing(http.server.SimpleHTTPRequestHandler):
        def list_directory(self, path):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(NoListing, directory=str(path.parent))
    )
    server.daemon_threads = True  # keep-alive connections must not block server_close()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/c.n5/raw"
        assert get_reader(url) is reader.read
        (layer,) = read(url)
        assert layer[1]["name"] == "raw"
        assert_levels(layer, levels)
        assert spatial(layer)[0] == (40.0, 4.0, 4.0)
    finally:
        server.shutdown()
        server.server_close()


def test_s3_url_opens_in_a_viewer(make_napari_viewer, s3_bucket, monkeypatch, corpus_dir):
    """The reader on a real S3 endpoint; credentials and endpoint come from fsspec's config,
    as users set them (FSSPEC_S3_* environment variables or ~/.config/fsspec)."""
    import fsspec.config

    monkeypatch.setitem(fsspec.config.conf, "s3", dict(s3_bucket))
    url = "s3://n5-data/java.n5/lz4"
    assert get_reader(url) is not None
    viewer = make_napari_viewer()
    layers = viewer.open(url, plugin="napari-n5zarr")
    expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
    assert len(layers) == 1
    np.testing.assert_array_equal(np.asarray(layers[0].data), expected)


def test_public_s3_url_opens_without_credentials(
    make_napari_viewer, public_s3, no_credentials, monkeypatch, corpus_dir
):
    """A public bucket dropped as a URL on a machine without AWS credentials (the endpoint
    from the standard ``AWS_ENDPOINT_URL``): read anonymously, no NoCredentialsError."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", public_s3)
    url = "s3://pub/java.n5/gzip"
    assert get_reader(url) is not None
    viewer = make_napari_viewer()
    layers = viewer.open(url, plugin="napari-n5zarr")
    expected = np.load(corpus_dir / "expected_derived/zarr_implementations_reference_image.npy")
    assert len(layers) == 1
    np.testing.assert_array_equal(np.asarray(layers[0].data), expected)
