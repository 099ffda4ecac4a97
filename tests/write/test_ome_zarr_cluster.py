"""convert --to ome-zarr on a real dask.distributed cluster: one task per shard (no shard is
written twice or by two tasks), progress per shard as futures finish, resume on the cluster,
and the dual export's robustness (a dead worker, no worker: one clear error, nothing left);
each shard task reads only the source blocks under its shard, once."""

from __future__ import annotations

import collections
import os
import threading
import time

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from napari_n5zarr import export
from napari_n5zarr import open as open_node
from napari_n5zarr.errors import ClusterError
from napari_n5zarr.write.convert.convert import convert

distributed = pytest.importorskip("distributed")

pytestmark = pytest.mark.filterwarnings("ignore:Object at .* is not recognized:UserWarning")


def _source(tmp_path):
    z, y, x = np.indices((48, 64, 80))
    a = ((z * 31 + y * 7 + x * 3) % 4000).astype("uint16")
    src = tmp_path / "src.n5"
    export(a, src, chunks=16, levels=2)
    return src, a


class _Writes:
    """In this process (the cluster's workers are threads here): every ``set`` of a shard key,
    and every ``array[region] = values`` with the dask task that made it."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.tasks: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def patch(self, monkeypatch) -> None:
        original_set, original_setitem = zarr.storage.LocalStore.set, zarr.Array.__setitem__

        async def counting_set(store, key, value, *args, **kwargs):
            if "/c/" in key:
                with self.lock:
                    self.keys.append(key)
            return await original_set(store, key, value, *args, **kwargs)

        def counting_setitem(array, region, values):
            task = distributed.get_worker().get_current_task()  # raises outside a worker's task
            with self.lock:
                self.tasks.append((str(task), f"{array.path} {region}"))
            return original_setitem(array, region, values)

        monkeypatch.setattr(zarr.storage.LocalStore, "set", counting_set)
        if hasattr(zarr.storage.LocalStore, "set_sync"):  # zarr's fused pipeline writes through it
            original_set_sync = zarr.storage.LocalStore.set_sync

            def counting_set_sync(store, key, value, *args, **kwargs):
                if "/c/" in key:
                    with self.lock:
                        self.keys.append(key)
                return original_set_sync(store, key, value, *args, **kwargs)

            monkeypatch.setattr(zarr.storage.LocalStore, "set_sync", counting_set_sync)
        monkeypatch.setattr(zarr.Array, "__setitem__", counting_setitem)


def test_one_task_per_shard_on_a_cluster_and_progress_per_shard(tmp_path, monkeypatch):
    src, a = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"
    seen: list[tuple[int, int]] = []
    writes = _Writes()
    with (
        distributed.LocalCluster(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):  # fmt: skip
        writes.patch(monkeypatch)
        convert(src, dest, to="ome-zarr", shards="1,2,2", scheduler=client,
                progress=lambda _n, d, t: seen.append((d, t)))  # fmt: skip
        monkeypatch.undo()
    s0 = zarr.open_array(dest / "s0", mode="r")
    s1 = zarr.open_array(dest / "s1", mode="r")
    np.testing.assert_array_equal(s0[...], a)
    np.testing.assert_array_equal(s1[...], np.asarray(open_node(src)["s1"][...]).T)
    n0 = 3 * 2 * 3  # 48/16, 64/32, 80/32 (rounded up)
    n1 = 2 * 1 * 2  # s1 24x32x40
    keys = collections.Counter(writes.keys)
    assert len(keys) == n0 + n1, sorted(keys)
    assert set(keys.values()) == {1}, [
        k for k, n in keys.items() if n > 1
    ]  # each shard stored once
    tasks = collections.Counter(task for task, _ in writes.tasks)
    regions = collections.Counter(region for _, region in writes.tasks)
    assert (
        len(writes.tasks) == len(tasks) == len(regions) == n0 + n1
    )  # a task per shard, one write each
    assert [d for d, _ in seen] == list(
        range(1, n0 + n1 + 1)
    )  # one step per shard, as futures finish
    assert {t for _, t in seen} == {n0 + n1}


class _Counted:
    """A source that appends each region read to a file (dask may pickle it: a list would not do)."""

    shape, dtype, ndim = (64, 64, 96), np.dtype("uint16"), 3

    def __init__(self, log) -> None:
        self.log = log

    def __getitem__(self, key):
        with open(self.log, "a") as f:
            f.write(" ".join(f"{s.start}:{s.stop}" for s in key) + "\n")
        return np.ones([s.stop - s.start for s in key], "uint16")


def test_each_shard_task_reads_only_its_source_blocks_once(tmp_path):
    """Memory per task is a shard and the source blocks under it: nothing reads a level whole,
    nothing is read twice (level 1 is computed from level 0 as written)."""
    log = tmp_path / "reads.txt"
    source = da.from_array(_Counted(log), chunks=16, asarray=False)
    export(source, tmp_path / "out.ome.zarr", format="ome-zarr", chunks=16, shards=2, levels=2)
    reads = [
        r for r in log.read_text().splitlines() if r != "0:0 0:0 0:0"
    ]  # dask's look at the dtype
    assert len(reads) == len(set(reads)) == 4 * 4 * 6  # every block once
    assert all(
        int(b) - int(a) == 16 for part in reads for a, b in [p.split(":") for p in part.split()]
    )
    np.testing.assert_array_equal(
        zarr.open_array(tmp_path / "out.ome.zarr" / "s1", mode="r")[...], 1
    )


@pytest.fixture(scope="module")
def client():
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                                 host="127.0.0.1") as cluster,
        distributed.Client(cluster) as c,
    ):  # fmt: skip
        yield c


def _dying(a: np.ndarray) -> da.Array:
    def work(x, block_info=None):
        if block_info[0]["chunk-location"] == (1, 0, 0):
            time.sleep(0.1)
            os._exit(1)
        time.sleep(0.3)
        return x

    return da.from_array(a, chunks=8).map_blocks(work, dtype=a.dtype)


def test_a_dead_worker_gives_one_clear_error_and_leaves_nothing(client, tmp_path):
    a = (np.arange(16**3).reshape(16, 16, 16) % 251).astype("uint8")
    dest = tmp_path / "out.ome.zarr"
    with pytest.raises(ClusterError, match="allowed-failures") as info:
        export(_dying(a), dest, format="ome-zarr", chunks=4, shards=2, scheduler=client)
    assert "\n" not in str(info.value)
    client.wait_for_workers(2, timeout=60)
    assert not dest.exists(), sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    export(
        da.from_array(a, chunks=8), dest, format="ome-zarr", chunks=4, shards=2, scheduler=client
    )
    np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], a)


def test_resume_on_the_cluster_writes_only_the_missing_shards(client, tmp_path, monkeypatch):
    src, a = _source(tmp_path)
    dest = tmp_path / "out.ome.zarr"

    def interrupt(_name, done, _total):
        if done >= 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        convert(src, dest, to="ome-zarr", shards=2, progress=interrupt, scheduler="synchronous")
    kept = {p: p.stat().st_mtime_ns for p in (dest / "s0" / "c").rglob("*") if p.is_file()}
    assert kept
    convert(src, dest, to="ome-zarr", shards=2, scheduler=client, resume=True)
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    np.testing.assert_array_equal(zarr.open_array(dest / "s0", mode="r")[...], a)


def test_no_worker_fails_after_worker_timeout(tmp_path):
    with (
        distributed.LocalCluster(processes=True, n_workers=0, dashboard_address=None, host="127.0.0.1") as cluster,
        distributed.Client(cluster) as c,
        pytest.raises(ClusterError, match=r"no worker for 0\.5 s"),
    ):  # fmt: skip
        export(da.ones((8, 8), "uint8", chunks=4), tmp_path / "out.ome.zarr", format="ome-zarr", chunks=4,
               scheduler=c, worker_timeout=0.5)  # fmt: skip
    assert not (tmp_path / "out.ome.zarr").exists()
