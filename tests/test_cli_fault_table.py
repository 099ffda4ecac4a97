"""Every command x every kind of fault (issue 27 item 3): the documented exit status and ONE
line on stderr naming the file, URL, variable or argument at fault; nothing is created.

Each cell runs the real CLI in its own process (``python -m napari_n5zarr.cli``; a package
is hidden with a ``sys.modules`` block in that process only). The five commands of a row
run at once, so the table costs about a dozen process starts' worth of wall time. Every
fault is met before ``n5zarr view`` starts napari: no display is needed."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr.cli import ExitCode

COMMANDS = ("tree", "info", "convert", "add-zarr-metadata", "view")
FAST = {
    "N5ZARR_RETRIES": "0",
    "N5ZARR_CONNECT_TIMEOUT": "5",
    "N5ZARR_READ_TIMEOUT": "5",
    "N5ZARR_RETRY_BACKOFF": "0.01",
}
WAITING = "n5zarr: waiting for "
"""``tree`` names a slow request on stderr (a loaded machine): progress, not a fault."""

# Runs the CLI as ``python -m`` does, after hiding the modules listed in argv[1].
BLOCKED_RUN = (
    "import runpy, sys\n"
    "for name in sys.argv.pop(1).split(','):\n"
    "    sys.modules[name] = None  # as if not installed\n"
    "runpy.run_module('napari_n5zarr.cli', run_name='__main__', alter_sys=True)\n"
)


@dataclass(frozen=True)
class Fault:
    """One row: where the fault is, what status it must give, what the line must name."""

    code: int
    src: Callable[[Path, int], str]
    """(data folder, a closed port) -> the PATH/SRC given to every command."""
    named: Callable[[Path, int], list[str]]
    """Texts the one line must contain (the place at fault, the variable, the hint)."""
    env: dict[str, str] = field(default_factory=dict)
    blocked: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    """Arguments after the command's own."""


FAULTS: dict[str, Fault] = {
    "missing folder": Fault(
        ExitCode.NOT_FOUND, lambda d, _: str(d / "missing.n5"), lambda d, _: [str(d / "missing.n5")]
    ),
    "missing zip": Fault(
        ExitCode.NOT_FOUND,
        lambda d, _: str(d / "missing.zip"),
        lambda d, _: [str(d / "missing.zip")],
    ),
    "symlink loop": Fault(
        ExitCode.NOT_FOUND, lambda d, _: str(d / "loop.n5"), lambda d, _: [str(d / "loop.n5")]
    ),
    "missing xml": Fault(
        ExitCode.NOT_FOUND,
        lambda d, _: str(d / "missing.xml"),
        lambda d, _: [str(d / "missing.xml")],
    ),
    "not a zip": Fault(
        ExitCode.INVALID_DATA,
        lambda d, _: str(d / "text.zip"),
        lambda d, _: [str(d / "text.zip"), "not a zip archive"],
    ),
    "truncated zip": Fault(
        ExitCode.INVALID_DATA,
        lambda d, _: str(d / "cut.zip"),
        lambda d, _: [str(d / "cut.zip"), "truncated"],
    ),
    "corrupt JSON": Fault(
        ExitCode.INVALID_DATA,
        lambda d, _: str(d / "bad.n5"),
        lambda d, _: [str(d / "bad.n5" / "attributes.json"), "not valid JSON"],
    ),
    "foreign xml": Fault(
        ExitCode.INVALID_DATA,
        lambda d, _: str(d / "other.xml"),
        lambda d, _: [str(d / "other.xml"), "not a BigDataViewer XML"],
    ),
    "unreachable URL": Fault(
        ExitCode.UNREACHABLE,
        lambda _, port: f"http://127.0.0.1:{port}/c.n5",
        lambda _, port: [f"http://127.0.0.1:{port}/c.n5", "connection refused"],
        env=FAST,
    ),
    "unknown URL scheme": Fault(
        ExitCode.USAGE, lambda *_: "nosuch://bucket/c.n5", lambda *_: ["nosuch://bucket/c.n5"]
    ),
    "bad env variable": Fault(
        ExitCode.USAGE,
        lambda d, _: str(d / "good.n5"),
        lambda *_: ["N5ZARR_MAX_BLOCK_BYTES", "'lots'"],
        env={"N5ZARR_MAX_BLOCK_BYTES": "lots"},
    ),
    "bad usage": Fault(
        ExitCode.USAGE,
        lambda d, _: str(d / "good.n5"),
        lambda *_: ["--no-such-option"],
        extra=("--no-such-option",),
    ),
    "missing package": Fault(
        ExitCode.MISSING_PACKAGE,
        lambda *_: "s3://bucket/c.n5",
        lambda *_: ["s3://bucket/c.n5", "s3fs", "pip install 'napari-n5zarr[s3]'"],
        blocked=("s3fs",),
    ),
}


