"""Fault campaign: walkers terminate (issue 19 item 7).

Every case runs in a child process with a timeout (a hang fails the case instead of the
suite) and a memory cap (an endless read fails it instead of the machine). Planted
symbolic-link fan-out, zips with odd member names, special files named like metadata.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from napari_n5zarr import export

TIMEOUT = 30
MEMORY_CAP = 1500 * 2**20  # an endless read fails with MemoryError, not the machine


def run_py(code: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter with a memory cap; a hang fails the case."""
    prelude = (
        f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))\n"
    )
    try:
        return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "NAPARI_CONFIG": os.devnull}, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {timeout} s (a walker that does not terminate)")


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    return run_py(
        f"import sys; from napari_n5zarr.cli import main; sys.exit(main({list(args)!r}))", timeout
    )


def no_traceback(run: subprocess.CompletedProcess[str]) -> bool:
    return "Traceback" not in run.stderr and "Traceback" not in run.stdout


def container_with_links(root: Path, links: int) -> Path:
    """A container holding a pyramid and ``links`` symbolic links to itself inside a group."""
    export(
        np.arange(64 * 64, dtype="uint16").reshape(64, 64),
        root,
        path="img",
        levels=2,
        chunks=32,
        zarr_json=True,
    )
    group = root / "grp"
    group.mkdir()
    (group / "attributes.json").write_text("{}")
    for k in range(links):
        (group / f"up{k}").symlink_to("..", target_is_directory=True)
    return root


# -- symbolic-link fan-out ----------------------------------------------------------------


@pytest.mark.parametrize("links", [4, 24])
def test_tree_terminates_with_links_to_the_parent(tmp_path: Path, links: int) -> None:
    root = container_with_links(tmp_path / "c.n5", links)
    run = run_cli("tree", str(root))
    assert run.returncode == 0, run.stderr
    assert no_traceback(run)
    assert run.stdout.count("img") == 1  # each real node once
    assert "up0" not in run.stdout  # the links lead back into the container: not followed


@pytest.mark.parametrize("links", [4, 24])
def test_add_zarr_metadata_terminates_with_links_to_the_parent(tmp_path: Path, links: int) -> None:
    root = container_with_links(tmp_path / "c.n5", links)
    run = run_cli("add-zarr-metadata", str(root))
    assert run.returncode == 0, run.stdout + run.stderr
    assert no_traceback(run)


def test_info_terminates_with_24_links(tmp_path: Path) -> None:
    root = container_with_links(tmp_path / "c.n5", 24)
    run = run_cli("info", str(root))
    assert run.returncode == 0, run.stderr
    assert no_traceback(run)


