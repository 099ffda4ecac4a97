"""Speed of napari-n5zarr against tensorstore where a person waits: every row of issue 11.

    python benchmarks/speed.py [--quick] [--repeat N] [--chart PATH] [--workdir DIR]
                               [--rows a,b,c,d,e,f,g] [--rss [GIB]] [--selftest]

All files are written by tensorstore (an independent writer) into a temporary folder (or
``--workdir``), then read by both libraries in the same run, OS cache warm; each figure is the
best of ``--repeat`` runs. "ratio" is tensorstore's time / ours: above 1 we are faster.

Rows (letters for ``--rows``):
  a  a real napari window under Xvfb (fresh process per run, napari imported before the clock):
     open + first frame, a far jump of the z slider, scrolling 64 planes (``napari_window.py``)
  b  one z-plane of level 0 from the reader's dask array, outside napari
  c  whole-array read ``napari_n5zarr.open(path)[...]`` per compression
  d  the reader's dask level (``read_path``) computed whole, per compression
  e  ``export`` level 0 per compression vs a tensorstore write; whole pyramid / level 0
  f  one plane over HTTP on 127.0.0.1 with 20 ms added per request
  g  the decompression limit: blocks decoded in a tight loop on 2 threads (printed with b, c, d)
``--rss`` exports a lazy dask array (8 GiB unless given) in a subprocess and prints its peak RSS.

Only public entry points are used (``open``, ``export``, ``_napari.reader.read_path``,
``viewer.open(..., plugin="napari-n5zarr")``) so the script works while internals change.
Ours never reads the same blocks twice within one measurement series: each repeat reads a
fresh copy of the files, or planes from block slabs not visited before, so that a decoded-block
cache cannot make a repeat look faster than a first visit.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
BLOCK = 64
COMPRESSIONS: dict[str, dict[str, Any]] = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip", "level": 6},
    "zstd": {"type": "zstd", "level": 3},
    "blosc": {
        "type": "blosc",
        "cname": "lz4",
        "clevel": 5,
        "shuffle": 2,
        "blocksize": 0,
    },
}
HTTP_DELAY_S = 0.020


@dataclass
class Row:
    """One printed line: ours vs tensorstore, in seconds (or another unit for special rows)."""

    key: str
    what: str
    ours: float
    ts: float | None = None
    goal: str = ""
    limit: float | None = None  # the decompression limit for the same work, seconds
    unit: str = "ms"
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.ts is None or not self.ours else self.ts / self.ours


@dataclass
class Config:
    pyramid: int = 512
    array: int = 256
    repeat: int = 3
    workdir: Path = field(default_factory=Path)


# -- data --------------------------------------------------------------------------------------


def sample(size: int) -> np.ndarray:
    """A smooth field plus noise (gzip ratio ~1.5), uint16, N5 order (x, y, z)."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 4 * np.pi, size, dtype=np.float32)
    field_ = 2000 + 1000 * (
        np.sin(x)[:, None, None] * np.cos(x)[None, :, None] + np.sin(x / 2)[None, None, :]
    )
    out = field_.astype(np.uint16)
    out += rng.integers(0, 100, size=out.shape, dtype=np.uint16)
    return out


def ts_spec(path: Path | str) -> dict[str, Any]:
    return {"driver": "n5", "kvstore": {"driver": "file", "path": str(path)}}


def ts_write(path: Path, data: np.ndarray, compression: dict[str, Any]) -> None:
    import tensorstore as ts

    meta = {
        "dimensions": list(data.shape),
        "blockSize": [BLOCK] * data.ndim,
        "dataType": str(data.dtype),
        "compression": compression,
    }
    t = ts.open(
        {**ts_spec(path), "create": True, "delete_existing": True, "metadata": meta}
    ).result()
    t.write(data).result()


def add_attributes(path: Path, extra: dict[str, Any]) -> None:
    f = path / "attributes.json"
    doc = json.loads(f.read_text()) if f.exists() else {}
    f.write_text(json.dumps({**doc, **extra}))


