"""No function of the package is longer than :data:`MOST_LINES` lines of code (its docstring
not counted: public functions document every parameter): a longer one is split into named
pieces."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "napari_n5zarr"
MOST_LINES = 60


def long_functions(source: str, most: int = MOST_LINES) -> list[tuple[str, int]]:
    """``(name, code lines)`` of each function in ``source`` longer than ``most`` lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines -= (first.end_lineno or first.lineno) - first.lineno + 1
            if lines > most:
                found.append((node.name, lines))
    return found


def test_no_function_is_over_sixty_lines():
    found = [f"{path.relative_to(SRC)}: {name} ({n} lines)" for path in sorted(SRC.rglob("*.py"))
             for name, n in long_functions(path.read_text(encoding="utf-8"))]  # fmt: skip
    assert not found, "functions to split:\n" + "\n".join(found)


def test_the_length_check_counts_code_not_the_docstring():
    body = "\n".join(f"    x{i} = {i}" for i in range(59))  # with the def line: 60
    assert long_functions(f'def f():\n    """Doc\n\n    more."""\n{body}\n') == []
    assert long_functions(f"def f():\n    y = 0\n{body}\n") == [("f", 61)]
