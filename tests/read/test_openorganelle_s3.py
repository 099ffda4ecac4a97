"""An OpenOrganelle-shaped container on a public S3 bucket (issue 29, item 2): the right
layers with the right scale and translate, read anonymously, at most one request per metadata
document the layers need, and never a listing of a level's blocks.

Layout as ``s3://janelia-cosem-datasets/<ds>/<ds>.n5``: ``em/fibsem-uint16`` (s0..s4) and
``labels/mito_seg``, ``labels/er_pred``, each dataset with a COSEM ``transform`` and each
pyramid group with ``multiscales``; the raw data at a non-zero offset."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from faulty_http import FaultyServer, serve

import napari_n5zarr
from napari_n5zarr import create_dataset
from napari_n5zarr._napari.reader import read_path

boto3 = pytest.importorskip("boto3")

PYRAMIDS = {  # name: (dtype, levels, level-0 voxel size nm (z, y, x), offset nm (z, y, x))
    "em/fibsem-uint16": ("uint16", 5, (3.24, 4.0, 4.0), (1600.0, 800.0, 400.0)),
    "labels/mito_seg": ("uint64", 3, (6.48, 8.0, 8.0), (1601.62, 802.0, 402.0)),
    "labels/er_pred": ("uint8", 2, (6.48, 8.0, 8.0), (1601.62, 802.0, 402.0)),
}
SHAPE0 = (48, 64, 80)  # z, y, x at level 0


def _transform(scale, offset, k: int) -> dict:
    f = 2**k
    return {
        "axes": ["z", "y", "x"],
        "units": ["nm", "nm", "nm"],
        "scale": [s * f for s in scale],
        "translate": [o + (f - 1) * s / 2 for o, s in zip(offset, scale, strict=True)],
    }


def _build(root: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    levels0 = {}
    (root / "attributes.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "attributes.json").write_text(json.dumps({"n5": "2.5.1"}))
    container = napari_n5zarr.open(root, mode="a")
    for name, (dtype, nlevels, scale, offset) in PYRAMIDS.items():
        group = root / name
        datasets = []
        for k in range(nlevels):
            shape = tuple(max(1, s // 2**k) for s in SHAPE0)
            data = rng.integers(0, 200, size=shape).astype(dtype)
            if k == 0:
                levels0[name] = data
            transform = _transform(scale, offset, k)
            create_dataset(container, f"{name}/s{k}", shape=shape[::-1], dtype=dtype, chunks=(16, 16, 16),
                           compression={"type": "gzip", "level": -1}, attributes={"transform": transform})[...] = data.T  # fmt: skip
            datasets.append({"path": f"s{k}", "transform": transform})
        attrs = {"multiscales": [{"name": name.rsplit("/", 1)[-1], "datasets": datasets}]}
        (group / "attributes.json").write_text(json.dumps(attrs))
    for middle in ("em", "labels"):
        (root / middle / "attributes.json").write_text("{}")
    for document in root.rglob("zarr.json"):  # N5 as n5-java writes it: attributes.json only
        document.unlink()
    return levels0


@pytest.fixture(scope="module")
def bucket(public_s3, tmp_path_factory) -> tuple[str, dict[str, np.ndarray]]:
    root = tmp_path_factory.mktemp("oo") / "jrc_test.n5"
    levels0 = _build(root)
    s3 = boto3.client("s3", endpoint_url=public_s3, aws_access_key_id="admin", aws_secret_access_key="admin",
                      region_name="us-east-1")  # fmt: skip
    for f in root.rglob("*"):
        if f.is_file():
            key = "jrc_test/jrc_test.n5/" + f.relative_to(root).as_posix()
            s3.put_object(Bucket="pub", Key=key, Body=f.read_bytes(), ACL="public-read")
    return public_s3, levels0


def test_openorganelle_shaped_container_over_public_s3(bucket, no_credentials, monkeypatch) -> None:
    endpoint, levels0 = bucket
    for front in serve(FaultyServer(upstream=endpoint, s3=True)):
        monkeypatch.setenv("AWS_ENDPOINT_URL", front.url)
        told: list[tuple[str, str]] = []
        layers = read_path(
            "s3://pub/jrc_test/jrc_test.n5", lambda level, msg, t=told: t.append((level, msg))
        )
        assert not [t for t in told if t[0] == "error"], told
        by_name = {kw["name"]: (data, kw, kind) for data, kw, kind in layers}
        assert set(by_name) == set(PYRAMIDS), list(by_name)
        for name, (_, nlevels, scale, offset) in PYRAMIDS.items():
            data, kw, kind = by_name[name]
            # a segmentation is labels; OpenOrganelle's *_pred are uint8 predictions: an image
            assert kind == ("labels" if name.endswith("_seg") else "image"), name
            np.testing.assert_allclose(kw["scale"], scale)
            np.testing.assert_allclose(kw["translate"], offset)
            levels = data if isinstance(data, list) else [data]
            assert len(levels) == nlevels
        requests = list(front.requests)
        # metadata: each document at most once; no level's blocks listed
        documents = Counter(r for r in requests if r.endswith(".json"))
        assert documents
        assert max(documents.values()) == 1, documents.most_common(3)
        listings = [
            parse_qs(urlsplit(r.split(" ", 1)[1]).query).get("prefix", [""])[0]
            for r in requests
            if "list-type" in r
        ]
        assert not [p for p in listings if re.search(r"/s\d+/", p)], listings
        # blocks: only each image's coarsest level, for its contrast limits (a few small blocks)
        coarsest = {
            f"{name}/s{PYRAMIDS[name][1] - 1}/" for name in PYRAMIDS if not name.endswith("_seg")
        }
        block_reads = [r for r in requests if re.search(r"/s\d+/\d+/\d+/\d+$", r)]
        assert all(any(c in r for c in coarsest) for r in block_reads), block_reads[:5]
        # and the data are right: level 0 of the raw image
        raw = by_name["em/fibsem-uint16"][0]
        first = raw[0] if isinstance(raw, list) else raw
        np.testing.assert_array_equal(np.asarray(first[10]), levels0["em/fibsem-uint16"][10])
