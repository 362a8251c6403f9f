"""Runtime objects: NDArray, Device and the global function registry."""

from .ndarray import Device, NDArray, array, cpu, cuda, device, empty
from .registry import (
    get_global_func,
    list_global_func_names,
    register_func,
    register_global_func,
    remove_global_func,
)

# Newer TVM spellings (``tvm.runtime.tensor`` / ``tvm.runtime.Tensor``).
tensor = array
Tensor = NDArray

__all__ = [
    "Device",
    "NDArray",
    "Tensor",
    "array",
    "cpu",
    "cuda",
    "device",
    "empty",
    "get_global_func",
    "list_global_func_names",
    "register_func",
    "register_global_func",
    "remove_global_func",
    "tensor",
]