def write_pyramid(root: Path, size: int) -> int:
    """An N5 Viewer pyramid (s0, s1, ... down to one block), gzip, written by tensorstore."""
    data = sample(size)
    root.mkdir(parents=True, exist_ok=True)
    add_attributes(
        root,
        {
            "n5": "4.0.0",
            "pixelResolution": {"unit": "um", "dimensions": [1.0, 1.0, 1.0]},
        },
    )
    k = 0
    while True:
        ts_write(root / f"s{k}", data, COMPRESSIONS["gzip"])
        add_attributes(root / f"s{k}", {"downsamplingFactors": [2**k] * 3})
        k += 1
        if max(data.shape) <= BLOCK:
            return k
        data = data[::2, ::2, ::2].copy()


def fresh_copy(src: Path, workdir: Path) -> Path:
    """A copy under a new name: ours cannot serve it from a cache of an earlier read."""
    dst = Path(tempfile.mkdtemp(dir=workdir, prefix="copy-")) / src.name
    shutil.copytree(src, dst)
    return dst


# -- timing helpers --------------------------------------------------------------------------


def best_of(fn: Callable[[int], Any], repeat: int) -> float:
    """min over ``repeat`` calls of ``fn(i)``; ``fn`` gets the repeat index."""
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return min(times)


def best_of_each(fns: dict[str, Callable[[int], Any]], repeat: int) -> dict[str, float]:
    """Like :func:`best_of` for several contenders, interleaved (A, B, A, B, ...): on a shared,
    loaded machine each one sees the same load, so the ratios hold even when times do not."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - t0)
    return {name: min(t) for name, t in times.items()}


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fresh_planes(nz: int, repeat: int) -> list[int]:
    """z of planes in block slabs not next to one another (a prefetch of neighbours cannot help).
    With more repeats than such slabs a slab comes again: the rows clear our block cache
    before each read (:func:`clear_block_cache`), or a repeat would time a cache hit."""
    slabs = list(range(0, nz // BLOCK, 2)) or [0]
    return [BLOCK * slabs[i % len(slabs)] + BLOCK // 2 for i in range(repeat)]


def level0(layers: list[Any]) -> Any:
    data = layers[0][0]
    return data[0] if isinstance(data, list | tuple) else data


# -- the decompression limit -----------------------------------------------------------------


def block_decoder(path: Path, swap: bool = True) -> Callable[[bytes], np.ndarray]:
    """bytes of one N5 block -> array: N5DefaultCodec.decode_block, + the byte swap to a
    native array when ``swap`` (a whole-array read must make one; a plane needs only the
    decompressed block, its plane is 1/64 of it)."""
    import napari_n5zarr

    arr = napari_n5zarr.open(path)
    dtype = arr.dtype
    codec = next((c for c in arr.metadata.codecs if hasattr(c, "decode_block")), None)
    if codec is None:  # the codec's API moved: decode with the libraries directly
        return plain_block_decoder(path, swap)

    def decode(raw: bytes) -> np.ndarray:
        block = codec.decode_block(raw, dtype)
        return block.astype(dtype.newbyteorder("="), copy=True) if swap else block

    return decode


def plain_block_decoder(path: Path, swap: bool = True) -> Callable[[bytes], np.ndarray]:
    """The same without our codec: header, then zlib / zstandard / blosc (numcodecs), byte swap."""
    attrs = json.loads((path / "attributes.json").read_text())
    kind = attrs["compression"]["type"]
    dtype = np.dtype(attrs["dataType"]).newbyteorder(">")

    def decompress(payload: bytes) -> bytes:
        if kind == "gzip":
            import zlib

            return zlib.decompress(payload, 15 if attrs["compression"].get("useZlib") else 31)
        if kind == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(payload)
        if kind == "blosc":
            from numcodecs import blosc

            return blosc.decompress(payload)
        return payload

    def decode(raw: bytes) -> np.ndarray:
        ndim = int.from_bytes(raw[2:4], "big")
        shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
        data = np.frombuffer(decompress(raw[4 + 4 * ndim :]), dtype=dtype)
        block = data.reshape(shape[::-1]).T
        return block.astype(dtype.newbyteorder("=")) if swap else block

    return decode


def decode_job(
    path: Path,
    keys: list[str],
    pool: ThreadPoolExecutor,
    extra: int = 4,
    swap: bool = True,
) -> Callable[[int], Any]:
    """A timed job: decode these blocks (already read into memory) on the pool's threads.

    Each call decodes them ``extra`` times; ``job.floor[0]`` keeps the fastest. The limit is a
    floor, and a few more tries (cheap) keep a busy machine's hiccups out of it.
    """
    decode = block_decoder(path, swap)
    blobs = [(path / k).read_bytes() for k in keys]
    decode(blobs[0])  # first-call setup (imports, tables) is not decoding
    floor = [float("inf")]

    def job(_i: int) -> None:
        for _ in range(extra):
            t0 = time.perf_counter()
            list(pool.map(decode, blobs))
            floor[0] = min(floor[0], time.perf_counter() - t0)

    job.floor = floor  # type: ignore[attr-defined]
    return job


def block_keys(shape: tuple[int, ...], z: int | None = None) -> list[str]:
    """N5 block paths x/y/z; only the slab holding plane ``z`` when given."""
    nb = [-(-s // BLOCK) for s in shape]
    zs = range(nb[2]) if z is None else [z // BLOCK]
    return [f"{i}/{j}/{k}" for i in range(nb[0]) for j in range(nb[1]) for k in zs]


# -- HTTP server with latency ----------------------------------------------------------------


class LatencyHandler(http.server.SimpleHTTPRequestHandler):
    """Files under ``directory``, each request answered after :data:`HTTP_DELAY_S`.

    Models an object store (S3, GCS) seen from a client: a fixed latency per request,
    requests on separate connections served in parallel, keep-alive connections (HTTP/1.1)
    and bodies that cost the server next to nothing (``sendfile``: the kernel copies the
    file to the socket). Python's stock handler (HTTP/1.0, a new connection per request, the
    body copied in 64 KiB pieces under the GIL) took as much CPU per plane as decoding it,
    on the same cores as the clients being timed: the row measured the server, not the
    clients' concurrency against latency.
    """

    protocol_version = "HTTP/1.1"  # keep-alive (the stock handler sends Content-Length)
    disable_nagle_algorithm = True  # headers and body go out without waiting for an ACK
    delay = HTTP_DELAY_S

    def do_GET(self) -> None:
        time.sleep(self.delay)
        super().do_GET()

    def do_HEAD(self) -> None:
        time.sleep(self.delay)
        super().do_HEAD()

    def copyfile(self, source: Any, outputfile: Any) -> None:
        self.connection.sendfile(source)  # falls back to send() for listings (no fileno)

    def log_message(self, *args: Any) -> None:
        pass


class LatencyServer(http.server.ThreadingHTTPServer):
    """A thread per connection: every request in flight is served at once."""

    daemon_threads = True
    request_queue_size = 256


def serve_forever(root: str) -> None:
    """The server process's body: serve ``root`` on 127.0.0.1, print the port, run until killed."""
    server = LatencyServer(("127.0.0.1", 0), partial(LatencyHandler, directory=root))
    print(server.server_address[1], flush=True)
    server.serve_forever()


