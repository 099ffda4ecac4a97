"""Fuzz campaign on N5 blocks: every mutated block ends in a clean error naming the block, or
in exactly the right data; decompression bombs are refused within bounded memory.

The campaign runs in a child process under a memory limit (RLIMIT_AS), so a crash or a bomb
fails the test instead of killing pytest; the child reports counts as JSON.

Default run: 20,000 cases (seeded, ~20-40 s). ``N5ZARR_FUZZ=long`` runs 500,000 cases
(``N5ZARR_FUZZ_SEED`` changes the seed). Run by hand: ``python tests/n5/test_fuzz_blocks.py
campaign|bombs [--cases N] [--seed S]``.

Outcome of each case:
* ``error``: N5BlockError/N5FormatError whose message starts "N5 block <key> in <container>: ";
* ``exact``: the original data;
* ``exact_other``: different data that is exactly what the mutated bytes say, checked with an
  independent decoder (raw: numpy; zstd: zstandard's streaming decoder), for formats without
  a checksum, where a flipped payload bit is a valid block with other content;
* ``blosc_unchecked``: blosc (no checksum in the format) returned other data of the right size
  for a block changed only in its compressed streams or its versionlz/flags/typesize bytes:
  undetectable by design (a change to nbytes, blocksize, cbytes or the block table that
  yields data counts as ``wrong``);
* ``wrong``, ``unnamed`` (an error without the block's name), ``unclean`` (any other exception),
  ``crash`` (the child died): the test requires 0 of each.
"""

from __future__ import annotations

import bz2
import contextlib
import json
import lzma
import os
import random
import resource
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

SRC = str(Path(__file__).parents[2] / "src")
MEMORY_LIMIT = 2 << 30
LONG = os.environ.get("N5ZARR_FUZZ", "").lower() == "long"

COMPRESSIONS = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip", "level": 6},
    "gzip+useZlib": {"type": "gzip", "level": 1, "useZlib": True},
    "bzip2": {"type": "bzip2", "blockSize": 9},
    "xz": {"type": "xz", "preset": 1},
    "lz4": {"type": "lz4", "blockSize": 128},
    "blosc/lz4/shuffle": {
        "type": "blosc",
        "cname": "lz4",
        "clevel": 5,
        "shuffle": 1,
        "blocksize": 0,
    },
    "blosc/blosclz/noshuffle": {
        "type": "blosc",
        "cname": "blosclz",
        "clevel": 9,
        "shuffle": 0,
        "blocksize": 0,
    },
    "blosc/zstd/bitshuffle": {
        "type": "blosc",
        "cname": "zstd",
        "clevel": 3,
        "shuffle": 2,
        "blocksize": 0,
    },
    "blosc/zlib/shuffle": {
        "type": "blosc",
        "cname": "zlib",
        "clevel": 5,
        "shuffle": 1,
        "blocksize": 64,
    },
    "zstd": {"type": "zstd", "level": 3},
}
DTYPES = (
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
    "float32",
    "float64",
)
GEOMETRIES = (([100], [32]), ([13, 9], [8, 4]), ([5, 6, 7], [4, 4, 4]), ([70, 40], [64, 32]))
CONTAINER = "memory store"


