"""Remote (fsspec) stores with timeouts, retries with backoff, and errors that name the URL.

Why a retry layer of our own: fsspec's HTTPFileSystem never retries (and aiohttp's default
timeout is 5 minutes per request), while s3fs and botocore each retry on their own, which
multiplies (5 s3fs tries x 5 botocore attempts x 15 s read timeout: minutes for one dead
block). So the libraries get timeouts and no retries of their own, and :class:`RemoteStore`
retries transient faults (5xx, 408/429, resets, truncated bodies, timeouts) for every
protocol with one budget, then raises :class:`N5StoreError` naming the URL.

A 404 (``FileNotFoundError``) stays "missing" (a fill-value block, no node); every other
failure is an error: a 500 is not a 404.

Bounded: every attempt has a total deadline (a server sending one byte a second beats any
per-byte timeout), counted once the request has one of the store's connection slots (a
plane's queued block requests are not timed while they wait); every body is read with a
cap (:func:`~napari_n5zarr.n5.constants.max_stored_bytes`; a block's is its dataset's own,
passed by the N5 Default Store): HTTP and S3 bodies are streamed (HTTP after aiohttp's
transparent ``Content-Encoding`` decompression) and refused one byte past the cap or when
their declared length is more; other protocols ask for a range of cap + 1 bytes. HTTP
directory pages are streamed and scanned for links as they arrive, capped in bytes and in
links; a folder's listing (HTTP or S3, page by page) stops at the entry cap
(:func:`~napari_n5zarr.n5.constants.max_listing_bytes`, ``max_listing_entries``).

Settings (environment variables, read when a store is opened):
``N5ZARR_CONNECT_TIMEOUT`` (s, default 10), ``N5ZARR_READ_TIMEOUT`` (s without a byte,
default 20), ``N5ZARR_REQUEST_TIMEOUT`` (s for a whole request, body included; default:
the read timeout, or the user's own timeout in ``storage_options``), ``N5ZARR_RETRIES``
(default 2), ``N5ZARR_RETRY_BACKOFF`` (s, default 0.5, doubled per retry). Worst case for
one key: (retries + 1) x request timeout + backoffs. Timeouts given in ``storage_options`` (``client_kwargs["timeout"]`` for
HTTP, ``config_kwargs`` for S3) take precedence, as does ``max_pool_connections`` (S3 stores
get :data:`MAX_CONNECTIONS`, botocore's default of 10 would queue a plane's block requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import posixpath
import random
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from zarr.abc.store import RangeByteRequest
from zarr.storage import FsspecStore

from napari_n5zarr.byte_ranges import cut, http_range
from napari_n5zarr.environment import number
from napari_n5zarr.errors import DeadlineExceeded, N5FormatError, N5StoreError
from napari_n5zarr.n5.constants import (
    MAX_LISTING_BYTES_ENV,
    MAX_LISTING_ENTRIES_ENV,
    ReadLimit,
    check_stored_size,
    max_listing_bytes,
    max_listing_entries,
    max_stored_bytes,
)
from napari_n5zarr.storage.cloud_credentials import refused_hint, with_anonymous_fallback
from napari_n5zarr.storage.local import is_metadata_key

if TYPE_CHECKING:
    from zarr.abc.buffer import Buffer, BufferPrototype
    from zarr.abc.store import ByteRequest

T = TypeVar("T")

logger = logging.getLogger(__name__)

_TRANSIENT_STATUS = frozenset({408, 429})
_TRANSIENT_NAMES = frozenset({
    "ClientConnectionError",  # aiohttp: resets, disconnects, socket timeouts
    "ClientPayloadError",  # aiohttp: body shorter than Content-Length
    "HTTPClientError",  # botocore: connection closed/refused, read/connect timeouts
    "IncompleteRead",
    "ResponseStreamingError",
})  # fmt: skip


MAX_CONNECTIONS = 100
"""Connections (requests in flight) per S3 store, as aiohttp's default for HTTP stores."""
HTTP_IN_FLIGHT = 32
"""Requests in flight per HTTP filesystem (browsers open 6 per host). Small servers drop
connections under more: Python's ``http.server`` (a listen backlog of 5) served the 4,000
metadata reads of a 2,000-child ``n5zarr tree`` in 13-20 s at 16-32, 91-122 s at 64-100."""


_session_options: dict[str, Any] | None = None


