"""The VM's per-call path: argument checks, pooled call_tir outputs, independent results."""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import VMError
from mlckit.relax.vm.runtime import array_pool, check_tensor, explain_tensor
from mlckit.runtime.ndarray import ALIGNMENT
from mlckit.testing.examples import Module

RNG = np.random.default_rng(0)
HIDDEN = 256  # Module's MLP: x (n, 784) -> 256 -> 10


def _weights():
    return (
        RNG.standard_normal((784, HIDDEN)).astype("float32") / 28,
        RNG.standard_normal(HIDDEN).astype("float32"),
        RNG.standard_normal((HIDDEN, 10)).astype("float32") / 16,
        RNG.standard_normal(10).astype("float32"),
    )


def _numpy_mlp(x, w0, b0, w1, b1):
    return np.maximum(x @ w0 + b0, 0) @ w1 + b1


def _address(result) -> int:
    return result._data.ctypes.data


@pytest.fixture(scope="module")
def vm():
    return relax.VirtualMachine(relax.build(Module, "llvm"), mlckit.cpu())


def test_held_results_of_calls_at_several_batch_sizes_stay_independent(vm):
    weights = _weights()
    inputs = [RNG.standard_normal((n, 784)).astype("float32") for n in (1, 7, 1, 64, 7, 1)]
    results = [vm["main"](x, *weights) for x in inputs]
    for x, result in zip(inputs, results):
        np.testing.assert_allclose(result.numpy(), _numpy_mlp(x, *weights), rtol=1e-5, atol=1e-5)
    for i, first in enumerate(results):
        for second in results[i + 1 :]:
            assert not np.shares_memory(first._data, second._data)


def test_a_dropped_result_is_reused_and_a_referenced_one_is_not(vm):
    weights = _weights()
    x = RNG.standard_normal((2, 784)).astype("float32")
    held = vm["main"](x, *weights)
    expected = held.numpy()
    dropped = vm["main"](x, *weights)
    address = _address(dropped)
    assert address != _address(held)
    del dropped
    again = vm["main"](x * 2, *weights)
    assert _address(again) == address  # nothing referred to it: the pool gave it back
    np.testing.assert_array_equal(held.numpy(), expected)
    # A view, an array from np.asarray or a DLPack export keeps the memory from the pool.
    for holder in (lambda r: r._data[0], lambda r: np.asarray(r), lambda r: np.from_dlpack(r)):
        address = _address(again)
        kept = holder(again)
        before = np.array(kept)
        del again
        again = vm["main"](x * 3, *weights)
        assert _address(again) != address
        np.testing.assert_array_equal(kept, before)


def test_intermediates_are_allocated_once_per_shape(vm):
    seen: list[tuple[str, int]] = []

    def record(name, func):
        def call(*args):
            seen.append((name, args[-1].ctypes.data))
            func(*args)

        return call

    entry = vm._entry("main", vm.executable.make_namespace(record))
    weights = _weights()
    for n in (1, 1, 5, 5):
        entry(RNG.standard_normal((n, 784)).astype("float32"), *weights)
    # linear, relu, linear per call: the first two write intermediates.
    per_call = [seen[i : i + 3] for i in range(0, len(seen), 3)]
    assert per_call[0][:2] == per_call[1][:2]
    assert per_call[2][:2] == per_call[3][:2]
    assert all(address % ALIGNMENT == 0 for _, address in seen)


def test_array_pool_gives_back_only_unreferenced_arrays_of_the_same_shape():
    pooled_empty = array_pool(2)
    first = pooled_empty(0, (3, 4), np.float32)
    assert first.shape == (3, 4) and first.dtype == np.float32
    assert first.ctypes.data % ALIGNMENT == 0 and first.flags.c_contiguous
    assert pooled_empty(0, (3, 4), np.float32) is not first  # still held here
    address = pooled_empty(1, (2,), np.float32).ctypes.data
    assert pooled_empty(1, (2,), np.float32).ctypes.data == address
    assert pooled_empty(1, (5,), np.float32).shape == (5,)


@pytest.mark.parametrize(
    "value, expected, dtype",
    [
        (np.zeros((2, 784), "float32"), (None, 784), "float32"),
        (np.zeros((128, 784), "float32"), (128, 784), "float32"),
        (np.zeros((), "int64"), (), "int64"),
        (np.zeros((3,), "float32"), None, None),
        (np.zeros((2, 784), "float32").view(np.recarray), (None, 784), "float32"),
    ],
)
def test_check_tensor_returns_the_shape_of_a_tensor_that_passes(value, expected, dtype):
    assert check_tensor(value, "f: parameter x", dtype, expected, ()) == value.shape


@pytest.mark.parametrize(
    "value, message",
    [
        ([1.0], "expects a tensor, got a list"),
        (np.zeros((2, 784, 1), "float32"), "expects a tensor of rank 2"),
        (
            np.zeros((2, 783), "float32"),
            "has size 783 in dimension 1, but the signature requires 784",
        ),
        (np.zeros((2, 784)), "expects dtype float32, got a float64 tensor"),
        (np.zeros((2, 783)), "has size 783 in dimension 1"),  # the first problem: the dims
    ],
)
def test_check_tensor_reports_the_first_problem_as_explain_tensor_does(value, message):
    args = ("f: parameter x", "float32", (None, 784), ("n", "784"))
    with pytest.raises(VMError, match=message) as fast:
        check_tensor(value, *args)
    with pytest.raises(VMError) as slow:
        explain_tensor(value, *args)
    assert str(fast.value) == str(slow.value)
