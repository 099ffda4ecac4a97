"""First screens, without a display (issue 27): what ``n5zarr view`` does with a folder that
holds no N5, how the plugin's own export is labelled, the export widget's suggested name,
and napari's own matching of the "remember this reader" preference."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import napari_n5zarr
from napari_n5zarr._napari import preferences
from napari_n5zarr.read.tree import open_tree

SRC = (
    Path(napari_n5zarr.__file__).resolve().parents[1]
)  # the package under test, in the subprocesses too


def _run(code: str, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def test_view_on_a_folder_without_n5_is_one_line_exit_3_before_napari(tmp_path: Path) -> None:
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    (folder / "readme.txt").write_text("no N5 here")
    (folder / "sub" / "a.png").write_bytes(b"\x89PNG")
    shot = tmp_path / "shot.png"
    done = _run(f"""
        import sys
        from napari_n5zarr.cli import main
        code = main(["view", {str(folder)!r}, "--screenshot", {str(shot)!r}])
        print(code, "napari" in sys.modules)
    """)
    assert done.stdout.split() == ["3", "False"], (
        done.stdout,
        done.stderr,
    )  # not found; napari never imported
    assert done.stderr.strip().splitlines() == [f"n5zarr: error: no N5 or Zarr v3 data in {folder}"]
    assert not shot.exists()


def _export(path: Path) -> Path:
    data = np.arange(16 * 32 * 32, dtype="uint16").reshape(16, 32, 32)
    napari_n5zarr.export(
        data, path, scale=(2.0, 0.5, 0.5), units="micrometer", axis_labels=("z", "y", "x"), levels=2
    )
    return path


def test_the_plugins_own_export_is_labelled_n5_viewer(tmp_path: Path) -> None:
    """The export writes N5 Viewer's ``pixelResolution`` with neuroglancer's ``axes``/``units``
    beside it: tree, info and the browser name the N5 Viewer convention."""
    path = _export(tmp_path / "vol.n5")
    assert open_tree(path).root.kind_text == "N5 Viewer, 2 levels"
    done = _run(f"""
        from napari_n5zarr.cli import main
        main(["tree", {str(path)!r}]); main(["info", {str(path)!r}])
    """)
    assert done.stdout.splitlines()[0].startswith(f"{path}/  [N5 Viewer, 2 levels]"), done.stdout
    assert "vol.n5: image uint16, 2 level(s), convention N5 Viewer" in done.stdout.splitlines(), (
        done.stdout
    )
    assert "neuroglancer" not in done.stdout


def test_suggested_export_name_never_doubles_a_suffix() -> None:
    from napari_n5zarr._napari.export_widget import suggested_name

    assert suggested_name("vol.n5") == "vol.n5"
    assert suggested_name("vol.N5") == "vol.n5"
    assert suggested_name("scan.n5.zip") == "scan.n5"
    assert (
        suggested_name("em/raw") == "raw.n5"
    )  # a layer of a nested group: no folders made on the way
    assert suggested_name("blobs") == "blobs.n5"
    assert suggested_name(".n5") == "layer.n5"
    taken = {"vol.n5", "vol-copy.n5"}  # e.g. the folder the layer was read from
    assert suggested_name("vol.n5", taken=taken.__contains__) == "vol-copy2.n5"


def test_remembered_reader_covers_groups_inside_n5_folders(tmp_path: Path) -> None:
    """napari's own matching (``get_preferred_reader``, its settings object): after "remember"
    on an .n5 folder, or on a group dropped from inside one, every .n5 folder and every group
    in one goes to this plugin; other folders do not."""
    config = tmp_path / "config" / "settings.yaml"
    for container in ("a.n5", "b.n5/em", "c.n5/em/raw"):
        (tmp_path / container).mkdir(parents=True)
    (tmp_path / "tiffs").mkdir()
    for remembered in ("a.n5", "b.n5/em"):
        done = _run(f"""
            import os
            os.environ["NAPARI_CONFIG"] = {str(config)!r}
            from napari.plugins.utils import get_preferred_reader
            from napari.settings import get_settings
            from napari_n5zarr._napari.preferences import remember_n5_folders
            remember_n5_folders()
            plugins = get_settings().plugins
            remembered = os.path.realpath({str(tmp_path / remembered)!r}) + os.sep  # what napari's dialog stores
            plugins.extension2reader = {{remembered: "napari-n5zarr"}}
            for p in ("b.n5", "b.n5/em", "c.n5/em/raw", "c.n5", "tiffs"):
                print(p, get_preferred_reader(os.path.join({str(tmp_path)!r}, p)))
        """)
        assert done.returncode == 0, done.stderr
        found = dict(line.split() for line in done.stdout.splitlines()[-5:])
        assert found == {"b.n5": "napari-n5zarr", "b.n5/em": "napari-n5zarr", "c.n5/em/raw": "napari-n5zarr",
                         "c.n5": "napari-n5zarr", "tiffs": "None"}, (remembered, done.stdout)  # fmt: skip
        config.unlink(missing_ok=True)
        (config.parent / preferences.STATE_FILE).unlink(missing_ok=True)
