"""The integer mean (sums one axis at a time) equals the mean of the 2^k window views,
rounded half to even, for every integer dtype, odd extents and anisotropic factors."""

import itertools

import numpy as np
import pytest

from napari_n5zarr.write import pyramid


def window_mean(block, factors):
    """The reference: all 2^k pixels of each window summed in int64, then rint(sum / n)."""
    pad = [(0, (-n) % f) for n, f in zip(block.shape, factors, strict=True)]
    block = np.pad(block, pad, mode="edge")
    views = [
        block[tuple(slice(o, None, f) for o, f in zip(off, factors, strict=True))]
        for off in itertools.product(*(range(f) for f in factors))
    ]
    return np.rint(sum(v.astype(np.int64) for v in views) / len(views)).astype(block.dtype)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16", "uint32", "int32"])
@pytest.mark.parametrize(
    ("shape", "factors"),
    [
        ((9, 7, 5), (2, 2, 2)),
        ((8, 8), (2, 2)),
        ((5, 6, 7), (1, 2, 2)),
        ((11,), (2,)),
        ((3, 4, 4, 5), (1, 2, 2, 2)),
    ],
)
def test_integer_mean_is_the_window_mean(dtype, shape, factors):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(0)
    for lo, hi in [
        (info.min, info.max + 1),
        (0, 4),
        (info.max - 3, info.max + 1),
        (info.min, info.min + 4),
    ]:
        block = rng.integers(lo, hi, shape, dtype=dtype)
        got = pyramid.downsample_block(block, factors, "mean")
        assert got.dtype == block.dtype
        np.testing.assert_array_equal(got, window_mean(block, factors))


def test_ties_round_half_to_even():
    block = np.array([[1, 2], [1, 2]], "uint8")  # mean 1.5 -> 2
    assert pyramid.downsample_block(block, (2, 2))[0, 0] == 2
    block = np.array([[2, 3], [2, 3]], "uint8")  # mean 2.5 -> 2
    assert pyramid.downsample_block(block, (2, 2))[0, 0] == 2


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_integer_mean_is_the_same_for_every_memory_layout(dtype):
    """The sums run outermost memory axis first: F-ordered, transposed and strided views of
    the same values give the same means as a C-ordered copy (and the window reference)."""
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype)
    base = rng.integers(info.min, info.max, (14, 9, 11), dtype=dtype)
    views = [base, np.asfortranarray(base), base.T.copy().T, np.pad(base, 3)[3:-3, 3:-3, 3:-3]]
    for factors in [(2, 2, 2), (1, 2, 2), (2, 1, 2)]:
        expected = window_mean(base, factors)
        for view in views:
            np.testing.assert_array_equal(pyramid.downsample_block(view, factors, "mean"), expected)
        np.testing.assert_array_equal(base, views[1])  # inputs untouched


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize(
    ("shape", "factors"),
    [
        ((9, 7, 6), (2, 2, 2)),
        ((6, 7), (2, 2)),
        ((5, 8, 6), (1, 1, 2)),
        ((4, 5, 6, 3), (2, 2, 2, 2)),
    ],
)
def test_16_bit_sums_only_when_every_value_fits(byteorder, shape, factors):
    """uint16 values below 2^16 / n are summed in 16 bits: at the limit, one value above
    it (which takes the 32-bit sums), big endian (stored block values) or native, C order or
    strided: always the window mean, in native byte order."""
    n = int(np.prod(factors))
    limit = (1 << 16) // n
    rng = np.random.default_rng(5)
    # 0xE000 among small values: only its high byte is set (a byte-order slip in the check
    # would see 0x00E0 and sum in 16 bits, overflowing)
    for low, high in [
        (limit - 8, limit - 1),
        (limit - 8, limit),
        (limit - 8, 65535),
        (0, 32),
        (0, 0xE000),
    ]:
        block = rng.integers(low, low + 8, shape).astype(f"{byteorder}u2")
        block.reshape(-1)[rng.integers(block.size)] = high  # the one largest value, anywhere
        for view in (block, np.pad(block, 2)[(slice(2, -2),) * block.ndim], block.T):
            f = factors if view is not block.T else factors[::-1]
            got = pyramid.downsample_block(view, f, "mean")
            assert got.dtype == np.dtype("uint16")
            assert got.dtype.isnative
            np.testing.assert_array_equal(got, window_mean(view.astype("uint16"), f))


@pytest.mark.parametrize("dtype", [">u2", ">i2", ">u4", ">i4", "i1", "u1"])
def test_stored_block_values_give_the_native_mean(dtype):
    """Big-endian input (an N5 block's stored values): the same means as native input."""
    rng = np.random.default_rng(6)
    info = np.iinfo(dtype)
    native = rng.integers(info.min, info.max, (10, 9, 7), dtype=np.dtype(dtype).newbyteorder("="))
    got = pyramid.downsample_block(native.astype(dtype), (2, 2, 2), "mean")
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, window_mean(native, (2, 2, 2)))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32"])
def test_negative_ties_round_half_to_even(dtype):
    """Sums whose floor division by n leaves exactly n / 2: to the even neighbour."""
    for values, expected in [
        ([-1, -2], -2),
        ([-2, -3], -2),
        ([-3, -4], -4),
        ([0, -1], 0),
        ([-1, 0], 0),
    ]:
        block = np.array(values, dtype)
        assert pyramid.downsample_block(block, (2,))[0] == expected, values