def serve(root: Path) -> tuple[subprocess.Popen[str], int]:
    """Start the latency server in its own process (in this one, its Python threads would take
    the GIL from the readers being timed) -> (process, port)."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import speed; speed.serve_forever({str(root)!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError(f"the HTTP server process did not start: {line!r}")
    return proc, int(line)


# -- rows ------------------------------------------------------------------------------------


def rows_napari(cfg: Config, pyr: Path, nlevels: int) -> list[Row]:
    """(a) a real napari window per run, under Xvfb, ours and tensorstore alternating."""
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "xcb",
        "NAPARI_CONFIG": str(cfg.workdir / "napari-settings.yaml"),
    }
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(HERE.parent / "src"), env.get("PYTHONPATH", "")] if p
    )
    # Bytecode is cached as on a user's machine (this sandbox sets PYTHONDONTWRITEBYTECODE,
    # which would make every window recompile every module it imports, for both contenders).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cfg.workdir / "pycache")
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "tensorstore": [], "numpy": []}
    for round_ in range(cfg.repeat + 1):  # round 0 only fills the bytecode cache
        for impl, results in runs.items():
            cmd = [
                "xvfb-run",
                "-a",
                "-s",
                "-screen 0 1280x1024x24",
                sys.executable,
                str(HERE / "napari_window.py"),
                "--impl",
                impl,
                "--path",
                str(pyr),
                "--levels",
                str(nlevels),
            ]
            proc = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=600, check=False
            )
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError(
                    f"napari window ({impl}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
                )
            if round_ > 0:
                results.append(json.loads(lines[-1]))
    o, t, floor = runs["ours"], runs["tensorstore"], runs["numpy"]

    def best(rs: list, k: str) -> float:
        return min(r[k] for r in rs)

    info = o[0]
    note = (
        f"level {info['data_level']} shown, tile {info['tile']}, "
        f"{'async' if info['async_slicing'] else 'sync'} slicing"
    )
    n = cfg.pyramid
    return [
        Row(
            "a1",
            f"napari window, {n}^3 uint16 pyramid, 64^3 gzip, level 0: far jump of the z slider",
            best(o, "jump_s"),
            best(t, "jump_s"),
            "≥ 1.2x",
            note=f"{note}; napari alone (in-memory pyramid) {fmt(best(floor, 'jump_s'), 'ms')}",
        ),
        Row(
            "a2",
            "the same, scrolling 64 consecutive z-planes (per plane)",
            best(o, "scroll_s_per_plane"),
            best(t, "scroll_s_per_plane"),
            "≤ 16 ms/plane",
            note=f"napari alone (in-memory pyramid) {fmt(best(floor, 'scroll_s_per_plane'), 'ms')}/plane",
        ),
        Row(
            "a3",
            "open + first frame drawn (fresh process, napari imported)",
            best(o, "open_s"),
            best(t, "open_s"),
            "≤ 1.0 s",
            unit="s",
            note=f"napari alone (in-memory pyramid) {fmt(best(floor, 'open_s'), 's')}",
        ),
    ]


def plane_limit_row(limit: float, cfg: Config) -> Row:
    n = len(block_keys((cfg.pyramid,) * 3, 0))
    return Row("g-plane", f"decode limit: the {n} gzip blocks of one plane (no byte swap)", limit)


def rows_plane(cfg: Config, pyr: Path, pool: ThreadPoolExecutor) -> list[Row]:
    """(b) one z-plane of level 0 from the reader's dask array vs tensorstore, + its decode limit."""
    import tensorstore as ts

    from napari_n5zarr._napari.reader import read_path

    lvl = level0(read_path(pyr))
    t_arr = ts.open(ts_spec(pyr / "s0")).result()
    zs = fresh_planes(cfg.pyramid, cfg.repeat)
    t = best_of_each(
        {
            "ours": lambda i: (clear_block_cache(), np.asarray(lvl[zs[i]])),
            "ts": lambda i: t_arr[:, :, zs[i]].read().result(),
            "limit": (
                limit := decode_job(
                    pyr / "s0",
                    block_keys((cfg.pyramid,) * 3, zs[0]),
                    pool,
                    swap=False,
                )
            ),
        },
        cfg.repeat,
    )
    t["limit"] = limit.floor[0]  # type: ignore[attr-defined]
    np.testing.assert_array_equal(
        np.asarray(lvl[zs[0]]), t_arr[:, :, zs[0]].read().result().T
    )  # napari order
    return [
        Row(
            "b",
            f"one z-plane of level 0 ({cfg.pyramid}^2) from the reader's dask array, outside napari",
            t["ours"],
            t["ts"],
            "≥ 1.2x",
            limit=t["limit"],
        ),
        plane_limit_row(t["limit"], cfg),
    ]


