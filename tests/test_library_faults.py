"""The library's errors say what the CLI says (issue 27 item 3): a missing package's pip
install, a zip that is no archive, a bad ``N5ZARR_*`` variable, a corrupt container root,
each an error of its own class naming the place, raised where it is met."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import napari_n5zarr
from napari_n5zarr import environment, export
from napari_n5zarr.cli import ExitCode, exit_code
from napari_n5zarr.errors import (
    EnvironmentVariableError,
    InvalidArgumentError,
    MissingPackageError,
    N5FormatError,
    N5MetadataError,
    NodeNotFoundError,
)


@pytest.fixture
def no_s3fs(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = importlib.import_module("fsspec.registry")._registry
    monkeypatch.setitem(sys.modules, "s3fs", None)  # as if s3fs were not installed...
    monkeypatch.delitem(registry, "s3", raising=False)  # ...nor loaded before


@pytest.fixture
def good(tmp_path: Path) -> Path:
    export(np.arange(512, dtype="uint8").reshape(8, 8, 8), tmp_path / "good.n5", chunks=8, levels=1)
    return tmp_path / "good.n5"


# -- missing packages ------------------------------------------------------------------------


def test_open_without_s3fs_says_what_to_install(no_s3fs: None) -> None:
    """It showed fsspec's "Install s3fs to access S3"; the CLI alone added the pip hint."""
    with pytest.raises(
        MissingPackageError,
        match=r"^s3://bucket/c\.n5 needs s3fs, .*pip install 'napari-n5zarr\[s3\]'$",
    ) as e:
        napari_n5zarr.open("s3://bucket/c.n5")
    assert isinstance(e.value, ModuleNotFoundError)  # except ImportError still catches it
    assert e.value.name == "s3fs"
    assert exit_code(e.value) == ExitCode.MISSING_PACKAGE


def test_the_reader_names_the_url_once(no_s3fs: None) -> None:
    from napari_n5zarr._napari.reader import read_path

    notes: list[str] = []
    assert read_path("s3://bucket/data.n5", notify=lambda level, msg: notes.append(msg)) == []
    [note] = notes
    assert note.count("s3://bucket/data.n5") == 1, note
    assert "pip install 'napari-n5zarr[s3]'" in note