@pytest.mark.parametrize("zarr_path", [False, True], ids=["zarr-free", "zarr"])
def test_reader_terminates_with_24_links(tmp_path: Path, zarr_path: bool) -> None:
    root = container_with_links(tmp_path / "c.n5", 24)
    if zarr_path:  # a stray zarr.json at the root sends the reader down zarr's path
        (root / "attributes.json").unlink()
    run = run_py(f"""
        from napari_n5zarr._napari.reader import read_path
        notes = []
        layers = read_path({str(root)!r}, lambda level, text: notes.append(text))
        print(len(layers), [meta.get("name") for _, meta, _ in layers], notes)
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("1 "), run.stdout  # img once, no copies through the links


def test_a_link_leaving_the_container_is_followed_once(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    export(np.zeros((8, 8), "uint8"), outside / "ds", levels=1, zarr_json=False)
    (outside / "back").symlink_to(outside, target_is_directory=True)  # a loop outside the container
    root = tmp_path / "c.n5"
    export(np.zeros((8, 8), "uint8"), root, path="img", levels=1, zarr_json=False)
    (root / "a").symlink_to(outside, target_is_directory=True)
    (root / "b").symlink_to(outside, target_is_directory=True)  # the same folder again
    run = run_cli("tree", str(root))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sum("ds" in line for line in lines) == 1, run.stdout
    assert not any("back" in line for line in lines), run.stdout


# -- zips with odd member names -------------------------------------------------------------


def zip_with_member(tmp_path: Path, odd: str) -> Path:
    src = tmp_path / "src.n5"
    export(np.arange(64, dtype="uint16").reshape(8, 8), src, levels=1, zarr_json=False)
    out = tmp_path / "odd.zip"
    with zipfile.ZipFile(out, "w") as z:
        for f in sorted(src.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(src).as_posix())
        z.writestr(zipfile.ZipInfo(odd), json.dumps({"n5": "4.0.0"}))
    return out


ODD_NAMES = [
    "/x/attributes.json",
    "../x/attributes.json",
    "x\\y/attributes.json",
    "x//attributes.json",
    "./x/attributes.json",
]


@pytest.mark.parametrize("odd", ODD_NAMES)
@pytest.mark.parametrize("command", ["tree", "info", "convert"])
def test_odd_zip_member_is_one_clear_error(tmp_path: Path, odd: str, command: str) -> None:
    archive = zip_with_member(tmp_path, odd)
    args = [command, str(archive)] + ([str(tmp_path / "out.n5")] if command == "convert" else [])
    run = run_cli(*args)
    assert run.returncode == 5, run.stdout + run.stderr  # 5: invalid data
    assert no_traceback(run)
    assert odd in run.stderr, run.stderr
    assert "member" in run.stderr, run.stderr
    assert not (tmp_path / "out.n5").exists()


@pytest.mark.parametrize("odd", ODD_NAMES[:2])
def test_reader_refuses_odd_zip_member(tmp_path: Path, odd: str) -> None:
    archive = zip_with_member(tmp_path, odd)
    run = run_py(f"""
        from napari_n5zarr._napari.reader import read_path
        notes = []
        layers = read_path({str(archive)!r}, lambda level, text: notes.append(text))
        print(len(layers)); print(notes)
    """)
    assert run.returncode == 0, run.stderr
    count, notes = run.stdout.splitlines()[:2]
    assert count == "0", run.stdout
    assert odd in notes, run.stdout


# -- special files ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_special_xml_beside_a_container_is_not_opened(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "c.n5"
    export(np.zeros((8, 8), "uint8"), root, levels=1, zarr_json=False)
    xml = tmp_path / "a.xml"
    if kind == "fifo":
        os.mkfifo(xml)
    else:
        xml.symlink_to("/dev/zero")
    run = run_py(
        f"""
        from napari_n5zarr._napari.reader import read_path
        from napari_n5zarr.read.locate import is_n5, resolve
        print(len(read_path({str(root)!r}, lambda l, t: None)), is_n5({str(xml)!r}), resolve({str(xml)!r}).bdv_setups)
        from napari_n5zarr.read.tree import open_tree
        try:
            open_tree({str(xml)!r})
        except Exception as e:
            print("refused:", e)
    """,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    first, second = run.stdout.splitlines()[:2]
    assert first == "1 False None", run.stdout
    assert second.startswith("refused:"), run.stdout
    assert str(xml) in second, run.stdout


@pytest.mark.parametrize("where", ["s0/pipe", "s0/zarr.json", "zarr.json"])
def test_fifo_inside_old_node_does_not_hang_overwrite(tmp_path: Path, where: str) -> None:
    dest = tmp_path / "out.n5"
    export(np.ones((8, 8), "uint8"), dest, levels=1, zarr_json=False)
    os.mkfifo(dest / where)
    run = run_py(
        f"""
        import numpy as np
        from napari_n5zarr import export
        try:
            export(np.ones((8, 8), "uint8"), {str(dest)!r}, levels=1, overwrite=True)
            print("written")
        except Exception as e:
            print("refused:", type(e).__name__, e)
    """,
        timeout=30,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(("written", "refused:")), run.stdout


def test_fifo_named_zarr_json_does_not_hang_the_sniffer(tmp_path: Path) -> None:
    folder = tmp_path / "data.zarr"
    folder.mkdir()
    os.mkfifo(folder / "zarr.json")
    run = run_py(
        f"""
        from napari_n5zarr._napari.reader import get_reader
        print(get_reader({str(folder)!r}))
    """,
        timeout=30,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "None", run.stdout + run.stderr
