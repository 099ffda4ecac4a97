"""Shared test fixtures (generic: paths to test data, a private napari config)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# napari reads its settings at import: keep tests away from the user's config.
if "NAPARI_CONFIG" not in os.environ:
    _config_dir = tempfile.mkdtemp(prefix="napari-cfg-")
    atexit.register(shutil.rmtree, _config_dir, ignore_errors=True)
    os.environ["NAPARI_CONFIG"] = os.path.join(_config_dir, "settings.yaml")

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``."""
    return DATA


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """``tests/data/corpus``: real N5 written by other software (same layout as the shared corpus)."""
    path = DATA / "corpus"
    if not path.is_dir():
        pytest.skip("tests/data/corpus is missing")
    return path


@pytest.fixture(scope="session")
def conventions_dir() -> Path:
    """``tests/data/conventions``: metadata-only examples of each metadata convention."""
    return DATA / "conventions"


@pytest.fixture
def read_json():
    """Load a JSON file."""

    def load(path: str | os.PathLike[str]) -> dict:
        return json.loads(Path(path).read_text())

    return load


@pytest.fixture(scope="session")
def write_n5():
    """``write_n5(group, name, data, chunks=..., attributes=..., compression=...)``: an N5
    dataset (data in N5 order) written through the library's ``n5_default`` codec."""
    from napari_n5zarr import create_dataset

    def write(group, name, data, *, chunks, attributes=None, compression=None):
        array = create_dataset(
            group, name, shape=data.shape, dtype=data.dtype, chunks=chunks,
            compression=compression or {"type": "gzip", "level": -1}, attributes=attributes,
        )  # fmt: skip
        array[...] = data
        return array

    return write


@pytest.fixture(scope="session")
def s3_bucket() -> dict:
    """A real S3 endpoint (moto's server on 127.0.0.1) with bucket ``n5-data`` holding
    ``java.n5`` (the corpus n5-java container); yields s3fs storage options."""
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
    s3 = boto3.client("s3", endpoint_url=endpoint, **creds)
    s3.create_bucket(Bucket="n5-data")
    java = DATA / "corpus/zarr_implementations/data/n5-java.n5"
    for f in java.rglob("*"):
        if f.is_file():
            s3.put_object(Bucket="n5-data", Key="java.n5/" + f.relative_to(java).as_posix(), Body=f.read_bytes())
    yield {"endpoint_url": endpoint, "key": "testing", "secret": "testing", "client_kwargs": {"region_name": "us-east-1"}}
    server.stop()
