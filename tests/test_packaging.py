"""Habits of a maintained package: one version, type information shipped, a license file."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from importlib.resources import files
from pathlib import Path

import napari_n5zarr

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_the_version_is_spelled_once_in_the_package() -> None:
    meta = _pyproject()
    assert "version" not in meta["project"], "pyproject.toml must not spell the version again"
    assert "version" in meta["project"]["dynamic"]
    source = ROOT / meta["tool"]["hatch"]["version"]["path"]
    assert source.resolve() == Path(napari_n5zarr.__file__).resolve()
    found = re.findall(
        r'^__version__ = "([^"]+)"$', source.read_text(encoding="utf-8"), flags=re.MULTILINE
    )
    assert found == [napari_n5zarr.__version__]


def test_the_version_is_the_installed_distributions() -> None:
    assert napari_n5zarr.__version__ == importlib.metadata.version("napari-n5zarr")


def test_type_information_ships_with_the_package() -> None:
    assert files("napari_n5zarr").joinpath("py.typed").is_file()


def test_the_license_file_is_the_declared_license() -> None:
    meta = _pyproject()["project"]
    assert meta["license"] == "BSD-3-Clause"
    for name in meta["license-files"]:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert text.startswith("BSD 3-Clause License")
        assert "napari-n5zarr developers" in text
