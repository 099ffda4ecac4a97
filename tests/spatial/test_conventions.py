"""spatial is pure, and its table of conventions works on plain data: each entry's
``matches`` / ``reads`` / ``build`` on a :class:`Listing` made of dicts, no store."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from napari_n5zarr.spatial import conventions as cv
from napari_n5zarr.spatial.model import ArrayInfo, Listing
from napari_n5zarr.spatial.pyramids import dataset_pyramid

SPATIAL = Path(__file__).resolve().parents[2] / "src" / "napari_n5zarr" / "spatial"
IO_MODULES = {
    "os",
    "io",
    "pathlib",
    "shutil",
    "socket",
    "tempfile",
    "urllib",
    "fsspec",
    "zarr",
    "requests",
    "aiohttp",
}
READ_WING = (
    "napari_n5zarr.read",
    "napari_n5zarr.storage",
    "napari_n5zarr.access",
    "napari_n5zarr.n5",
)


def _imports(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("path", sorted(SPATIAL.glob("*.py")), ids=lambda p: p.name)
def test_no_spatial_module_imports_zarr_io_or_the_read_wing(path: Path) -> None:
    """Every import, also inside functions; ``__init__``'s forwarding ``__getattr__`` (the
    walk's old public names, imported on first use) is the one exception."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if path.name == "__init__.py":
        tree.body = [
            n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
        ]
    bad = [m for m in _imports(tree) if m.split(".")[0] in IO_MODULES or m.startswith(READ_WING)]
    assert bad == []