# ====================================================================== the child process
def _limit_memory(limit: int) -> None:
    with contextlib.suppress(
        ValueError, OSError
    ):  # macOS does not enforce RLIMIT_AS: the RSS checks remain
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _sample(shape: tuple[int, ...], dtype: str, rng) -> object:
    """Half smooth (compressible), half random values of ``dtype``, N5 order."""
    import numpy as np

    count = int(np.prod(shape))
    smooth = (np.arange(count) // 3 % 50).astype(dtype)
    if np.dtype(dtype).kind == "f":
        noise = rng.standard_normal(count).astype(dtype) * 1000
    else:
        info = np.iinfo(dtype)
        noise = rng.integers(info.min, info.max, size=count, dtype=dtype, endpoint=True)
    mask = rng.random(count) < 0.5
    return np.where(mask, smooth, noise).reshape(shape)


class Campaign:
    """Datasets in one MemoryStore behind N5DefaultStore, read through zarr like a user does."""

    def __init__(self, seed: int) -> None:
        import numpy as np
        import zarr
        from zarr.core.buffer.cpu import Buffer
        from zarr.storage import MemoryStore

        from napari_n5zarr.n5.metadata import N5DatasetMetadata
        from napari_n5zarr.n5.stores import N5DefaultStore

        self.np, self.Buffer = np, Buffer
        self.rng = random.Random(seed)
        nprng = np.random.default_rng(seed)
        self.mem = MemoryStore()
        store = N5DefaultStore(self.mem)
        self.codecs: dict[str, object] = {}
        self.datasets = []
        for c, (cname, comp) in enumerate(COMPRESSIONS.items()):
            for t, dtype in enumerate(DTYPES):
                dims, block = GEOMETRIES[(c + t) % len(GEOMETRIES)]
                attrs = {
                    "dimensions": dims,
                    "blockSize": block,
                    "dataType": dtype,
                    "compression": comp,
                }
                prefix = f"{cname.replace('/', '_')}-{dtype}"
                self.mem._store_dict[f"{prefix}/attributes.json"] = Buffer.from_bytes(
                    json.dumps(attrs).encode()
                )
                codec = N5DatasetMetadata.from_json(attrs).codec()
                self.codecs[cname] = codec
                data = _sample(tuple(dims), dtype, nprng)
                arr = zarr.open_array(store=store, path=prefix, mode="r")
                blocks = {}
                for index in np.ndindex(*[-(-d // b) for d, b in zip(dims, block, strict=True)]):
                    region = tuple(
                        slice(i * b, min((i + 1) * b, d))
                        for i, b, d in zip(index, block, dims, strict=True)
                    )
                    part = data[region]
                    if part.shape != tuple(block) and self.rng.random() < 0.5:  # padded edge block
                        part = np.pad(
                            part, [(0, b - n) for n, b in zip(part.shape, block, strict=True)]
                        )
                    key = f"{prefix}/" + "/".join(map(str, index))
                    encoded = codec.encode_block(part)
                    self.mem._store_dict[key] = Buffer.from_bytes(encoded)
                    blocks[key] = (region, encoded, part)
                self.datasets.append((cname, dtype, dims, block, arr, data, blocks))
        self.counts = dict.fromkeys(
            ("error", "exact", "exact_other", "blosc_unchecked", "wrong", "unnamed", "unclean"), 0
        )
        self.by_kind: dict[str, int] = {}
        self.samples: list[str] = []

    # -- mutations ------------------------------------------------------------------
    def mutations(
        self, cname: str, dims, block, key: str, encoded: bytes, part, full_truncation: bool
    ):
        """(kind, bytes) pairs for one block."""
        rng = self.rng
        ndim = len(dims)
        hs = 4 + 4 * ndim
        n = len(encoded)
        lengths = (
            range(n)
            if full_truncation
            else sorted(
                {
                    *range(min(n, hs + 24)),
                    *rng.sample(range(n), min(n, 24)),
                    *range(max(0, n - 16), n),
                }
            )
        )
        for length in lengths:
            yield "truncate", encoded[:length]
        for extra in (
            b"\x00",
            b"\x00" * 4,
            bytes(rng.randrange(256) for _ in range(16)),
            encoded[hs:],
            b"\xff" * 3,
        ):
            yield "extend", encoded + extra
        for _ in range(48):
            buf = bytearray(encoded)
            span = min(n, hs + 64) if rng.random() < 0.5 else n
            for _ in range(rng.randint(1, 3)):
                pos = rng.randrange(span)
                buf[pos] ^= 1 << rng.randrange(8)
            yield "bitflip", bytes(buf)
        for _ in range(12):
            buf = bytearray(encoded)
            pos = rng.randrange(n)
            buf[pos] = rng.choice((0, 0xFF, rng.randrange(256)))
            yield "byteset", bytes(buf)
        for mode in (1, 2, 3, 0xFFFF):
            yield "header-mode", struct.pack(">H", mode) + encoded[2:]
        for nd in {0, ndim - 1, ndim + 1, 0xFFFF}:
            yield "header-ndim", encoded[:2] + struct.pack(">H", nd) + encoded[4:]
        yield (
            "header-drop-axis",
            struct.pack(">HH", 0, ndim - 1) + encoded[4 : hs - 4] + encoded[hs:],
        )
        yield (
            "header-add-axis",
            struct.pack(">HH", 0, ndim + 1) + encoded[4:hs] + struct.pack(">I", 1) + encoded[hs:],
        )
        shape = struct.unpack_from(f">{ndim}I", encoded, 4)
        for axis in range(ndim):
            for value in {
                0,
                1,
                shape[axis] - 1,
                shape[axis] + 1,
                block[axis],
                block[axis] - 1,
                block[axis] + 1,
                dims[axis],
                1 << 31,
                0xFFFFFFFF,
            }:
                if value == shape[axis] or not 0 <= value <= 0xFFFFFFFF:
                    continue
                yield (
                    "header-dims",
                    encoded[: 4 + 4 * axis] + struct.pack(">I", value) + encoded[8 + 4 * axis :],
                )
        if ndim > 1:
            swapped = list(shape)
            swapped[0], swapped[-1] = swapped[-1], swapped[0]
            yield (
                "header-swap-dims",
                encoded[:4] + struct.pack(f">{ndim}I", *swapped) + encoded[hs:],
            )
        for other, codec in self.codecs.items():
            if other != cname:
                yield "payload-swap", encoded[:hs] + codec.encode_block(part)[hs:]
        yield "bomb", encoded[:hs] + self.bombs[cname]

    def build_bombs(self, size: int) -> None:
        """Per compression: ``size`` bytes of zeros (far more than any block here needs)."""
        zeros = bytes(size)
        self.bombs = {}
        for cname, codec in self.codecs.items():
            self.bombs[cname] = codec.encode_block(self.np.frombuffer(zeros, dtype="uint8"))[8:]

    # -- one case --------------------------------------------------------------------
    def run_case(
        self,
        kind: str,
        arr,
        dtype: str,
        region,
        key: str,
        original,
        encoded: bytes,
        mutated: bytes,
        cname: str,
    ) -> None:
        from napari_n5zarr.errors import N5FormatError

        self.mem._store_dict[key] = self.Buffer.from_bytes(mutated)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        try:
            out = arr[region]
        except N5FormatError as e:
            if str(e).startswith(f"N5 block {key} in {CONTAINER}: "):
                self.counts["error"] += 1
            else:
                self._bad("unnamed", kind, key, f"{type(e).__name__}: {e}")
            return
        except Exception as e:  # that is the point: count it
            self._bad("unclean", kind, key, f"{type(e).__name__}: {e}")
            return
        if out.tobytes() == original.tobytes():
            self.counts["exact"] += 1
            return
        reference = self.reference(cname, mutated, dtype, len(region))
        shape = tuple(s.stop - s.start for s in region)
        if (
            reference is not None
            and reference[tuple(slice(0, n) for n in shape)].tobytes() == out.tobytes()
        ):
            self.counts["exact_other"] += 1
        elif cname.startswith("blosc") and self._blosc_undetectable(encoded, mutated, len(region)):
            self.counts["blosc_unchecked"] += 1
        else:
            self._bad("wrong", kind, key, f"returned other data ({len(mutated)} bytes)")

    def _bad(self, what: str, kind: str, key: str, detail: str) -> None:
        self.counts[what] += 1
        if len(self.samples) < 20:
            self.samples.append(f"{what} [{kind}] {key}: {detail[:300]}")

    def reference(self, cname: str, data: bytes, dtype: str, ndim: int):
        """Independent decoding of a block for the formats without a checksum."""
        np = self.np
        if cname not in ("raw", "zstd") or len(data) < 4:
            return None
        mode, nd = struct.unpack_from(">HH", data, 0)
        if mode != 0 or nd != ndim or len(data) < 4 + 4 * nd:
            return None
        shape = struct.unpack_from(f">{nd}I", data, 4)
        payload = data[4 + 4 * nd :]
        if cname == "zstd":
            import zstandard

            try:
                payload = zstandard.ZstdDecompressor().decompressobj().decompress(payload)
            except zstandard.ZstdError:
                return None
        dt = np.dtype(dtype).newbyteorder(">")
        if len(payload) != int(np.prod(shape)) * dt.itemsize:
            return None
        return np.frombuffer(payload, dtype=dt).reshape(shape[::-1]).T.astype(dtype)

    @staticmethod
    def _blosc_undetectable(encoded: bytes, mutated: bytes, ndim: int) -> bool:
        """A same-length blosc block whose changes lie only where blosc keeps no redundancy:
        the compressed streams after the block table, or the versionlz/flags/typesize bytes
        (and blocksize, which a stored copy never reads). Changes to nbytes, cbytes, the
        blocksize of a compressed chunk or the block table must never yield data."""
        hs = 4 + 4 * ndim
        if len(mutated) != len(encoded) or len(encoded) < hs + 16 or mutated[:hs] != encoded[:hs]:
            return False
        nbytes, blocksize = struct.unpack_from("<II", encoded, hs + 4)
        flags = encoded[hs + 2]
        table = 16 if flags & 0x02 or not blocksize else 16 + 4 * -(-nbytes // blocksize)
        changed = [i - hs for i in range(hs, len(encoded)) if encoded[i] != mutated[i]]
        # a stored copy (memcpyed, e.g. incompressible float64 after shuffle) ignores blocksize
        redundant = (1, 2, 3, 8, 9, 10, 11) if flags & 0x02 else (1, 2, 3)
        return all(i >= table or i in redundant for i in changed)

    def run(self, target: int, budget: float, progress: Path | None) -> dict:
        start = time.monotonic()
        self.build_bombs(8 << 20)
        plans = []
        for cname, dtype, dims, block, arr, _data, blocks in self.datasets:
            for i, (key, (region, encoded, part)) in enumerate(blocks.items()):
                plans.append(
                    (
                        cname,
                        dtype,
                        dims,
                        block,
                        arr,
                        key,
                        region,
                        encoded,
                        part,
                        i == len(blocks) - 1 and len(encoded) < 700,
                    )
                )
        total = 0
        rounds = 0
        while (
            total < target and time.monotonic() - start <= budget
        ):  # more rounds: new random mutations
            rounds += 1
            self.rng.shuffle(plans)
            for cname, dtype, dims, block, arr, key, region, encoded, part, full in plans:
                original = self._original(arr, key, encoded, region)
                for kind, mutated in self.mutations(
                    cname, dims, block, key, encoded, part, full and rounds == 1
                ):
                    if progress is not None and total % 200 == 0:
                        progress.write_text(f"{total} {kind} {key}\n")
                    self.run_case(kind, arr, dtype, region, key, original, encoded, mutated, cname)
                    total += 1
                self.mem._store_dict[key] = self.Buffer.from_bytes(encoded)
                if total >= target or time.monotonic() - start > budget:
                    break
        return {
            "cases": total,
            "seconds": round(time.monotonic() - start, 1),
            "counts": self.counts,
            "by_kind": self.by_kind,
            "compressions": list(COMPRESSIONS),
            "dtypes": list(DTYPES),
            "samples": self.samples,
            "maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }

    def _original(self, arr, key, encoded, region):
        self.mem._store_dict[key] = self.Buffer.from_bytes(encoded)
        return arr[region]


def bomb_payloads(size: int) -> dict[str, bytes]:
    """``size`` bytes of zeros per compression, built in constant memory where the format
    allows (concatenated members/streams are legal gzip, bzip2 and xz)."""
    import numcodecs.blosc
    import zstandard

    from napari_n5zarr.n5 import lz4block

    step = 64 << 20
    reps = max(1, size // step)
    chunk = bytes(1 << 24)

    def stream(c) -> bytes:
        return b"".join([c.compress(chunk) for _ in range(size >> 24)] + [c.flush()])

    return {
        "gzip": stream(zlib.compressobj(1, zlib.DEFLATED, 31)),
        "gzip (multi-member)": _gzip_of(step) * reps,
        "gzip+useZlib": stream(zlib.compressobj(1)),
        "bzip2": bz2.compress(bytes(step), 9) * reps,
        "xz": lzma.compress(bytes(step), preset=0) * reps,
        "zstd (content size)": zstandard.ZstdCompressor(level=1).compress(bytes(size)),
        "zstd (no content size)": stream(
            zstandard.ZstdCompressor(level=1, write_content_size=False).compressobj()
        ),
        "lz4": lz4block.compress(bytes(65536))[:-21] * (size // 65536) + lz4block.compress(b""),
        "blosc": numcodecs.blosc.compress(bytes(min(size, (2 << 30) - 64)), b"lz4", 5, 1),
    }


def _gzip_of(n: int) -> bytes:
    c = zlib.compressobj(1, zlib.DEFLATED, 31)
    return c.compress(bytes(n)) + c.flush()


COMPRESSION_OF_BOMB = {
    "gzip": {"type": "gzip"},
    "gzip (multi-member)": {"type": "gzip"},
    "gzip (ISIZE forged)": {"type": "gzip"},
    "gzip+useZlib": {"type": "gzip", "useZlib": True},
    "bzip2": {"type": "bzip2"},
    "xz": {"type": "xz"},
    "zstd (content size)": {"type": "zstd"},
    "zstd (no content size)": {"type": "zstd"},
    "lz4": {"type": "lz4"},
    "blosc": {"type": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
}
BOMB_BLOCK = [64, 64, 64]  # uint16: 512 KiB


def write_bombs(root: Path, size: int) -> None:
    """One N5 dataset per bomb, each a single small block whose payload inflates to ``size``."""
    from napari_n5zarr.n5.block_format import encode_header

    bombs = bomb_payloads(size)
    isize = bytearray(_gzip_of(64 << 20))
    isize[-4:] = struct.pack("<I", 2 * 64 * 64 * 64)  # forged to exactly the bound
    bombs["gzip (ISIZE forged)"] = bytes(isize)
    for name, payload in bombs.items():
        ds = root / name.replace(" ", "_").replace("(", "").replace(")", "")
        ds.mkdir(parents=True)
        attrs = {
            "dimensions": BOMB_BLOCK,
            "blockSize": BOMB_BLOCK,
            "dataType": "uint16",
            "compression": COMPRESSION_OF_BOMB[name],
        }
        (ds / "attributes.json").write_text(json.dumps(attrs))
        (ds / "0/0").mkdir(parents=True)
        with open(ds / "0/0/0", "wb") as f:
            f.write(encode_header(BOMB_BLOCK))
            f.write(payload)


def read_bombs(root: Path) -> dict:
    """Read every bomb; report the outcome and this process's peak RSS growth."""
    import numpy  # noqa: F401  (imports before the baseline)

    import napari_n5zarr
    from napari_n5zarr.errors import N5BlockError

    names = sorted(p.name for p in root.iterdir())
    napari_n5zarr.open(root / names[0])  # warm imports before the baseline
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    results = {}
    for name in names:
        t0 = time.monotonic()
        try:
            napari_n5zarr.open(root / name)[...]
            outcome = "READ WITHOUT ERROR"
        except N5BlockError as e:
            outcome = str(e)
        except BaseException as e:
            outcome = f"UNCLEAN {type(e).__name__}: {e}"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        results[name] = {
            "outcome": outcome[:300],
            "rss_growth_mib": round((peak - base) / 1024, 1),
            "seconds": round(time.monotonic() - t0, 2),
        }
    return results


def _child_main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["campaign", "write-bombs", "read-bombs"])
    ap.add_argument("--cases", type=int, default=12000)
    ap.add_argument("--budget", type=float, default=240)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dir", type=Path)
    ap.add_argument("--size", type=int, default=1 << 30)
    ap.add_argument("--limit", type=int, default=MEMORY_LIMIT)
    ap.add_argument("--progress", type=Path)
    args = ap.parse_args(argv)
    _limit_memory(args.limit)
    if args.what == "campaign":
        result = Campaign(args.seed).run(args.cases, args.budget, args.progress)
    elif args.what == "write-bombs":
        write_bombs(args.dir, args.size)
        result = {"written": sorted(p.name for p in args.dir.iterdir())}
    else:
        result = read_bombs(args.dir)
    print(json.dumps(result))


# ====================================================================== the tests
def _child(*args: str, timeout: float) -> tuple[subprocess.CompletedProcess, dict | None]:
    env = {
        **os.environ,
        "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "MALLOC_ARENA_MAX": "2",
    }
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    try:
        return proc, json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return proc, None


def test_fuzz_campaign_every_block_is_a_named_error_or_exact_data(tmp_path: Path) -> None:
    cases = 500_000 if LONG else 20_000
    seed = int(os.environ.get("N5ZARR_FUZZ_SEED", "7"))
    progress = tmp_path / "progress"
    proc, result = _child(
        "campaign",
        "--cases",
        str(cases),
        "--seed",
        str(seed),
        "--budget",
        "7200" if LONG else "240",
        "--progress",
        str(progress),
        timeout=9000 if LONG else 600,
    )
    crashed = proc.returncode != 0
    last = progress.read_text() if progress.exists() else "?"
    assert not crashed, (
        f"campaign child died (rc {proc.returncode}) near case {last}: {proc.stderr[-3000:]}"
    )
    assert result is not None, proc.stdout[-2000:] + proc.stderr[-2000:]
    print(
        "\nfuzz campaign:",
        json.dumps({k: result[k] for k in ("cases", "seconds", "counts", "maxrss_mib")}),
    )
    print("by kind:", json.dumps(result["by_kind"]))
    counts = result["counts"]
    assert counts["wrong"] == 0, "\n".join(result["samples"])
    assert counts["unnamed"] == 0, "\n".join(result["samples"])
    assert counts["unclean"] == 0, "\n".join(result["samples"])
    assert result["cases"] >= 10_000, f"only {result['cases']} cases ran in the time budget"
    assert counts["error"] > 0.5 * result["cases"]
    assert counts["exact"] > 0
    assert sum(counts.values()) == result["cases"]


def test_decompression_bombs_are_refused_in_bounded_memory(tmp_path: Path) -> None:
    """1 GiB of zeros per compression, declared as one 64^3 uint16 block (512 KiB)."""
    root = tmp_path / "bombs"
    root.mkdir()
    proc, written = _child(
        "write-bombs",
        "--dir",
        str(root),
        "--size",
        str(1 << 30),
        "--limit",
        str(4 << 30),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert written, proc.stderr[-3000:]
    # 1.5 GiB of address space: a reader that inflated any of these would die here.
    proc, results = _child("read-bombs", "--dir", str(root), "--limit", str(3 << 29), timeout=600)
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-3000:]}"
    assert results, f"rc {proc.returncode}: {proc.stderr[-3000:]}"
    print("\nbombs:", json.dumps(results, indent=1))
    assert set(results) == set(written["written"])
    assert len(results) == len(COMPRESSION_OF_BOMB)
    for name, r in results.items():
        # refused while decoding, or (a bomb stored larger than any encoding of its block: blosc's
        # 1 GiB of zeros) before it is read, by its dataset's limit
        assert r["outcome"].startswith((f"N5 block 0/0/0 in {root / name}: ",
                                        f"{root / name / '0/0/0'}: stored block is over its dataset's limit")), (name, r)  # fmt: skip
        assert r["rss_growth_mib"] < 48, (name, r)  # block 0.5 MiB (+ decoder state): not the 1 GiB


if __name__ == "__main__":
    _child_main(sys.argv[1:])
