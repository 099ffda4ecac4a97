"""Bounded memory and bounded time for every source (issue 19, items 5 and 6).

Hostile inputs on 127.0.0.1 and in real zip files: a gzip ``Content-Encoding`` bomb, an
endless chunked body, a huge declared ``Content-Length``, a zip member of zeros declaring
gigabytes, for blocks and for ``attributes.json``; a server sending one byte a second. Each
read runs in a subprocess that reports its peak memory (``VmHWM``); a watchdog ends it
past :data:`WATCHDOG_MB` (before the fix, the bombs grew to gigabytes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from faulty_http import FaultyServer, serve

from napari_n5zarr.errors import N5StoreError

CORPUS = Path(__file__).parents[1] / "data" / "corpus"
JAVA = CORPUS / "zarr_implementations/data/n5-java.n5"
SRC = Path(__file__).parents[2] / "src"
PEAK_MB = 600  # generous: the caps below are 16-64 MiB; the bombs inflate to gigabytes
WATCHDOG_MB = 1500  # a reader past this is unbounded: stopped before it takes the machine
BLOCK_CAP = 32 * 2**20  # N5ZARR_MAX_BLOCK_BYTES in these tests (the default is 2 GiB)
DEADLINE = (
    "not complete within 2 s"  # our deadline fired (N5ZARR_READ_TIMEOUT=2), not a per-byte timeout
)

READER = r"""
import json, os, sys, threading, time

def watchdog():
    while True:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        if rss > int(os.environ["WATCHDOG_MB"]) * 2**20:
            print(json.dumps({"error": "watchdog", "message": f"RSS {rss >> 20} MB", "peak_mb": rss >> 20, "seconds": time.monotonic() - t0}), flush=True)
            os._exit(3)
        time.sleep(0.05)

t0 = time.monotonic()
threading.Thread(target=watchdog, daemon=True).start()
import napari_n5zarr
what, location, inner, options = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
try:
    if what == "list":
        from napari_n5zarr.access import base_store
        from napari_n5zarr.n5.stores import list_names
        names = list_names(base_store(location, storage_options=options), inner)
        out = {"error": None, "message": f"{len(names)} names"}
    elif what == "tree":
        import contextlib, io
        from napari_n5zarr.cli import main
        err, printed = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(printed):
            code = main(["tree", location])
        out = {"error": f"exit {code}", "message": err.getvalue(), "stdout": printed.getvalue()}
    else:
        node = napari_n5zarr.open(location, storage_options=options)
        if inner:
            node = node[inner]
        if what == "block":
            node[(0,) * node.ndim]
        out = {"error": None, "message": ""}
except Exception as e:
    out = {"error": type(e).__name__, "message": str(e)}
# VmHWM: this process's own peak (ru_maxrss keeps the forking parent's size across exec:
# late in a full run, pytest's 1.3 GB)
with open("/proc/self/status") as f:
    out["peak_mb"] = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024
out["seconds"] = time.monotonic() - t0
print(json.dumps(out), flush=True)
"""


def read_in_subprocess(
    what: str, location: str, inner: str = "", options: dict | None = None, **env: str
) -> dict:
    """Open ``location`` (its node ``inner`` if given; and read its first block if ``what == "block"``) in a fresh
    interpreter: {error class, message, peak_mb, seconds}."""
    environ = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(SRC), "WATCHDOG_MB": str(WATCHDOG_MB),
               "N5ZARR_MAX_BLOCK_BYTES": str(BLOCK_CAP), "N5ZARR_READ_TIMEOUT": "2", "N5ZARR_CONNECT_TIMEOUT": "2",
               "N5ZARR_RETRIES": "1", "N5ZARR_RETRY_BACKOFF": "0.05", **env}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", READER, what, location, inner, json.dumps(options)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no result (exit {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(lines[-1])
    print(f"{what} {location}: {result}")  # the figures, in -s output
    return result


@pytest.fixture(autouse=True)
def short_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process stores: 2 s timeouts (the subprocesses get theirs from read_in_subprocess)."""
    monkeypatch.setenv("N5ZARR_READ_TIMEOUT", "2")
    monkeypatch.delenv("N5ZARR_REQUEST_TIMEOUT", raising=False)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyServer]:
    import shutil

    root = tmp_path_factory.mktemp("served")
    shutil.copytree(JAVA, root / "java.n5")
    yield from serve(FaultyServer(root=root))


