"""The two kinds of library file (``mlckit.runtime.export`` is the envelope and its format):
``relax.build``'s Executable and ``mlckit.build``'s runtime Module of PrimFuncs.

Both carry their kernels the same way: each kernel module's source (what ``kernel_source``
wrote) as a member, with the name of its function and the signature its arguments are checked
against. Loading one hands the source to ``load_kernel_source``, as a build does after
generating it: numba compiles it or loads its machine code from the kernel cache. No PrimFunc
is involved, so nothing is lowered or generated again.

An Executable adds the VM's Python of each relax function (``vm/main.py``) with its
parameters and which of them kernels write, the Python name of every function, the pool slots
and the constants (``constants/0.npy``). A Module adds ``aliases``: the IRModule's names of
functions whose ``global_symbol`` differs.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from mlckit.backend.kernel import CODEGEN_VERSION, Kernel, load_kernel_source
from mlckit.errors import SerializationError
from mlckit.runtime.archive import check_tensor, tensor_bytes, tensor_from_bytes
from mlckit.runtime.export import AddPart, LibraryKind, register_library_kind
from mlckit.runtime.gpu import simulated
from mlckit.runtime.module import Module, ParamSpec
from mlckit.target import Target

from ..expr import Constant
from .build import Executable

# How a kernel module binds a C function (mlckit.backend.extern's ExternFunction.binding):
# c_extern('/path/lib.so', 'name', ...), the strings written with ascii().
_C_BINDING = re.compile(r"""\bc_extern\((['"])(.*?)\1, (['"])(.*?)\3""")


def _versions() -> dict[str, str]:
    import numba

    return {"codegen": CODEGEN_VERSION, "numba": numba.__version__}


def _write_target(target: Target) -> dict[str, Any]:
    # numba's CUDA simulator runs kernels written differently from a GPU's.
    return {"target": str(target), "cuda_simulator": simulated() if target.is_gpu else None}


def _read_target(manifest: dict[str, Any], label: str) -> Target:
    target = Target(manifest["target"])
    if target.is_gpu and manifest["cuda_simulator"] != simulated():
        written, here = ("numba's CUDA simulator", "a GPU")
        if not manifest["cuda_simulator"]:
            written, here = here, written
        raise SerializationError(
            f"{label} was exported under {written} and cannot run under {here}: "
            "its kernels differ; export it again where it runs"
        )
    return target


def _write_kernel(
    add_part: AddPart, name: str, function: str, source: str, signature: tuple[ParamSpec, ...]
) -> dict[str, Any]:
    binding = _C_BINDING.search(source)
    if binding is not None:
        # The library is a path on this machine, which the file cannot carry.
        raise SerializationError(
            f"kernel {name!r} calls {binding[4]} from the C library {binding[2]}, which a "
            "library file cannot carry; it cannot be exported"
        )
    return {
        "name": name,
        "function": function,
        "file": add_part(f"kernels/{function}", ".py", source.encode()),
        "signature": [dataclasses.asdict(spec) for spec in signature],
    }


def _read_kernels(
    manifest: dict[str, Any], contents: dict[str, bytes], target: Target
) -> dict[str, Kernel]:
    kernels = {}
    for entry in manifest["kernels"]:
        name = entry["name"]
        source = contents[entry["file"]].decode()
        func, cache_path = load_kernel_source(source, entry["function"], name, target)
        signature = tuple(
            ParamSpec(**{**spec, "shape": tuple(spec["shape"])}) for spec in entry["signature"]
        )
        # A loaded kernel has no GeneratedFunction: its PrimFunc is not in the file.
        kernels[name] = Kernel(name, source, target, func, None, cache_path, signature)
    return kernels


def _function_name(kernel: Kernel) -> str:
    # A kernel loaded from a library keeps its function's name in its module only.
    return kernel.generated.name if kernel.generated is not None else kernel.func.__name__


def _write_executable(exe: Executable, add_part: AddPart) -> dict[str, Any]:
    kernels = [
        _write_kernel(add_part, name, _function_name(k), k.source, k.signature)
        for name, k in exe.kernels.items()
    ]
    functions = [
        {
            "name": name,
            "file": add_part(f"vm/{exe.python_names[name]}", ".py", source.encode()),
            "params": exe.params[name],
            "written": sorted(exe.written.get(name, ())),
        }
        for name, source in exe.relax_sources.items()
    ]
    constants = []
    for index, constant in enumerate(exe.constants):
        array = constant.data.numpy()
        file = add_part(f"constants/{index}", ".npy", tensor_bytes(array))
        constants.append({"file": file, "dtype": array.dtype.name, "shape": list(array.shape)})
    return {
        **_write_target(exe.target),
        "python_names": exe.python_names,
        "kernels": kernels,
        "functions": functions,
        "pool_slots": exe.pool_slots,
        "constants": constants,
    }


def _load_executable(manifest: dict[str, Any], contents: dict[str, bytes], label: str) -> Any:
    target = _read_target(manifest, label)
    kernels = _read_kernels(manifest, contents, target)
    functions = manifest["functions"]
    constants = []
    for index, entry in enumerate(manifest["constants"]):
        where = f"{label}: constant {index}"
        array = tensor_from_bytes(contents[entry["file"]], where)
        check_tensor(array, entry, where)
        constants.append(Constant(array))
    return Executable(
        kernels,
        {f["name"]: contents[f["file"]].decode() for f in functions},
        manifest["python_names"],
        {f["name"]: f["params"] for f in functions},
        constants,
        target,
        {f["name"]: frozenset(f["written"]) for f in functions},
        manifest["pool_slots"],
    )


def _write_module(lib: Module, add_part: AddPart) -> dict[str, Any]:
    kernels = [
        _write_kernel(
            add_part, name, func.__name__, lib.source(name), lib.get_function(name).params
        )
        for name, func in lib._functions.items()
    ]
    return {**_write_target(lib.target), "kernels": kernels, "aliases": lib._aliases}


def _load_module(manifest: dict[str, Any], contents: dict[str, bytes], label: str) -> Any:
    target = _read_target(manifest, label)
    kernels = _read_kernels(manifest, contents, target)
    return Module(
        {name: k.func for name, k in kernels.items()},
        {name: k.source for name, k in kernels.items()},
        target,
        {name: k.signature for name, k in kernels.items()},
        manifest["aliases"],
    )


for _kind in (
    LibraryKind(
        "relax.Executable", Executable, _write_executable, _load_executable, _versions, ("codegen",)
    ),
    LibraryKind("runtime.Module", Module, _write_module, _load_module, _versions, ("codegen",)),
):
    register_library_kind(_kind)
