"""Local folders: FIFOs and devices are refused (never a hang or an endless read), metadata
is size-capped and depth-limited, and every refusal names the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import zarr
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.storage import LocalStore

import napari_n5zarr
from napari_n5zarr.errors import N5MetadataError, N5StoreError
from napari_n5zarr.storage.local import SafeLocalStore

SRC = Path(__file__).parents[2] / "src"
ATTRS = {
    "dimensions": [4, 3],
    "blockSize": [2, 2],
    "dataType": "uint8",
    "compression": {"type": "raw"},
}
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def dataset(path: Path, **extra) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "attributes.json").write_text(json.dumps({**ATTRS, **extra}))
    return path


def run_child(code: str, timeout: float = 120) -> dict:
    """Run ``code`` in a fresh Python (address space capped at 2 GiB) and return the JSON it
    prints last; a hang fails the test at ``timeout`` instead of hanging the suite."""
    prelude = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    try:
        done = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                              text=True, timeout=timeout, env=env)  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"the read hangs (still running after {timeout} s)")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


OPEN_AND_READ = """
    import json, sys, napari_n5zarr
    try:
        arr = napari_n5zarr.open(sys.argv[1] if len(sys.argv) > 1 else {path!r})
        arr[...]
        print(json.dumps({{"ok": True}}))
    except Exception as e:
        print(json.dumps({{"type": type(e).__name__, "message": str(e), "mro": [c.__name__ for c in type(e).__mro__]}}))