@pytest.fixture
def server(http_server: FaultyServer) -> Iterator[FaultyServer]:
    http_server.faults.clear()
    yield http_server
    http_server.faults.clear()


# -- memory: HTTP --------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["gzip-bomb", "endless", "huge-length"])
def test_hostile_http_metadata_body_is_refused_at_the_cap(server: FaultyServer, fault: str) -> None:
    server.faults["/gzip/attributes.json"] = fault
    result = read_in_subprocess("metadata", f"{server.url}/java.n5/gzip")
    assert result["error"] == "N5MetadataError", result
    assert "java.n5/gzip/attributes.json" in result["message"], result
    assert "size limit" in result["message"], result
    assert "N5ZARR_MAX_METADATA_BYTES" in result["message"]
    assert result["peak_mb"] < PEAK_MB, result


# -- bounds that follow the data (issue 27): a block is capped by its dataset's own bound ---
DATA_PEAK_MB = 300
"""Issue 27: an endless block body or listing page ends under this peak (it reached 2.2-3.4 GB)."""
GZIP_LIMIT = re.compile(r"stored block is over its dataset's limit of (\d+) bytes \(a \[1, 100, 100\] block of 1-byte "
                        r"elements, gzip's worst case and the header\)")  # fmt: skip


def _check_block_refused_at_its_dataset_limit(result: dict, url: str) -> None:
    assert result["error"] == "N5BlockError", result
    message = result["message"]
    assert message.startswith(f"{url}: "), message
    assert "\n" not in message
    found = GZIP_LIMIT.search(message)
    assert found, message
    assert 10_000 < int(found[1]) < 16_000, (
        message
    )  # 10,000 bytes a block: gzip's worst case and a header, not 2 GiB
    assert result["peak_mb"] < DATA_PEAK_MB, result


@pytest.mark.parametrize("fault", ["endless", "gzip-bomb", "huge-length"])
def test_endless_http_block_ends_at_its_datasets_limit(server: FaultyServer, fault: str) -> None:
    """With the default global cap (2 GiB), an endless block body stops at what the
    dataset's block size allows (it was read to 2 GiB: 2.2 GB peak)."""
    server.faults["/gzip/0/0/0"] = fault
    result = read_in_subprocess("block", f"{server.url}/java.n5/gzip", N5ZARR_MAX_BLOCK_BYTES="")
    _check_block_refused_at_its_dataset_limit(result, f"{server.url}/java.n5/gzip/0/0/0")


def test_endless_s3_block_ends_at_its_datasets_limit(s3_bucket: dict) -> None:
    """Over S3 too: s3fs reads a whole body, whatever range was asked (the front ignores it)."""
    for server in serve(FaultyServer(upstream=s3_bucket["endpoint_url"], s3=True)):
        server.faults["/java.n5/gzip/0/0/0"] = "endless"
        options = {**s3_bucket, "endpoint_url": server.url}
        result = read_in_subprocess(
            "block", "s3://n5-data/java.n5/gzip", options=options, N5ZARR_MAX_BLOCK_BYTES=""
        )
    _check_block_refused_at_its_dataset_limit(result, "s3://n5-data/java.n5/gzip/0/0/0")


def test_zip_member_over_its_datasets_limit_is_refused_before_it_inflates(tmp_path: Path) -> None:
    """A 64x64 uint8 raw dataset whose block member declares 16 MiB (under the global cap):
    refused from the member's declared size, naming it and the dataset's limit."""
    path = tmp_path / "big.zip"
    _zip_bomb(path, "data/0/0", 16 * 2**20)
    result = read_in_subprocess("block", str(path), "data", N5ZARR_MAX_BLOCK_BYTES="")
    assert result["error"] == "N5BlockError", result
    assert result["message"].startswith(f"{path}/data/0/0 (zip member declares {16 * 2**20} bytes): stored block is over "
                                        "its dataset's limit of"), result  # fmt: skip
    assert (
        "(a [64, 64] block of 1-byte elements, raw's worst case and the header)"
        in result["message"]
    )
    assert result["peak_mb"] < DATA_PEAK_MB, result


