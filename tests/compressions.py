"""The compression table the format tests run over: every N5 compression, one setting each
(imported by the tests that need it; tests/ is on sys.path through conftest.py)."""

COMPRESSIONS = {
    "raw": {"type": "raw"},
    "gzip": {"type": "gzip", "level": -1},
    "gzip-zlib": {"type": "gzip", "level": 4, "useZlib": True},
    "bzip2": {"type": "bzip2", "blockSize": 9},
    "xz": {"type": "xz", "preset": 6},
    "lz4": {"type": "lz4", "blockSize": 65536},
    "blosc": {"type": "blosc", "cname": "zstd", "clevel": 5, "shuffle": 1, "blocksize": 0},
    "zstd": {"type": "zstd", "level": 3},
}
DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32", "float64"]
