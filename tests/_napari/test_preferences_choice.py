"""The "*.n5 folder" reader preference is offered once: a person who removes it keeps it
removed (issue 19 item 8). napari's own settings object, in fresh interpreters."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def run_py(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NAPARI_CONFIG": os.devnull}, check=False)  # fmt: skip


def test_removing_the_n5_pattern_in_napari_preferences_stands(tmp_path: Path) -> None:
    """napari's settings object, in two sessions sharing one settings file."""
    config = tmp_path / "config" / "settings.yaml"
    env_code = f"""
        import os, sys
        os.environ["NAPARI_CONFIG"] = {str(config)!r}
        import napari
        from napari.settings import get_settings
        from napari_n5zarr._napari.preferences import remember_n5_folders
        plugins = get_settings().plugins
        remember_n5_folders()
    """
    env_code = textwrap.dedent(env_code)
    first = run_py(
        env_code
        + textwrap.dedent("""
        plugins.extension2reader = {"/data/a.n5/": "napari-n5zarr"}  # "remember this choice"
        print(sorted(plugins.extension2reader))
        plugins.extension2reader = {"/data/a.n5/": "napari-n5zarr"}  # the person removes *.n5/
        print(sorted(plugins.extension2reader))
        get_settings().save()
    """)
    )
    assert first.returncode == 0, first.stderr
    added, removed = first.stdout.splitlines()[-2:]
    assert "*.n5/" in added, first.stdout
    assert "*.n5/" not in removed, first.stdout
    second = run_py(env_code + "print(sorted(plugins.extension2reader))")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip().splitlines()[-1] == "['/data/a.n5/']", second.stdout