def rows_reads(cfg: Config, files: dict[str, Path], pool: ThreadPoolExecutor) -> list[Row]:
    """(c) open(path)[...], (d) the reader's dask level computed whole, (g) decode limit, per compression."""
    import tensorstore as ts

    import napari_n5zarr
    from napari_n5zarr._napari.reader import read_path

    out = []
    for name, path in files.items():
        copies = [fresh_copy(path, cfg.workdir) for _ in range(2 * cfg.repeat)]
        t = best_of_each(
            {
                "ts": lambda _i: ts.open(ts_spec(path)).result().read().result(),
                "open": lambda i: napari_n5zarr.open(copies[i])[...],
                "dask": lambda i: np.asarray(level0(read_path(copies[cfg.repeat + i]))),
                "limit": (limit := decode_job(path, block_keys((cfg.array,) * 3), pool)),
            },
            cfg.repeat,
        )
        t["limit"] = limit.floor[0]  # type: ignore[attr-defined]
        out.append(
            Row(
                f"c-{name}",
                f"whole-array read open(path)[...] {name}",
                t["open"],
                t["ts"],
                "≥ 1.5x" if name == "gzip" else "≥ 1.2x",
                limit=t["limit"],
            )
        )
        out.append(
            Row(
                f"d-{name}",
                f"the reader's dask level computed whole, {name}",
                t["dask"],
                t["ts"],
                "≥ 1.0x",
                limit=t["limit"],
            )
        )
        out.append(
            Row(
                f"g-{name}",
                f"decode limit: the whole {cfg.array}^3 array, {name}",
                t["limit"],
            )
        )
        expected = ts.open(ts_spec(path)).result().read().result()
        np.testing.assert_array_equal(napari_n5zarr.open(copies[0])[...], expected)
        np.testing.assert_array_equal(np.asarray(level0(read_path(copies[-1]))), expected.T)
        for c in copies:
            shutil.rmtree(c.parent, ignore_errors=True)
    return out


