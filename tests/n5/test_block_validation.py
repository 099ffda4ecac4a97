"""Block reads never crash, never return wrong data, never inflate past the block, and every
error names the container and the block key (issue 7, read side of blocks)."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import textwrap
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import zarr
from format_cases import COMPRESSIONS

import napari_n5zarr
from napari_n5zarr.errors import N5BlockError
from napari_n5zarr.n5 import bounded, lz4block
from napari_n5zarr.n5.block_format import FRAMING_SLACK, encode_header
from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.n5.metadata import N5DatasetMetadata, attributes_to_zarr

SRC = str(Path(__file__).parents[2] / "src")


def codec_for(attrs: dict) -> N5DefaultCodec:
    return N5DatasetMetadata.from_json(attrs).codec()


def make_dataset(
    root: Path, dims: list[int], block: list[int], dtype: str, compression: dict
) -> tuple[Path, N5DefaultCodec]:
    root.mkdir(parents=True, exist_ok=True)
    attrs = {"dimensions": dims, "blockSize": block, "dataType": dtype, "compression": compression}
    (root / "attributes.json").write_text(json.dumps(attrs))
    return root, codec_for(attrs)


def put(root: Path, key: str, data: bytes) -> None:
    (root / key).parent.mkdir(parents=True, exist_ok=True)
    (root / key).write_bytes(data)


def smooth(shape: tuple[int, ...], dtype: str = "uint16") -> np.ndarray:
    """Compressible data (so blosc really compresses instead of storing a copy)."""
    grid = np.indices(shape).sum(axis=0)
    return ((grid * 7) % 251).astype(dtype)


def named(ds: Path, key: str) -> str:
    return rf"^N5 block {re.escape(key)} in {re.escape(str(ds))}: "


# -- blosc: the header is checked before c-blosc trusts it ------------------------------
SEGV_CHILD = textwrap.dedent(
    """
    import json, sys, pathlib, numpy as np
    import napari_n5zarr
    from napari_n5zarr.n5.metadata import N5DatasetMetadata
    d = pathlib.Path(sys.argv[1]); cname = sys.argv[2]
    attrs = {"dimensions": [64, 64, 64], "blockSize": [64, 64, 64], "dataType": "uint16",
             "compression": {"type": "blosc", "cname": cname, "clevel": 5, "shuffle": 1, "blocksize": 0}}
    d.mkdir(); (d / "attributes.json").write_text(json.dumps(attrs))
    codec = N5DatasetMetadata.from_json(attrs).codec()
    data = (np.indices((64, 64, 64)).sum(axis=0) * 7 % 4093).astype("uint16")
    block = codec.encode_block(data)
    (d / "0/0").mkdir(parents=True)
    arr = napari_n5zarr.open(d)
    for cut in (min(4096, len(block) // 4), 1, 7, 100, len(block) // 2, len(block) - 12 - 17, len(block) - 12 - 16):
        (d / "0/0/0").write_bytes(block[:-cut])
        try:
            arr[...]
            print("READ WITHOUT ERROR")
        except Exception as e:
            print(type(e).__name__, e)
    """
)


@pytest.mark.parametrize("cname", ["lz4", "blosclz", "zstd"])
def test_truncated_blosc_block_is_an_error_not_a_crash(tmp_path: Path, cname: str) -> None:
    """Before the fix this child died with SIGSEGV (6 of 6 runs) or read garbage."""
    ds = tmp_path / "x.n5"
    proc = subprocess.run(
        [sys.executable, "-c", SEGV_CHILD, str(ds), cname],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    lines = proc.stdout.splitlines()
    assert len(lines) == 7, proc.stdout
    for line in lines:  # the last cut leaves 16 bytes: a header alone, its cbytes still checked
        assert re.match(
            rf"N5BlockError N5 block 0/0/0 in {re.escape(str(ds))}: blosc (header declares \d+ compressed bytes, block has \d+|payload of \d+ bytes is shorter)",
            line,
        ), line


def test_every_truncation_of_a_small_blosc_block_is_refused(tmp_path: Path) -> None:
    ds, codec = make_dataset(tmp_path / "b.n5", [20, 7], [20, 7], "uint16", COMPRESSIONS["blosc"])
    block = codec.encode_block(smooth((20, 7)))
    arr = napari_n5zarr.open(ds)
    for n in range(len(block)):
        put(ds, "0/0", block[:n])
        with pytest.raises(N5BlockError, match=named(ds, "0/0")):
            arr[...]
    put(ds, "0/0", block)
    np.testing.assert_array_equal(arr[...], smooth((20, 7)))


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "match"),
    [
        (0, "B", 3, "format version 3"),
        (4, "<I", 1 << 30, r"declares 1073741824 decompressed bytes, the header shape needs 280"),
        (3, "B", 0, "typesize 0"),
        (8, "<I", 0, "blocksize 0"),
        (16, "<I", 1 << 20, "block table points outside"),
    ],
)
def test_forged_blosc_headers_refused(offset: int, fmt: str, value: int, match: str) -> None:
    codec = codec_for(
        {
            "dimensions": [20, 7],
            "blockSize": [20, 7],
            "dataType": "uint16",
            "compression": COMPRESSIONS["blosc"],
        }
    )
    payload = bytearray(codec.encode_block(smooth((20, 7)))[12:])
    assert not payload[2] & bounded.BLOSC_MEMCPYED  # really compressed: the block table exists
    struct.pack_into(fmt, payload, offset, value)
    with pytest.raises(N5BlockError, match=match):
        bounded.blosc_decompress(bytes(payload), 280)


# -- exact sizes for every compression ---------------------------------------------------
@pytest.mark.parametrize("name", list(COMPRESSIONS))
@pytest.mark.parametrize("delta", [-1, +1])
def test_payload_for_another_element_count_is_refused(
    tmp_path: Path, name: str, delta: int
) -> None:
    """The header says [16, 4]; the payload holds 16*4 +- 1 elements: corrupt, never cropped/padded."""
    ds, codec = make_dataset(tmp_path / "d.n5", [16, 4], [16, 4], "uint16", COMPRESSIONS[name])
    data = np.arange(16 * 4 + delta, dtype="uint16")
    payload = codec.encode_block(data)[8:]  # a 1-D block's payload: 4 + 4 header bytes
    put(ds, "0/0", encode_header((16, 4)) + payload)
    with pytest.raises(
        N5BlockError, match=named(ds, "0/0") + r".*(needs 128|more than the 128|declares)"
    ):
        napari_n5zarr.open(ds)[...]


@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_exact_blocks_still_read(tmp_path: Path, name: str) -> None:
    ds, codec = make_dataset(tmp_path / "d.n5", [16, 4], [16, 4], "uint16", COMPRESSIONS[name])
    data = smooth((16, 4))
    put(ds, "0/0", codec.encode_block(data))
    np.testing.assert_array_equal(napari_n5zarr.open(ds)[...], data)


def test_multi_member_gzip_reads_and_forged_isize_is_bounded() -> None:
    import gzip

    data = bytes(range(256)) * 4
    two = gzip.compress(data[:300]) + gzip.compress(data[300:])
    assert bytes(bounded.gzip_decompress(two, 1024)) == data
    bomb = bytearray(gzip.compress(bytes(1 << 20)))
    bomb[-4:] = struct.pack("<I", 1024)  # ISIZE forged to the bound: libdeflate must not be trusted
    with pytest.raises(N5BlockError, match="more than the 1024 bytes"):
        bounded.gzip_decompress(bytes(bomb), 1024)


def test_lz4block_stream_declaring_more_than_the_block_is_refused_before_allocation() -> None:
    piece = struct.pack("<8sBiii", lz4block.MAGIC, 0x20, 10, 1 << 30, 0) + bytes(10)
    with pytest.raises(N5BlockError, match="declares more than the 64 bytes"):
        lz4block.decompress(piece, max_size=64, exact=True)
    with pytest.raises(N5BlockError, match="no end mark"):
        lz4block.decompress(lz4block.compress(bytes(64))[:-21], max_size=64, exact=True)
    with pytest.raises(N5BlockError, match="stray bytes"):
        lz4block.decompress(lz4block.compress(bytes(64)) + b"x", max_size=64, exact=True)


def test_zstd_frame_declaring_another_size_is_refused_before_decoding() -> None:
    import zstandard

    frame = zstandard.ZstdCompressor().compress(bytes(1 << 20))
    with pytest.raises(
        N5BlockError, match="zstd frame declares 1048576 bytes, the header shape needs 4096"
    ):
        bounded.zstd_decompress(frame, 4096)
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(1 << 20))
    with pytest.raises(N5BlockError, match="corrupt zstd"):
        bounded.zstd_decompress(unsized, 4096)
    assert len(bounded.zstd_decompress(unsized, 1 << 20)) == 1 << 20


# -- header shapes: only edge blocks may be truncated, and only to the array's extent ----
@pytest.mark.parametrize("name", list(COMPRESSIONS))
def test_interior_block_with_a_short_header_is_refused(tmp_path: Path, name: str) -> None:
    """The issue's case: an interior raw block whose dims[0] says 15 instead of 16 came back
    scrambled; now it is refused, for every compression."""
    ds, codec = make_dataset(tmp_path / "d.n5", [40, 8], [16, 4], "uint16", COMPRESSIONS[name])
    put(ds, "0/0", codec.encode_block(smooth((15, 4))))
    with pytest.raises(
        N5BlockError,
        match=named(ds, "0/0")
        + r"header shape \[15, 4\] in an interior block; it must be the block size \[16, 4\]",
    ):
        napari_n5zarr.open(ds)[...]


def test_edge_blocks_truncated_or_padded_read_exactly_and_other_shapes_are_refused(
    tmp_path: Path,
) -> None:
    ds, codec = make_dataset(tmp_path / "d.n5", [40, 10], [16, 4], "uint16", COMPRESSIONS["gzip"])
    full = smooth((40, 10))
    put(ds, "2/2", codec.encode_block(full[32:40, 8:10]))  # truncated on both axes (n5-java)
    padded = np.zeros((16, 4), "uint16")
    padded[:8, :2] = full[32:40, 8:10]
    put(
        ds, "2/1", codec.encode_block(np.pad(full[32:40, 4:8], [(0, 8), (0, 0)]))
    )  # padded (tensorstore)
    arr = napari_n5zarr.open(ds)
    np.testing.assert_array_equal(arr[32:40, 4:10], full[32:40, 4:10])
    for shape in [
        (8, 4),
        (16, 2),
        (7, 2),
        (8, 1),
        (16, 3),
    ]:  # mixed per axis, or short of the extent
        put(ds, "2/2", codec.encode_block(np.ones(shape, "uint16")))
        with pytest.raises(
            N5BlockError,
            match=named(ds, "2/2")
            + rf"header shape \[{shape[0]}, {shape[1]}\] is neither the block size \[16, 4\] nor the array's extent in this edge block \[8, 2\]",
        ):
            arr[32:40, 8:10]


def test_codec_without_our_store_refuses_headers_larger_than_the_chunk(tmp_path: Path) -> None:
    """Zarr-only n5_default arrays: no key, the codec still checks what it can."""
    ds, codec = make_dataset(tmp_path / "d", [16, 4], [16, 4], "uint16", COMPRESSIONS["raw"])
    (ds / "zarr.json").write_text(
        json.dumps(attributes_to_zarr(json.loads((ds / "attributes.json").read_text())))
    )
    (ds / "attributes.json").unlink()
    put(ds, "0/0", codec.encode_block(smooth((17, 4))))
    with pytest.raises(
        N5BlockError, match=r"^N5 block: header shape \[17, 4\] exceeds the block size \[16, 4\]"
    ):
        zarr.open_array(ds, mode="r")[...]


# -- every error names the container and the key, over every store and pipeline ---------
def corrupt_container(root: Path) -> Path:
    ds, codec = make_dataset(root / "s0", [32, 8], [16, 4], "uint16", COMPRESSIONS["zstd"])
    put(ds, "1/1", codec.encode_block(smooth((16, 4)))[:-3])
    return root


def test_error_names_local_container_and_key_with_both_pipelines(tmp_path: Path) -> None:
    root = corrupt_container(tmp_path / "x.n5")
    pattern = rf"^N5 block s0/1/1 in {re.escape(str(root))}: corrupt zstd payload"
    with pytest.raises(N5BlockError, match=pattern):
        napari_n5zarr.open(root)["s0"][...]
    with (
        zarr.config.set({"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}),
        pytest.raises(N5BlockError, match=pattern),
    ):
        napari_n5zarr.open(root)["s0"][...]


def test_error_names_zip_and_fsspec_containers(tmp_path: Path) -> None:
    from zarr.storage import FsspecStore, ZipStore

    from napari_n5zarr import ImplicitGroupStore, N5DefaultStore

    root = corrupt_container(tmp_path / "x.n5")
    archive = tmp_path / "x.n5.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in root.rglob("*"):
            if f.is_file():
                zf.write(f, f.relative_to(root).as_posix())
    store = ImplicitGroupStore(N5DefaultStore(ZipStore(archive, mode="r")))
    with pytest.raises(N5BlockError, match=rf"^N5 block s0/1/1 in {re.escape(str(archive))}: "):
        zarr.open_array(store, path="s0", mode="r")[...]
    fs_store = FsspecStore.from_url(f"file://{root}", read_only=True)
    store = ImplicitGroupStore(N5DefaultStore(fs_store))
    with pytest.raises(N5BlockError, match=rf"^N5 block s0/1/1 in file://{re.escape(str(root))}: "):
        zarr.open_array(store, path="s0", mode="r")[...]


def test_decode_block_names_the_block_when_told(tmp_path: Path) -> None:
    codec = codec_for(
        {"dimensions": [4], "blockSize": [4], "dataType": "uint8", "compression": {"type": "gzip"}}
    )
    with pytest.raises(N5BlockError, match=r"^N5 block 3 in /x.n5: (corrupt|truncated) gzip"):
        codec.decode_block(
            encode_header((4,)) + zlib.compress(b"ab")[:3], "uint8", 1, where="N5 block 3 in /x.n5"
        )


def test_error_through_dask_is_the_named_block_error(tmp_path: Path) -> None:
    """napari reads through dask: the user sees the same named error, not a wrapper."""
    import dask.array as da

    root = corrupt_container(tmp_path / "x.n5")
    lazy = da.from_zarr(napari_n5zarr.open(root)["s0"], chunks=(16, 4))
    assert lazy[:16, :4].compute().shape == (16, 4)  # healthy blocks still read
    with pytest.raises(
        N5BlockError, match=rf"^N5 block s0/1/1 in {re.escape(str(root))}: corrupt zstd payload"
    ):
        lazy.compute()


def test_container_descriptions(tmp_path: Path) -> None:
    from zarr.storage import FsspecStore, LocalStore, MemoryStore

    from napari_n5zarr import ImplicitGroupStore, N5DefaultStore
    from napari_n5zarr.n5.stores import describe_store

    assert describe_store(ImplicitGroupStore(N5DefaultStore(LocalStore(tmp_path)))) == str(tmp_path)
    assert describe_store(N5DefaultStore(MemoryStore())) == "memory store"
    http = FsspecStore.from_url("http://127.0.0.1:9/data/x.n5", read_only=True)
    assert N5DefaultStore(http).container == "http://127.0.0.1:9/data/x.n5"


# -- block files that are not files, or far too large -----------------------------------
FIFO_CHILD = textwrap.dedent(
    """
    import sys
    import napari_n5zarr
    try:
        napari_n5zarr.open(sys.argv[1])[...]
        print("READ WITHOUT ERROR")
    except Exception as e:
        print(type(e).__name__, e)
    """
)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_block_that_is_not_a_regular_file_is_refused_without_reading(
    tmp_path: Path, kind: str
) -> None:
    """A FIFO would hang the read forever, /dev/zero would read until memory runs out: in a
    child with a timeout, so a regression fails instead of hanging the suite."""
    import os

    ds, _ = make_dataset(tmp_path / "d.n5", [16, 4], [16, 4], "uint16", COMPRESSIONS["gzip"])
    (ds / "0").mkdir()
    if kind == "fifo":
        os.mkfifo(ds / "0/0")
    else:
        os.symlink("/dev/zero", ds / "0/0")
    proc = subprocess.run(
        [sys.executable, "-c", FIFO_CHILD, str(ds)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    # refused by the local store (one home for non-regular files), naming the file
    assert proc.stdout.startswith(f"N5StoreError {ds / '0/0'}: "), proc.stdout + proc.stderr[-2000:]
    assert "not a regular file" in proc.stdout


def test_block_file_larger_than_any_encoding_is_refused_before_reading(tmp_path: Path) -> None:
    ds, codec = make_dataset(
        tmp_path / "d.n5", [64, 4], [64, 4], "uint16", {"type": "lz4", "blockSize": 64}
    )
    noise = np.random.default_rng(0).integers(0, 65535, size=(64, 4), dtype="uint16")
    block = codec.encode_block(noise)
    assert len(block) > 1.3 * noise.nbytes  # lz4 pieces of 64 bytes: the worst legal expansion
    put(ds, "0/0", block)
    arr = napari_n5zarr.open(ds)
    np.testing.assert_array_equal(arr[...], noise)
    put(ds, "0/0", block + bytes(2 * noise.nbytes + 8 + 65536))
    # lz4-java's worst case: 512 bytes in 64-byte pieces, 21 bytes before each and an end mark
    limit = 12 + 512 + 21 * 9 + FRAMING_SLACK
    put(ds, "0/0", block + bytes(limit - len(block)))
    with pytest.raises(
        N5BlockError, match="stray bytes after the LZ4Block end mark"
    ):  # within the limit: read and decoded
        arr[...]
    put(ds, "0/0", block + bytes(limit - len(block) + 1))
    with pytest.raises(N5BlockError, match=re.escape(f"{ds / '0/0'}: stored block is over its dataset's limit of {limit} bytes "
                                                     "(a [64, 4] block of 2-byte elements, lz4's worst case and the header)")):  # fmt: skip
        arr[...]