"""


@needs_fifo
@pytest.mark.parametrize("where", ["attributes.json", "0/0"])
def test_fifo_is_refused_not_waited_on(tmp_path: Path, where: str) -> None:
    ds = dataset(tmp_path / "d.n5")
    (ds / where).parent.mkdir(parents=True, exist_ok=True)
    if where == "attributes.json":
        (ds / where).unlink()
    os.mkfifo(ds / where)
    out = run_child(OPEN_AND_READ.format(path=str(ds)))
    assert out["type"] == "N5StoreError", out
    assert "FileNotFoundError" not in out["mro"]
    assert out["message"].startswith(f"{ds / where}: a FIFO, not a regular file")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
@pytest.mark.parametrize("where", ["attributes.json", "0/0"])
def test_link_to_dev_zero_is_refused_not_read_forever(tmp_path: Path, where: str) -> None:
    ds = dataset(tmp_path / "d.n5")
    (ds / where).parent.mkdir(parents=True, exist_ok=True)
    if where == "attributes.json":
        (ds / where).unlink()
    (ds / where).symlink_to("/dev/zero")
    out = run_child(OPEN_AND_READ.format(path=str(ds)))
    assert out["type"] == "N5StoreError", out
    assert out["message"].startswith(f"{ds / where}: a character device, not a regular file")


def test_symlinks_to_regular_files_still_read(tmp_path: Path) -> None:
    real = dataset(tmp_path / "real.n5")
    (real / "0").mkdir()
    for j in range(2):
        (real / "0" / str(j)).write_bytes(
            bytes([0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2]) + bytes([j + 1] * 4)
        )
    link = tmp_path / "link.n5"
    link.mkdir()
    (link / "attributes.json").symlink_to(real / "attributes.json")
    (link / "0").symlink_to(real / "0")
    arr = napari_n5zarr.open(link)
    np.testing.assert_array_equal(arr[:2, :], [[1, 1, 2], [1, 1, 2]])


def test_oversized_attributes_json_is_refused_with_how_to_raise_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ds = dataset(tmp_path / "d.n5", note="x" * 5000)
    monkeypatch.setenv("N5ZARR_MAX_METADATA_BYTES", "4096")
    with pytest.raises(
        N5MetadataError,
        match=rf"^{ds / 'attributes.json'}: .*size limit of 4096 bytes.*N5ZARR_MAX_METADATA_BYTES",
    ):
        napari_n5zarr.open(ds)
    monkeypatch.setenv("N5ZARR_MAX_METADATA_BYTES", "8192")
    assert napari_n5zarr.open(ds).attrs["note"] == "x" * 5000


def test_default_cap_refuses_a_17_mib_attributes_json_before_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("N5ZARR_MAX_METADATA_BYTES", raising=False)
    ds = dataset(tmp_path / "d.n5")
    with open(
        ds / "attributes.json", "r+b"
    ) as f:  # sparse: valid JSON followed by 17 MiB of spaces
        f.seek(17 << 20)
        f.write(b" ")
        f.seek(0)
        f.write(json.dumps(ATTRS).encode())
    with pytest.raises(N5MetadataError, match=r"size limit of 16777216 bytes"):
        napari_n5zarr.open(ds)


def test_bad_cap_setting_is_explained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("N5ZARR_MAX_METADATA_BYTES", "lots")
    with pytest.raises(
        ValueError, match="N5ZARR_MAX_METADATA_BYTES must be a whole number of bytes"
    ):
        napari_n5zarr.open(dataset(tmp_path / "d.n5"))


def nested(depth: int) -> object:
    value: object = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@pytest.mark.parametrize("depth", [150, 1000, 100_000])
def test_deeply_nested_user_attribute_is_bad_metadata_naming_the_file(
    tmp_path: Path, depth: int
) -> None:
    ds = tmp_path / "d.n5"
    ds.mkdir()
    text = (
        '{"dimensions": [4, 3], "blockSize": [2, 2], "dataType": "uint8", "deep": '
        + "[" * depth
        + "]" * depth
        + "}"
    )
    (ds / "attributes.json").write_text(text)
    with pytest.raises(
        N5MetadataError, match=rf"^{ds / 'attributes.json'}: JSON nested deeper than 100 levels"
    ):
        napari_n5zarr.open(ds)


def test_nesting_up_to_the_limit_round_trips(tmp_path: Path) -> None:
    ds = dataset(tmp_path / "d.n5", deep=nested(98))
    assert napari_n5zarr.open(ds).attrs["deep"] == nested(98)


def test_deep_child_is_reported_and_its_siblings_listed(tmp_path: Path) -> None:
    root = tmp_path / "c.n5"
    dataset(root / "good")
    (root / "deep").mkdir(parents=True)
    (root / "deep/attributes.json").write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    (root / "attributes.json").write_text('{"n5": "4.0.0"}')
    group = napari_n5zarr.open(root)
    with pytest.warns(UserWarning, match=r"c.n5/deep/attributes.json: JSON nested deeper"):
        assert list(dict(group.members())) == ["good"]
    cli = subprocess.run([sys.executable, "-m", "napari_n5zarr.cli", "tree", str(root)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=120)  # fmt: skip
    # exit code 1: something unreadable was reported (the CLI's rule); siblings still listed
    assert cli.returncode == 1
    assert "good" in cli.stdout
    assert "Traceback" not in cli.stdout + cli.stderr
    assert "deep/attributes.json: JSON nested deeper than 100 levels" in cli.stdout + cli.stderr


def test_base_store_is_the_safe_store(tmp_path: Path) -> None:
    from napari_n5zarr.access import base_store

    assert isinstance(base_store(dataset(tmp_path / "d.n5")), SafeLocalStore)


@pytest.mark.parametrize(
    "byte_range",
    [
        None,
        RangeByteRequest(2, 7),
        RangeByteRequest(5, 100),
        OffsetByteRequest(4),
        SuffixByteRequest(3),
        SuffixByteRequest(100),
        RangeByteRequest(20, 30),
    ],
)
def test_reads_match_zarr_local_store(tmp_path: Path, byte_range) -> None:
    """Same bytes as zarr's LocalStore for every kind of request, sync and async."""
    from zarr.core.sync import sync

    (tmp_path / "a").mkdir()
    (tmp_path / "a/k").write_bytes(bytes(range(10)))
    ours, theirs = SafeLocalStore(tmp_path, read_only=True), LocalStore(tmp_path, read_only=True)
    proto = default_buffer_prototype()
    for key in ("a/k", "a/missing", "a", "missing/k", "a/k/below"):
        want = sync(theirs.get(key, proto, byte_range))
        for got in (
            sync(ours.get(key, proto, byte_range)),
            ours.get_sync(key, prototype=proto, byte_range=byte_range),
        ):
            assert (got is None) == (want is None), key
            if want is not None:
                assert got.to_bytes() == want.to_bytes(), key
    got = sync(ours.get_partial_values(proto, [("a/k", byte_range), ("a/missing", None)]))
    assert got[0].to_bytes() == sync(theirs.get("a/k", proto, byte_range)).to_bytes()
    assert got[1] is None


def test_write_through_safe_store_then_read(tmp_path: Path) -> None:
    root = napari_n5zarr.open(tmp_path / "w.n5", mode="w")
    arr = napari_n5zarr.create_dataset(root, "d", shape=(5, 4), dtype="uint16", chunks=(2, 2))
    arr[...] = np.arange(20, dtype="uint16").reshape(5, 4)
    np.testing.assert_array_equal(
        napari_n5zarr.open(tmp_path / "w.n5/d")[...], np.arange(20).reshape(5, 4)
    )
    assert isinstance(napari_n5zarr.open(tmp_path / "w.n5"), zarr.Group)


def test_store_error_is_an_oserror_not_a_missing_file() -> None:
    assert issubclass(N5StoreError, OSError)
    assert not issubclass(N5StoreError, FileNotFoundError)
