"""The shared test machinery of ``conftest.py``: the ``napari`` marker, skips for missing
interop tools, zarr's config reset after each test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import zarr

CONFTEST = Path(__file__).with_name("conftest.py")


def _pytest(
    folder: Path, tests: str, *args: str, block: str | None = None
) -> subprocess.CompletedProcess[str]:
    """pytest in its own process, headless (no display, no Xvfb), on ``tests`` written into
    ``folder`` beside a copy of this conftest; ``block`` makes that module unimportable
    there, as if it were not installed."""
    shutil.copy(CONFTEST, folder / "conftest.py")
    (folder / "test_sample.py").write_text(textwrap.dedent(tests))
    code = "import sys, pytest\n"
    if block:
        code += f"sys.modules[{block!r}] = None\n"
    code += f"sys.exit(pytest.main({['-p', 'no:cacheprovider', '-p', 'no:xvfb', '-q', '-rs', *args]!r}))"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "DISPLAY": ""}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_viewer_tests_are_marked_napari(tmp_path: Path) -> None:
    """A test using make_napari_viewer or qtbot, directly or through a fixture, is marked."""
    tests = """
        import pytest

        @pytest.fixture
        def widget(make_napari_viewer):
            return make_napari_viewer

        def test_viewer(make_napari_viewer): pass
        def test_qt(qtbot): pass
        def test_through_fixture(widget): pass
        def test_headless(tmp_path): pass
    """
    marked = _pytest(tmp_path, tests, "--co", "-m", "napari").stdout  # -m "not napari": the rest
    for name in ("test_viewer", "test_qt", "test_through_fixture"):
        assert f"::{name}" in marked
    assert "::test_headless" not in marked
    assert "3/4 tests collected" in marked


def test_missing_interop_tool_skips_with_its_name(tmp_path: Path) -> None:
    """Without tensorstore a test importing it is a skip naming it; any other missing module
    is still a failure."""
    tests = """
        def test_needs_tensorstore():
            import tensorstore

        def test_needs_something_else():
            import napari_n5zarr_no_such_module
    """
    run = _pytest(tmp_path, tests, block="tensorstore")
    assert "1 failed" in run.stdout, run.stdout + run.stderr
    assert "1 skipped" in run.stdout, run.stdout + run.stderr
    assert "tensorstore is not installed" in run.stdout


class TestZarrConfigReset:
    """In file order: the first test leaves a setting behind, the second sees it undone."""

    def test_leaves_a_setting_behind(self) -> None:
        zarr.config.set({"array.order": "F"})  # no ``with``: the setting outlives the call
        assert zarr.config.get("array.order") == "F"

    def test_finds_it_undone(self) -> None:
        assert zarr.config.get("array.order") == "C"
