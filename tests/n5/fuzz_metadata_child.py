"""Child process of test_fuzz_metadata.py: mutate attributes.json, open, read, classify.

Usage: python fuzz_metadata_child.py WORKDIR SEED COUNT [MEMORY_LIMIT_BYTES]. Prints one JSON summary line:
{"cases": n, "outcomes": {...}, "failures": [...]}. Sets its own address-space limit
(RLIMIT_AS) first, so a memory blow-up ends this process, not pytest or the machine.
"""

from __future__ import annotations

import json
import random
import re
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import zarr

import napari_n5zarr
from napari_n5zarr.errors import N5BlockError, N5FormatError, N5MetadataError
from napari_n5zarr.n5.metadata import attributes_to_zarr, is_dataset

CASE_SECONDS = 20  # one case still running after this is a hang (a failure)
COMPRESSIONS = [
    {"type": "raw"}, {"type": "gzip", "level": -1}, {"type": "gzip", "level": 5, "useZlib": True},
    {"type": "bzip2", "blockSize": 9}, {"type": "xz", "preset": 6}, {"type": "lz4", "blockSize": 65536},
    {"type": "zstd", "level": 3},
    {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0, "nthreads": 1},
]  # fmt: skip
DTYPES = ["uint8", "int16", "uint32", "float32", "int64", "float64"]
GROUP_ATTRS = {"n5": "4.0.0", "pixelResolution": {"unit": "um", "dimensions": [1.0, 1.0, 2.0]},
               "scales": [[1, 1, 1], [2, 2, 1]], "axes": ["x", "y", "z"]}  # fmt: skip
KEYS = ["dimensions", "blockSize", "dataType", "compression", "compressionType", "n5", "codecs", "shardSize",
        "pixelResolution", "downsamplingFactors", "axes", "units", "resolution", "transform", "multiscales",
        "Dimensions", "dataType ", ""]  # fmt: skip
COMPRESSION_PARAMS = ["type", "level", "useZlib", "blockSize", "preset", "cname", "clevel", "shuffle", "blocksize",
                      "nthreads", "id", "format"]  # fmt: skip
TOKENS = [b"{", b"}", b"[", b"]", b'"', b",", b":", b"null", b"true", b"1e999", b"-", b"NaN", b"Infinity",
          b"\\u0000", b"\\ud800", b"\x00", b"\xff", b"9" * 400, b"0.5", b"-1"]  # fmt: skip


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang(f"case still running after {CASE_SECONDS} s")


def random_value(rng: random.Random, depth: int = 0) -> Any:
    choice = rng.randrange(26)
    if choice == 0:
        return None
    if choice == 1:
        return rng.choice([True, False])
    if choice == 2:
        return rng.choice(
            [
                0,
                1,
                -1,
                2,
                3,
                7,
                100,
                65536,
                2**31 - 1,
                2**31,
                2**32 - 1,
                2**32,
                2**53,
                2**63,
                2**64,
                -(2**63),
            ]
        )
    if choice == 3:
        return rng.choice([0.0, 0.5, -1.5, 1e300, -1e-300, 3.0, float("nan"), float("inf")])
    if choice == 4:
        return rng.choice(["", "x", "raw", "gzip", "blosc", "zstd", "uint8", "float64", "object", "string", "4.0.0",
                           "\u0000", "é", "a" * 1000])  # fmt: skip
    if choice in (5, 6, 7, 8, 9):  # lists of small ints: plausible dims/blockSize
        return [
            rng.choice([0, 1, 2, 3, 5, 7, 64, 2**31, 2**32 - 1, 2**32, -1])
            for _ in range(rng.randrange(0, 6))
        ]
    if choice == 10:
        return [rng.choice([1.5, "2", None, True, [2]]) for _ in range(rng.randrange(1, 4))]
    if choice in (11, 12, 13) and depth < 3:
        return {
            "type": rng.choice(
                ["raw", "gzip", "bzip2", "xz", "lz4", "zstd", "blosc", "snappy", "", None, 5]
            ),
            **{
                rng.choice(COMPRESSION_PARAMS): random_value(rng, depth + 1)
                for _ in range(rng.randrange(0, 4))
            },
        }
    if choice in (14, 15) and depth < 3:
        return {rng.choice(KEYS): random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))}
    if choice in (16, 17):  # deep nesting, spliced into the text by dump()
        return f"__DEEP_{rng.choice([5, 50, 98, 99, 100, 101, 150, 1000, 5000, 100000])}__"
    if choice in (18, 19):
        return (
            [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))] if depth < 3 else []
        )
    return rng.choice(DTYPES)


