"""Export on a real dask.distributed cluster (processes on 127.0.0.1): a failure stops the
workers' writes before the clean-up, says its cause, and leaves nothing behind."""

from __future__ import annotations

import os
import pickle
import time

import dask
import dask.array as da
import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr.errors import ClusterError

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def client():
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            processes=True,
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=None,
            host="127.0.0.1",
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def idle(client) -> None:
    """Until every worker is back and runs nothing (a task the export gave up on included)."""
    client.wait_for_workers(2, timeout=60)
    while any(
        client.run(
            lambda dask_worker: (
                len(dask_worker.state.executing) + len(dask_worker.state.long_running)
            )
        ).values()
    ):
        time.sleep(0.05)


def failing(a: np.ndarray, how: str) -> da.Array:
    """``a`` in 8 tasks of 8^3: one fails (its worker exits, or it raises) at once; the
    others take half a second, so the surviving worker is still writing when it fails."""

    def work(x, block_info=None):
        if block_info[0]["chunk-location"] == (1, 0, 0):
            time.sleep(0.1)
            if how == "exit":
                os._exit(1)
            raise RuntimeError("a task failed on purpose")
        time.sleep(0.5)
        return x

    return da.from_array(a, chunks=8).map_blocks(work, dtype=a.dtype)


@pytest.mark.parametrize(
    ("how", "error", "cause"),
    [("exit", ClusterError, "allowed-failures"), ("raise", RuntimeError, "on purpose")],
)
def test_a_failure_on_the_cluster_leaves_nothing_and_a_rerun_works(
    client, tmp_path, how, error, cause
):
    a = (np.arange(16**3).reshape(16, 16, 16) % 251).astype("uint8")
    dest = tmp_path / "out.n5"
    with pytest.raises(error, match=cause) as info:
        export(failing(a, how), dest, chunks=4, scheduler=client)
    assert "\n" not in str(info.value)
    idle(client)  # a worker still writing would leave blocks now
    assert not dest.exists(), sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    export(da.from_array(a, chunks=8), dest, chunks=4, scheduler=client)
    from napari_n5zarr import open as open_node

    np.testing.assert_array_equal(open_node(dest)["s0"][...], a.T)


def test_no_worker_fails_after_worker_timeout(tmp_path):
    with (
        distributed.LocalCluster(
            processes=True, n_workers=0, dashboard_address=None, host="127.0.0.1"
        ) as cluster,
        distributed.Client(cluster) as c,
        pytest.raises(ClusterError, match=r"no worker for 0\.5 s"),
    ):
        export(
            da.ones((8, 8), "uint8", chunks=4),
            tmp_path / "out.n5",
            chunks=4,
            scheduler=c,
            worker_timeout=0.5,
        )
    assert not (tmp_path / "out.n5").exists()


def test_a_layer_opened_by_the_reader_exports_on_the_cluster(client, tmp_path):
    """The reader's lazy levels pickle (they held a thread lock): exported exactly."""
    from napari_n5zarr import open as open_node
    from napari_n5zarr._napari.reader import read_path

    idle(client)
    a = (np.arange(9 * 20 * 30).reshape(9, 20, 30) % 251).astype("uint16")
    export(a, tmp_path / "in.n5", chunks=8, scale=(3.0, 1.0, 1.0))
    notes: list[tuple[str, str]] = []
    (data, _meta, kind), *_ = read_path(
        tmp_path / "in.n5", lambda level, message: notes.append((level, message))
    )
    assert kind == "image"
    assert isinstance(data, list)
    assert not notes
    export(data[0], tmp_path / "one.n5", chunks=8, scheduler=client)
    export(data, tmp_path / "all.n5", chunks=8, scheduler=client)  # every level as it is
    np.testing.assert_array_equal(open_node(tmp_path / "one.n5")["s0"][...], a.T)
    written = open_node(tmp_path / "all.n5")
    for k, level in enumerate(data):
        np.testing.assert_array_equal(written[f"s{k}"][...].T, np.asarray(level))
    assert pickle.loads(pickle.dumps(data[0])).shape == a.shape