@contextlib.contextmanager
def default_storage_options(options: dict[str, Any] | None) -> Iterator[None]:
    """While the block runs, every URL opened without ``storage_options`` of its own gets
    ``options`` (the CLI's ``--storage-options``: one command reads and writes through
    several layers that each open the location); None changes nothing."""
    global _session_options
    saved = _session_options
    if options is not None:
        _session_options = dict(options)
    try:
        yield
    finally:
        _session_options = saved


@dataclass(frozen=True)
class RemoteSettings:
    """Timeouts (seconds) and the retry budget of remote reads."""

    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    retries: int = 2
    backoff: float = 0.5
    request_timeout: float | None = None
    """Seconds for one whole attempt (connect, headers, body); None: :attr:`read_timeout`."""

    @property
    def deadline(self) -> float:
        """The total seconds one attempt may take."""
        return self.read_timeout if self.request_timeout is None else self.request_timeout

    @classmethod
    def from_env(cls) -> RemoteSettings:
        """Defaults overridden by ``N5ZARR_CONNECT_TIMEOUT``, ``N5ZARR_READ_TIMEOUT``,
        ``N5ZARR_REQUEST_TIMEOUT``, ``N5ZARR_RETRIES`` and ``N5ZARR_RETRY_BACKOFF``."""
        values: dict[str, Any] = {}
        names = (
            ("connect_timeout", float),
            ("read_timeout", float),
            ("request_timeout", float),
            ("retries", int),
            ("backoff", float),
        )
        for name, conv in names:
            env = f"N5ZARR_{name.upper()}" if name != "backoff" else "N5ZARR_RETRY_BACKOFF"
            if os.environ.get(env, "").strip():
                values[name] = conv(number(env, 0))
        return cls(**values)


def storage_options_with_defaults(
    url: str, storage_options: dict[str, Any] | None, settings: RemoteSettings
) -> dict[str, Any]:
    """``storage_options`` plus our timeouts (and no library retries) where the user set none."""
    opts = dict(storage_options or {})
    if url.startswith(("http://", "https://")):
        client_kwargs = dict(opts.get("client_kwargs") or {})
        if "timeout" not in client_kwargs:
            import aiohttp

            client_kwargs["timeout"] = aiohttp.ClientTimeout(
                total=None, sock_connect=settings.connect_timeout, sock_read=settings.read_timeout
            )
        opts["client_kwargs"] = client_kwargs
    elif url.startswith(("s3://", "s3a://")):
        config_kwargs = dict(opts.get("config_kwargs") or {})
        config_kwargs.setdefault("connect_timeout", settings.connect_timeout)
        config_kwargs.setdefault("read_timeout", settings.read_timeout)
        config_kwargs.setdefault(
            "retries", {"total_max_attempts": 1, "mode": "standard"}
        )  # we retry
        # botocore keeps 10 connections per client: a napari plane of 64 blocks would wait
        # for 7 round trips instead of 1. As many as aiohttp allows over HTTP by default.
        config_kwargs.setdefault("max_pool_connections", MAX_CONNECTIONS)
        opts["config_kwargs"] = config_kwargs
        # s3fs sends a HEAD before every whole-object read when max_concurrency > 1 (to split
        # big objects into parallel ranges): one wasted round trip per N5 block.
        opts.setdefault("max_concurrency", 1)
        endpoint = os.environ.get("AWS_ENDPOINT_URL", "").strip()
        if (
            endpoint
            and "endpoint_url" not in opts
            and "endpoint_url" not in (opts.get("client_kwargs") or {})
        ):
            # botocore reads it too, but fsspec caches filesystems by their options: named
            # here, a changed endpoint is a new filesystem, not the old one's connections
            opts["endpoint_url"] = endpoint
    return with_anonymous_fallback(url, opts)


def user_deadline(url: str, storage_options: dict[str, Any] | None) -> float | None:
    """The deadline a user's own timeout in ``storage_options`` implies (aiohttp ``total``,
    else ``sock_read``; S3 ``read_timeout``), or None: a user who allows a slow server more
    time must not be cut off by our default deadline."""
    opts = storage_options or {}
    if url.startswith(("http://", "https://")):
        timeout = (opts.get("client_kwargs") or {}).get("timeout")
        value = getattr(timeout, "total", None) or getattr(timeout, "sock_read", None)
    else:
        value = (opts.get("config_kwargs") or {}).get("read_timeout")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = getattr(fs, "protocol", ())
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def _chain(error: BaseException) -> Iterable[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_status(error: BaseException) -> int | None:
    """The HTTP status behind an fsspec error (aiohttp or botocore), if any."""
    for e in _chain(error):
        status = getattr(e, "status", None)
        if isinstance(status, int):
            return status
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if isinstance(code, int):
                return code
    return None


def is_transient(error: BaseException) -> bool:
    """True for faults worth retrying: 5xx/408/429, resets, truncated bodies, timeouts."""
    status = http_status(error)
    if status is not None:
        return status >= 500 or status in _TRANSIENT_STATUS
    for e in _chain(error):
        if isinstance(e, (TimeoutError, ConnectionError)):
            return True
        if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(e).__mro__):
            return True
    return False


