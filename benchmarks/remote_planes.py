"""Remote planes against local ones (issue 29, item 3), in one run.

    PYTHONPATH=src python benchmarks/remote_planes.py [--size 512] [--repeat 7] [--trace]
        [--napari] [--s3 [--s3-size 256] [--no-http]] [--workdir DIR]

Data: ``speed.py``'s 512^3 uint16 N5 Viewer pyramid (64^3 gzip blocks, written by
tensorstore). The HTTP server is ``speed.py``'s (its own process, +20 ms per request,
HTTP/1.1 keep-alive, bodies by ``sendfile``). Rows, interleaved (ours local, ours HTTP,
tensorstore HTTP, tensorstore local, in turn), median and best of ``--repeat``:

* a cold z-plane of level 0 from the reader's dask array (``read_path``), each run a plane
  of a block slab not read before, our block cache cleared and the prefetch settled first;
  tensorstore opened without a cache (``ts.open(...)[:, :, z].read()``);
* ratios: ours HTTP / ours local (goal <= 1.5), tensorstore HTTP / ours HTTP (goal >= 1.5).

``--trace``: where a cold HTTP plane's time goes (request issue times, body arrivals,
decoding: start, end and CPU on the pool), from the store's and the block source's own calls.

``--napari``: scrolling through the pyramid in a hidden napari window under Xvfb
(``napari_window.py --planes 128``: two block slabs, so the prefetch of the second counts),
ours over HTTP against ours local, per plane; and the far jump.

``--s3``: moto's S3 server in its own process holding level 0 (``--s3-size``, default 256):
the emulator's own floor for a plane (its blocks fetched with bare aiohttp GETs, all at
once, nothing decoded; and moto's CPU a GET), ours and tensorstore's S3 kvstore on the same plane (goal: ours <= 1.2x the floor,
ahead of tensorstore).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import speed  # noqa: E402  (the pyramid, the latency server, fresh planes)

BLOCK = speed.BLOCK


def settle() -> None:
    """Background prefetch finished, block cache empty: the next read is cold."""
    from napari_n5zarr.read import fetch

    fetch._prefetch_pool().submit(lambda: None).result()
    speed.clear_block_cache()


def interleaved(fns: dict[str, Callable[[int], Any]], repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(repeat):
        for name, fn in fns.items():
            settle()
            t0 = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - t0)
    return times


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:6.1f} ms, best {min(values) * 1e3:6.1f} ms"


def cold_planes(pyr: Path, url: str, size: int, repeat: int) -> dict[str, list[float]]:
    import tensorstore as ts

    from napari_n5zarr._napari.reader import read_path

    local, remote = speed.level0(read_path(pyr)), speed.level0(read_path(url))
    ts_http = ts.open({"driver": "n5", "kvstore": f"{url}/s0/"}).result()
    ts_local = ts.open(speed.ts_spec(pyr / "s0")).result()
    zs = speed.fresh_planes(size, repeat)
    np.testing.assert_array_equal(np.asarray(remote[zs[0]]), ts_http[:, :, zs[0]].read().result().T)
    return interleaved(
        {
            "ours local": lambda i: np.asarray(local[zs[i]]),
            "ours HTTP": lambda i: np.asarray(remote[zs[i]]),
            "tensorstore HTTP": lambda i: ts_http[:, :, zs[i]].read().result(),
            "tensorstore local": lambda i: ts_local[:, :, zs[i]].read().result(),
        },
        repeat,
    )


def trace_plane(url: str, size: int, repeat: int, server: int | None = None) -> None:
    """Times of each block request (issued, body in) and decode (start, end, CPU) of cold
    HTTP planes, relative to the plane's start (ms)."""
    from napari_n5zarr._napari.reader import read_path
    from napari_n5zarr.read.fetch import BlockSource
    from napari_n5zarr.storage.remote import RemoteStore

    events: list[tuple[str, float, float, float]] = []
    lock = threading.Lock()
    get, decode = RemoteStore.get, BlockSource.decode

    async def traced_get(self: Any, key: str, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await get(self, key, *args, **kwargs)
        finally:
            if key.count("/") >= 3:  # block keys only
                with lock:
                    events.append(("get", t0, time.perf_counter(), 0.0))

    def traced_decode(self: Any, raw: Any, key: str) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return decode(self, raw, key)
        finally:
            with lock:
                events.append(("decode", t0, time.perf_counter(), time.thread_time() - c0))

    RemoteStore.get, BlockSource.decode = traced_get, traced_decode  # type: ignore[method-assign]
    try:
        level = speed.level0(read_path(url))
        for z in speed.fresh_planes(size, repeat):
            settle()
            events.clear()
            c0, s0 = time.process_time(), _cpu(server) if server else 0.0
            t0 = time.perf_counter()
            np.asarray(level[z])
            total, cpu = time.perf_counter() - t0, time.process_time() - c0
            served = f", server CPU {(_cpu(server) - s0) * 1e3:.0f} ms" if server else ""
            gets = [e for e in events if e[0] == "get"]
            decs = [e for e in events if e[0] == "decode"]

            def rel(t: float, t0: float = t0) -> float:
                return (t - t0) * 1e3

            print(
                f"  plane z={z}: total {total * 1e3:.0f} ms, process CPU {cpu * 1e3:.0f} ms{served}; "
                f"{len(gets)} requests issued {rel(min(e[1] for e in gets)):.0f}-{rel(max(e[1] for e in gets)):.0f} ms, "
                f"bodies in {rel(min(e[2] for e in gets)):.0f}-{rel(max(e[2] for e in gets)):.0f} ms "
                f"(median {statistics.median(rel(e[2]) for e in gets):.0f}); "
                f"{len(decs)} decodes {rel(min(e[1] for e in decs)):.0f}-{rel(max(e[2] for e in decs)):.0f} ms, "
                f"CPU {sum(e[3] for e in decs) * 1e3:.0f} ms ({statistics.median(e[3] for e in decs) * 1e3:.2f} ms a block)"
            )
    finally:
        RemoteStore.get, BlockSource.decode = get, decode  # type: ignore[method-assign]


def napari_scroll(pyr: Path, url: str, nlevels: int, repeat: int, workdir: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "NAPARI_CONFIG": str(workdir / "napari.yaml")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(HERE.parent / "src"), env.get("PYTHONPATH", "")] if p
    )
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "HTTP": []}
    for round_ in range(repeat + 1):  # round 0 fills the bytecode cache
        for name, path in (("local", str(pyr)), ("HTTP", url)):
            cmd = ["xvfb-run", "-a", "-s", "-screen 0 1280x1024x24", sys.executable,
                   str(HERE / "napari_window.py"), "--impl", "ours", "--path", path,
                   "--levels", str(nlevels), "--planes", "128"]  # fmt: skip
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
            if proc.returncode != 0 or not lines:
                raise RuntimeError(
                    f"napari window failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
                )
            if round_:
                runs[name].append(json.loads(lines[-1]))
    for key, what in (
        ("scroll_s_per_plane", "scrolling 128 planes, per plane"),
        ("jump_s", "far jump"),
    ):
        loc = [r[key] for r in runs["local"]]
        rem = [r[key] for r in runs["HTTP"]]
        print(f"napari {what}: local {ms(loc)}; HTTP {ms(rem)}; "
              f"HTTP / local {statistics.median(rem) / statistics.median(loc):.2f}x (median)")  # fmt: skip


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def s3_rows(workdir: Path, size: int, repeat: int, trace: bool = False) -> None:
    """Level 0 of a ``size``^3 pyramid in moto (own process): floor, ours, tensorstore."""
    import boto3
    import tensorstore as ts

    from napari_n5zarr._napari.reader import read_path

    pyr = workdir / f"s3-{size}.n5"
    if not pyr.exists():
        speed.write_pyramid(pyr, size)
    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    session: list[Any] = []
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        from botocore.config import Config

        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="x", aws_secret_access_key="x",
                          region_name="us-east-1", config=Config(max_pool_connections=64))  # fmt: skip
        s3.create_bucket(Bucket="pub", ACL="public-read")
        for f in pyr.rglob("*"):
            if f.is_file():
                s3.put_object(Bucket="pub", Key=f"p.n5/{f.relative_to(pyr)}", Body=f.read_bytes())
        opts = {"endpoint_url": endpoint, "anon": True}
        os.environ["AWS_ENDPOINT_URL"] = endpoint  # for checkouts without storage options
        try:
            from napari_n5zarr.storage.remote import default_storage_options
        except ImportError:  # older checkouts (A/B runs): anonymous where there are no keys

            def default_storage_options(_options: Any) -> Any:
                return contextlib.nullcontext()

        with default_storage_options(opts):
            level = speed.level0(read_path("s3://pub/p.n5"))
        t_arr = ts.open({"driver": "n5", "kvstore": {"driver": "s3", "bucket": "pub", "path": "p.n5/s0/",
                         "endpoint": endpoint, "aws_credentials": {"type": "anonymous"}}}).result()  # fmt: skip
        zs = speed.fresh_planes(size, repeat)

        async def get_all(keys: list[str]) -> list[bytes]:
            import aiohttp

            if not session:
                session.append(aiohttp.ClientSession())

            async def one(key: str) -> bytes:
                async with session[0].get(f"{endpoint}/pub/{key}") as r:
                    return await r.read()

            return await asyncio.gather(*(one(k) for k in keys))

        def floor(i: int) -> None:
            from napari_n5zarr.zarr_internals import sync

            sync(get_all([f"p.n5/s0/{k}" for k in speed.block_keys((size,) * 3, zs[i])]))

        floor(0)  # connections opened
        if trace:
            print("where a cold S3 plane's time goes:")
            with default_storage_options(opts):
                trace_plane("s3://pub/p.n5", size, 3, proc.pid)
        t = interleaved(
            {
                "S3 floor (bare aiohttp GETs, no decode)": floor,
                "ours S3": lambda i: np.asarray(level[zs[i]]),
                "tensorstore S3": lambda i: t_arr[:, :, zs[i]].read().result(),
            },
            repeat,
        )
        nblocks = len(speed.block_keys((size,) * 3, 0))
        c0 = _cpu(proc.pid)
        for i in range(repeat):
            floor(i)
        moto = (_cpu(proc.pid) - c0) / (repeat * nblocks)
        print(f"S3 (moto, own process, {moto * 1e3:.1f} ms of its CPU a GET), one plane of "
              f"{size}^3 level 0 ({nblocks} blocks):")  # fmt: skip
        for name, values in t.items():
            print(f"  {name:<42} {ms(values)}")
        f, o, s = (statistics.median(v) for v in t.values())
        print(
            f"  ours / floor {o / f:.2f}x (goal <= 1.2x); tensorstore / ours {s / o:.2f}x (goal > 1x)"
        )
    finally:
        if session:
            from napari_n5zarr.zarr_internals import sync

            sync(session[0].close())
        proc.kill()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--trace", action="store_true")
    ap.add_argument("--napari", action="store_true")
    ap.add_argument("--s3", action="store_true")
    ap.add_argument("--s3-size", type=int, default=256)
    ap.add_argument("--no-http", dest="http", action="store_false", help="the S3 rows only")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the data here between runs")
    args = ap.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="remote-planes-"))
    workdir.mkdir(parents=True, exist_ok=True)
    pyr = workdir / f"pyramid-{args.size}.n5"
    if not (pyr / "s0").exists():
        speed.write_pyramid(pyr, args.size)
    nlevels = len([p for p in pyr.iterdir() if p.name.startswith("s")])
    if not args.http:
        s3_rows(workdir, args.s3_size, args.repeat, args.trace)
        return
    server, port = speed.serve(workdir)
    url = f"http://127.0.0.1:{port}/{pyr.name}"
    try:
        t = cold_planes(pyr, url, args.size, args.repeat)
        print(f"cold z-plane of level 0 ({args.size}^2, {(args.size // BLOCK) ** 2} gzip blocks), "
              f"HTTP +{speed.HTTP_DELAY_S * 1e3:.0f} ms per request, {args.repeat} interleaved runs:")  # fmt: skip
        for name, values in t.items():
            print(f"  {name:<18} {ms(values)}")
        med = {k: statistics.median(v) for k, v in t.items()}
        print(f"  ours HTTP / ours local {med['ours HTTP'] / med['ours local']:.2f}x (goal <= 1.5x); "
              f"tensorstore HTTP / ours HTTP {med['tensorstore HTTP'] / med['ours HTTP']:.2f}x (goal >= 1.5x)")  # fmt: skip
        if args.trace:
            print("where a cold HTTP plane's time goes:")
            trace_plane(url, args.size, 3, server.pid)
        if args.napari:
            napari_scroll(pyr, url, nlevels, max(1, args.repeat // 2), workdir)
    finally:
        server.kill()
        server.wait()
    if args.s3:
        s3_rows(workdir, args.s3_size, args.repeat, args.trace)


if __name__ == "__main__":
    main()
