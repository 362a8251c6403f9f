"""Host tensors start on a cache line (``ALIGNMENT`` bytes), whatever numpy's allocator does."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit.runtime.ndarray import ALIGNMENT, aligned_copy, aligned_empty


def _offset(array: np.ndarray) -> int:
    return array.ctypes.data % ALIGNMENT


@pytest.mark.parametrize("shape", [(), (1,), (3,), (7, 5), (512, 512), (2, 3, 4)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "bool", "uint8"])
def test_aligned_empty_starts_on_a_cache_line(shape, dtype):
    # Allocate a few in a row: numpy places consecutive arrays at varying offsets.
    for _ in range(4):
        array = aligned_empty(shape, dtype)
        assert _offset(array) == 0
        assert array.shape == shape and array.dtype == np.dtype(dtype)
        assert array.flags.c_contiguous and array.flags.writeable


def test_aligned_empty_takes_an_int_and_zero_sized_shapes():
    assert aligned_empty(5, "float32").shape == (5,)
    assert aligned_empty((0, 4), "float32").shape == (0, 4)


def test_aligned_copy_keeps_values_dtype_and_makes_transposes_contiguous():
    source = np.arange(12, dtype=np.int64).reshape(3, 4).T
    copy = aligned_copy(source)
    np.testing.assert_array_equal(copy, source)
    assert copy.dtype == source.dtype and copy.flags.c_contiguous and _offset(copy) == 0
    copy[0, 0] = 99
    assert source[0, 0] == 0  # a copy, not a view


@pytest.mark.parametrize(
    "data", [np.ones((3, 5), np.float32), [[1.0, 2.0], [3.0, 4.0]], np.float32(2.5)]
)
def test_nd_array_and_empty_are_aligned(data):
    tensor = mlckit.nd.array(data)
    assert _offset(tensor._data) == 0
    np.testing.assert_array_equal(tensor.numpy(), np.asarray(data, dtype=tensor.dtype))
    assert _offset(mlckit.nd.empty((17, 3), "float32")._data) == 0


def test_nd_array_keeps_the_float32_default_for_python_lists():
    assert mlckit.nd.array([[1.0, 2.0]]).dtype == "float32"
    assert mlckit.nd.array(np.ones(2)).dtype == "float64"