def describe(error: BaseException, settings: RemoteSettings) -> str:
    """A short reason: ``HTTP 503 Service Unavailable``, ``timed out ...``, or the error."""
    status = http_status(error)
    if status is not None:
        for e in _chain(error):
            message = getattr(e, "message", None)  # aiohttp: the reason phrase
            if isinstance(message, str) and message:
                return f"HTTP {status} {message}"
            response = getattr(e, "response", None)  # botocore: the S3 error document
            if isinstance(response, dict) and isinstance(response.get("Error"), dict):
                err = response["Error"]
                code = (
                    "" if str(err.get("Code", "")) == str(status) else err.get("Code", "")
                )  # HEAD: no document
                return f"HTTP {status} {code}: {err.get('Message', '')}".replace(" : ", " ").rstrip(
                    ": "
                )
        return f"HTTP {status} ({type(error).__name__}: {error})"
    refused = _connection_fault(error)
    if refused is not None:
        return refused
    if isinstance(error, DeadlineExceeded):
        return (f"timed out (not complete within {settings.deadline:g} s; "
                f"set N5ZARR_REQUEST_TIMEOUT / N5ZARR_READ_TIMEOUT to change)")  # fmt: skip
    if any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in _chain(error)):
        return (f"timed out (no answer within {settings.read_timeout:g} s, connect timeout "
                f"{settings.connect_timeout:g} s; set N5ZARR_READ_TIMEOUT / N5ZARR_CONNECT_TIMEOUT to change)")  # fmt: skip
    text = str(error) or repr(error)
    return f"{type(error).__name__}: {text}"


def _connection_fault(error: BaseException) -> str | None:
    """``cannot connect to HOST:PORT (connection refused)`` for aiohttp's connector errors
    (whose own text adds ``ssl:default`` even for plain http), else None."""
    for e in _chain(error):
        host, os_error = getattr(e, "host", None), getattr(e, "os_error", None)
        if isinstance(host, str) and isinstance(os_error, OSError):
            if isinstance(os_error, ConnectionRefusedError):
                reason = "connection refused"
            else:
                reason = os_error.strerror or str(os_error) or type(os_error).__name__
            port = getattr(e, "port", None)
            return f"cannot connect to {host}{f':{port}' if port else ''} ({reason})"
    return None


_SLOTS: weakref.WeakKeyDictionary[Any, tuple[asyncio.AbstractEventLoop, asyncio.Semaphore]] = (
    weakref.WeakKeyDictionary()
)


def _slots(fs: Any) -> asyncio.Semaphore:
    """Requests in flight per filesystem (fsspec shares one per set of options, and with it
    the connection pool) and event loop: no more than the pool holds, so that no request
    waits for a connection while its deadline runs."""
    loop = asyncio.get_running_loop()
    known = _SLOTS.get(fs)
    if known is None or known[0] is not loop:
        known = _SLOTS[fs] = (
            loop,
            asyncio.Semaphore(HTTP_IN_FLIGHT if "http" in _protocols(fs) else MAX_CONNECTIONS),
        )
    return known[1]


