"""``open()`` reads of ``n5_default`` arrays equal tensorstore's and ``zarr.open_array``'s over
the same stores exactly: every compression, padded (tensorstore) and truncated (n5-java)
boundary blocks, missing blocks; writes, zip archives and pickling too. ``open()`` leaves
zarr's objects and its global config as zarr made them."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import zarr
from format_cases import COMPRESSIONS as ALL_COMPRESSIONS
from format_cases import TENSORSTORE_COMPRESSIONS as TS_COMPRESSIONS

import napari_n5zarr
from napari_n5zarr.access import base_store, wrap
from napari_n5zarr.n5.codec import N5DefaultCodec
from napari_n5zarr.n5.metadata import attributes_to_zarr

SHAPE = (45, 38, 21)  # N5 order; not a multiple of the block on any axis
BLOCK = [16, 16, 8]
SELECTIONS = [
    (slice(None),) * 3,
    (slice(3, 40), slice(5, 37), slice(2, 20)),
    (7, slice(None), slice(None)),  # an integer drops an axis
    (slice(None, None, 3), 20, slice(1, None, 2)),
    (44, 37, 20),
]


def sample(shape=SHAPE, dtype="uint16") -> np.ndarray:
    rng = np.random.default_rng(11)
    return (rng.random(shape) * 3000).astype(dtype)


def zarr_open_read(path) -> zarr.Array:
    """The same array opened by zarr's own ``open_array``."""
    return zarr.open_array(store=wrap(base_store(path)), mode="r")


