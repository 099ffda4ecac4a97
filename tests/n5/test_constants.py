"""n5/constants.py is the one place that spells the metadata file names and the version key."""

from __future__ import annotations

import ast
from pathlib import Path

import napari_n5zarr
from napari_n5zarr.n5 import constants

NAMES = (constants.N5_JSON, constants.ZARR_JSON, *constants.ZARR_V2_FILES)
# "n5" strings that are not the N5 version key: the <n5> element of a BigDataViewer XML, and the
# "n5" field of a tree node's JSON (its N5 document).
VERSION_KEY_ALLOWED = {"spatial/pyramids.py", "read/node.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _spelled_elsewhere() -> list[str]:
    """String pieces that build a metadata file's name or test the version key outside
    n5/constants.py. Prose (messages, docstrings) has spaces and is left alone."""
    package = Path(napari_n5zarr.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package).as_posix()
        if where == "n5/constants.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                not (isinstance(node, ast.Constant) and isinstance(node.value, str))
                or id(node) in skip
            ):
                continue
            text = node.value
            a_file_name = set(text.split("/")) & set(NAMES) and not any(c.isspace() for c in text)
            if a_file_name or (text == constants.VERSION_KEY and where not in VERSION_KEY_ALLOWED):
                found.append(f"{where}:{node.lineno}: {text!r}")
    return found


def test_metadata_file_names_and_the_version_key_come_from_constants() -> None:
    assert _spelled_elsewhere() == []


def test_the_names_are_what_the_formats_say() -> None:
    assert (constants.N5_JSON, constants.ZARR_JSON, constants.VERSION_KEY) == (
        "attributes.json",
        "zarr.json",
        "n5",
    )
    assert {"attributes.json", "zarr.json"} == constants.METADATA_FILES