async def http_get_capped(
    fs: Any, url: str, byte_range: ByteRequest | None, cap: int, check: Callable[[int], None]
) -> bytes:
    """The body at ``url`` over fsspec's aiohttp session, streamed: ``check(size)`` (which
    raises past ``cap``) sees the declared ``Content-Length`` before the body and the
    running total while it arrives (after aiohttp's transparent decompression, so a gzip
    ``Content-Encoding`` bomb stops at the cap too); a 404 raises ``FileNotFoundError``."""
    if isinstance(byte_range, RangeByteRequest) and byte_range.end <= byte_range.start:
        return b""
    kw = dict(fs.kwargs)
    headers = dict(kw.pop("headers", None) or {})
    if (spec := http_range(byte_range)) is not None:
        headers["Range"] = spec
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), headers=headers, **kw) as r:
        if r.status == 416 and byte_range is not None:  # a range past the end: nothing (as fsspec)
            return b""
        if (
            r.status == 404
        ):  # read the (short) page first: a connection closed with it unread is reset
            await r.content.read(2**16)
        fs._raise_not_found_for_status(r, url)
        whole = byte_range is not None and r.status != 206  # the server ignored the range
        limit = byte_range.end if whole and isinstance(byte_range, RangeByteRequest) else None
        declared = r.headers.get("Content-Length")
        if (
            declared
            and declared.isdigit()
            and r.headers.get("Content-Encoding", "identity") == "identity"
            and limit is None
        ):
            check(int(declared))
        pieces, size = [], 0  # joined once at the end: one copy of the body, not two
        async for piece in r.content.iter_any():
            pieces.append(piece)
            size += len(piece)
            if limit is not None and size >= limit:
                break
            check(size)
            if size > cap:  # check raised for any real cap; never read on regardless
                break
    data = b"".join(pieces)
    return cut(data, byte_range) if whole else data


async def s3_get_capped(
    fs: Any, path: str, byte_range: ByteRequest | None, cap: int, check: Callable[[int], None]
) -> bytes:
    """The object at ``path`` over s3fs's client, streamed: a whole read asks for its first
    ``cap + 1`` bytes, ``check(size)`` (which raises past ``cap``) sees the declared length
    and the running total while the body arrives (a server that ignores the range, or sends
    a body without end, is cut off at the cap; s3fs's own read takes the whole body)."""
    if isinstance(byte_range, RangeByteRequest) and byte_range.end <= byte_range.start:
        return b""
    bucket, key, version = fs.split_path(path)
    spec = http_range(byte_range if byte_range is not None else RangeByteRequest(0, cap + 1))
    try:  # s3fs translates botocore's errors (NoSuchKey: FileNotFoundError), keeping the cause
        response = await fs._call_s3(
            "get_object",
            Bucket=bucket,
            Key=key,
            Range=spec,
            **({"VersionId": version} if version else {}),
        )
    except Exception as e:
        if http_status(e) == 416:  # a range past the end (an empty object): nothing
            return b""
        raise
    body = response["Body"]
    try:
        declared = response.get("ContentLength")
        if isinstance(declared, int):
            check(declared)
        pieces, size = [], 0
        async for piece in body.iter_chunks(2**20):
            pieces.append(piece)
            size += len(piece)
            check(size)
            if size > cap:  # check raised for any real cap; never read on regardless
                break
    finally:
        body.close()
    return b"".join(pieces)


_DNS_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_UNSIGNED: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def unsigned_object_url(fs: Any, path: str) -> str | None:
    """The plain HTTP(S) URL of an S3 object that an anonymous filesystem reads with an
    unsigned GET (what botocore would send, less its ~1 ms of CPU a request: 2-3x the
    client's work on a plane of blocks), or None where botocore is needed: signed or
    versioned reads, requester pays, extra request arguments, names a URL cannot carry."""
    from napari_n5zarr.storage.cloud_credentials import is_anonymous

    if (
        not is_anonymous(fs)
        or getattr(fs, "version_aware", False)
        or getattr(fs, "req_kw", None)
        or getattr(fs, "s3_additional_kwargs", None)
        or (getattr(fs, "config_kwargs", None) or {}).get("proxies")
        or any(c in path for c in "?#%\\")
    ):
        return None
    bucket, _, key = path.partition("/")
    if not bucket or not key:
        return None
    client = getattr(fs, "client_kwargs", None) or {}
    endpoint = getattr(fs, "endpoint_url", None) or client.get("endpoint_url")
    if endpoint:  # an S3-compatible service: path style, as botocore addresses an IP endpoint
        return f"{str(endpoint).rstrip('/')}/{bucket}/{key}"
    if not _DNS_BUCKET.fullmatch(bucket):
        return None  # dots or capitals: botocore knows the region rules
    region = client.get("region_name")
    host = f"s3.{region}.amazonaws.com" if region else "s3.amazonaws.com"
    scheme = "http" if getattr(fs, "use_ssl", True) is False else "https"
    return f"{scheme}://{bucket}.{host}/{key}"


