"""errors: one home for every error, each also the builtin it refines."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest
import zarr

import napari_n5zarr
from napari_n5zarr import errors
from napari_n5zarr.access import base_store, create_dataset


def test_every_error_is_an_n5zarr_error_and_its_builtin() -> None:
    assert issubclass(errors.N5FormatError, errors.N5ZarrError)
    assert issubclass(errors.N5FormatError, ValueError)
    assert issubclass(errors.N5MetadataError, errors.N5FormatError)
    assert issubclass(errors.N5MetadataError, KeyError)
    assert issubclass(errors.N5BlockError, errors.N5FormatError)
    assert issubclass(errors.N5StoreError, errors.N5ZarrError)
    assert issubclass(errors.N5StoreError, OSError)
    assert not issubclass(errors.N5StoreError, FileNotFoundError)  # a 500 is not a missing key
    assert issubclass(errors.NodeNotFoundError, errors.N5ZarrError)
    assert issubclass(errors.NodeNotFoundError, FileNotFoundError)
    assert issubclass(errors.NodeExistsError, errors.N5ZarrError)
    assert issubclass(errors.NodeExistsError, FileExistsError)
    assert issubclass(errors.ExportCancelled, errors.N5ZarrError)
    assert issubclass(errors.SkippedNodeWarning, UserWarning)


def test_metadata_error_message_is_not_quoted_like_a_key_error() -> None:
    assert str(errors.N5MetadataError("x/attributes.json: bad")) == "x/attributes.json: bad"


def test_located_names_the_block_once() -> None:
    e = errors.located(errors.N5BlockError("bad header"), "N5 block 0/1 in /d/x.n5")
    assert str(e) == "N5 block 0/1 in /d/x.n5: bad header"
    assert errors.located(e, "N5 block 0/1 in /d/x.n5") is e
    assert str(errors.located(errors.N5BlockError("bad"), None)) == "N5 block: bad"


def test_one_class_per_name_wherever_it_is_imported_from() -> None:
    from napari_n5zarr.spatial import SkippedNodeWarning
    from napari_n5zarr.write.export.blocks import ExportCancelled
    from napari_n5zarr.write.export.exporter import ExportCancelled as FromExporter

    assert napari_n5zarr.N5FormatError is errors.N5FormatError
    assert ExportCancelled is FromExporter is errors.ExportCancelled
    assert SkippedNodeWarning is errors.SkippedNodeWarning


@pytest.mark.parametrize("what", ["missing folder", "missing zip", "a file", "empty folder"])
def test_a_missing_node_is_node_not_found_and_file_not_found(tmp_path: Path, what: str) -> None:
    target = {"missing folder": tmp_path / "none.n5", "missing zip": tmp_path / "none.zip",
              "a file": tmp_path / "file.n5", "empty folder": tmp_path / "empty.n5"}[what]  # fmt: skip
    if what == "a file":
        target.write_text("not a folder")
    if what == "empty folder":
        target.mkdir()
    with pytest.raises(errors.NodeNotFoundError, match=str(target)) as info:
        napari_n5zarr.open(target)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(FileNotFoundError):  # callers catching the builtin still do
        napari_n5zarr.open(target)


def test_base_store_of_a_missing_path_is_node_not_found(tmp_path: Path) -> None:
    with pytest.raises(errors.NodeNotFoundError, match="no such N5/Zarr container"):
        base_store(tmp_path / "none.n5")


def test_an_existing_node_is_node_exists_and_file_exists(tmp_path: Path) -> None:
    napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    with pytest.raises(errors.NodeExistsError, match="already holds") as info:
        napari_n5zarr.open(tmp_path / "c.n5", mode="w-")
    assert isinstance(info.value, FileExistsError)


def test_create_dataset_refuses_what_n5_cannot_store_naming_it(tmp_path: Path) -> None:
    root = napari_n5zarr.open(tmp_path / "c.n5", mode="w")
    with pytest.raises(
        errors.N5MetadataError, match=r"^raw: N5 dataType 'complex64' is not supported"
    ):
        create_dataset(root, "raw", shape=(4,), dtype="complex64", chunks=(4,))
    with pytest.raises(errors.N5MetadataError, match=r"^raw: .*\['dataType'\] are reserved"):
        create_dataset(
            root, "raw", shape=(4,), dtype="uint8", chunks=(4,), attributes={"dataType": "x"}
        )
    assert not (tmp_path / "c.n5" / "raw").exists()
    arr = create_dataset(
        root, "raw", shape=(5, 3), dtype="uint16", chunks=(2, 2), compression={"type": "gzip"}
    )
    assert isinstance(arr, zarr.Array)
    assert arr.shape == (5, 3)


def test_export_onto_a_node_is_node_exists_and_file_exists(tmp_path: Path) -> None:
    import numpy as np

    napari_n5zarr.export(np.zeros((4, 4), dtype="uint8"), tmp_path / "x.n5", levels=1)
    with pytest.raises(errors.NodeExistsError, match="already exists") as info:
        napari_n5zarr.export(np.zeros((4, 4), dtype="uint8"), tmp_path / "x.n5", levels=1)
    assert isinstance(info.value, FileExistsError)


def test_a_missing_tree_is_node_not_found(tmp_path: Path) -> None:
    from napari_n5zarr.read.tree import open_tree

    with pytest.raises(errors.NodeNotFoundError, match="no such N5/Zarr container"):
        open_tree(tmp_path / "none.n5")


def test_errors_defined_elsewhere_before_are_the_same_classes_there() -> None:
    from napari_n5zarr.storage.remote import DeadlineExceeded
    from napari_n5zarr.write.convert.convert import NothingToConvertError
    from napari_n5zarr.write.edit.save import NotEditableError

    assert NothingToConvertError is errors.NothingToConvertError
    assert NotEditableError is errors.NotEditableError
    assert DeadlineExceeded is errors.DeadlineExceeded


def test_errors_moved_into_errors_py_keep_their_builtins() -> None:
    for cls, builtin in [(errors.NothingToConvertError, ValueError), (errors.NotEditableError, ValueError),
                         (errors.DeadlineExceeded, TimeoutError)]:  # fmt: skip
        assert issubclass(cls, errors.N5ZarrError), cls
        assert issubclass(cls, builtin), cls
    assert errors.NothingToConvertError("none", ["a: bad"]).skipped == ["a: bad"]
    assert errors.NothingToConvertError("none").skipped == []


# Internal control-flow signals that never reach a caller (not part of the public API).
_INTERNAL: set[str] = set()  # none today (read/local.py's NeedsZarr went with the zarr-free open)


def _is_exception_base(base: ast.expr) -> bool:
    name = (
        base.id
        if isinstance(base, ast.Name)
        else base.attr
        if isinstance(base, ast.Attribute)
        else ""
    )
    builtin = getattr(builtins, name, None)
    return (isinstance(builtin, type) and issubclass(builtin, BaseException)) or name.endswith(
        ("Error", "Exception", "Warning", "Exceeded", "Cancelled")
    )


def test_every_public_error_is_defined_in_errors_py() -> None:
    package = Path(napari_n5zarr.__file__).parent
    elsewhere = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if where == "errors.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                    and any(_is_exception_base(b) for b in node.bases)
                    and f"{where}:{node.name}" not in _INTERNAL):  # fmt: skip
                elsewhere.append(f"{where}:{node.name}")
    assert elsewhere == []
    public = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    assert public <= set(errors.__all__)
