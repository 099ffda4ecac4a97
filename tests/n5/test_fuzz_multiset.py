"""Fuzz campaign on Paintera label-multiset blocks (issue 21), in the style of
``test_fuzz_blocks.py``: random truncations, bit flips and overwritten size fields of real
multiset blocks (stored argMax and not; raw and gzip; edge cells) end in a clean error naming
the block, or in exactly the labels the mutated bytes say (checked with an independent,
per-voxel pure-Python decoder): never a crash, never silently other labels.

The campaign runs in a child process under a memory limit (a crash or a runaway allocation
fails the test instead of killing pytest). Run by hand: ``python tests/n5/test_fuzz_multiset.py
--cases N --seed S``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import resource
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

SRC = str(Path(__file__).parents[2] / "src")
MEMORY_LIMIT = 1 << 30
WHERE = "N5 block s1/0/0/0 in fuzz"
INVALID = 2**64 - 2


def _reference(payload: bytes, voxels: int) -> list[int] | None:
    """argMax per voxel by the byte layout, voxel by voxel (None: not a valid payload)."""
    if len(payload) < 4 + 4 * voxels:
        return None
    (arg_size,) = struct.unpack_from(">i", payload, 0)
    if arg_size not in (0, voxels):
        return None
    start = 4 + 8 * arg_size
    if start + 4 * voxels > len(payload):
        return None
    data = payload[start + 4 * voxels :]
    offsets = struct.unpack_from(f">{voxels}i", payload, start)
    used = 0
    label: dict[int, int] = {}
    for off in sorted(set(offsets)):
        if off < 0 or off + 4 > len(data):
            return None
        (k,) = struct.unpack_from("<i", data, off)
        if k < 0 or off + 4 + 12 * k > len(data):
            return None
        used += 4 + 12 * k
        best = None
        for e in range(k):
            ident, count = struct.unpack_from("<qi", data, off + 4 + 12 * e)
            if best is None or (count, -ident) > (best[1], -best[0]):
                best = (ident, count)
        label[off] = INVALID if best is None else best[0] % 2**64
    if used > len(data):
        return None
    if arg_size:
        return [v % 2**64 for v in struct.unpack_from(f">{voxels}q", payload, 4)]
    return [label[o] for o in offsets]


def _lists(rng: random.Random, voxels: int) -> list[Counter]:
    pool = [
        Counter({rng.randrange(-3, 40): rng.randrange(1, 4) for _ in range(rng.randrange(0, 4))})
        for _ in range(6)
    ]
    return [rng.choice(pool) for _ in range(voxels)]


def campaign(cases: int, seed: int) -> dict:
    import numpy as np

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from paintera_multiset import multiset_payload

    from napari_n5zarr.errors import N5FormatError
    from napari_n5zarr.n5.block_format import n5_decompress
    from napari_n5zarr.n5.label_multiset import decode_multiset_block

    rng = random.Random(seed)
    counts = Counter()
    samples: list[str] = []
    decoders = {"raw": n5_decompress({"type": "raw"}), "gzip": n5_decompress({"type": "gzip"})}
    for case in range(cases):
        cell = rng.choice([(4, 3, 2), (8, 8, 4), (5, 1, 1), (3, 7)])
        header_shape = cell if rng.random() < 0.7 else tuple(8 for _ in cell)
        voxels = int(np.prod(cell))
        lists = _lists(rng, voxels)
        payload = multiset_payload(lists, store_argmax=rng.random() < 0.3)
        original = _reference(payload, voxels)
        cname = rng.choice(["raw", "gzip"])
        body = gzip.compress(payload) if cname == "gzip" else payload
        header = struct.pack(f">HH{len(cell)}II", 1, len(cell), *header_shape, len(payload))
        block = bytearray(header + body)
        how = rng.choice(["flip", "flip", "truncate", "field", "byte"])
        if how == "flip":
            for _ in range(rng.randrange(1, 4)):
                at = rng.randrange(len(block))
                block[at] ^= 1 << rng.randrange(8)
        elif how == "truncate":
            del block[rng.randrange(len(block)) :]
        elif (
            how == "field"
        ):  # a size field: count, argMaxSize, an offset or numEntries (raw payloads)
            at = rng.choice(
                [
                    len(header) - 4,
                    len(header),
                    len(header) + 4,
                    len(header) + len(payload) - 4 * voxels,
                ]
            )
            if at + 4 <= len(block):
                block[at : at + 4] = struct.pack(
                    ">I", rng.choice([0, 1, 3, 255, 2**31 - 1, 2**32 - 1, rng.randrange(2**32)])
                )
        else:
            block[rng.randrange(len(block))] = rng.randrange(256)
        mutated = bytes(block)
        try:
            got = (
                decode_multiset_block(mutated, cell, WHERE, decoders[cname])
                .ravel(order="F")
                .tolist()
            )
        except N5FormatError as e:
            if str(e).startswith(WHERE + ": "):
                counts["error"] += 1
            else:
                counts["unnamed"] += 1
                samples.append(f"{case}: unnamed {e}")
            continue
        except Exception as e:  # counted: the test requires none
            counts["unclean"] += 1
            samples.append(f"{case}: {type(e).__name__}: {e}")
            continue
        if got == original:
            counts["exact"] += 1
            continue
        # A valid block with other content (raw payloads carry no checksum): exactly what its bytes say?
        expected = None
        if cname == "raw" and mutated[:4] == header[:4]:
            count = struct.unpack_from(">I", mutated, 4 + 4 * len(cell))[0]
            stored = mutated[4 + 4 * len(cell) + 4 :]
            expected = _reference(stored, voxels) if len(stored) == count else None
        elif cname == "gzip":
            try:
                count = struct.unpack_from(">I", mutated, 4 + 4 * len(cell))[0]
                inflated = zlib.decompress(mutated[4 + 4 * len(cell) + 4 :], 31)
                expected = _reference(inflated, voxels) if len(inflated) == count else None
            except (zlib.error, struct.error):
                expected = None
        if expected is not None and got == expected:
            counts["exact_other"] += 1
        else:
            counts["wrong"] += 1
            samples.append(f"{case}: wrong ({how}, {cname})")
    return {"cases": cases, "counts": dict(counts), "samples": samples[:20],
            "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}  # fmt: skip


def test_multiset_fuzz_every_block_is_a_named_error_or_exact_labels() -> None:
    cases = 50_000 if os.environ.get("N5ZARR_FUZZ", "").lower() == "long" else 4000
    seed = int(os.environ.get("N5ZARR_FUZZ_SEED", "21"))
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, __file__, "--cases", str(cases), "--seed", str(seed)],
                          capture_output=True, text=True, timeout=900, env=env)  # fmt: skip
    assert proc.returncode == 0, f"child died (rc {proc.returncode}): {proc.stderr[-3000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print("\nmultiset fuzz:", json.dumps(result["counts"]), f"{result['maxrss_mib']} MiB")
    counts = result["counts"]
    assert counts.get("wrong", 0) == counts.get("unnamed", 0) == counts.get("unclean", 0) == 0, (
        "\n".join(result["samples"])
    )
    assert counts.get("error", 0) > 0.3 * cases
    assert counts.get("exact", 0) > 0
    assert sum(counts.values()) == cases


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=21)
    args = ap.parse_args()
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    print(json.dumps(campaign(args.cases, args.seed)))
