"""The one location parser (storage/location.py) and what a location holds (read/locate.py),
without napari."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr.read.locate import Source, bdv_xml_target, is_n5, resolve, sibling_bdv_xml
from napari_n5zarr.storage import location

BDV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<SpimData version="0.2"><BasePath type="relative">.</BasePath><SequenceDescription>
<ImageLoader format="bdv.n5" version="1.0"><n5 type="relative">{n5}</n5></ImageLoader>
<ViewSetups><ViewSetup><id>0</id><name>0</name><size>8 8 8</size>
<voxelSize><unit>nm</unit><size>4 4 40</size></voxelSize></ViewSetup></ViewSetups>
</SequenceDescription></SpimData>
"""


@pytest.mark.parametrize(
    ("text", "url"),
    [("s3://bucket/a.n5", True), ("http://h/x", True), ("memory://x", True), ("gs://b", True),
     ("file:///tmp/a.n5", False), ("/tmp/a.n5", False), ("a.n5", False), ("~/a.n5", False), ("C:/x", False)],
)  # fmt: skip
def test_is_url(text, url):
    assert location.is_url(text) is url
    assert (location.local_path(text) is None) is url


def test_local_paths_lose_file_scheme_and_tilde(tmp_path):
    home = os.path.expanduser("~")
    assert location.local_path("file:///tmp/a.n5") == Path("/tmp/a.n5")
    assert location.local_path("~/a.n5") == Path(home) / "a.n5"
    assert location.local_path(Path("/x/y")) == Path("/x/y")


def test_node_location_metadata_files_mean_their_folder():
    assert location.node_location("/d/c.n5/attributes.json") == "/d/c.n5"
    assert location.node_location("file:///d/c.n5/zarr.json") == "/d/c.n5"
    assert location.node_location("s3://b/c.n5/") == "s3://b/c.n5"
    assert (
        location.node_location("s3://b/c.n5/zarr.json") == "s3://b/c.n5/zarr.json"
    )  # URLs: as given


def test_real_path_resolves_symlinks(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert location.real_path(tmp_path / "link") == location.real_path(f"file://{tmp_path}/real")
    assert location.real_path("https://h/x") is None


def test_suffix_join_display_name():
    assert location.suffix("/a/b.ZIP") == ".zip"
    assert location.suffix("s3://b/c.n5/") == ".n5"
    assert location.suffix("/a/b") == ""
    assert location.join("s3://b/c.n5/", "g/d") == "s3://b/c.n5/g/d"
    assert location.join("/a/c.n5", "") == "/a/c.n5"
    assert location.display_name("s3://b/c.n5/") == "c.n5"
    assert location.display_name("/") == "/"


def test_base_store_uses_the_parser(tmp_path):
    from zarr.storage import ZipStore

    from napari_n5zarr.access import base_store

    napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    assert base_store(f"file://{tmp_path}/c.n5").root == tmp_path / "c.n5"
    with zipfile.ZipFile(tmp_path / "c.zip", "w") as z:
        z.writestr("attributes.json", '{"n5": "4.0.0"}')
    assert isinstance(base_store(f"file://{tmp_path}/c.zip"), ZipStore)
    with pytest.raises(FileNotFoundError, match="no such"):
        base_store(tmp_path / "missing.n5")


def _bdv(tmp_path: Path) -> Path:
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    root.create_group("setup0")
    xml = tmp_path / "dataset.xml"
    xml.write_text(BDV_XML.format(n5="c.n5"))
    return xml


def test_resolve_bdv_xml_and_its_sibling(tmp_path):
    xml = _bdv(tmp_path)
    target, setups = bdv_xml_target(xml)
    assert target == str(tmp_path / "c.n5")
    assert list(setups) == [0]
    assert setups[0].voxel_size == (4.0, 4.0, 40.0)
    assert setups[0].unit == "nm"
    assert sibling_bdv_xml(tmp_path / "c.n5") == setups
    from_xml, from_folder = resolve(xml), resolve(tmp_path / "c.n5" / "attributes.json")
    assert from_xml.target == from_folder.target == str(tmp_path / "c.n5")
    assert from_xml.bdv_setups == from_folder.bdv_setups == setups
    assert from_xml.name == "c.n5"
    assert from_xml.location == str(xml)


def test_resolve_plain_locations(tmp_path):
    napari_n5zarr.open(tmp_path / "p.n5", mode="w")
    assert resolve(f"file://{tmp_path}/p.n5") == Source(
        f"file://{tmp_path}/p.n5", str(tmp_path / "p.n5")
    )
    assert resolve("s3://b/c.n5/") == Source("s3://b/c.n5/", "s3://b/c.n5")
    (tmp_path / "other.xml").write_text("<not-spimdata/>")
    assert bdv_xml_target(tmp_path / "other.xml") is None
    assert resolve(tmp_path / "other.xml").target == str(tmp_path / "other.xml")


def test_is_n5(tmp_path, write_n5):
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    write_n5(root, "d", np.zeros((4, 4), "uint8"), chunks=(2, 2))
    assert is_n5(tmp_path / "c.n5")
    assert is_n5(tmp_path / "c.n5" / "d")
    assert is_n5(f"file://{tmp_path}/c.n5")
    assert is_n5(tmp_path / "c.n5" / "d" / "attributes.json")
    (tmp_path / "c.n5" / "d" / "0").mkdir(exist_ok=True)
    assert is_n5(
        tmp_path / "c.n5" / "d" / "0"
    )  # inside a container: an ancestor has attributes.json
    (tmp_path / "plain").mkdir()
    assert not is_n5(tmp_path / "plain")
    assert not is_n5(tmp_path / "missing")
    assert is_n5(_bdv(tmp_path))
    with zipfile.ZipFile(tmp_path / "n5.zip", "w") as z:
        z.writestr("c.n5/attributes.json", '{"n5": "4.0.0"}')
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "hi")
    assert is_n5(tmp_path / "n5.zip")
    assert not is_n5(tmp_path / "other.zip")
    (tmp_path / "v3").mkdir()
    (tmp_path / "v3" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    assert is_n5(tmp_path / "v3")
    assert is_n5("s3://bucket/data.n5/raw")  # by name, no request
