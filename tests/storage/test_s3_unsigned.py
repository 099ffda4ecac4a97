"""Blocks of a public S3 bucket read anonymously are plain unsigned GETs (issue 29, item 3:
botocore's ~1 ms of CPU a request was 2-3x the client's work on a plane of blocks), with
the same caps, retries and errors; signed, versioned or requester-pays reads, and metadata,
stay with s3fs. moto's S3 server runs in its own process (conftest ``public_s3``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from faulty_http import FaultyHandler, FaultyServer, serve

import napari_n5zarr
from napari_n5zarr.errors import N5StoreError
from napari_n5zarr.storage.remote import unsigned_object_url, unsigned_tls

CORPUS = Path(__file__).parents[1] / "data/corpus"
EXPECTED = np.load(CORPUS / "expected_derived/zarr_implementations_reference_image.npy").T


def _fs(**options):
    s3fs = pytest.importorskip("s3fs")
    return s3fs.S3FileSystem(skip_instance_cache=True, **options)


def test_which_reads_are_plain_gets() -> None:
    anon = _fs(anon=True, endpoint_url="http://127.0.0.1:9000")
    assert (
        unsigned_object_url(anon, "pub/c.n5/s0/1/2/3") == "http://127.0.0.1:9000/pub/c.n5/s0/1/2/3"
    )
    aws = _fs(anon=True)
    assert unsigned_object_url(aws, "janelia-cosem-datasets/a/s0/0/0/0") == (
        "https://janelia-cosem-datasets.s3.amazonaws.com/a/s0/0/0/0"
    )
    regional = _fs(anon=True, client_kwargs={"region_name": "us-west-2"})
    assert (
        unsigned_object_url(regional, "bucket/k/0")
        == "https://bucket.s3.us-west-2.amazonaws.com/k/0"
    )
    assert unsigned_object_url(aws, "dotted.bucket/k/0") is None  # region rules: botocore's
    assert unsigned_object_url(anon, "pub/a?b/0") is None  # not a URL path as it is
    assert unsigned_object_url(_fs(key="k", secret="s"), "pub/c.n5/0") is None  # signed
    assert unsigned_object_url(_fs(anon=True, requester_pays=True), "pub/c.n5/0") is None
    assert unsigned_object_url(_fs(anon=True, version_aware=True), "pub/c.n5/0") is None
    proxied = _fs(anon=True, config_kwargs={"proxies": {"https": "http://proxy:3128"}})
    assert unsigned_object_url(proxied, "pub/c.n5/0") is None


def test_unsigned_reads_verify_certificates_as_botocore_would(monkeypatch, tmp_path) -> None:
    import ssl

    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    assert unsigned_tls(_fs(anon=True)) is None  # the system's certificates
    assert unsigned_tls(_fs(anon=True, client_kwargs={"verify": False})) is False
    bundle = pytest.importorskip("certifi").where()
    monkeypatch.setenv("AWS_CA_BUNDLE", bundle)
    assert isinstance(unsigned_tls(_fs(anon=True)), ssl.SSLContext)
    missing = tmp_path / "none.pem"
    monkeypatch.setenv("AWS_CA_BUNDLE", str(missing))
    with pytest.raises(N5StoreError, match="cannot read the CA bundle"):  # not "absent"
        unsigned_tls(_fs(anon=True))


class _AgentHandler(FaultyHandler):
    def _respond(self) -> None:
        agent = self.headers.get("User-Agent", "")
        self.server.agents.append((self.path, "aiohttp" in agent, "Authorization" in self.headers))
        super()._respond()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _respond


class _AgentServer(FaultyServer):
    def __init__(self, upstream: str) -> None:
        super().__init__(upstream=upstream, s3=True)
        self.RequestHandlerClass = _AgentHandler
        self.agents: list[tuple[str, bool, bool]] = []


@pytest.fixture
def logged_s3(public_s3, no_credentials, monkeypatch):
    """moto behind a logging proxy (User-Agent and Authorization of each request)."""
    for server in serve(_AgentServer(public_s3)):
        monkeypatch.setenv("AWS_ENDPOINT_URL", server.url)
        monkeypatch.setenv("N5ZARR_RETRY_BACKOFF", "0.01")
        yield server


def test_public_blocks_are_unsigned_gets_and_metadata_goes_through_s3fs(logged_s3) -> None:
    arr = napari_n5zarr.open("s3://pub/java.n5/gzip")
    np.testing.assert_array_equal(arr[...], EXPECTED)
    blocks = [a for a in logged_s3.agents if not a[0].endswith(".json") and "/gzip/" in a[0]]
    documents = [a for a in logged_s3.agents if a[0].endswith("attributes.json")]
    assert blocks
    assert all(plain and not signed for _, plain, signed in blocks), blocks
    assert documents
    assert not any(plain for _, plain, _ in documents), documents  # botocore's


def test_a_failing_block_is_retried_and_named_as_an_s3_url(logged_s3) -> None:
    arr = napari_n5zarr.open("s3://pub/java.n5/gzip")
    logged_s3.faults["/gzip/0/0/0"] = "500"
    with pytest.raises(N5StoreError) as error:
        arr[...]
    message = str(error.value)
    assert "s3://pub/java.n5/gzip/0/0/0" in message
    assert "HTTP 500" in message
    assert "after 3 attempts" in message, message
    logged_s3.hits.clear()
    logged_s3.faults["/gzip/0/0/0"] = "flaky:1"  # one 503, then the block
    np.testing.assert_array_equal(arr[...], EXPECTED)