def unsigned_tls(fs: Any) -> Any:
    """aiohttp's ``ssl`` for ``fs``'s unsigned reads, verifying as botocore would:
    ``client_kwargs["verify"]`` (False, or a CA bundle) or ``AWS_CA_BUNDLE``; None: the
    system's certificates."""
    import ssl

    verify = (getattr(fs, "client_kwargs", None) or {}).get("verify")
    if verify is False:
        return False
    cafile = verify if isinstance(verify, str) else os.environ.get("AWS_CA_BUNDLE", "").strip()
    if not cafile:
        return None
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as e:  # never a FileNotFoundError: a block is not absent
        raise N5StoreError(f"cannot read the CA bundle {cafile}: {e.strerror or e}") from None


async def _unsigned_http(fs: Any, settings: RemoteSettings) -> Any:
    """An fsspec HTTP filesystem (its session on the running event loop, closed at exit)
    for ``fs``'s unsigned reads, with the same timeouts; one per S3 filesystem."""
    known = _UNSIGNED.get(fs)
    if known is None:
        import aiohttp
        from fsspec.implementations.http import HTTPFileSystem

        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=settings.connect_timeout, sock_read=settings.read_timeout
        )
        client: dict[str, Any] = {"timeout": timeout, "trust_env": True}  # proxies as botocore
        if (tls := unsigned_tls(fs)) is not None:
            client["connector"] = aiohttp.TCPConnector(ssl=tls)
        known = HTTPFileSystem(asynchronous=True, skip_instance_cache=True, client_kwargs=client)
        session = await known.set_session()
        weakref.finalize(known, known.close_session, asyncio.get_running_loop(), session)
        known = _UNSIGNED.setdefault(fs, known)
    return known


def _too_many(url: str, entries: int) -> N5StoreError:
    return N5StoreError(f"cannot list {url}: more than {entries} entries (the listing limit); "
                        f"set the environment variable {MAX_LISTING_ENTRIES_ENV} to raise it")  # fmt: skip


_ANCHOR = re.compile(r"<[aA]\s[^<>]*>")
"""An ``<a ...>`` tag: ``[^<>]`` ends every attempt at the next ``<``, so a page is scanned in
linear time, whatever it holds (fsspec's pattern backtracks on long tags)."""
_HREF = re.compile(r"""\s(?:href|HREF)=["']([^"']+)""")
_BARE_URL = re.compile(r"""http[s]?://[-a-zA-Z0-9@:%_+.~#?&/=]+""")
"""fsspec's ``simple_links`` pattern: any URL in the page's text."""


class _Links:
    """The links of an HTML page fed piece by piece, found as fsspec's HTTP listing finds
    them (``href`` of ``<a>`` tags, and bare URLs with ``simple``), in linear time: text is
    scanned up to the last ``>`` only, the rest waits (unjoined) for a piece that holds one.
    Refuses more than ``most`` distinct links."""

    def __init__(self, url: str, simple: bool, most: int) -> None:
        self.url, self.simple, self.most = url, simple, most
        self.pending: list[str] = []
        self.found: dict[str, None] = {}  # in page order, each once

    def feed(self, text: str, final: bool = False) -> None:
        cut = len(text) if final else text.rfind(">") + 1
        if not cut and not final:
            self.pending.append(text)
            return
        part = "".join([*self.pending, text[:cut]])
        self.pending = [text[cut:]]
        for tag in _ANCHOR.finditer(part):
            if (href := _HREF.search(tag.group())) is not None:
                self.found[href.group(1)] = None
        if self.simple:
            self.found.update(dict.fromkeys(m.group() for m in _BARE_URL.finditer(part)))
        if len(self.found) > self.most:
            raise _too_many(self.url, self.most)


def _children(url: str, links: Iterable[str], same_scheme: bool) -> list[str]:
    """fsspec's rules (``HTTPFileSystem._ls_real``) for the URLs a page's links name below ``url``."""
    out: dict[str, None] = {}
    parts = urlparse(url)
    base = url.rstrip("/") + "/"
    for link in links:
        if link.startswith("/") and len(link) > 1:  # absolute URL on this server
            link = f"{parts.scheme}://{parts.netloc}{link}"
        if link.startswith("http"):
            if (same_scheme and link.startswith(base)) or link.replace("https", "http").startswith(
                base.replace("https", "http")
            ):
                out[link] = None
        elif link not in ("..", "../"):
            out["/".join([url.rstrip("/"), link.lstrip("/")])] = None
    return sorted(out)


