"""What generated VM functions call at run time: argument checks and packed-function calls.

Every check raises VMError naming the function, the parameter, what was expected and what
arrived, so a wrong input is reported where the student can act on it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlckit.errors import VMError
from mlckit.runtime.gpu import is_device_array, to_device
from mlckit.runtime.module import convert_hint, describe, scalar_problem
from mlckit.runtime.ndarray import Device, NDArray, cuda
from mlckit.runtime.ndarray import aligned_empty as aligned_empty  # for the generated code
from mlckit.runtime.registry import get_global_func


def check_tensor(
    value: Any, where: str, dtype: str | None, expected: tuple | None, labels: tuple[str, ...]
) -> tuple[int, ...]:
    """Check a tensor argument and return its shape (so new symbolic dims can be bound).

    ``expected`` has one entry per dim: the required size, or None for a dim bound here;
    ``labels`` spell the dims as the signature does (``"n"``, ``"784"``) for the message.

    It runs for every tensor a VM function takes, on every call: a numpy array that passes
    returns after a few comparisons, and anything else goes through :func:`explain_tensor`,
    which finds the first problem and says what it is.
    """
    if type(value) is np.ndarray and (dtype is None or value.dtype == dtype):
        shape = value.shape
        if expected is None or shape == expected:
            return shape
        if len(shape) == len(expected):
            for actual, required in zip(shape, expected):
                if required is not None and actual != required:
                    break
            else:
                return shape
    return explain_tensor(value, where, dtype, expected, labels)


def explain_tensor(
    value: Any, where: str, dtype: str | None, expected: tuple | None, labels: tuple[str, ...]
) -> tuple[int, ...]:
    """:func:`check_tensor` one check at a time: kind, rank, each dim, dtype. The first that
    fails raises a VMError saying so; a value that passes them all (a device array, a numpy
    subclass) returns its shape."""
    if not isinstance(value, np.ndarray) and not is_device_array(value):
        raise VMError(f"{where} expects a tensor, got {describe(value)}{convert_hint(value)}")
    shape = value.shape
    if expected is not None:
        if len(shape) != len(expected):
            raise VMError(
                f"{where} expects a tensor of rank {len(expected)}, got {describe(value)}"
            )
        for axis, (actual, required) in enumerate(zip(shape, expected)):
            if required is not None and actual != required:
                check_dim(actual, required, where, axis, labels[axis])
    if dtype is not None and value.dtype != dtype:
        raise VMError(
            f"{where} expects dtype {dtype}, got {describe(value)}; convert it with "
            f".astype({dtype!r})"
        )
    return shape


def array_pool(slots: int) -> Callable[[int, tuple[int, ...], Any], np.ndarray]:
    """``pooled_empty(slot, shape, dtype)`` for one VM: the array of ``slot`` from the previous
    call when it has that shape and nothing but the pool refers to it (the caller dropped the
    output, an intermediate's call returned), else a new one that the pool keeps.

    So a call reads like fresh allocations (no caller ever sees its array overwritten) and
    costs like preallocated ones: the MLP at batch 1 in a loop, whose result is read and
    dropped, allocates nothing after its first call. Held results, views of them (numpy views
    refer to the memory's owner, the array's ``base``), DLPack and buffer exports, a call of
    the same function still running (recursion, another thread) all count as references, and
    the next call gets a new array. A call at another batch size replaces the slot's array:
    the pool holds at most one call's worth of memory.
    """
    arrays: list[np.ndarray | None] = [None] * slots
    getrefcount = sys.getrefcount
    # The reference counts of an array that only a list and a local name refer to, and of the
    # owner of its memory, taken as the check below takes them.
    probe = [aligned_empty(1, np.uint8)]
    array = probe[0]
    alone, owner_alone = getrefcount(array), getrefcount(array.base)

    def pooled_empty(slot: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        array = arrays[slot]
        if (
            array is None
            or array.shape != shape
            or getrefcount(array) != alone
            or getrefcount(array.base) != owner_alone
        ):
            array = arrays[slot] = aligned_empty(shape, dtype)
        return array

    return pooled_empty


def check_dim(actual: int, expected: int, where: str, axis: int, expected_text: str) -> None:
    if actual == expected:
        return
    if expected_text.lstrip("-").isdigit():
        why = f"the signature requires {expected}"
    else:
        why = f"the signature requires {expected_text}, which an earlier argument set to {expected}"
    raise VMError(f"{where} has size {actual} in dimension {axis}, but {why}")


def check_storage(storage: np.ndarray, end: int, where: str) -> None:
    """A tensor placed in a storage must end within it (``end`` is its last byte + 1)."""
    if end > storage.nbytes:
        raise VMError(f"{where} needs {end} bytes, but its storage holds {storage.nbytes}")


def check_tuple(value: Any, where: str, size: int) -> None:
    if not isinstance(value, (tuple, list)) or len(value) != size:
        raise VMError(f"{where} expects a tuple of {size} values, got {describe(value)}")


def check_shape(value: Any, where: str, ndim: int) -> None:
    if not isinstance(value, (tuple, list)) or (ndim >= 0 and len(value) != ndim):
        dims = f" of {ndim} dims" if ndim >= 0 else ""
        raise VMError(f"{where} expects a shape{dims} (a tuple of ints), got {describe(value)}")
    for axis, dim in enumerate(value):
        problem = scalar_problem(dim, "int64")
        if problem is not None:
            raise VMError(f"{where}, dimension {axis}, {problem}")


def check_prim(value: Any, where: str, dtype: str) -> None:
    problem = scalar_problem(value, dtype)
    if problem is not None:
        raise VMError(f"{where} {problem}")


def as_bool(value: Any, where: str) -> bool:
    """The condition of a relax ``if``: a tensor of one element, or a scalar."""
    data = value.copy_to_host() if is_device_array(value) else value
    if not isinstance(data, (np.ndarray, bool, int, float, np.generic)) or np.size(data) != 1:
        raise VMError(
            f"{where} must be one value (a scalar or a tensor of shape ()), got {describe(value)}"
        )
    return bool(np.asarray(data).reshape(()))


def tuple_item(value: Any, index: int, where: str) -> Any:
    """Field ``index`` of a value whose struct info did not say it is a tuple (R.Object)."""
    if not isinstance(value, (tuple, list)) or not 0 <= index < len(value):
        raise VMError(f"{where} takes field {index} of a tuple, got {describe(value)}")
    return value[index]


def to_ndarray(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return NDArray(value)
    if is_device_array(value):
        return NDArray(value, cuda())
    if isinstance(value, tuple):
        return tuple(to_ndarray(v) for v in value)
    return value


def from_ndarray(value: Any, device: Device | None = None, written: str | None = None) -> Any:
    """A VM argument as the generated code takes it, on ``device``: a C-contiguous numpy array
    on the cpu, a device array on cuda (other arrays are copied).

    ``written`` names a parameter that a kernel writes into: the result must land in the
    caller's own array, so one that would be copied is refused instead."""
    on_gpu = device is not None and device.is_gpu
    if isinstance(value, (tuple, list)):  # kept a list, for error messages to name it
        return type(value)(from_ndarray(v, device) for v in value)
    data = value._data if isinstance(value, NDArray) else value
    if (
        is_device_array(data)
        if on_gpu
        else isinstance(data, np.ndarray) and data.flags.c_contiguous
    ):
        return data
    if not isinstance(data, np.ndarray) and not is_device_array(data):
        return value  # not a tensor: the generated checks say what it should have been
    if written is not None:
        if on_gpu != is_device_array(data):
            why, fix = f"is not on {device}", "mlckit.nd.array(..., device)"
        else:
            why, fix = "is not C-contiguous (a view with strides)", "np.ascontiguousarray(...)"
        raise VMError(
            f"{written} receives a result, but its array {why}, so the result would go to a "
            f"copy; pass {fix} and read the result from that array"
        )
    host = data.copy_to_host() if is_device_array(data) else np.ascontiguousarray(data)
    return to_device(host) if on_gpu else host


def call_dps_packed(name: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
    """Call a registered function with inputs and preallocated outputs (as NDArrays that share
    memory with the VM's arrays, so the function fills the outputs in place)."""
    func = get_global_func(name)
    func(*[to_ndarray(v) for v in inputs], *[to_ndarray(v) for v in outputs])


def call_packed(name: str, args: Sequence[Any]) -> Any:
    """Call a registered function that returns its result (``call_pure_packed``)."""
    return from_ndarray(get_global_func(name)(*[to_ndarray(v) for v in args]))