def rows_export(cfg: Config) -> list[Row]:
    """(e) export level 0 vs a tensorstore write of the same array; whole pyramid / level 0.

    Each contender writes its own folder, removed before its run and outside the timing:
    deleting the files of the run before (as many as the blocks written) is no part of a
    write, and it cost each side a different amount (the pyramid has more files).
    tensorstore runs with its defaults (it fsyncs every block file and its folder)."""
    import napari_n5zarr

    data = sample(cfg.array)
    napari_order = data.T
    targets = {k: cfg.workdir / f"export-{k}.n5" for k in ("ts", "s0", "pyramid")}
    out = []
    for name, comp in COMPRESSIONS.items():

        def ours(levels: Any, target: Path, comp: dict[str, Any] = comp) -> Callable[[], None]:
            def run() -> None:
                napari_n5zarr.export(
                    napari_order, target, compression=comp, chunks=BLOCK, levels=levels
                )

            return run

        def theirs(comp: dict[str, Any] = comp) -> None:
            ts_write(targets["ts"], data, comp)

        fns = {
            "ts": theirs,
            "s0": ours(1, targets["s0"]),
            "pyramid": ours("auto", targets["pyramid"]),
        }
        times: dict[str, list[float]] = {k: [] for k in fns}
        for _ in range(cfg.repeat):  # interleaved: each sees the same load
            for key, fn in fns.items():
                shutil.rmtree(targets[key], ignore_errors=True)
                times[key].append(timed(fn))
        t_ts, t_s0, t_pyr = (min(times[k]) for k in ("ts", "s0", "pyramid"))
        np.testing.assert_array_equal(napari_n5zarr.open(targets["s0"] / "s0")[...], data)
        np.testing.assert_array_equal(napari_n5zarr.open(targets["pyramid"] / "s0")[...], data)
        out.append(
            Row(
                f"e-{name}",
                f"export level 0 ({cfg.array}^3), {name}",
                t_s0,
                t_ts,
                "≥ 1.0x",
            )
        )
        out.append(
            Row(
                f"e-pyr-{name}",
                f"export whole pyramid / level 0, {name}",
                t_pyr / t_s0,
                None,
                "≤ 1.4x",
                unit="x",
            )
        )
    for target in targets.values():
        shutil.rmtree(target, ignore_errors=True)
    return out


def clear_block_cache() -> None:
    """Empty our decoded-block cache, so a timed read fetches every block (cold, like
    tensorstore opened without a cache pool). Opening a level reads a contrast sample,
    which on tiny pyramids is the very block timed next."""
    try:
        from napari_n5zarr.read.block_cache import block_cache
    except ImportError:  # a checkout without the cache
        return
    block_cache().clear()