# -- listing pages: capped and streamed ---------------------------------------------------------
@pytest.mark.parametrize(("fault", "limit"), [
    ("padded-page:300", "the listing page is over the size limit of 67108864 bytes; set the environment variable N5ZARR_MAX_LISTING_BYTES to raise it"),
    ("links:400000", "more than 100000 entries (the listing limit); set the environment variable N5ZARR_MAX_LISTING_ENTRIES to raise it"),
])  # fmt: skip
def test_huge_http_listing_ends_at_its_limit(server: FaultyServer, fault: str, limit: str) -> None:
    """A 300 MB listing page, and one of 400k links, end in one line naming the URL and the
    limit, within the request deadline (default 20 s: not "timed out"), peak under 300 MB
    (fsspec read the whole page: 3.2-3.4 GB, 120-162 s)."""
    server.faults["/java.n5"] = server.faults["/java.n5/"] = fault
    url = f"{server.url}/java.n5"
    result = read_in_subprocess("list", url, N5ZARR_READ_TIMEOUT="20")
    assert result["error"] == "N5StoreError", result
    assert result["message"] == f"cannot list {url}: {limit}", result
    assert result["peak_mb"] < DATA_PEAK_MB, result


def test_tree_of_a_huge_listing_says_one_line(server: FaultyServer) -> None:
    """``n5zarr tree``: the root's row, then one row saying why its children are not
    listed, naming the URL and the limit once."""
    server.faults["/java.n5"] = server.faults["/java.n5/"] = "padded-page:300"
    url = f"{server.url}/java.n5"
    result = read_in_subprocess("tree", url, N5ZARR_READ_TIMEOUT="20")
    lines = result["stdout"].splitlines()
    assert len(lines) == 2, result
    assert lines[1].endswith(f"unreadable: cannot list {url}: the listing page is over the size limit of 67108864 bytes; "
                             "set the environment variable N5ZARR_MAX_LISTING_BYTES to raise it"), result  # fmt: skip
    assert result["peak_mb"] < DATA_PEAK_MB, result


def _collect(keys: AsyncIterator[str]) -> list[str]:
    from napari_n5zarr.zarr_internals import sync

    async def all_of() -> list[str]:
        return [k async for k in keys]

    return sync(all_of())


