"""pint's application registry (napari's units) from the disk cache: what the second
session builds, that it answers as pint's own registry does, and every way it stays out of
the way (registry already in use, a broken cache, turned off). Each case runs the reader in
a fresh interpreter, as napari does, with the cache folder under ``tmp_path``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr._napari.unit_registry import CACHE_ENV

pytest.importorskip("pint")
SRC = Path(napari_n5zarr.__file__).resolve().parents[1]

CHILD = r"""
import json, sys
import flexparser.flexparser as ffp
import pint

parsed = []  # pint's definition files parsed (not loaded from the cache)
_parse = ffp.Parser.parse_file
def counting(self, *args, **kwargs):
    parsed.append(1)
    return _parse(self, *args, **kwargs)
ffp.Parser.parse_file = counting

path, in_use = sys.argv[1], sys.argv[2] == "in-use"
before = None
if in_use:  # someone already made units of the application registry
    held = pint.get_application_registry().Unit("meter")
    before = pint.get_application_registry().get()
from napari_n5zarr._napari.reader import get_reader
layers = get_reader(path)(path)
app = pint.get_application_registry()
registry = app.get()
ffp.Parser.parse_file = _parse
plain = pint.UnitRegistry()
answers = lambda r: [sorted(map(str, r.get_compatible_units("micrometer"))), str(r.Quantity(1500, "micrometer").to_compact()),
                     str(r.Quantity(2, "minute").to("second")), str(r.Unit("um").dimensionality), str(r.Quantity(1, "degC").to("kelvin"))]
print(json.dumps({
    "units": list(layers[0][1]["units"]),
    "registry": type(registry).__name__,
    "parsed": len(parsed),
    "same_registry": registry is before if in_use else None,
    "answers": answers(app),
    "plain_answers": answers(plain),
}))
"""


@pytest.fixture(scope="module")
def pyramid(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("units") / "p.n5"
    root = napari_n5zarr.open(path, mode="w")
    root.attrs.update({"pixelResolution": {"unit": "um", "dimensions": [1.0, 1.0, 4.0]}})
    data = (np.arange(16 * 16 * 16) % 251).astype("uint16").reshape(16, 16, 16)
    for k in range(2):
        level = data[:: 2**k, :: 2**k, :: 2**k]
        napari_n5zarr.create_dataset(root, f"s{k}", shape=level.T.shape, dtype="uint16", chunks=(8, 8, 8), compression={"type": "gzip"})
        arr = napari_n5zarr.open(path / f"s{k}", mode="r+")
        arr[...] = level.T
        arr.attrs["downsamplingFactors"] = [2**k] * 3
    return path


def run(pyramid: Path, cache: str, tmp_path: Path, mode: str = "fresh") -> dict:
    env = {**os.environ, CACHE_ENV: cache, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "NAPARI_CONFIG": str(tmp_path / "napari.yaml")}
    out = subprocess.run([sys.executable, "-c", CHILD, str(pyramid), mode], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["units"] == ["micrometer"] * 3  # whatever happened to pint
    assert result["answers"] == result["plain_answers"]  # the application registry answers as pint's own
    return result


def test_second_session_loads_the_registry_from_the_cache(pyramid, tmp_path):
    cache = tmp_path / "cache"
    first = run(pyramid, str(cache), tmp_path)
    assert first["registry"] == "CachedUnitRegistry" and first["parsed"] > 0  # parsed once, then kept
    assert any(cache.glob("*.pickle"))
    second = run(pyramid, str(cache), tmp_path)
    assert second["registry"] == "CachedUnitRegistry"
    assert second["parsed"] == 0  # nothing parsed: the whole registry came from the cache
    assert second["answers"][0]  # the unit cache was used, not left empty (pint 0.26 drops it)


def test_a_broken_cache_leaves_pint_as_usual_and_is_cleared(pyramid, tmp_path):
    cache = tmp_path / "cache"
    run(pyramid, str(cache), tmp_path)
    for file in cache.glob("*.pickle"):
        file.write_bytes(file.read_bytes()[:100])  # cut short, as by a concurrent writer
    result = run(pyramid, str(cache), tmp_path)
    assert result["registry"] == "UnitRegistry" and result["parsed"] > 0  # pint's own lazy registry, built as usual
    assert not cache.exists()  # the next session starts the cache again
    assert run(pyramid, str(cache), tmp_path)["registry"] == "CachedUnitRegistry"


def test_a_registry_in_use_is_never_replaced(pyramid, tmp_path):
    result = run(pyramid, str(tmp_path / "cache"), tmp_path, mode="in-use")
    assert result["same_registry"] is True and result["registry"] == "UnitRegistry"
    assert not (tmp_path / "cache").exists()


def test_turned_off(pyramid, tmp_path):
    result = run(pyramid, "0", tmp_path)
    assert result["registry"] == "UnitRegistry" and result["parsed"] > 0