def row_http(cfg: Config, pyr: Path) -> list[Row]:
    """(f) one plane over a local HTTP server adding 20 ms per request; and (f-open) the
    reader opening the pyramid there (imports and first-call setup done: what a second
    drop costs), ours only (tensorstore opens one array, not a container's pyramids).

    Models an object store (S3, GCS) seen from the reader: the server (:class:`LatencyHandler`,
    its own process) answers every request after 20 ms, all in parallel, on keep-alive
    connections, with bodies sent by the kernel, so that what is timed is each client's
    concurrency against latency and its CPU per block, not Python's ``http.server``. Both
    clients run with their defaults (tensorstore's ``http_request_concurrency`` is 32: a
    64-block plane takes it two round trips; ours requests a plane's blocks all at once).
    The machine's cores are shared by server and client, which a real store does not do."""
    import tensorstore as ts

    from napari_n5zarr._napari.reader import read_path

    server, port = serve(pyr.parent)
    try:
        url = f"http://127.0.0.1:{port}/{pyr.name}"
        layers = read_path(url)
        if not layers:
            raise RuntimeError(f"read_path({url}) gave no layer")
        t_open = best_of_each({"ours": lambda i: read_path(url)}, cfg.repeat)["ours"]
        lvl = level0(layers)
        t_arr = ts.open({"driver": "n5", "kvstore": f"{url}/s0/"}).result()
        zs = fresh_planes(cfg.pyramid, cfg.repeat)
        t = best_of_each(
            {
                "ours": lambda i: (clear_block_cache(), np.asarray(lvl[zs[i]])),
                "ts": lambda i: t_arr[:, :, zs[i]].read().result(),
            },
            cfg.repeat,
        )
        t_ours, t_ts = t["ours"], t["ts"]
        np.testing.assert_array_equal(np.asarray(lvl[zs[0]]), t_arr[:, :, zs[0]].read().result().T)
    finally:
        server.kill()
        server.wait()
    nblocks = len(block_keys((cfg.pyramid,) * 3, 0))
    return [
        Row(
            "f",
            f"one plane ({nblocks} blocks) over HTTP, +20 ms per request",
            t_ours,
            t_ts,
            "≥ 1.2x",
            note=f"{nblocks} requests one after another would take {nblocks * HTTP_DELAY_S * 1e3:.0f} ms",
        ),
        Row(
            "f-open",
            "the reader opening the pyramid over HTTP, +20 ms per request",
            t_open,
            note="imports done; 4 round trips: root metadata, listing, levels, coarsest block",
        ),
    ]


def row_rss(cfg: Config, gib: float) -> Row:
    """Peak RSS of exporting a lazy dask array of ``gib`` GiB, in a subprocess."""
    code = f"""
import resource, time, sys
import numpy as np, dask.array as da
import napari_n5zarr
n = -(-int(({gib} * 2**30 / 2) ** (1 / 3)) // 64) * 64
shape = (n, n, n)
def block(block_info=None):
    loc = block_info[None]["array-location"]
    z, y, x = (np.arange(a, b_, dtype=np.uint16) for a, b_ in loc)
    return (z[:, None, None] * 7 + y[None, :, None] * 3 + x[None, None, :]).astype(np.uint16)
lazy = da.map_blocks(block, chunks=((64,) * (n // 64),) * 3, dtype=np.uint16)
def peak():  # kB. Linux keeps ru_maxrss across exec: it would report the parent's peak at fork
    try:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
base = peak()
t0 = time.perf_counter()
napari_n5zarr.export(lazy, sys.argv[1], compression="zstd", chunks=64)
print(lazy.nbytes, base, peak(), time.perf_counter() - t0)
"""
    target = cfg.workdir / "rss.n5"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in [str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")] if p
        ),
    }
    proc = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    shutil.rmtree(target, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"RSS export failed:\n{proc.stderr[-4000:]}")
    nbytes, base, peak, secs = proc.stdout.split()[-4:]
    return Row(
        "rss",
        f"peak RSS, export of a {int(nbytes) / 2**30:.2f} GiB lazy dask array (zstd, pyramid)",
        int(peak) / 2**20,
        None,
        "≤ 1 GiB",
        unit="GiB",
        note=f"{float(secs):.0f} s; {int(base) / 2**10:.0f} MiB after imports",
    )


# -- output ----------------------------------------------------------------------------------


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "ms":
        return f"{value * 1e3:.0f} ms" if value >= 0.0095 else f"{value * 1e3:.2g} ms"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.2f} {unit}"