@pytest.mark.parametrize("name", list(TS_COMPRESSIONS))
def test_open_reads_equal_tensorstore_exactly(tmp_path, name: str) -> None:
    ts = pytest.importorskip("tensorstore")
    data = sample()
    path = tmp_path / f"{name}.n5"
    spec = {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}
    meta = {
        "dimensions": list(SHAPE),
        "blockSize": BLOCK,
        "dataType": "uint16",
        "compression": TS_COMPRESSIONS[name],
    }
    t = ts.open({**spec, "create": True, "metadata": meta}).result()
    t[...] = data
    t[:16, :16, 8:16] = 0  # tensorstore deletes a block equal to the fill value: a missing block
    expected = ts.open(spec).result().read().result()
    arr = napari_n5zarr.open(path)
    assert (
        type(arr._async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
    )  # the fast path is tested
    assert zarr.config.get("codec_pipeline.path") == "zarr.core.codec_pipeline.BatchedCodecPipeline"
    whole = arr[...]
    assert whole.dtype == np.dtype("uint16")
    assert whole.flags.c_contiguous
    np.testing.assert_array_equal(whole, expected)
    reference = zarr_open_read(path)
    for sel in SELECTIONS:
        got = arr[sel]
        np.testing.assert_array_equal(got, expected[sel])
        np.testing.assert_array_equal(got, reference[sel])
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(arr))[SELECTIONS[1]], expected[SELECTIONS[1]]
    )


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float64"])
@pytest.mark.parametrize("name", list(ALL_COMPRESSIONS))
def test_open_reads_truncated_and_missing_blocks_like_zarr(tmp_path, name: str, dtype: str) -> None:
    """n5-java style: truncated boundary blocks, one block absent (fill value 0)."""
    data = sample(dtype=dtype)
    path = tmp_path / "java.n5"
    root = napari_n5zarr.open(path, mode="w")
    n5 = {
        "dimensions": list(SHAPE),
        "blockSize": BLOCK,
        "dataType": dtype,
        "compression": ALL_COMPRESSIONS[name],
    }
    doc = attributes_to_zarr(n5)
    codec = N5DefaultCodec.from_dict(doc["codecs"][0])
    arr = root.create_array(
        "d",
        shape=SHAPE,
        dtype=dtype,
        chunks=BLOCK,
        serializer=codec,
        compressors=None,
        chunk_key_encoding={"name": "v2", "separator": "/"},
        fill_value=0,
    )
    expected = np.zeros(SHAPE, dtype)
    grid = [range(0, s, b) for s, b in zip(SHAPE, BLOCK, strict=True)]
    for i, x in enumerate(grid[0]):
        for j, y in enumerate(grid[1]):
            for k, z in enumerate(grid[2]):
                if (i, j, k) == (1, 0, 1):
                    continue  # missing
                block = data[
                    x : x + BLOCK[0], y : y + BLOCK[1], z : z + BLOCK[2]
                ]  # truncated at the edge
                (path / "d" / str(i) / str(j)).mkdir(parents=True, exist_ok=True)
                (path / "d" / str(i) / str(j) / str(k)).write_bytes(codec.encode_block(block))
                expected[x : x + BLOCK[0], y : y + BLOCK[1], z : z + BLOCK[2]] = block
    del arr
    fast = napari_n5zarr.open(path / "d")
    reference = zarr_open_read(path / "d")
    assert (path / "d" / "zarr.json").is_file()  # a dual dataset: both documents
    assert type(fast._async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
    assert type(reference._async_array.codec_pipeline).__name__ == "BatchedCodecPipeline"
    for sel in SELECTIONS:
        np.testing.assert_array_equal(fast[sel], expected[sel])
        np.testing.assert_array_equal(fast[sel], reference[sel])
    assert fast[...].dtype == np.dtype(dtype)


def test_open_writes_padded_and_partial_blocks(tmp_path) -> None:
    data = sample()
    path = tmp_path / "w.n5"
    root = napari_n5zarr.open(path, mode="w")
    napari_n5zarr.create_dataset(
        root, "d", shape=SHAPE, dtype="uint16", chunks=BLOCK, compression={"type": "gzip"}
    )
    arr = napari_n5zarr.open(path / "d", mode="r+")
    arr[...] = data
    arr[3:9, 30:38, 4] = 5  # partial blocks: read-modify-write
    data[3:9, 30:38, 4] = 5
    np.testing.assert_array_equal(napari_n5zarr.open(path / "d")[...], data)
    np.testing.assert_array_equal(zarr_open_read(path / "d")[...], data)


def test_zip_archives_read_like_folders(tmp_path) -> None:
    data = sample()
    src = tmp_path / "z.n5"
    root = napari_n5zarr.open(src, mode="w")
    napari_n5zarr.create_dataset(
        root, "d", shape=SHAPE, dtype="uint16", chunks=BLOCK, compression={"type": "zstd"}
    )
    napari_n5zarr.open(src / "d", mode="r+")[...] = data
    import shutil

    shutil.make_archive(str(tmp_path / "z"), "zip", src)
    zipped = zarr.open_array(store=wrap(base_store(tmp_path / "z.zip")), path="d", mode="r")
    np.testing.assert_array_equal(zipped[...], data)
    np.testing.assert_array_equal(zipped[SELECTIONS[3]], data[SELECTIONS[3]])


def test_zip_archives_open_like_folders(tmp_path) -> None:
    """Arrays in a zip archive read like the same arrays in a folder (missing blocks too)."""
    import shutil

    data = sample()
    src = tmp_path / "z.n5"
    root = napari_n5zarr.open(src, mode="w")
    napari_n5zarr.create_dataset(
        root, "d", shape=SHAPE, dtype="uint16", chunks=BLOCK, compression={"type": "gzip"}
    )
    napari_n5zarr.open(src / "d", mode="r+")[3:40, :, 2:] = data[3:40, :, 2:]  # some blocks missing
    data[:3], data[:, :, :2], data[40:] = 0, 0, 0
    shutil.make_archive(str(tmp_path / "z"), "zip", src)
    for arr in (napari_n5zarr.open(tmp_path / "z.zip")["d"], napari_n5zarr.open(src / "d")):
        np.testing.assert_array_equal(arr[...], data)
        np.testing.assert_array_equal(arr[SELECTIONS[3]], data[SELECTIONS[3]])


@pytest.mark.parametrize("compressor", [None, "GzipCodec", "ZstdCodec", "BloscCodec"])
def test_plain_zarr_arrays_read_like_zarr(tmp_path, compressor) -> None:
    """A Zarr v3 array (not N5): fill value 7, edge chunks, missing chunks, every read equal to zarr's own."""
    data = sample(shape=(30, 17, 9), dtype="int32")
    path = tmp_path / "plain.zarr"
    arr = zarr.create_array(
        path,
        shape=data.shape,
        chunks=(8, 8, 4),
        dtype="int32",
        fill_value=7,
        compressors=compressor and getattr(zarr.codecs, compressor)(),
    )
    arr[4:29, :, 1:] = data[4:29, :, 1:]
    expected = zarr.open_array(path, mode="r")[...]
    assert (expected[:4] == 7).all()
    fast = napari_n5zarr.open(path)
    assert type(fast._async_array.codec_pipeline).__name__ == "FusedCodecPipeline"
    np.testing.assert_array_equal(fast[...], expected)
    for sel in [(slice(2, 30), 3, slice(None)), (slice(None, None, 4),) * 3, (29, 16, 8)]:
        np.testing.assert_array_equal(fast[sel], expected[sel])


def test_a_pipeline_the_user_configured_is_kept(tmp_path) -> None:
    from zarr.core.codec_pipeline import BatchedCodecPipeline
    from zarr.registry import register_pipeline

    class UsersPipeline(BatchedCodecPipeline):
        pass

    register_pipeline(UsersPipeline)
    path = tmp_path / "u.n5"
    root = napari_n5zarr.open(path, mode="w")
    napari_n5zarr.create_dataset(root, "d", shape=SHAPE, dtype="uint16", chunks=BLOCK)
    with zarr.config.set(
        {"codec_pipeline.path": f"{UsersPipeline.__module__}.{UsersPipeline.__qualname__}"}
    ):
        arr = napari_n5zarr.open(path / "d")
    assert type(arr._async_array.codec_pipeline) is UsersPipeline
    np.testing.assert_array_equal(arr[...], np.zeros(SHAPE, "uint16"))


def test_opening_from_many_threads_leaves_zarrs_config_alone(tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "t.n5"
    root = napari_n5zarr.open(path, mode="w")
    napari_n5zarr.create_dataset(root, "d", shape=SHAPE, dtype="uint16", chunks=BLOCK)
    before = zarr.config.get("codec_pipeline.path")
    with ThreadPoolExecutor(8) as pool:
        arrays = list(pool.map(lambda _: napari_n5zarr.open(path / "d"), range(64)))
    assert zarr.config.get("codec_pipeline.path") == before
    assert {type(a._async_array.codec_pipeline).__name__ for a in arrays} == {"FusedCodecPipeline"}


@pytest.mark.parametrize("name", ["bzip2", "xz"])
def test_blocks_decoded_on_the_pool_name_the_one_corrupt_block(tmp_path, name: str) -> None:
    """``open()[...]`` decodes a read's blocks concurrently (zarr's fused pipeline, one thread
    per core): a cut block among 27 good ones fails the read naming that block."""
    from napari_n5zarr.errors import N5BlockError

    path = tmp_path / "c.n5"
    root = napari_n5zarr.open(path, mode="w")
    napari_n5zarr.create_dataset(
        root, "d", shape=SHAPE, dtype="uint16", chunks=BLOCK, compression=ALL_COMPRESSIONS[name]
    )
    napari_n5zarr.open(path / "d", mode="r+")[...] = sample()
    np.testing.assert_array_equal(napari_n5zarr.open(path)["d"][...], sample())
    block = path / "d" / "1" / "2" / "1"
    block.write_bytes(block.read_bytes()[:-5])
    with pytest.raises(
        N5BlockError,
        match=rf"^N5 block d/1/2/1 in {re.escape(str(path))}: (corrupt|truncated) {name}",
    ):
        napari_n5zarr.open(path)["d"][...]