def dump(doc: Any) -> bytes:
    """JSON text of ``doc`` with each ``"__DEEP_n__"`` replaced by n nested lists/objects."""

    def deep(match: re.Match[bytes]) -> bytes:
        n = int(match.group(1))
        opens = b"".join(b"[" if i % 3 else b'{"k":' for i in range(n))
        closes = b"".join(b"]" if i % 3 else b"}" for i in reversed(range(n)))
        return opens + b"0" + closes

    return re.sub(rb'"__DEEP_(\d+)__"', deep, json.dumps(doc).encode())


def mutate_structure(rng: random.Random, doc: dict[str, Any]) -> tuple[Any, str]:
    doc = json.loads(json.dumps(doc))
    kind = rng.randrange(9)
    if kind == 0:
        key = rng.choice(KEYS)
        doc[key] = random_value(rng)
        return doc, f"set {key!r}"
    if kind == 1 and doc:
        key = rng.choice(sorted(doc))
        del doc[key]
        return doc, f"delete {key!r}"
    if kind == 2 and isinstance(doc.get("compression"), dict):
        param = rng.choice(COMPRESSION_PARAMS)
        doc["compression"][param] = random_value(rng)
        return doc, f"compression[{param!r}]"
    if kind == 3:
        doc["compression"] = (
            random_value(rng) if rng.random() < 0.3 else dict(rng.choice(COMPRESSIONS))
        )
        return doc, "swap compression"
    if kind == 4 and isinstance(doc.get("dimensions"), list) and doc["dimensions"]:
        key = rng.choice(["dimensions", "blockSize"])
        values = list(doc[key]) if isinstance(doc.get(key), list) and doc[key] else [1]
        i = rng.randrange(len(values))
        old = values[i] if isinstance(values[i], int) and not isinstance(values[i], bool) else 1
        values[i] = rng.choice(
            [0, 1, -1, 2**32 - 1, 2**32, 2**63, 1.0, 2.5, True, None, "3", old + 1, old * 2]
        )
        if rng.random() < 0.2:
            values.append(rng.choice([1, 2, 0]))
        doc[key] = values
        return doc, f"{key}[{i}]"
    if kind == 5:
        return random_value(rng), "replace document"
    if kind == 6:
        doc["compressionType"] = rng.choice(
            ["raw", "gzip", "bzip2", "xz", "lz4", "zstd", "blosc", "nope", 1, None]
        )
        doc.pop("compression", None) if rng.random() < 0.5 else None
        return doc, "legacy compressionType"
    if kind == 7:
        doc[rng.choice(["user", "a", "scales"])] = random_value(rng)
        return doc, "user attribute"
    doc["dataType"] = rng.choice(
        [*DTYPES, "object", "string", "uint128", "UINT8", "", None, 8, "bool", "complex64"]
    )
    return doc, "dataType"


def mutate_bytes(rng: random.Random, text: bytes) -> tuple[bytes, str]:
    data = bytearray(text)
    kind = rng.randrange(6)
    pos = rng.randrange(len(data) + 1)
    if kind == 0 and data:
        data[min(pos, len(data) - 1)] = rng.randrange(256)
        return bytes(data), f"byte {pos}"
    if kind == 1:
        end = pos + rng.randrange(1, 20)
        del data[pos:end]
        return bytes(data), f"delete {pos}:{end}"
    if kind == 2:
        token = rng.choice(TOKENS)
        data[pos:pos] = token
        return bytes(data), f"insert {token[:12]!r} at {pos}"
    if kind == 3:
        return bytes(data[:pos]), f"truncate at {pos}"
    if kind == 4:
        end = min(len(data), pos + rng.randrange(1, 30))
        data[pos:pos] = data[pos:end]
        return bytes(data), f"duplicate {pos}:{end}"
    digits = [i for i, c in enumerate(data) if chr(c).isdigit()]
    if digits:
        i = rng.choice(digits)
        data[i : i + 1] = rng.choice([b"0", b"9999999999", b"-1", b"1.5", b"1e3", b"00"])
        return bytes(data), f"number at {i}"
    return bytes(data), "unchanged"


def build(work: Path, rng: random.Random) -> list[dict[str, Any]]:
    """One dataset per compression (varied dtype/shape, boundary blocks) plus one group."""
    root = napari_n5zarr.open(work / "c.n5", mode="w")
    bases = []
    for i, compression in enumerate(COMPRESSIONS):
        ndim = 1 + i % 3
        shape = tuple(rng.randrange(3, 9) for _ in range(ndim))
        chunks = tuple(rng.randrange(2, 5) for _ in range(ndim))
        dtype = np.dtype(DTYPES[i % len(DTYPES)])
        data = (np.arange(int(np.prod(shape))) * 7 % 251).astype(dtype).reshape(shape)
        arr = napari_n5zarr.create_dataset(root, f"d{i}", shape=shape, dtype=dtype, chunks=chunks, compression=compression,
                                           attributes={"pixelResolution": [1, 2, 3][:ndim], "note": "é"})  # fmt: skip
        arr[...] = data
        folder = work / "c.n5" / f"d{i}"
        (folder / "zarr.json").unlink()
        text = (folder / "attributes.json").read_bytes()
        bases.append({"folder": folder, "text": text, "doc": json.loads(text), "data": data})
    group = work / "c.n5" / "g"
    group.mkdir()
    (group / "attributes.json").write_text(json.dumps(GROUP_ATTRS))
    napari_n5zarr.create_dataset(
        napari_n5zarr.open(group, mode="r+"), "s0", shape=(4, 4, 2), dtype="uint8", chunks=(2, 2, 2)
    )
    (group / "s0" / "zarr.json").unlink()
    bases.append(
        {
            "folder": group,
            "text": (group / "attributes.json").read_bytes(),
            "doc": GROUP_ATTRS,
            "data": None,
        }
    )
    return bases


