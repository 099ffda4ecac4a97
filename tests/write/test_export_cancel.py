"""Cancel stops an export promptly: counted in blocks, not seconds.

After ``cancel`` is set, no block task starts (dask's scheduler is stopped in its own loop),
at most one block per thread (those already running) is still computed, no block is written,
``export`` raises :class:`ExportCancelled` without waiting for a block that is still being
computed, and neither the partial output nor an empty folder remains.
"""

import itertools
import threading

import dask
import dask.array as da
import numpy as np
import pytest

from napari_n5zarr import export
from napari_n5zarr.write import pyramid
from napari_n5zarr.write.export import blocks
from napari_n5zarr.write.export import levels as levels
from napari_n5zarr.write.export.blocks import ExportCancelled

THREADS = 3
HANG_GUARD = 60  # seconds: only keeps a broken implementation from hanging the suite


class Counter:
    """Thread-safe counts of what happened before and after ``cancel`` was set."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.lock = threading.Lock()
        self.before: dict[str, int] = {}
        self.after: dict[str, int] = {}

    def count(self, what: str) -> bool:
        with self.lock:
            side = self.after if self.cancel.is_set() else self.before
            side[what] = side.get(what, 0) + 1
            return self.cancel.is_set()

    def set_cancel(self) -> None:
        with self.lock:
            self.cancel.set()


@pytest.fixture
def threads():
    with dask.config.set(num_workers=THREADS, scheduler="threads"):
        yield THREADS


@pytest.fixture
def writes(monkeypatch):
    """Counts block writes (keys under s<k>/) done before and after cancel."""
    state = {}
    real = blocks.store_set

    def counting(store, key, value):
        if "counter" in state and key.split("/")[0].startswith("s") and "/" in key:
            state["counter"].count(f"write {key.split('/')[0]}")
        return real(store, key, value)

    monkeypatch.setattr(blocks, "store_set", counting)
    return state


def leftovers(tmp_path):
    return sorted(p.name for p in tmp_path.iterdir())


def test_cancel_starts_no_block_and_writes_none_after(tmp_path, threads, writes):
    cancel = threading.Event()
    counter = writes["counter"] = Counter(cancel)

    def slow(block):
        counter.count("start")
        threading.Event().wait(0.005)  # a source that is slow to compute
        counter.count("computed")
        return block

    def progress(done, total):
        if done >= 20 and not cancel.is_set():
            counter.set_cancel()

    source = da.ones((64, 64, 64), dtype="uint8", chunks=8).map_blocks(slow, dtype="uint8")
    with pytest.raises(ExportCancelled):
        export(
            source, tmp_path / "x.n5", chunks=8, compression="raw", progress=progress, cancel=cancel
        )
    assert counter.before["write s0"] >= 20
    # Blocks already running when cancel came may finish computing; none starts later.
    assert counter.after.get("start", 0) <= threads
    assert counter.after.get("computed", 0) <= threads
    assert counter.after.get("write s0", 0) == 0
    assert sum(counter.before.values()) < 3 * 512  # it did not run to the end
    assert leftovers(tmp_path) == []  # no partial output, no empty folder, no lock file


def test_cancel_does_not_wait_for_a_block_still_computing(tmp_path, threads, writes):
    """A block that takes long (here: until released) does not hold the cancelled export."""
    cancel, release, settled = threading.Event(), threading.Event(), threading.Event()
    counter = writes["counter"] = Counter(cancel)
    starts, running, finished = itertools.count(), [], []

    def hangs_after_ten(block):
        counter.count("start")
        if next(starts) >= 10:
            running.append(1)
            counter.set_cancel()
            release.wait(HANG_GUARD)  # still "computing" when cancel is set
            finished.append(1)
            if len(finished) == len(running):
                settled.set()
        return block

    source = da.ones((64, 64, 64), dtype="uint8", chunks=8).map_blocks(
        hangs_after_ten, dtype="uint8"
    )
    with pytest.raises(ExportCancelled):
        export(source, tmp_path / "x.n5", chunks=8, compression="raw", cancel=cancel)
    assert running
    assert not finished  # returned while a block was still computing
    assert leftovers(tmp_path) == []
    release.set()
    assert settled.wait(HANG_GUARD)
    threading.Event().wait(0.2)  # let the released blocks reach their (refused) writes
    assert counter.after.get("write s0", 0) == 0
    assert counter.after.get("start", 0) <= threads
    assert leftovers(tmp_path) == []  # nothing written by the blocks that were still running


def test_cancel_while_the_next_level_reads_the_previous_one(tmp_path, threads, writes, monkeypatch):
    """Level 1 computed from the blocks of level 0 (as levels coarser than a region are
    when the next one does not fit in memory; regions are made too small here to hold
    any level, and memory to hold level 1): a task reads 8 blocks; cancel stops each
    running task at its next block read, and no task starts after it."""
    monkeypatch.setattr(levels, "REGION_BYTES", 0)
    monkeypatch.setattr(levels, "ACCUM_BYTES", 0)
    cancel = threading.Event()
    counter = writes["counter"] = Counter(cancel)
    real_get = blocks.store_get

    def counting_get(store, key):
        if (
            key.startswith("s0/")
            and counter.before.get("write s1", 0) >= 2
            and counter.count("read s0") is False
            and counter.before.get("read s0", 0) >= 40
        ):
            counter.set_cancel()
        return real_get(store, key)

    monkeypatch.setattr(blocks, "store_get", counting_get)
    source = da.from_array(np.arange(64**3, dtype="uint16").reshape(64, 64, 64), chunks=16)
    with pytest.raises(ExportCancelled):
        export(source, tmp_path / "x.n5", chunks=8, compression="raw", cancel=cancel)
    assert counter.before["write s0"] == 512
    assert cancel.is_set()
    assert counter.after.get("read s0", 0) <= threads  # each running task stops at its next read
    assert counter.after.get("write s1", 0) == 0
    assert leftovers(tmp_path) == []


def test_cancel_during_a_slow_pyramid_step(tmp_path, threads, writes, monkeypatch):
    """One level-1 block that takes long to downsample does not hold the cancelled export."""
    cancel, release = threading.Event(), threading.Event()
    counter = writes["counter"] = Counter(cancel)
    real = pyramid.downsample_block
    stuck = []

    def slow_downsample(block, factors, method="mean"):
        if not stuck:
            stuck.append(1)
            counter.set_cancel()
            release.wait(HANG_GUARD)
            stuck.append("ended")
        return real(block, factors, method)

    monkeypatch.setattr(pyramid, "downsample_block", slow_downsample)
    source = da.from_array(np.ones((32, 32, 32), "uint8"), chunks=8)
    with pytest.raises(ExportCancelled):
        export(source, tmp_path / "x.n5", chunks=8, compression="raw", cancel=cancel)
    assert stuck == [1]  # returned while the block was still being downsampled
    release.set()
    assert counter.after.get("write s1", 0) == 0
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("accum_bytes", [0, 64 << 20], ids=["after-level-0", "kept-in-memory"])
def test_cancel_during_the_in_memory_pyramid(tmp_path, writes, monkeypatch, accum_bytes):
    """numpy input, each level downsampled from the one before (regions too small to
    hold a level here; level 1 computed after level 0, or kept in memory and filled while
    level 0 is written): cancellable while a level is still being computed."""
    monkeypatch.setattr(levels, "REGION_BYTES", 0)
    monkeypatch.setattr(levels, "ACCUM_BYTES", accum_bytes)
    cancel, release = threading.Event(), threading.Event()
    counter = writes["counter"] = Counter(cancel)
    real = pyramid.downsample_block

    ended = []

    def slow_downsample(block, factors, method="mean"):
        counter.set_cancel()
        release.wait(HANG_GUARD)
        ended.append(1)
        return real(block, factors, method)

    monkeypatch.setattr(pyramid, "downsample_block", slow_downsample)
    with pytest.raises(ExportCancelled):
        export(
            np.ones((32, 32, 32), "uint8"),
            tmp_path / "x.n5",
            chunks=8,
            compression="raw",
            cancel=cancel,
        )
    assert not ended  # returned while level 1 was still being computed
    release.set()
    if accum_bytes:  # level 1 is computed from each level-0 region once it is written
        assert (
            1 <= counter.before["write s0"] < 64
        )  # stopped inside level 0 (regions in flight finish)
    else:
        assert counter.before["write s0"] == 64
    assert counter.after.get("write s0", 0) == 0
    assert counter.after.get("write s1", 0) == 0
    assert leftovers(tmp_path) == []


def test_uncancelled_export_is_unchanged(tmp_path, threads):
    """The cancellable path writes exactly the same pyramid."""
    from napari_n5zarr import open as n5open

    data = np.arange(40 * 24 * 16, dtype="uint16").reshape(40, 24, 16)
    export(da.from_array(data, chunks=8), tmp_path / "a.n5", chunks=8, cancel=threading.Event())
    export(data, tmp_path / "b.n5", chunks=8, cancel=threading.Event())
    a, b = n5open(tmp_path / "a.n5"), n5open(tmp_path / "b.n5")
    names = sorted(name for name, _ in a.arrays())
    assert names == sorted(name for name, _ in b.arrays())
    assert len(names) >= 2
    np.testing.assert_array_equal(np.asarray(a["s0"][...]).T, data)  # N5 order in zarr
    for name in names:
        np.testing.assert_array_equal(a[name][...], b[name][...])


@pytest.mark.napari
def test_widget_cancel_does_not_wait_for_a_block_still_computing(
    make_napari_viewer, qtbot, tmp_path
):
    """Cancel in the dock widget: the export ends ('cancelled', no folder left) while a
    block of the layer is still being computed."""
    viewer = make_napari_viewer()
    _, w = viewer.window.add_plugin_dock_widget("napari-n5zarr", "Export as N5 + Zarr v3")
    exporting, release = threading.Event(), threading.Event()
    running, finished = [], []

    def hangs_in_the_export(block):
        if exporting.is_set() and threading.current_thread() is not threading.main_thread():
            running.append(1)
            release.wait(
                2 * HANG_GUARD
            )  # outlasts the waits below; napari's own reads (main thread) are not held
            finished.append(1)
        return block + 1

    data = da.zeros((32, 64, 64), dtype="uint16", chunks=16).map_blocks(
        hangs_in_the_export, dtype="uint16"
    )
    viewer.add_image(data, name="slow")
    w.destination.value = tmp_path / "slow.n5"
    w.block_size.value = 16
    exporting.set()
    try:
        w.start()
        qtbot.waitUntil(lambda: bool(running), timeout=HANG_GUARD * 1000)
        w.cancel_button.clicked.emit()
        qtbot.waitUntil(lambda: w.worker is None, timeout=HANG_GUARD * 1000)
        assert w.status.value == "cancelled"
        assert len(finished) < len(running)  # a block was still computing when it ended
        assert not (tmp_path / "slow.n5").exists()
        assert leftovers(tmp_path) == []
    finally:
        release.set()