def test_listing_within_the_limits_lists(
    server: FaultyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: a page of 2,000 links lists every child (and the real folder page too)."""
    from napari_n5zarr.access import base_store
    from napari_n5zarr.n5.stores import list_names

    assert sorted(list_names(base_store(f"{server.url}/java.n5"), "")) == sorted(
        p.name for p in JAVA.iterdir()
    )
    assert sorted(list_names(base_store(f"{server.url}/java.n5"), "gzip/0")) == sorted(
        p.name for p in (JAVA / "gzip/0").iterdir()
    )
    files = sorted(p.relative_to(JAVA).as_posix() for p in JAVA.rglob("*") if p.is_file())
    assert (
        sorted(_collect(base_store(f"{server.url}/java.n5").list())) == files
    )  # every page capped, walked
    assert sorted(_collect(base_store(f"{server.url}/java.n5").list_prefix("gzip/"))) == [
        f for f in files if f.startswith("gzip/")
    ]
    server.faults["/java.n5"] = server.faults["/java.n5/"] = "links:2000"
    assert sorted(list_names(base_store(f"{server.url}/java.n5"), "")) == sorted(
        f"k{i}" for i in range(2000)
    )
    monkeypatch.setenv("N5ZARR_MAX_LISTING_ENTRIES", "1999")
    with pytest.raises(N5StoreError, match="more than 1999 entries"):
        list_names(base_store(f"{server.url}/java.n5"), "")


def test_http_reads_still_work_and_ignored_ranges_are_sliced(server: FaultyServer) -> None:
    """Control: the capped reader returns the same bytes (whole, and a range the server ignores)."""
    import asyncio

    from zarr.abc.store import RangeByteRequest, SuffixByteRequest
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from napari_n5zarr.access import base_store

    store = base_store(f"{server.url}/java.n5")
    whole = (JAVA / "gzip/0/0/0").read_bytes()
    proto = default_buffer_prototype()

    async def reads() -> list:
        return await asyncio.gather(store.get("gzip/0/0/0", proto), store.get("gzip/0/0/0", proto, RangeByteRequest(3, 20)),
                                    store.get("gzip/0/0/0", proto, SuffixByteRequest(7)))  # fmt: skip

    got = [b.to_bytes() for b in sync(reads())]
    assert got == [whole, whole[3:20], whole[-7:]]


# -- memory: zip ---------------------------------------------------------------------------
def _zip_bomb(path: Path, member: str, inflated: int) -> None:
    """A zip of a dataset ``data`` whose ``member`` is ``inflated`` zero bytes (deflated:
    about 1/1000 of it), written in pieces (the test never holds it in memory)."""
    attrs = {
        "dimensions": [64, 64],
        "blockSize": [64, 64],
        "dataType": "uint8",
        "compression": {"type": "raw"},
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("attributes.json", json.dumps({"n5": "4.0.0"}))
        if member != "data/attributes.json":
            zf.writestr("data/attributes.json", json.dumps(attrs))
        with zf.open(member, "w", force_zip64=True) as f:
            zeros = bytes(2**22)
            for _ in range(inflated // len(zeros)):
                f.write(zeros)


@pytest.mark.parametrize("member", ["data/0/0", "data/attributes.json"])
def test_zip_bomb_member_is_refused_before_it_inflates(tmp_path: Path, member: str) -> None:
    path = tmp_path / "bomb.zip"
    _zip_bomb(path, member, 2**30)  # 1 GiB of zeros in a ~1 MB zip
    assert path.stat().st_size < 8 * 2**20
    result = read_in_subprocess("block" if member.endswith("0") else "metadata", str(path), "data")
    assert result["error"] in ("N5BlockError", "N5MetadataError"), result
    assert f"bomb.zip/{member}" in result["message"], result
    assert ("size limit" if member.endswith(".json") else "over its dataset's limit") in result[
        "message"
    ], result
    assert "declares 1073741824 bytes" in result["message"]
    assert result["peak_mb"] < PEAK_MB, result


def test_zip_member_lying_about_its_size_is_an_error_naming_it(tmp_path: Path) -> None:
    """A central directory declaring 100 bytes for a member that inflates to 1 MiB: zipfile
    stops at the declared size; the CRC check fails; the error names the member."""
    import struct

    path = tmp_path / "liar.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("attributes.json", "{}")
        zf.writestr("data/0/0", bytes(2**20))
    raw = bytearray(path.read_bytes())
    central = raw.rfind(b"PK\x01\x02")  # the last central directory entry: data/0/0
    raw[central + 24 : central + 28] = struct.pack("<I", 100)  # uncompressed size
    path.write_bytes(bytes(raw))
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from napari_n5zarr.access import base_store
    from napari_n5zarr.errors import N5BlockError

    store = base_store(path)
    with pytest.raises(
        N5BlockError, match=r"liar.zip/data/0/0: broken zip member"
    ):  # the bytes are bad, not the disk
        sync(store.get("data/0/0", default_buffer_prototype()))


# -- time: a server sending one byte a second ----------------------------------------------
@pytest.mark.parametrize("what", ["block", "metadata"])
def test_one_byte_a_second_ends_at_the_deadline(server: FaultyServer, what: str) -> None:
    """N5ZARR_READ_TIMEOUT=2, one retry: the read fails as timed out after about 2 x 2 s
    (it used to wait for the whole body: minutes), naming the URL."""
    key = "/gzip/0/0/0" if what == "block" else "/gzip/attributes.json"
    server.faults[key] = "trickle"
    result = read_in_subprocess(what, f"{server.url}/java.n5/gzip")
    assert result["error"] == "N5StoreError", result
    assert f"java.n5{key}" in result["message"], result
    assert "timed out" in result["message"], result
    assert "after 2 attempts" in result["message"], result
    assert DEADLINE in result["message"], result  # the time it took is printed, not asserted


def test_one_byte_a_second_from_s3_ends_at_the_deadline(s3_bucket: dict) -> None:
    """The same over S3 (moto behind the faulting front): botocore's read timeout is per
    byte too; the deadline holds."""
    for server in serve(FaultyServer(upstream=s3_bucket["endpoint_url"], s3=True)):
        server.faults["/java.n5/gzip/0/0/0"] = "trickle"
        options = {**s3_bucket, "endpoint_url": server.url}
        result = read_in_subprocess("block", "s3://n5-data/java.n5/gzip", options=options)
    assert result["error"] == "N5StoreError", result
    assert "java.n5/gzip/0/0/0" in result["message"], result
    assert "timed out" in result["message"], result
    assert DEADLINE in result["message"], result


def test_request_timeout_setting(server: FaultyServer) -> None:
    """N5ZARR_REQUEST_TIMEOUT sets the deadline apart from the read timeout."""
    server.faults["/gzip/attributes.json"] = "trickle"
    result = read_in_subprocess(
        "metadata",
        f"{server.url}/java.n5/gzip",
        N5ZARR_READ_TIMEOUT="60",
        N5ZARR_REQUEST_TIMEOUT="1",
    )
    assert result["error"] == "N5StoreError", result
    assert "not complete within 1 s" in result["message"], result


# -- time: n5zarr tree says what it waits for ------------------------------------------------
def test_tree_streams_and_names_what_it_waits_for(tmp_path: Path) -> None:
    """A child whose metadata trickles: the root line is out at once, stderr names the wait
    (``waiting for the metadata of URL``), the child ends as an unreadable row (timed out)
    after the deadline, its siblings are listed."""
    import time

    root = tmp_path / "c.n5"
    attrs = {
        "dimensions": [8, 8],
        "blockSize": [4, 4],
        "dataType": "uint8",
        "compression": {"type": "raw"},
    }
    for name in ("a", "b", "c"):
        (root / name).mkdir(parents=True)
        (root / name / "attributes.json").write_text(json.dumps(attrs))
    (root / "attributes.json").write_text(json.dumps({"n5": "4.0.0"}))
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(SRC), "N5ZARR_READ_TIMEOUT": "2",
           "N5ZARR_RETRIES": "1", "N5ZARR_RETRY_BACKOFF": "0.05"}  # fmt: skip
    code = "import sys; from napari_n5zarr.cli import main; sys.exit(main(sys.argv[1:]))"
    for server in serve(FaultyServer(root=tmp_path)):
        server.faults["/c.n5/b/attributes.json"] = "trickle"
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", code, "tree", f"{server.url}/c.n5"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout is not None
        first = proc.stdout.readline()  # streamed: the root before the slow child is done
        first_at = time.monotonic() - start
        rest, err = proc.communicate(timeout=120)
        seconds = time.monotonic() - start
    print(f"tree: first line after {first_at:.1f} s, done after {seconds:.1f} s; stderr {err!r}")
    assert first.startswith(f"{server.url}/c.n5"), first
    assert f"waiting for the metadata of 3 nodes in {server.url}/c.n5" in err, err
    lines = rest.splitlines()
    assert [line.split()[1] for line in lines] == ["a", "b", "c"], rest
    assert "unreadable" in lines[1], lines[1]
    assert "c.n5/b/attributes.json" in lines[1], lines[1]
    assert "timed out" in lines[1], lines[1]
    assert proc.returncode == 1  # an unreadable node
    assert "not complete within 2 s" in lines[1], lines[
        1
    ]  # the deadline ended it (timings printed above)


def test_http_requests_in_flight_are_capped(tmp_path: Path, counting_http) -> None:
    """At most HTTP_IN_FLIGHT requests at once per HTTP filesystem (a plane of 64 blocks, a
    tree page of 200 documents): small servers drop connections under 100 at once (2,000
    children took 84-122 s to list, 17-19 s now), and a request waiting for a slot is not
    timed by the deadline."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from napari_n5zarr.access import base_store
    from napari_n5zarr.storage.remote import HTTP_IN_FLIGHT

    for i in range(64):
        (tmp_path / f"k{i}").write_bytes(b"x" * 10)
    url, state = counting_http(tmp_path, latency=0.3)
    store = base_store(url)
    proto = default_buffer_prototype()

    async def all_at_once() -> list:
        return await asyncio.gather(*(store.get(f"k{i}", proto) for i in range(64)))

    assert all(b.to_bytes() == b"x" * 10 for b in sync(all_at_once()))
    assert state["peak"] == HTTP_IN_FLIGHT == 32, state["peak"]


def test_a_users_own_timeout_sets_the_deadline(
    server: FaultyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user who gave aiohttp (or S3) a longer timeout is not cut off at our default
    deadline; N5ZARR_REQUEST_TIMEOUT still wins."""
    import aiohttp

    from napari_n5zarr.access import base_store

    url = f"{server.url}/java.n5"
    assert (
        base_store(url).settings.deadline == 2.0
    )  # N5ZARR_READ_TIMEOUT of the autouse fixture below
    slow = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=300)}}
    assert base_store(url, storage_options=slow).settings.deadline == 300
    assert (
        base_store(
            url, storage_options={"client_kwargs": {"timeout": aiohttp.ClientTimeout(sock_read=90)}}
        ).settings.deadline
        == 90
    )
    monkeypatch.setenv("N5ZARR_REQUEST_TIMEOUT", "5")
    assert base_store(url, storage_options=slow).settings.deadline == 5


def test_listing_page_links_are_found_across_pieces_in_linear_time() -> None:
    """The streamed scanner finds what fsspec's patterns find on a real page, whatever the
    pieces; a page of 200,000 unclosed ``<a `` (fsspec's pattern backtracks on each) is one pass."""
    from fsspec.implementations.http import ex, ex2

    from napari_n5zarr.storage.remote import _Links

    page = ("<html><body><h1>Index</h1><A HREF=\"s0/\">s0/</A> <a class='x' href='attributes.json'>a</a>\n"
            "<a\thref=\"http://h/c.n5/s1/\">s1</a> see http://h/c.n5/readme.txt <a name=top>top</a></body></html>")  # fmt: skip
    expected = {u[2] for u in ex.findall(page)} | set(ex2.findall(page))
    for size in (1, 7, 64, len(page)):
        links = _Links("http://h/c.n5", simple=True, most=100)
        for i in range(0, len(page), size):
            links.feed(page[i : i + size])
        links.feed("", final=True)
        assert set(links.found) == expected, size
    soup = _Links("http://h/c.n5", simple=False, most=100)
    soup.feed("<a " * 200_000)
    soup.feed("<a href='k/'>k</a>", final=True)
    assert list(soup.found) == ["k/"]


def test_s3_listing_is_bounded_in_entries(s3_bucket: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """An S3 folder's listing stops at the entry cap, in one line naming the URL and the
    limit (s3fs's ``ls`` read every page of a folder, however many)."""
    from napari_n5zarr.access import base_store
    from napari_n5zarr.n5.stores import list_names

    url = "s3://n5-data/java.n5"
    assert sorted(list_names(base_store(url, storage_options=s3_bucket), "")) == sorted(
        p.name for p in JAVA.iterdir()
    )
    blocks = sorted(p.name for p in (JAVA / "gzip/0").iterdir())
    monkeypatch.setenv("N5ZARR_MAX_LISTING_ENTRIES", str(len(blocks)))
    assert sorted(list_names(base_store(url, storage_options=s3_bucket), "gzip/0")) == blocks
    monkeypatch.setenv("N5ZARR_MAX_LISTING_ENTRIES", str(len(blocks) - 1))
    with pytest.raises(N5StoreError) as info:
        list_names(base_store(url, storage_options=s3_bucket), "gzip/0")
    assert str(info.value) == (f"cannot list {url}/gzip/0: more than {len(blocks) - 1} entries (the listing limit); "
                               "set the environment variable N5ZARR_MAX_LISTING_ENTRIES to raise it")  # fmt: skip