def test_importing_spatial_imports_no_zarr_no_n5_format_and_nothing_of_the_read_wing() -> None:
    code = (
        "import sys, napari_n5zarr.spatial as sp\n"
        "import napari_n5zarr.spatial.conventions, napari_n5zarr.spatial.calibration, napari_n5zarr.spatial.pyramids\n"
        "sp.calibrate({'pixelResolution': [1, 2, 3]}, 3)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('zarr', 'numcodecs', 'fsspec')"
        " or m.startswith(('napari_n5zarr.read', 'napari_n5zarr.storage', 'napari_n5zarr.access', 'napari_n5zarr.n5'))]\n"
        "print(sorted(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _info(shape: tuple[int, ...], attrs: dict | None = None, dtype: str = "uint16") -> ArrayInfo:
    return ArrayInfo(attrs or {}, shape, dtype)


def _levels(n: int = 3, **attrs: object) -> dict[str, ArrayInfo]:
    return {f"s{k}": _info((64 >> k, 32 >> k, 16 >> k), dict(attrs)) for k in range(n)}


def _take(
    convention: cv.Convention, group: Listing, inherited: dict | None = None
) -> list[cv.Recognised]:
    assert convention.matches(group)
    assert convention.reads(group) == ()  # everything it needs is in the listing
    return convention.build(group, inherited or {})


def test_listing_of_nested_groups_and_sub() -> None:
    data = Listing.of({"k": 1}, _levels(2))
    g = Listing.of({"top": True}, {"a": _info((2,))}, {"data": data, "other": None})
    assert g.attrs == {"top": True}
    assert list(g.arrays_in()) == ["a"]
    assert g.groups_in() == ["data", "other"]
    assert g.listed("data")
    assert not g.listed("other")
    assert g.sub("data").attrs == {"k": 1}
    assert list(g.sub("data").arrays_in()) == ["s0", "s1"]
    assert g.arrays["data/s1"].shape == (32, 16, 8)


def test_ngff_entry() -> None:
    attrs = {
        "multiscales": [
            {
                "version": "0.4",
                "axes": [{"name": "z"}, {"name": "y"}, {"name": "x"}],
                "datasets": [
                    {
                        "path": "0",
                        "coordinateTransformations": [{"type": "scale", "scale": [4, 2, 1]}],
                    },
                    {
                        "path": "1",
                        "coordinateTransformations": [{"type": "scale", "scale": [8, 4, 2]}],
                    },
                ],
            }
        ]
    }
    g = Listing.of(attrs)
    assert cv.NGFF.matches(g)
    assert not cv.N5_VIEWER.matches(g)
    assert cv.NGFF.reads(g) == ("0", "1")  # the referenced datasets, read by the walk
    g.arrays.update({"0": _info((8, 8, 8)), "1": _info((4, 4, 4))})
    assert cv.NGFF.reads(g) == ()
    (r,) = cv.NGFF.build(g, {})
    assert r.at == ""
    assert r.claims == ("0", "1")
    assert r.pyramid.convention == "ngff-0.4"
    assert r.pyramid.scale == (1.0, 2.0, 4.0)
    assert cv.NGFF.build(Listing.of(attrs), {}) == []  # its datasets are not there


def test_cosem_entry() -> None:
    transform = {
        "axes": ["z", "y", "x"],
        "scale": [8, 4, 2],
        "translate": [0, 0, 0],
        "units": ["nm"] * 3,
    }
    attrs = {"multiscales": [{"datasets": [{"path": "s0", "transform": transform}]}]}
    g = Listing.of(attrs, {"s0": _info((10, 10, 10))})
    assert cv.COSEM.matches(g)
    assert not cv.NGFF.matches(g)
    (r,) = _take(cv.COSEM, g)
    assert r.pyramid.convention == "cosem"
    assert r.pyramid.scale == (2.0, 4.0, 8.0)
    assert r.claims == ("s0",)


def test_n5viewer_entry_inherits_the_resolution() -> None:
    g = Listing.of({}, _levels(3))
    (r,) = _take(cv.N5_VIEWER, g, {"pixelResolution": {"unit": "nm", "dimensions": [4, 4, 40]}})
    assert r.pyramid.paths == ("s0", "s1", "s2")
    assert r.pyramid.scale == (4.0, 4.0, 40.0)
    assert r.pyramid.downsampling[2] == (4.0, 4.0, 4.0)
    assert not cv.N5_VIEWER.matches(Listing.of({}, {"raw": _info((4, 4))}))


def test_paintera_entry() -> None:
    attrs = {"painteraData": {"type": "label"}, "maxId": 9}
    g = Listing.of(attrs, {}, {"data": None, "unique-labels": None})
    assert cv.PAINTERA.matches(g)
    assert cv.PAINTERA.reads(g) == ("data",)
    g = Listing.of(
        attrs,
        {},
        {"data": Listing.of({"resolution": [2, 2, 2]}, _levels(2)), "unique-labels": None},
    )
    (r,) = _take(cv.PAINTERA, g)
    assert r.pyramid.paths == ("data/s0", "data/s1")
    assert r.pyramid.scale == (2.0, 2.0, 2.0)
    assert r.pyramid.attrs["painteraData"] == {"type": "label"}
    assert r.claims == ("data", "unique-labels")  # the bookkeeping is no layer of its own
    assert not cv.PAINTERA.matches(Listing.of({}, {}, {"data": None}))


def _setup(timepoints: int = 2) -> Listing:
    tps = {f"timepoint{t}": Listing.of({}, _levels(2)) for t in range(timepoints)}
    return Listing.of(
        {"downsamplingFactors": [[1, 1, 1], [2, 2, 1]], "dataType": "uint16"}, {}, tps
    )


def test_bdv_timepoints_entry() -> None:
    bare = Listing.of({}, {}, {"timepoint0": None, "timepoint1": None})
    assert cv.BDV_TIMEPOINTS.matches(bare)
    assert cv.BDV_TIMEPOINTS.reads(bare) == ("timepoint0", "timepoint1")
    (r,) = _take(cv.BDV_TIMEPOINTS, _setup())
    assert r.at == ""
    assert r.claims == ("timepoint0", "timepoint1")
    assert r.pyramid.convention == "bdv"
    assert r.pyramid.ndim == 4  # time points stacked as t
    assert r.pyramid.downsampling[1] == (2.0, 2.0, 1.0, 1.0)


def test_bdv_setups_entry_reads_setups_then_their_timepoints() -> None:
    root = Listing.of({}, {}, {"setup0": None, "setup1": None, "other": None})
    assert cv.BDV_SETUPS.matches(root)
    assert cv.BDV_SETUPS.reads(root) == ("setup0", "setup1")
    half = Listing.of({}, {}, {"setup0": Listing.of({}, {}, {"timepoint0": None}), "setup1": None})
    assert cv.BDV_SETUPS.reads(half) == ("setup0/timepoint0", "setup1")
    found = _take(
        cv.BDV_SETUPS, Listing.of({}, {}, {"setup0": _setup(1), "setup1": _setup(2), "other": None})
    )
    assert [(r.at, r.claims, r.pyramid.ndim) for r in found] == [
        ("setup0", ("setup0",), 3),
        ("setup1", ("setup1",), 4),
    ]


def test_the_first_pyramid_entry_that_builds_wins() -> None:
    """OME-NGFF before N5 Viewer: a group with both is the NGFF image; if its datasets are not
    there, N5 Viewer's ``sN`` levels are."""
    ngff = {
        "multiscales": [
            {"axes": ["z", "y", "x"], "datasets": [{"path": "s1", "coordinateTransformations": []}]}
        ]
    }
    g = Listing.of(ngff, _levels(2))
    built = next(r for c in cv.PYRAMIDS if c.matches(g) for r in c.build(g, {}))
    assert built.pyramid.convention.startswith("ngff")
    assert built.pyramid.paths == ("s1",)
    g = Listing.of(
        {
            **ngff,
            "multiscales": [
                {
                    **ngff["multiscales"][0],
                    "datasets": [{"path": "x", "coordinateTransformations": []}],
                }
            ],
        },
        _levels(2),
    )
    built = next(r for c in cv.PYRAMIDS if c.matches(g) for r in c.build(g, {}))
    assert built.pyramid.convention == "n5viewer"
    assert built.pyramid.paths == ("s0", "s1")


def test_plain_dataset_and_finish() -> None:
    ms = dataset_pyramid(_info((3, 40, 30), dtype="uint8"), "rgb")
    assert ms is not None
    assert ms.paths == ("rgb",)
    assert ms.convention == "none"
    done = cv.finish(ms, "c/rgb", "c")
    assert done.name == "c/rgb"
    assert done.paths == ("c/rgb",)
    assert done.axes == ("rgb", "x", "y")
    labels = cv.finish(dataset_pyramid(_info((4, 4), dtype="uint32"), "seg"), "seg", "")
    assert labels.is_labels
    assert cv.stored_name({cv.NAME_KEY: " cells "}) == "cells"
    assert cv.stored_name({}) is None