def test_convert_on_a_scheduler_address_without_distributed(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from napari_n5zarr.write.convert.convert import convert

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(
        MissingPackageError,
        match=r"tcp://127\.0\.0\.1:9 needs distributed.*pip install 'napari-n5zarr\[distributed\]'",
    ):
        convert(
            good, tmp_path / "out.n5", scheduler="tcp://127.0.0.1:9"
        )  # it was a ValueError: exit 5
    assert not (tmp_path / "out.n5").exists()


def test_an_unknown_url_scheme_is_a_bad_argument_naming_the_url() -> None:
    with pytest.raises(
        InvalidArgumentError,
        match=r"^cannot open nosuch://b/c\.n5: no filesystem is known for nosuch:// URLs$",
    ):
        napari_n5zarr.open("nosuch://b/c.n5")  # it was fsspec's "Protocol not known: nosuch"


# -- zips ------------------------------------------------------------------------------------


def test_a_file_that_is_no_zip_archive_is_invalid_data_naming_it(
    good: Path, tmp_path: Path
) -> None:
    text = tmp_path / "notes.zip"
    text.write_text("notes, not a zip")
    shutil.make_archive(str(tmp_path / "whole"), "zip", good)
    raw = (tmp_path / "whole.zip").read_bytes()
    cut = tmp_path / "cut.zip"
    cut.write_bytes(raw[: len(raw) // 2])
    for path in (text, cut):
        for mode in ("r", "r+"):
            with pytest.raises(
                N5FormatError, match=rf"^{path}: not a zip archive, or a truncated one"
            ):
                napari_n5zarr.open(path, mode=mode)  # it was zipfile.BadZipFile: exit 7
    assert text.read_text() == "notes, not a zip"  # r+ never appended an archive behind it
    assert cut.read_bytes() == raw[: len(raw) // 2]


def test_opening_a_missing_zip_for_update_creates_nothing(tmp_path: Path) -> None:
    from napari_n5zarr.write.convert.zarr_metadata import add_zarr_metadata

    with pytest.raises(NodeNotFoundError, match="no such zip file"):
        napari_n5zarr.open(tmp_path / "none.zip", mode="r+")
    with pytest.raises(NodeNotFoundError, match="no such zip file"):
        add_zarr_metadata(
            tmp_path / "none.zip"
        )  # it wrote an empty zip, then said "no attributes.json"
    assert not (tmp_path / "none.zip").exists()
    with pytest.raises(NodeNotFoundError, match=r"^no such N5/Zarr container: "):
        add_zarr_metadata(tmp_path / "none.n5")  # it said "not a directory"


# -- environment variables ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(environment.VARIABLES))
def test_every_variable_refuses_garbage_naming_itself(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "lots")
    with pytest.raises(
        EnvironmentVariableError, match=rf"^environment variable {name} must be .*, got 'lots'$"
    ) as e:
        environment.check_environment()
    assert exit_code(e.value) == ExitCode.USAGE


def test_values_variables_take(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("N5ZARR_PREFETCH", "off")
    monkeypatch.setenv("N5ZARR_PROGRESS", " YES ")
    monkeypatch.setenv("N5ZARR_RETRIES", "0")
    monkeypatch.setenv("N5ZARR_READ_TIMEOUT", "2.5")
    monkeypatch.setenv("N5ZARR_MAX_BLOCK_BYTES", "")  # empty: the default
    environment.check_environment()
    assert environment.flag("N5ZARR_PREFETCH", True) is False
    assert environment.flag("N5ZARR_PROGRESS", False) is True
    assert environment.number("N5ZARR_RETRIES", 2) == 0
    assert environment.number("N5ZARR_READ_TIMEOUT", 20) == 2.5
    assert environment.number("N5ZARR_MAX_BLOCK_BYTES", 7) == 7
    for name, value in (("N5ZARR_RETRIES", "-1"), ("N5ZARR_MAX_BLOCK_BYTES", "0"), ("N5ZARR_RETRIES", "1.5"),
                        ("N5ZARR_READ_TIMEOUT", "nan")):  # fmt: skip
        monkeypatch.setenv(name, value)
        with pytest.raises(EnvironmentVariableError, match=name):
            environment.check_environment()
        monkeypatch.delenv(name)


def test_a_bad_block_cap_is_named_not_nothing_to_convert(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``convert`` said "no image or labels arrays to convert": the variable made every
    dataset "unreadable" and the cause was lost."""
    from napari_n5zarr.write.convert.convert import convert

    monkeypatch.setenv("N5ZARR_MAX_BLOCK_BYTES", "lots")
    with pytest.raises(EnvironmentVariableError, match="N5ZARR_MAX_BLOCK_BYTES"):
        convert(good, tmp_path / "out.n5")
    with pytest.raises(EnvironmentVariableError, match="N5ZARR_MAX_BLOCK_BYTES"):
        napari_n5zarr.open(good / "s0")


# -- a container's own metadata ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"), [("{", "not valid JSON"), ("[1, 2]", "does not hold a JSON object")]
)
def test_add_zarr_metadata_on_a_corrupt_root_raises_naming_it(
    tmp_path: Path, content: str, reason: str
) -> None:
    """It reported the root as "cannot express /" on stdout and exited 1, stderr empty."""
    from napari_n5zarr.write.convert.zarr_metadata import add_zarr_metadata

    root = tmp_path / "c.n5"
    export(np.zeros((8, 8), "uint8"), root / "a", levels=1, zarr_json=False)
    (root / "attributes.json").write_text(content)
    with pytest.raises(N5MetadataError, match=rf"{root / 'attributes.json'}: {reason}"):
        add_zarr_metadata(root)
    assert not (root / "zarr.json").exists()
    assert not (root / "a" / "s0" / "zarr.json").exists()


def test_node_info_of_a_bigdataviewer_xml(tmp_path: Path) -> None:
    from napari_n5zarr.read.node_info import node_info

    root = tmp_path / "c.n5"
    export(np.ones((8, 8, 8), "uint16"), root, path="setup0/timepoint0", levels=1, zarr_json=False)
    (root / "setup0" / "attributes.json").write_text(
        json.dumps({"downsamplingFactors": [[1, 1, 1]], "dataType": "uint16"})
    )
    xml = tmp_path / "dataset.xml"
    xml.write_text(
        '<SpimData version="0.2"><SequenceDescription><ImageLoader format="bdv.n5"><n5 type="relative">c.n5</n5>'
        "</ImageLoader><ViewSetups><ViewSetup><id>0</id><voxelSize><unit>nm</unit><size>4 4 40</size></voxelSize>"
        "</ViewSetup></ViewSetups></SequenceDescription></SpimData>"
    )
    info = node_info(xml)  # it opened the XML file as a folder: "not a directory"
    [ms] = info.multiscales
    assert ms.scale == (4, 4, 40)  # N5 order, the XML's
    assert not info.incomplete


def test_the_reader_names_a_broken_zip_once(tmp_path: Path) -> None:
    from napari_n5zarr._napari.reader import read_path

    text = tmp_path / "notes.zip"
    text.write_text("notes, not a zip")
    notes: list[str] = []
    assert read_path(str(text), notify=lambda level, msg: notes.append(msg)) == []
    [note] = notes
    assert note.count(str(text)) == 1, note
    assert "not a zip archive" in note