async def http_list_capped(fs: Any, url: str, max_bytes: int, max_entries: int) -> list[str]:
    """The URLs an HTTP directory page at ``url`` links to below it (fsspec's rules), the
    page streamed and scanned as it arrives: N5StoreError naming the URL and the limit past
    ``max_bytes`` of page or ``max_entries`` links (nothing else is held but the links); a
    404 raises ``FileNotFoundError``. Pages that are not HTML list nothing (as fsspec)."""
    session = await fs.set_session()
    async with session.get(fs.encode_url(url), **fs.kwargs) as r:
        if r.status == 404:
            await r.content.read(2**16)
        fs._raise_not_found_for_status(r, url)
        mimetype = r.headers.get("Content-Type", "").partition(";")[0] or None
        if mimetype not in ("text/html", None):
            return []
        too_big = N5StoreError(f"cannot list {url.rstrip('/')}: the listing page is over the size limit of {max_bytes} bytes; "
                               f"set the environment variable {MAX_LISTING_BYTES_ENV} to raise it")  # fmt: skip
        declared = r.headers.get("Content-Length")
        if (
            declared
            and declared.isdigit()
            and r.headers.get("Content-Encoding", "identity") == "identity"
            and int(declared) > max_bytes
        ):
            raise too_big
        import codecs

        decoder = codecs.getincrementaldecoder(r.get_encoding() if r.charset else "utf-8")(
            errors="ignore"
        )
        links = _Links(url.rstrip("/"), bool(getattr(fs, "simple_links", True)), max_entries)
        read = 0
        async for piece in r.content.iter_any():
            read += len(piece)
            if read > max_bytes:
                raise too_big
            links.feed(decoder.decode(piece))
        links.feed(decoder.decode(b"", final=True), final=True)
    return _children(url, links.found, bool(getattr(fs, "same_schema", True)))


