"""``n5zarr info`` agrees with itself and with ``n5zarr tree`` (issue 18 item 7): one voxel
size, in physical units, for a level opened on its own (local and over HTTP); the field
names and their values are apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from faulty_http import FaultyServer, serve

from napari_n5zarr import export
from napari_n5zarr.cli import main


def n5_viewer_pyramid(root: Path) -> Path:
    """An N5 Viewer pyramid as tensorstore writes it: ``pixelResolution`` on the group only,
    each level ``sN`` with its ``downsamplingFactors`` and nothing else (4 x 1 x 1 um, zyx)."""
    dest = root / "PYR.n5"
    export(
        np.arange(16 * 32 * 32, dtype="uint16").reshape(16, 32, 32),
        dest,
        chunks=8,
        levels=3,
        zarr_json=False,
    )
    (dest / "attributes.json").write_text(
        json.dumps({"n5": "4.0.0", "pixelResolution": {"unit": "um", "dimensions": [1, 1, 4]}})
    )
    for k in range(3):
        path = dest / f"s{k}" / "attributes.json"
        doc = json.loads(path.read_text())
        doc = {key: doc[key] for key in ("dimensions", "blockSize", "dataType", "compression")}
        path.write_text(json.dumps({**doc, "downsamplingFactors": [2**k] * 3}))
    return dest


def voxel_of(text: str, name: str) -> str:
    """The voxel column of ``name``'s row in ``n5zarr tree`` output."""
    [line] = [line for line in text.splitlines() if re.search(rf"(^|── ){name}  ", line)]
    return re.search(r"(\d[\d.]* × [\d.]+ × [\d.]+ \S+)", line).group(1)


@pytest.fixture
def where(request, tmp_path):
    pyr = n5_viewer_pyramid(tmp_path)
    if request.param == "local":
        yield str(pyr)
        return
    for server in serve(FaultyServer(root=tmp_path)):
        yield f"{server.url}/PYR.n5"


@pytest.mark.parametrize("where", ["local", "http"], indirect=True)
def test_info_of_a_level_gives_the_voxel_size_tree_gives(where, capsys):
    assert main(["tree", where]) == 0
    tree_out = capsys.readouterr().out
    assert voxel_of(tree_out, "s1") == "8 × 2 × 2 µm"

    assert main(["info", f"{where}/s1"]) == 0
    out = capsys.readouterr().out
    assert "  voxel       8 × 2 × 2 µm" in out, (
        out
    )  # physical, from the pyramid's metadata; not "2 × 2 × 2 px"
    assert "scale      x=2 y=2 z=8" in out  # the pyramid section agrees
    assert "px" not in out

    assert main(["info", "--json", f"{where}/s1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["scale"] == [8.0, 2.0, 2.0] and doc["units"] == ["micrometer"] * 3) or doc[
        "units"
    ] == ["um"] * 3


def test_info_fields_are_apart_from_their_values(calibrated_pyramid, capsys):
    assert main(["info", str(calibrated_pyramid[0])]) == 0
    out = capsys.readouterr().out
    assert "  compression gzip 6" in out
    assert "compressiongzip" not in out
    for label in ("shape", "dtype", "blocks", "voxel", "size", "on disk"):
        assert re.search(rf"^  {label} +\S", out, re.M), label


def test_info_names_a_pyramid_that_is_the_node_itself(calibrated_pyramid, capsys):
    """``info C.n5`` names the pyramid by the folder (was ``/:``, a name no one typed)."""
    assert main(["info", str(calibrated_pyramid[0])]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^pyr\.n5: image uint8, \d+ level\(s\)", out, re.M), out
    assert not re.search(r"^/: ", out, re.M)