def cli(
    args: list[str], env: dict[str, str] | None = None, blocked: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own (``blocked`` modules hidden in it)."""
    prefix = ["-c", BLOCKED_RUN, ",".join(blocked)] if blocked else ["-m", "napari_n5zarr.cli"]
    return subprocess.run([sys.executable, *prefix, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, check=False)  # fmt: skip


def fault_line(run: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr (fails unless there is exactly one, progress lines aside)."""
    lines = [
        line for line in run.stderr.splitlines() if line.strip() and not line.startswith(WAITING)
    ]
    assert len(lines) == 1, f"expected one line on stderr, got {run.stderr!r}"
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """good.n5, its zip cut in half, a text file named .zip, bad.n5 (attributes.json not
    JSON), other.xml (XML, not BigDataViewer's), loop.n5 (a symbolic link to itself)."""
    d = tmp_path_factory.mktemp("faults")
    export(np.arange(4096, dtype="uint8").reshape(16, 16, 16), d / "good.n5", chunks=8)
    shutil.make_archive(str(d / "good.n5"), "zip", d / "good.n5")
    whole = (d / "good.n5.zip").read_bytes()
    (d / "cut.zip").write_bytes(whole[: len(whole) // 2])
    (d / "text.zip").write_text("these are notes, not a zip archive\n")
    (d / "bad.n5").mkdir()
    (d / "bad.n5" / "attributes.json").write_text("this is not JSON")
    (d / "other.xml").write_text(
        '<?xml version="1.0"?><project><name>not BigDataViewer</name></project>'
    )
    (d / "loop.n5").symlink_to("loop.n5")
    return d


@pytest.fixture(scope="module")
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def table(
    data: Path, closed_port: int
) -> Callable[[str], dict[str, subprocess.CompletedProcess[str]]]:
    """fault -> {command: finished process}: a row's five commands run at once, once."""
    rows: dict[str, dict[str, subprocess.CompletedProcess[str]]] = {}

    def row(name: str) -> dict[str, subprocess.CompletedProcess[str]]:
        if name not in rows:
            fault = FAULTS[name]
            src = fault.src(data, closed_port)
            dest = data / f"out-{name.replace(' ', '-')}.n5"

            def argv(command: str) -> list[str]:
                return [command, src, *([str(dest)] if command == "convert" else []), *fault.extra]

            with ThreadPoolExecutor(len(COMMANDS)) as pool:
                runs = pool.map(lambda c: cli(argv(c), fault.env, fault.blocked), COMMANDS)
                rows[name] = dict(zip(COMMANDS, runs, strict=True))
        return rows[name]

    return row


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_table(table, data: Path, closed_port: int, fault: str, command: str) -> None:
    run = table(fault)[command]
    line = fault_line(run)
    assert run.returncode == FAULTS[fault].code, (run.returncode, line)
    assert line.startswith("n5zarr: error: "), line
    for text in FAULTS[fault].named(data, closed_port):
        assert text in line, (text, line)
    assert "Traceback" not in run.stderr + run.stdout
    assert "BadZipFile" not in line, line  # exit 7's words (a bug), as it was for zips
    assert "N5ZARR_DEBUG" not in line, line
    # Nothing was created: no convert output, no (empty zip) file where none was.
    assert not (data / f"out-{fault.replace(' ', '-')}.n5").exists()
    if fault.startswith("missing "):
        assert not Path(FAULTS[fault].src(data, closed_port)).exists()


# -- missing packages beyond a URL's backend -----------------------------------------------


def test_convert_to_a_scheduler_without_distributed_is_a_missing_package(
    data: Path, closed_port: int
) -> None:
    run = cli(["convert", str(data / "good.n5"), str(data / "out-sched.n5"), "--scheduler", f"tcp://127.0.0.1:{closed_port}"],
              blocked=("distributed",))  # fmt: skip
    line = fault_line(run)
    assert run.returncode == ExitCode.MISSING_PACKAGE, (
        line
    )  # was 5 (a ValueError): invalid data it is not
    assert f"--scheduler tcp://127.0.0.1:{closed_port}" in line, line
    assert "pip install 'napari-n5zarr[distributed]'" in line, line
    assert not (data / "out-sched.n5").exists()


def test_view_without_napari_is_a_missing_package_naming_the_path(data: Path) -> None:
    run = cli(["view", str(data / "good.n5")], blocked=("napari",))
    line = fault_line(run)
    assert run.returncode == ExitCode.MISSING_PACKAGE, line
    assert str(data / "good.n5") in line, line
    assert "pip install 'napari-n5zarr[qt]'" in line, line


# -- what the table's rows changed, the successes beside them --------------------------------


BDV_XML = """<?xml version="1.0" encoding="UTF-8"?>
<SpimData version="0.2"><BasePath type="relative">.</BasePath><SequenceDescription>
<ImageLoader format="bdv.n5" version="1.0"><n5 type="relative">c.n5</n5></ImageLoader>
<ViewSetups><ViewSetup><id>0</id><name>0</name><size>8 8 8</size>
<voxelSize><unit>nm</unit><size>4 4 40</size></voxelSize></ViewSetup></ViewSetups>
</SequenceDescription></SpimData>
"""


@pytest.fixture
def bdv_xml(tmp_path: Path) -> Path:
    root = tmp_path / "c.n5"
    export(np.ones((8, 8, 8), "uint16"), root, path="setup0/timepoint0", levels=1, zarr_json=False)
    (root / "setup0" / "attributes.json").write_text(
        json.dumps({"downsamplingFactors": [[1, 1, 1]], "dataType": "uint16"})
    )
    xml = tmp_path / "dataset.xml"
    xml.write_text(BDV_XML)
    return xml


def test_a_bigdataviewer_xml_is_a_path_for_every_command(bdv_xml: Path, tmp_path: Path) -> None:
    """The README's PATH/SRC: ``info X.xml`` exited 3 ("not a directory"), convert too."""
    info = cli(["info", "--json", str(bdv_xml)])
    assert info.returncode == 0, info.stderr
    [ms] = json.loads(info.stdout)["multiscales"]
    assert ms["scale"] == [40, 4, 4]  # the XML's voxel size, z y x
    assert ms["units"] == ["nm"] * 3
    convert = cli(["convert", str(bdv_xml), str(tmp_path / "out.n5")])
    assert convert.returncode == 0, convert.stderr
    assert json.loads((tmp_path / "out.n5" / "s0" / "attributes.json").read_text())[
        "dimensions"
    ] == [8, 8, 8]
    add = cli(["add-zarr-metadata", str(bdv_xml)])
    assert add.returncode == 0, add.stderr
    assert (tmp_path / "c.n5" / "setup0" / "timepoint0" / "s0" / "zarr.json").is_file()
    refused = cli(
        ["convert", str(bdv_xml), str(tmp_path / "c.n5" / "inside.n5")]
    )  # into its own N5 folder
    assert refused.returncode == ExitCode.USAGE, refused.stderr
    assert "overlap" in fault_line(refused)


def test_add_zarr_metadata_on_a_corrupt_child_still_goes_on(data: Path, tmp_path: Path) -> None:
    """The root's document is fatal (exit 5, the table); a child's is skipped and listed (1)."""
    root = tmp_path / "c.n5"
    shutil.copytree(data / "good.n5", root)
    (root / "broken").mkdir()
    (root / "broken" / "attributes.json").write_text("{")
    run = cli(["add-zarr-metadata", str(root)])
    assert run.returncode == 1, run.stderr
    assert "cannot express broken:" in run.stdout
    assert (root / "s0" / "zarr.json").is_file()


def test_a_zip_that_is_no_archive_is_not_written_into(data: Path, tmp_path: Path) -> None:
    """add-zarr-metadata changes PATH in place: a text file named .zip stays as it was
    (zipfile's append mode would have started a new archive behind it)."""
    text = tmp_path / "notes.zip"
    shutil.copy(data / "text.zip", text)
    before = text.read_bytes()
    run = cli(["add-zarr-metadata", str(text)])
    assert run.returncode == ExitCode.INVALID_DATA, run.stderr
    assert text.read_bytes() == before


# -- convert's DEST ------------------------------------------------------------------------------


@pytest.mark.parametrize("dest", ["notes.txt", "notes.txt/out.n5", "notes.txt/a/out.n5", "notes.txt/out.zip", "text.zip",
                                  "loop.n5", "loop.n5/out.n5", "dangling.n5"])  # fmt: skip
def test_a_dest_with_a_file_in_the_way_is_refused_naming_it(
    data: Path, tmp_path: Path, dest: str
) -> None:
    """It was "[Errno 17] File exists: 'notes.txt'", "cannot lock ... (File exists)", or
    exit 7 "RuntimeError: Symlink loop" for a link to itself."""
    (tmp_path / "notes.txt").write_text("notes")
    shutil.copy(data / "text.zip", tmp_path / "text.zip")
    (tmp_path / "loop.n5").symlink_to("loop.n5")
    (tmp_path / "dangling.n5").symlink_to("nowhere.n5")
    before = sorted(p.name for p in tmp_path.iterdir())
    run = cli(["convert", str(data / "good.n5"), str(tmp_path / dest)])
    line = fault_line(run)
    assert run.returncode == ExitCode.USAGE, line
    assert "Errno" not in line, line
    assert str(tmp_path / dest.split("/")[0]) in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no lock file, nothing created
    assert (tmp_path / "notes.txt").read_text() == "notes"


def test_add_zarr_metadata_names_a_first_block_that_is_no_n5_block(
    data: Path, tmp_path: Path
) -> None:
    """It exited 5 with "unknown block mode 26465 (...)", naming no block; the dataset is
    now skipped and listed (exit 1), the rest written."""
    root = tmp_path / "c.n5"
    shutil.copytree(data / "good.n5", root)
    for name in ("zarr.json", "s0/zarr.json", "s1/zarr.json"):
        (root / name).unlink()
    (root / "s0" / "0" / "0" / "0").write_bytes(b"garbage!")
    run = cli(["add-zarr-metadata", str(root)])
    assert run.returncode == 1, run.stderr
    [line] = [line for line in run.stdout.splitlines() if line.startswith("cannot express s0:")]
    assert str(root / "s0" / "0" / "0" / "0") in line, line
    assert (root / "s1" / "zarr.json").is_file()
    assert not (root / "s0" / "zarr.json").exists()