class RemoteStore(FsspecStore):
    """``FsspecStore`` whose reads retry transient faults with exponential backoff and then
    raise :class:`N5StoreError` naming the URL; every body and listing page is size-capped."""

    limited_reads = True
    """:meth:`get` takes ``limit``: a block's dataset's own cap (see :class:`ReadLimit`)."""

    def __init__(self, *args: Any, settings: RemoteSettings | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings or RemoteSettings.from_env()

    @classmethod
    def open_url(
        cls, url: str, storage_options: dict[str, Any] | None = None, *, read_only: bool = True
    ) -> RemoteStore:
        """The store at ``url`` with this module's timeouts and retries."""
        settings = RemoteSettings.from_env()
        if storage_options is None:
            storage_options = _session_options
        if (
            settings.request_timeout is None
            and (user := user_deadline(url, storage_options)) is not None
        ):
            settings = dataclasses.replace(settings, request_timeout=user)
        try:
            store = cls.from_url(url, storage_options=storage_options_with_defaults(url, storage_options, settings),
                                 read_only=read_only)  # fmt: skip
        except (
            ImportError
        ) as e:  # fsspec's "Install s3fs to access S3": the same pip hint as the CLI's
            from napari_n5zarr.extras import needs_package

            raise needs_package(e, url) from None
        except ValueError as e:
            if not str(e).startswith("Protocol not known"):
                raise
            from napari_n5zarr.errors import InvalidArgumentError

            scheme = url.split("://", 1)[0]
            raise InvalidArgumentError(
                f"cannot open {url}: no filesystem is known for {scheme}:// URLs"
            ) from None
        assert isinstance(store, RemoteStore)
        store.settings = settings
        if hasattr(store.fs, "retries") and url.startswith(("s3://", "s3a://")):
            store.fs.retries = 1  # s3fs's own retry loop (default 5): one layer retries, ours
        return store

    def with_read_only(self, read_only: bool = False) -> RemoteStore:
        return type(self)(fs=self.fs, path=self.path, allowed_exceptions=self.allowed_exceptions,
                          read_only=read_only, settings=self.settings)  # fmt: skip

    def __repr__(self) -> str:
        return f"<RemoteStore({type(self.fs).__name__}, {self.path})>"

    def url(self, key: str = "") -> str:
        """The URL of ``key`` (for messages)."""
        path = f"{self.path.rstrip('/')}/{key}" if key else self.path
        try:
            return str(self.fs.unstrip_protocol(path))
        except Exception:  # a message helper must not fail
            return path

    @property
    def is_http(self) -> bool:
        return "http" in _protocols(self.fs)

    async def _attempt(self, call: Callable[[], Awaitable[T]], deadline: bool) -> T:
        """``await call()`` holding a connection slot, within the deadline (if ``deadline``)."""
        async with _slots(self.fs):
            if not deadline:
                return await call()
            timer = asyncio.timeout(self.settings.deadline)
            try:
                async with timer:
                    return await call()
            except TimeoutError as e:
                if timer.expired():  # ours, not a library's per-byte timeout
                    raise DeadlineExceeded(
                        f"not complete within {self.settings.deadline:g} s"
                    ) from e
                raise

    async def _retrying(
        self,
        name: str | Callable[[], str],
        call: Callable[[], Awaitable[T]],
        *,
        deadline: bool = True,
    ) -> T:
        """``await call()``, retried on transient faults, each attempt within the deadline;
        ``name`` (or ``name()``, computed only on a fault: a block read must not pay for its
        URL) says what for messages."""
        attempts = self.settings.retries + 1
        for attempt in range(attempts):
            try:
                return await self._attempt(call, deadline)
            except (FileNotFoundError, N5FormatError, N5StoreError):
                raise
            except Exception as e:  # every library's fault, classified below
                what = name() if callable(name) else name
                if attempt + 1 < attempts and is_transient(e):
                    delay = self.settings.backoff * 2**attempt
                    logger.info(
                        "retrying %s in %.2f s (attempt %d of %d): %s",
                        what,
                        delay,
                        attempt + 2,
                        attempts,
                        describe(e, self.settings),
                    )
                    await asyncio.sleep(delay * (1 + random.random() / 4))  # jitter
                    continue
                tries = f" (after {attempt + 1} attempts)" if attempt else ""
                logger.debug("giving up on %s%s", what, tries, exc_info=True)
                hint = refused_hint(self.url(), self.fs) if http_status(e) in (401, 403) else ""
                raise N5StoreError(
                    f"cannot read {what}: {describe(e, self.settings)}{tries}{hint}"
                ) from e
        raise AssertionError("unreachable")

    async def get(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None,
                  *, limit: ReadLimit | None = None) -> Buffer | None:  # fmt: skip
        """The value at ``key``, read within its cap: a metadata document's, a block's
        dataset's own ``limit`` (passed by the N5 Default Store), else the global block cap."""
        metadata = is_metadata_key(key)
        cap = max_stored_bytes(metadata, limit)

        def check(size: int) -> None:
            check_stored_size(size, self.url(key), metadata=metadata, limit=limit)

        get_capped = (
            http_get_capped
            if self.is_http
            else s3_get_capped
            if hasattr(self.fs, "_call_s3")
            else None
        )
        if get_capped is not None:  # HTTP and s3fs: the body streamed and capped
            path = f"{self.path.rstrip('/')}/{key}" if self.path else key
            target: Any = self.fs
            unsigned = (
                None
                if metadata or get_capped is http_get_capped
                else unsigned_object_url(self.fs, path)
            )
            if unsigned is not None:  # a block of a public bucket: one plain GET
                get_capped, path = http_get_capped, unsigned
                target = await _unsigned_http(self.fs, self.settings)

            async def fetch() -> Buffer | None:
                try:
                    return prototype.buffer.from_bytes(
                        await get_capped(target, path, byte_range, cap, check)
                    )
                except self.allowed_exceptions:
                    return None

            value = await self._retrying(lambda: self.url(key), fetch)
        else:
            if byte_range is None:  # a bounded read: the other object stores honour ranges
                byte_range = RangeByteRequest(0, cap + 1)
            parent_get = super().get
            value = await self._retrying(
                lambda: self.url(key), lambda: parent_get(key, prototype, byte_range)
            )
        if value is not None:
            check(len(value))
        return value

    async def exists(self, key: str) -> bool:
        parent_exists = super().exists
        return await self._retrying(lambda: self.url(key), lambda: parent_exists(key))

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    async def _listing(
        self, prefix: str, make: Callable[[], AsyncIterator[str]], most: int | None = None
    ) -> AsyncIterator[str]:
        """The keys ``make()`` lists, retried as one read; N5StoreError naming the place past
        ``most`` keys (one folder's children; whole-store walks are not capped here: their
        readers stop when they have counted enough)."""

        async def collect() -> list[str]:
            out = []
            async for key in make():
                out.append(key)
                if most is not None and len(out) > most:
                    raise _too_many(self.url(prefix), most)
            return out

        # an HTTP listing is one request: the deadline holds; an S3 listing may be many pages
        # (each under botocore's timeouts), a big one may take longer than one request may
        for key in await self._retrying(
            f"the listing of {self.url(prefix)}", collect, deadline=self.is_http
        ):
            yield key

    def _full(self, prefix: str) -> str:
        """The path listed for ``prefix`` (as zarr's ``FsspecStore.list_dir`` makes it)."""
        root = self.path.rstrip("/")
        return f"{root}/{prefix.rstrip('/')}" if root else prefix.rstrip("/")

    async def _http_ls(self, path: str) -> list[str]:
        """One HTTP directory page at ``path``, capped (:func:`http_list_capped`), within the
        deadline and retried like every read; [] when there is no such page."""
        max_bytes, max_entries = max_listing_bytes(), max_listing_entries()

        async def page() -> list[str]:
            try:
                found = await http_list_capped(self.fs, path, max_bytes, max_entries)
                if not found and path.endswith("/"):  # as fsspec: the page without the slash
                    found = await http_list_capped(
                        self.fs, path.rstrip("/"), max_bytes, max_entries
                    )
                return found
            except FileNotFoundError:
                return []

        return await self._retrying(f"the listing of {path}", page)  # an HTTP path is its URL

    async def _http_names(self, prefix: str) -> list[str]:
        """The names directly under ``prefix`` on an HTTP listing page (zarr's rules:
        in-page anchors and queries skipped, ``./a`` normalized, each name once)."""
        path = self._full(prefix)
        names: dict[str, None] = {}
        for link in await self._http_ls(path):
            name = link.replace(f"{path}/", "").removeprefix(self.path).removeprefix("/")
            if "#" in name or "?" in name:
                continue
            name = posixpath.normpath(name).rstrip("/")
            if name in ("", ".", "..") or "/" in name:
                continue
            names[name] = None
        return list(names)

    async def _s3_names(self, prefix: str) -> AsyncIterator[str]:
        """The names directly under ``prefix`` from s3fs's page-by-page listing (``_iterdir``:
        its own pagination and error translation), as they arrive: the reader stops at the
        entry cap after the page that passes it (s3fs's ``ls`` reads every page first)."""
        bucket, key, _ = self.fs.split_path(self._full(prefix))
        stem = f"{key.strip('/')}/" if key.strip("/") else ""
        seen: set[str] = set()
        async for entry in self.fs._iterdir(bucket, prefix=stem, delimiter="/"):
            name = (
                str(entry.get("Key", "")).removeprefix(f"{bucket}/{stem}").rstrip("/")
            )  # "bucket/key"
            if name and "/" not in name and name not in seen:
                seen.add(name)
                yield name

    async def _http_walk(self, prefix: str) -> AsyncIterator[str]:
        """Every file key below ``prefix`` (folders are the links ending in ``/``, as fsspec's
        walk has it), page by page as they are read, each page capped."""
        todo = [prefix.strip("/")]
        walked: set[str] = set()
        while todo:
            folder = todo.pop()
            path = self._full(folder)
            for link in await self._http_ls(path):
                name = link.replace(f"{path}/", "").removeprefix(self.path).removeprefix("/")
                if "#" in name or "?" in name:
                    continue
                is_folder = name.endswith("/")
                name = posixpath.normpath(name).rstrip("/")
                if name in ("", ".", "..") or "/" in name:
                    continue
                key = f"{folder}/{name}" if folder else name
                if not is_folder:
                    yield key
                elif key not in walked:
                    walked.add(key)
                    todo.append(key)

    async def list(self) -> AsyncIterator[str]:
        if self.is_http:
            async for key in self._http_walk(""):
                yield key
            return
        async for key in self._listing("", super().list):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        if self.is_http:
            for name in await self._http_names(prefix):
                yield name
            return
        if hasattr(self.fs, "_iterdir") and hasattr(
            self.fs, "_call_s3"
        ):  # s3fs: page by page, stopped at the cap
            make: Callable[[], AsyncIterator[str]] = lambda: self._s3_names(prefix)  # noqa: E731
        else:
            parent = super().list_dir
            make = lambda: parent(prefix)  # noqa: E731
        async for key in self._listing(prefix, make, max_listing_entries()):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        if self.is_http:
            async for key in self._http_walk(prefix):
                yield key
            return
        parent = super().list_prefix
        async for key in self._listing(prefix, lambda: parent(prefix)):
            yield key