def translated(doc: Any) -> dict[str, Any] | None:
    try:
        out = attributes_to_zarr(doc)
    except N5FormatError:
        return None
    return {k: v for k, v in out.items() if k != "attributes"}


def check_case(base: dict[str, Any], text: bytes) -> str:
    """Open and read; return the outcome name, or raise AssertionError for a wrong result."""
    folder: Path = base["folder"]
    where = str(folder / "attributes.json")
    try:
        node = napari_n5zarr.open(folder)
    except N5MetadataError as e:
        if where not in str(e):
            raise AssertionError(f"metadata error does not name {where}: {e}") from e
        return "refused: metadata"
    except N5FormatError as e:
        if str(folder) not in str(e):
            raise AssertionError(f"format error does not name {folder}: {e}") from e
        return "refused: format"
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise AssertionError("opened although attributes.json is not valid JSON") from None
    if not isinstance(node, zarr.Array):
        assert not (isinstance(doc, dict) and is_dataset(doc)), "a dataset opened as a group"
        list(node.keys())
        return "opened: group"
    assert isinstance(doc, dict), "a non-dataset opened as an array"
    assert is_dataset(doc), "a non-dataset opened as an array"
    assert list(node.shape) == doc["dimensions"], "shape/dtype differ from attributes"
    assert str(node.dtype) == doc["dataType"], "shape/dtype differ from attributes"
    assert list(node.chunks) == doc["blockSize"], "chunks differ from blockSize"
    same = base["data"] is not None and translated(doc) == translated(base["doc"])
    if same:
        np.testing.assert_array_equal(node[...], base["data"])
        assert dict(node.attrs) == {
            k: v
            for k, v in doc.items()
            if k
            not in ("dimensions", "blockSize", "dataType", "compression", "compressionType", "n5")
        }
        return "opened: same data"
    region = tuple(slice(0, min(d, 2 * b)) for d, b in zip(node.shape, node.chunks, strict=True))
    try:
        out = node[region]
    except N5BlockError:
        return "opened: blocks refused"
    assert out.shape == tuple(s.stop for s in region), "wrong region shape"
    return "opened: read"


def main() -> None:
    work, seed, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    if len(sys.argv) > 4:
        import resource

        limit = int(sys.argv[4])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rng = random.Random(seed)
    bases = build(work, rng)
    signal.signal(signal.SIGALRM, _alarm)
    outcomes: dict[str, int] = {}
    failures: list[dict[str, Any]] = []
    for case in range(count):
        base = rng.choice(bases)
        steps = []
        doc: Any = base["doc"]
        text = base["text"]
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            if rng.random() < 0.55 and isinstance(doc, dict):
                doc, step = mutate_structure(rng, doc)
                text = dump(doc)
            else:
                text, step = mutate_bytes(rng, text)
                try:
                    doc = json.loads(text)
                except (ValueError, RecursionError):
                    doc = None
                if not isinstance(doc, dict) or "__DEEP_" in text.decode("utf-8", "replace"):
                    doc = None  # further steps mutate bytes only
            steps.append(step)
        path = base["folder"] / "attributes.json"
        path.write_bytes(text)
        # the case under way, for the parent to report if this process dies
        (work / "current-case.json").write_text(
            json.dumps(
                {
                    "case": case,
                    "base": base["folder"].name,
                    "steps": steps,
                    "document": text[:2000].decode("utf-8", "replace"),
                }
            )
        )
        signal.alarm(CASE_SECONDS)
        try:
            outcome = check_case(base, text)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        except Exception as e:  # every other end is a failure to report
            failures.append({"case": case, "base": base["folder"].name, "steps": steps, "error": f"{type(e).__name__}: {e}"[:400],
                             "document": text[:300].decode("utf-8", "replace"),
                             "where": traceback.format_exc(limit=-3)[-600:]})  # fmt: skip
        finally:
            signal.alarm(0)
            path.write_bytes(base["text"])
    print(
        json.dumps(
            {
                "cases": count,
                "outcomes": outcomes,
                "failures": failures[:25],
                "failed": len(failures),
            }
        )
    )


if __name__ == "__main__":
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    main()
