"""A faulting HTTP server on 127.0.0.1 for tests: serves a folder (or forwards to an
upstream such as moto's S3 server) and injects faults per path (403/500/503, resets,
truncated or empty bodies, HTML pages, slow answers; and hostile bodies: a gzip
``Content-Encoding`` bomb, an endless chunked body, a huge declared ``Content-Length``,
one byte per second, listing pages of many links or many megabytes). Shared by ``storage/test_remote.py``
and ``test_cli_faults.py``; ``tests/`` is on ``sys.path`` through its ``conftest.py``.
"""

from __future__ import annotations

import http.client
import http.server
import itertools
import socket
import struct
import sys
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

HANG_GUARD = 120  # s: a "slow" answer ends at teardown, or after this at the latest
HTML_PAGE = b"<!DOCTYPE html><html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
S3_ERRORS = {403: ("AccessDenied", "Access Denied"), 500: ("InternalError", "We encountered an internal error."),
             503: ("SlowDown", "Please reduce your request rate.")}  # fmt: skip


ZEROS = bytes(2**20)


def _gzip_of_endless_zeros() -> tuple[bytes, bytes]:
    """(first piece, repeated piece) of a gzip stream of zeros without end: each piece is
    1 MiB of zeros deflated (~1 KiB) and fully flushed, so every later piece is the same bytes."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = c.compress(ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    assert again == c.compress(ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    return first, again * 16  # 16 MiB inflated per write


GZIP_BOMB = _gzip_of_endless_zeros()


class FaultyServer(http.server.ThreadingHTTPServer):
    """Serves ``root`` (or forwards to ``upstream``, e.g. moto) and injects ``faults``:
    {path suffix: fault}. Counts GET requests per path in ``hits``."""

    daemon_threads = True

    def __init__(
        self, root: Path | None = None, upstream: str | None = None, s3: bool = False
    ) -> None:
        super().__init__(("127.0.0.1", 0), FaultyHandler)
        self.root, self.upstream, self.s3 = root, upstream, s3
        self.faults: dict[str, str] = {}
        self.hits: Counter[str] = Counter()
        self.requests: list[str] = []
        """Every request as ``"METHOD /path?query"``, in order."""
        self.release = threading.Event()  # ends "slow" responses at teardown

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: object, client_address: object) -> None:
        """A client hanging up mid-response (a reader giving up on a 500) is part of the tests:
        quiet. socketserver's default prints a traceback to stderr, which an in-process CLI
        test captures as if the CLI had printed it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class FaultyHandler(http.server.SimpleHTTPRequestHandler):
    server: FaultyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def translate_path(self, path: str) -> str:
        return str(self.server.root / urlsplit(path).path.lstrip("/")) if self.server.root else ""

    def _fault(self) -> str | None:
        path = urlsplit(self.path).path
        for suffix, fault in self.server.faults.items():
            if path.endswith(suffix):
                return fault
        return None

    def _send(
        self, status: int, body: bytes, content_type: str = "text/plain", length: int | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int) -> None:
        if self.server.s3:
            code, message = S3_ERRORS.get(
                status, ("NoSuchKey", "The specified key does not exist.")
            )
            body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>{message}</Message></Error>"
            self._send(status, body.encode(), "application/xml")
        else:
            self._send(status, f"error {status}".encode())

    def _real(self) -> tuple[int, dict[str, str], bytes]:
        """The real response: the file, or the upstream's answer."""
        if self.server.upstream:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            up = urlsplit(self.server.upstream)
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=30)
            conn.request(self.command, self.path, body=body, headers=dict(self.headers))
            resp = conn.getresponse()
            data = resp.read()
            headers = {
                k: v
                for k, v in resp.getheaders()
                if k.lower() not in ("transfer-encoding", "connection", "content-length")
            }
            conn.close()
            return resp.status, headers, data
        path = Path(self.translate_path(self.path))
        if path.is_file():
            return 200, {"Content-Type": "application/octet-stream"}, path.read_bytes()
        return 404, {}, b""

    def _respond(self) -> None:
        fault = self._fault()
        path = urlsplit(self.path).path
        self.server.requests.append(f"{self.command} {self.path}")
        if self.command == "GET":
            self.server.hits[path] += 1
        if fault and fault.startswith("flaky"):  # 503 for the first N GETs, then the real answer
            fault = "503" if self.server.hits[path] <= int(fault.split(":")[1]) else None
        if fault is None or (self.command == "HEAD" and fault in ("truncated", "html", "empty")):
            if (
                not self.server.upstream
                and self.server.root
                and (Path(self.translate_path(self.path))).is_dir()
            ):
                if self.command == "GET":
                    super().do_GET()
                else:
                    super().do_HEAD()
                return
            status, headers, body = self._real()
            if status == 404 and not self.server.upstream:
                self._error(404)
                return
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            return
        if fault.isdigit():
            self._error(int(fault))
            return
        if fault == "reset":  # RST instead of an answer
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if fault == "slow":  # accept, then never answer (until teardown)
            self.server.release.wait(HANG_GUARD)
            self.close_connection = True
            return
        if fault in ("gzip-bomb", "endless", "huge-length"):
            self._endless(fault)
            return
        if fault.startswith(("links:", "padded-page:")):
            self._listing_page(fault)
            return
        _, _, body = self._real()
        if fault == "trickle":  # the real Content-Length, then one byte a second
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self._stream(body[i : i + 1] for i in range(len(body)))
            self.close_connection = True
            return
        if fault == "truncated":  # the full Content-Length, half the body, then close
            self._send(200, body[: len(body) // 2], "application/octet-stream", length=len(body))
            self.close_connection = True
        elif fault == "html":
            self._send(200, HTML_PAGE, "text/html")
        elif fault == "empty":
            self._send(200, b"", "application/octet-stream")
        else:
            raise AssertionError(f"unknown fault {fault!r}")

    def _endless(self, fault: str) -> None:
        """200 and a body without end (until the client hangs up, teardown or HANG_GUARD):
        gzip-encoded zeros (chunked), plain zeros (chunked), or zeros under a Content-Length
        of 1 TB."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if fault == "huge-length":
            self.send_header("Content-Length", str(10**12))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        if fault == "gzip-bomb":
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return
        first, again = GZIP_BOMB if fault == "gzip-bomb" else (ZEROS, ZEROS)

        def pieces() -> Iterator[bytes]:
            yield first
            while True:
                yield again

        chunked = fault != "huge-length"
        self._stream((b"%x\r\n%s\r\n" % (len(p), p) if chunked else p for p in pieces()), delay=0)

    def _listing_page(self, fault: str) -> None:
        """An HTML directory page, chunked: ``links:N`` holds N links (``kI/``);
        ``padded-page:MB`` one link, then MB MiB of text without links."""
        kind, _, count = fault.partition(":")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.close_connection = True
        if self.command == "HEAD":
            return

        def pieces() -> Iterator[bytes]:
            yield b"<html><body><a href='k0/'>k0/</a>\n"
            if kind == "links":
                for start in range(1, int(count), 1000):
                    yield b"".join(
                        b"<a href='k%d/'>k%d/</a>\n" % (i, i)
                        for i in range(start, min(start + 1000, int(count)))
                    )
            else:
                filler = b"<p>" + b"x" * (2**20 - 8) + b"</p>\n"
                for _ in range(int(count)):
                    yield filler
            yield b"</body></html>"

        chunks = (b"%x\r\n%s\r\n" % (len(p), p) for p in pieces())
        self._stream(itertools.chain(chunks, [b"0\r\n\r\n"]), delay=0)

    def _stream(self, pieces: Iterator[bytes], delay: float = 1.0) -> None:
        """Write ``pieces`` (``delay`` s apart) until they end, the client hangs up, or teardown."""
        end = time.monotonic() + HANG_GUARD
        try:
            for piece in pieces:
                if self.server.release.is_set() or time.monotonic() > end:
                    return
                self.wfile.write(piece)
                self.wfile.flush()
                if delay:
                    self.server.release.wait(delay)
        except OSError:  # the client hung up: what a bounded reader does
            return

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _respond


def serve(server: FaultyServer) -> Iterator[FaultyServer]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
