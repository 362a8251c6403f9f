"""NDArray: a tensor living on a device: host memory (a numpy array) or a GPU's (a numba
device array, see ``mlckit.runtime.gpu``)."""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

from mlckit.errors import MLCError

from .gpu import device_array, to_device

# Host tensors start on a cache line, which is also an AVX-512 vector (TVM's NDArrays are
# aligned likewise). numpy aligns to 16 bytes only, and a vectorized kernel's speed then
# depends on where the allocator happened to put its arrays: a tuned 512^3 matmul ran 23%
# slower on arrays 16 bytes past a cache line than on aligned ones.
ALIGNMENT = 64


def aligned_empty(shape: Any, dtype: Any = "float32") -> np.ndarray:
    """An uninitialized C-contiguous numpy array whose data starts on an ``ALIGNMENT``-byte
    boundary: a view, ``start`` bytes into a byte buffer ``ALIGNMENT`` bytes longer than needed,
    where ``start`` brings its address to the next boundary (an address 0x...1010 is 48 bytes
    short of one: the view starts at byte 48).

    The VM allocates every call's outputs with it, so it stays cheap (~0.5 us): the address
    comes from a ctypes view of the buffer (``ndarray.ctypes`` builds a helper object per call,
    ~1 us) and the array from ``np.ndarray``'s constructor (slicing, ``view`` and ``reshape``
    make three arrays)."""
    dims = shape if type(shape) is tuple else tuple(shape) if isinstance(shape, list) else (shape,)
    dtype = np.dtype(dtype)
    nbytes = math.prod(dims) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -ctypes.addressof(ctypes.c_char.from_buffer(raw)) % ALIGNMENT
    return np.ndarray(dims, dtype, raw, start)


def aligned_copy(data: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``data`` that starts on an ``ALIGNMENT``-byte boundary."""
    copy = aligned_empty(data.shape, data.dtype)
    copy[...] = data
    return copy


class Device:
    """Where an NDArray lives: ``mlckit.cpu(0)`` or ``mlckit.cuda(0)``."""

    def __init__(self, device_type: str = "cpu", device_id: int = 0):
        self.device_type = device_type
        self.device_id = device_id

    @property
    def is_gpu(self) -> bool:
        return self.device_type == "cuda"

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (self.device_type, self.device_id) == (
            other.device_type,
            other.device_id,
        )

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))


def cpu(device_id: int = 0) -> Device:
    return Device("cpu", device_id)


def cuda(device_id: int = 0) -> Device:
    return Device("cuda", device_id)


# TVM's names for the two device types mlckit runs on: its own type names, the target kinds
# whose code runs there, and the DLPack type codes (kDLCPU = 1, kDLCUDA = 2).
DEVICE_TYPES: dict[str | int, str] = {
    "cpu": "cpu",
    "llvm": "cpu",
    "c": "cpu",
    1: "cpu",
    "cuda": "cuda",
    "gpu": "cuda",
    "nvptx": "cuda",
    2: "cuda",
}


def device(device_type: str | int, device_id: int = 0) -> Device:
    """TVM's ``tvm.device("cpu")``, ``tvm.device("cuda", 0)``: the device of that type and index.

    A target string names its device too (``tvm.device("llvm --num-cores=1")`` is the CPU)."""
    key = (
        device_type.split()[0]
        if isinstance(device_type, str) and device_type.strip()
        else device_type
    )
    if key not in DEVICE_TYPES:
        names = ", ".join(repr(k) for k in DEVICE_TYPES if isinstance(k, str))
        raise MLCError(
            f"device({device_type!r}): mlckit runs on CPUs and NVIDIA GPUs only; "
            f"choose one of {names} (or the type codes 1 and 2)"
        )
    if not isinstance(device_id, int) or device_id < 0:
        raise MLCError(f"device({device_type!r}, {device_id!r}): the index must be an int >= 0")
    return Device(DEVICE_TYPES[key], device_id)


class NDArray:
    """A tensor: ``.numpy()`` copies it out, ``.shape``/``.dtype`` describe it."""

    def __init__(self, data: Any, device: Device | None = None):
        # A numpy array on the cpu, a numba device array on cuda.
        self._data = data
        self.device = device or cpu()

    @property
    def on_gpu(self) -> bool:
        return self.device.is_gpu

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> str:
        return self._data.dtype.name

    def numpy(self) -> np.ndarray:
        return self._data.copy_to_host() if self.on_gpu else self._data.copy()

    def asnumpy(self) -> np.ndarray:
        return self.numpy()

    def copyfrom(self, source: Any) -> "NDArray":
        src = source.numpy() if isinstance(source, NDArray) else np.asarray(source)
        if src.shape != self._data.shape:
            raise MLCError(f"copyfrom: shape {src.shape} does not match {self._data.shape}")
        if self.on_gpu:
            self._data.copy_to_device(np.ascontiguousarray(src, dtype=self._data.dtype))
        else:
            self._data[...] = src
        return self

    def copyto(self, device: Device) -> "NDArray":
        """A copy of this tensor on ``device``."""
        return array(self.numpy(), device)

    # DLPack: np.from_dlpack(arr) and torch.from_dlpack(arr) view this array's memory, so a
    # registered function can fill a destination tensor in place.
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        self._host_only("DLPack")
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        self._host_only("DLPack")
        return self._data.__dlpack_device__()

    def _host_only(self, what: str) -> None:
        if self.on_gpu:
            raise MLCError(
                f"{what} is available for cpu tensors only; copy this {self.device} tensor "
                "to the host first with .numpy()"
            )

    def to_dlpack(self) -> Any:
        return self.__dlpack__()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self._data.copy_to_host() if self.on_gpu else self._data
        return host if dtype is None else host.astype(dtype)

    def __repr__(self) -> str:
        return f"<mlckit.nd.NDArray shape={self.shape}, {self.device}>\n{self.numpy()!r}"


def array(data: Any, device: Device | None = None, dtype: Any = None) -> NDArray:
    """Copy an array-like (numpy, list, torch CPU tensor) into a new NDArray."""
    if isinstance(data, NDArray):
        data = data.numpy()
    arr = np.asarray(data, dtype=dtype)
    if arr.dtype == np.float64 and dtype is None and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)
    arr = aligned_copy(arr)
    if device is not None and device.is_gpu:
        return NDArray(to_device(arr), device)
    return NDArray(arr, device)


def empty(shape: Any, dtype: str = "float32", device: Device | None = None) -> NDArray:
    if device is not None and device.is_gpu:
        return NDArray(device_array(tuple(shape), np.dtype(dtype)), device)
    return NDArray(aligned_empty(shape, dtype), device)