def table(rows: list[Row]) -> str:
    lines = [
        "| what a person waits for | napari-n5zarr | tensorstore | ratio (ts / ours) | goal | decode limit (2 threads) | ours at % of limit |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}x"
        limit = fmt(r.limit, r.unit) if r.limit is not None else "—"
        frac = f"{100 * r.limit / r.ours:.0f} %" if r.limit is not None and r.ours else "—"
        what = r.what + (f" ({r.note})" if r.note else "")
        lines.append(
            f"| {what} | {fmt(r.ours, r.unit)} | {fmt(r.ts, r.unit)} | {ratio} | {r.goal} | {limit} | {frac} |"
        )
    return "\n".join(lines)


def goal_ratio(r: Row) -> float | None:
    """The goal as a tensorstore/ours ratio: "≥ 1.2x" -> 1.2; "≤ 16 ms/plane" -> ts / 16 ms."""
    parts = r.goal.split()
    if len(parts) < 2 or r.ts is None:
        return None
    try:
        if parts[1].endswith("x") and parts[0] == "≥":
            return float(parts[1][:-1])
        value = float(parts[1]) * (1e-3 if parts[2].startswith("ms") else 1.0)
    except (ValueError, IndexError):
        return None
    return r.ts / value


def label(r: Row) -> str:
    what = r.what.split(" (")[0].replace("whole-array read open(path)[...]", "open(path)[...]")
    what = what.replace("the reader's dask level computed whole,", "reader's dask level, whole,")
    if r.key.startswith("e-"):
        what = f"export level 0, {r.key[2:]}"
    what = {
        "a1": "napari window: far z jump (level 0)",
        "a2": "napari window: scrolling z (per plane)",
        "a3": "napari window: open + first frame",
    }.get(r.key, what)
    return f"{r.key}  {what[:60]}"


def chart(rows: list[Row], path: Path, title: str) -> None:
    """Left: tensorstore's time / ours per row, goal marked. Right: ours as % of the decode limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.ratio is not None]
    y = np.arange(len(shown))[::-1]
    fig, (ax, ax2) = plt.subplots(
        1,
        2,
        figsize=(11, 0.34 * len(shown) + 1.6),
        dpi=80,
        sharey=True,
        gridspec_kw={"width_ratios": [3, 1.2]},
    )
    ratios = [r.ratio for r in shown]
    ax.barh(
        y,
        ratios,
        color=["#2a9d8f" if v >= 1 else "#e76f51" for v in ratios],
        height=0.6,
    )
    for yi, r in zip(y, shown, strict=True):
        ax.text(r.ratio, yi, f" {r.ratio:.2f}x", va="center", fontsize=8)
        if (g := goal_ratio(r)) is not None:
            ax.plot([g], [yi], marker="|", color="black", markersize=13, mew=2)
    ax.axvline(1.0, color="gray", lw=1, ls="--")
    ax.set_yticks(y, [label(r) for r in shown], fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("tensorstore time / ours (log; > 1: ours faster; | = goal)", fontsize=9)
    ax.set_title(title, fontsize=9)
    fracs = [100 * r.limit / r.ours if r.limit else 0.0 for r in shown]
    ax2.barh(y, fracs, color="#8d99ae", height=0.6)
    for yi, f, r in zip(y, fracs, shown, strict=True):
        if r.limit:
            ax2.text(f, yi, f" {f:.0f} %", va="center", fontsize=8)
    ax2.axvline(100, color="gray", lw=1, ls="--")
    ax2.set_xlim(0, max([120.0, *fracs]) * 1.25)
    ax2.set_xlabel("ours, % of the decode limit", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# -- main ------------------------------------------------------------------------------------


def run(cfg: Config, rows: str, rss: float | None = None) -> list[Row]:
    """Write the files, measure the selected rows, return them (printing each as it comes)."""
    out: list[Row] = []

    def add(new: Row | list[Row]) -> None:
        for r in [new] if isinstance(new, Row) else new:
            out.append(r)
            ratio = "" if r.ratio is None else f"  ratio {r.ratio:.2f}x"
            print(
                f"  {r.key:12s} ours {fmt(r.ours, r.unit):>10s}  tensorstore {fmt(r.ts, r.unit):>10s}{ratio}  "
                f"{r.what}{'; ' + r.note if r.note else ''}",
                flush=True,
            )

    pyr = cfg.workdir / "pyramid.n5"
    nlevels = 0
    if set(rows) & set("abf"):
        nlevels = timed_print(
            f"writing {cfg.pyramid}^3 gzip pyramid with tensorstore",
            lambda: write_pyramid(pyr, cfg.pyramid),
        )
    files: dict[str, Path] = {}
    if set(rows) & set("cdg"):

        def write_arrays() -> None:
            data = sample(cfg.array)
            for name, comp in COMPRESSIONS.items():
                files[name] = cfg.workdir / f"{name}.n5"
                ts_write(files[name], data, comp)

        timed_print(
            f"writing {cfg.array}^3 arrays (raw, gzip, zstd, blosc) with tensorstore",
            write_arrays,
        )
    pool = ThreadPoolExecutor(2, thread_name_prefix="decode-limit")
    plane_rows: list[Row] = []
    if "b" in rows or "a" in rows:
        plane_rows = rows_plane(cfg, pyr, pool)
        add([r for r in plane_rows if r.key[0] in rows])
    if set(rows) & set("cdg"):
        add([r for r in rows_reads(cfg, files, pool) if r.key[0] in rows])
    if "e" in rows:
        add(rows_export(cfg))
    if "f" in rows:
        add(row_http(cfg, pyr))
    if "a" in rows:
        new = rows_napari(cfg, pyr, nlevels)
        limit_plane = plane_rows[-1].ours  # measured with row b, in this process
        new[0].limit = limit_plane
        new[1].limit = limit_plane / BLOCK  # one slab of 64^3 blocks serves 64 planes
        add(new)
    if rss:
        add(row_rss(cfg, rss))
    pool.shutdown()
    return out


def timed_print(what: str, fn: Callable[[], Any]) -> Any:
    t0 = time.perf_counter()
    result = fn()
    print(f"  ({what}: {time.perf_counter() - t0:.1f} s)", flush=True)
    return result


ORDER = ["a1", "a2", "a3", "b", "c-", "d-", "e-", "f", "g-", "rss"]


def main(argv: list[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes, 1 repeat (< 3 minutes)")
    ap.add_argument("--repeat", type=int, help="best of N (default 3, --quick 1)")
    ap.add_argument(
        "--chart",
        default=str(HERE / "speed.png"),
        help="PNG to write (default benchmarks/speed.png; '' for none)",
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        help="where the data goes (default: a temporary folder, removed)",
    )
    ap.add_argument("--rows", default="abcdefg", help="letters of the rows to run (default all)")
    ap.add_argument(
        "--rss",
        type=float,
        nargs="?",
        const=8.0,
        help="also the peak RSS of exporting a lazy GiB-sized array",
    )
    ap.add_argument(
        "--pyramid",
        type=int,
        help="edge of the pyramid's level 0 (default 512, --quick 384)",
    )
    ap.add_argument(
        "--array",
        type=int,
        help="edge of the whole-array reads/writes (default 256, --quick 128)",
    )
    ap.add_argument(
        "--selftest",
        action="store_true",
        help="tiny sizes, rows b-e and g, no chart: proves the script runs",
    )
    args = ap.parse_args(argv)
    src = str(HERE.parent / "src")
    if Path(src, "napari_n5zarr").is_dir() and src not in sys.path:
        sys.path.insert(
            0, src
        )  # measure the checkout this script lives in (the napari child does too)

    if args.selftest:
        cfg = Config(pyramid=128, array=64, repeat=1)
        rows = args.rows if args.rows != "abcdefg" else "bcdeg"
    else:
        cfg = Config(
            pyramid=args.pyramid or (384 if args.quick else 512),
            array=args.array or (128 if args.quick else 256),
            repeat=args.repeat or (1 if args.quick else 3),
        )
        rows = args.rows
    tmp = None
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        cfg.workdir = args.workdir
    else:
        tmp = tempfile.TemporaryDirectory(prefix="n5zarr-speed-")
        cfg.workdir = Path(tmp.name)
    from importlib.metadata import version

    import napari_n5zarr

    header = (
        f"napari-n5zarr {napari_n5zarr.__version__} ({Path(napari_n5zarr.__file__).parent}) vs tensorstore "
        f"{version('tensorstore')}; {os.cpu_count()} cores; best of {cfg.repeat}; uint16, {BLOCK}^3 blocks; "
        f"ratio = tensorstore time / ours"
    )
    print(header, flush=True)
    t0 = time.perf_counter()
    try:
        result = run(cfg, rows, args.rss)
    finally:
        if tmp is not None:
            tmp.cleanup()
    result.sort(key=lambda r: next(i for i, p in enumerate(ORDER) if r.key.startswith(p)))
    print(f"\n{header}\n")
    print(table(result))
    print(
        f"\n(total {time.perf_counter() - t0:.0f} s; peak RSS of this process "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB)"
    )
    if not args.selftest and args.chart:
        chart(
            result,
            Path(args.chart),
            f"napari-n5zarr vs tensorstore {version('tensorstore')}, {os.cpu_count()} cores, best of {cfg.repeat}",
        )
        print(f"chart: {args.chart}")
    return result


if __name__ == "__main__":
    main()
