"""Every module imports, the package's import graph has no cycle, and one module is the seam
to zarr's internals.

The graph counts every ``import`` statement of the package's own modules: at module level,
inside functions (a lazy import still ties two modules together) and under
``if TYPE_CHECKING:`` (a type that names a module is a dependency on it). A cycle means two
modules each need the other: one of them belongs below the other, or their shared part in a
third module.

Only :mod:`napari_n5zarr.zarr_internals` imports ``zarr.core.*``, zarr's ``_``-modules and
``_``-names, or reads the private zarr attributes in :data:`ZARR_PRIVATE_ATTRIBUTES` (its
docstring states the rule).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "napari_n5zarr"


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the package's modules it imports (``from pkg import sub`` names ``pkg.sub``):
    every import statement, at module level, inside functions or under ``if TYPE_CHECKING:``."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, package)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        graph[name].add(full)
                    elif base in modules:
                        graph[name].add(base)
    return graph


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The absolute module name of a ``from ... import`` (relative ones resolved in ``package``)."""
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return base


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


KNOWN_CYCLES: list[set[str]] = []  # none: keep it so


def test_the_package_has_no_import_cycle():
    graph = import_graph(_modules())
    assert graph["napari_n5zarr.access"], (
        "the graph must see imports (else this test proves nothing)"
    )
    found = [c for c in cycles(graph) if set(c) not in KNOWN_CYCLES]
    detail = [
        " <-> ".join(c)
        + ": "
        + "; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c)
        for c in found
    ]
    assert not found, "import cycles:\n" + "\n".join(detail)


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# -- floors: rooms (top-level modules and sub-packages) import only downwards ---------------

FLOORS = {
    "cli": 9,
    "": 8,  # the package's __init__: the public names
    "_napari": 8,
    "write": 7,
    "read": 6,
    "access": 5,
    "storage": 4,
    "n5": 3,
    "spatial": 2,
    "environment": 2,
    "extras": 2,
    "byte_ranges": 1,
    "block_grid": 1,
    "errors": 1,
    "zarr_internals": 1,
}
"""Each room's floor: a room imports (lazily or not) only rooms on lower floors, or itself."""


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def arrows_up(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """``a -> b`` for each import of a room on the same floor or higher (another room)."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if _room(a) != _room(b) and floors[_room(b)] >= floors[_room(a)]
    )


def test_every_room_has_a_floor():
    assert {_room(m) for m in _modules()} == set(FLOORS)


def test_no_arrow_runs_up_a_floor():
    """No import, lazy or for type checking, climbs: ``access`` does not reach into ``write``,
    ``read`` not into ``write``, ``spatial`` not into ``read``, ``n5`` not into ``storage``."""
    found = arrows_up(import_graph(_modules()), FLOORS)
    assert not found, "imports that climb a floor:\n" + "\n".join(found)


def test_the_floor_check_finds_climbs():
    graph = {"p.read.a": {"p.write.b", "p.spatial"}, "p.spatial": {"p.read.a"}, "p.write.b": set()}
    floors = {"read": 6, "write": 7, "spatial": 2}
    assert arrows_up(graph, floors) == ["p.read.a -> p.write.b", "p.spatial -> p.read.a"]


def test_lazy_and_type_checking_imports_count(tmp_path):
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from p import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.a import f\nfrom . import c\n"
    )
    (pkg / "c.py").write_text("")
    modules = {
        "p": pkg / "__init__.py",
        "p.a": pkg / "a.py",
        "p.b": pkg / "b.py",
        "p.c": pkg / "c.py",
    }
    graph = import_graph(modules)
    assert graph == {"p": set(), "p.a": {"p.b"}, "p.b": {"p.a", "p.c"}, "p.c": set()}
    assert cycles(graph) == [["p.a", "p.b"]]


# -- one seam to zarr ------------------------------------------------------------------------

SEAM = f"{PACKAGE}.zarr_internals"
ZARR_PRIVATE_ATTRIBUTES = frozenset(
    {
        "_async_group",
        "_async_array",
        "_codec_registries",
        "_normalize_byte_range_index",
        "_zf",
        "_zipfile",
        "_sync_open",
    }
)
"""Private attributes of zarr's concrete classes and modules the project has needed: only the
seam reads them. (The ``zarr.abc`` hooks a subclass implements, ``_get_many``, ``_store``,
``_decode_single``, ..., are zarr's extension API: see the seam's docstring.)"""


def _internal_zarr_module(name: str) -> bool:
    parts = name.split(".")
    return (
        parts[0] == "zarr"
        and len(parts) > 1
        and (parts[1] == "core" or any(p.startswith("_") for p in parts[1:]))
    )


def zarr_internals_used(source: str) -> list[str]:
    """Each use of zarr's internals in ``source``: ``line: what``."""
    found = []
    tree = ast.parse(source)
    inner = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
    }  # report a.b.c once
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}"
                for a in node.names
                if _internal_zarr_module(a.name)
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and (node.module or "").split(".")[0] == "zarr"
        ):
            module = node.module or ""
            if _internal_zarr_module(module):
                found.append(f"{node.lineno}: from {module} import ...")
            found += [
                f"{node.lineno}: from {module} import {a.name}"
                for a in node.names
                if a.name.startswith("_")
            ]
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = [node.attr]
            value: ast.expr = node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            dotted = ".".join(reversed(chain))
            if (
                isinstance(value, ast.Name)
                and value.id == "zarr"
                and _internal_zarr_module(f"zarr.{dotted}")
            ):
                found.append(f"{node.lineno}: zarr.{dotted}")
            found += [
                f"{node.lineno}: .{a}" for a in reversed(chain) if a in ZARR_PRIVATE_ATTRIBUTES
            ]
    return sorted(set(found), key=lambda s: (int(s.split(":")[0]), s))


def test_only_the_seam_uses_zarr_internals():
    modules = _modules()
    assert SEAM in modules
    assert zarr_internals_used(modules[SEAM].read_text(encoding="utf-8")), (
        "the seam must be seen using them"
    )
    used = {
        name: hits
        for name, path in modules.items()
        if name != SEAM and (hits := zarr_internals_used(path.read_text(encoding="utf-8")))
    }
    assert not used, f"zarr internals outside {SEAM} (import them from there):\n" + "\n".join(
        f"{name}: {hit}" for name, hits in sorted(used.items()) for hit in hits
    )


def test_the_seam_scanner_finds_internals():
    source = """
import zarr
import zarr.core.sync
from zarr.core.buffer import default_buffer_prototype
from zarr.storage._utils import helper
from zarr.registry import _codec_registries, register_codec
from zarr.abc.store import Store
from zarr.buffer import default_buffer_prototype as public
def f(group, store):
    zarr.core.sync.sync(None)
    group._async_group.getitem("a")
    return store._zf, zarr.storage.LocalStore, store._store
"""
    assert zarr_internals_used(source) == [
        "3: import zarr.core.sync",
        "4: from zarr.core.buffer import ...",
        "5: from zarr.storage._utils import ...",
        "6: from zarr.registry import _codec_registries",
        "10: zarr.core.sync.sync",
        "11: ._async_group",
        "12: ._zf",
    ]


@pytest.mark.parametrize("module", sorted(_modules()))
def test_every_module_imports(module):
    importlib.import_module(module)
