"""Runtime objects: NDArray, Device and the global function registry; exported libraries
(``load_module``) and parameter files (``save_param_dict``, ``load_param_dict``)."""

from .export import load_module
from .ndarray import Device, NDArray, array, cpu, cuda, device, empty
from .param_dict import load_param_dict, load_param_dict_from_file, save_param_dict
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
    "load_module",
    "load_param_dict",
    "load_param_dict_from_file",
    "register_func",
    "register_global_func",
    "remove_global_func",
    "save_param_dict",
    "tensor",
]
