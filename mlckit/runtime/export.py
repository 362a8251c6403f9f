"""Shipping a compiled model: ``Executable.export_library(path)`` writes one file holding
everything the VM needs to run it, and ``mlckit.runtime.load_module(path)`` (TVM's name) reads
it back as an Executable for ``relax.VirtualMachine(lib, dev)``.

Loading runs no compiler pass and parses no TVMScript: the file holds the *generated code*, the
kernels' Python (what ``ex.source("linear")`` shows) and the VM's Python of each relax function,
and numba compiles the kernel sources as a build does, through the kernel cache: a process that
loads a file whose kernels it (or an earlier process) compiled before takes their machine code
from the cache. Shipping sources rather than machine code keeps a file usable under another
numba or Python version (they are recorded, not required) and on another CPU.

**A library file is code, like a pickle: load only files from a trusted source.** Loading one
runs the Python it holds. Its hashes detect damage, not malice: whoever can write the file can
write matching hashes.

The format
----------
A zip archive (see :mod:`mlckit.runtime.archive`: its directory and CRCs catch a cut-short or
damaged file before anything runs) rather than one JSON document, because a model's weights are
most of its bytes: as ``.npy`` members they are stored raw and loaded without decoding, where
JSON would grow them by a third in base64. Sources are members of their own, so ``unzip -p``
shows each. The course MLP (``mlckit.demo.mlp_script`` through ``relax.get_pipeline
("default")``, weights bound) exports as (the manifest spaced out and in reading order here;
the file has it on one line, keys sorted)::

    manifest.json                 the JSON manifest below
    kernels/linear.py             the kernel module kernel_source wrote: imports, @njit, loops
    kernels/fused_linear_relu.py
    vm/main.py                    def main(x): check_tensor(...); fused_linear_relu(...); ...
    constants/0.npy ... 3.npy     w0 (128, 784), b0, w1, b1 as .npy tensors

    {"format": "mlckit.library", "format_version": 1, "kind": "relax.Executable",
     "versions": {"mlckit": "0.1.0", "codegen": "6", "numba": "0.68.1",
                  "python": "3.11.7", "numpy": "2.4.6"},
     "target": "llvm", "cuda_simulator": null,
     "python_names": {"linear": "linear", "main": "main", ...},
     "kernels": [{"name": "linear", "function": "linear", "file": "kernels/linear.py",
                  "sha256": "9f2c...", "signature": [{"name": "X", "dtype": "float32",
                  "ndim": 2, "shape": ["n", "k"], "written": false}, ...]}, ...],
     "functions": [{"name": "main", "file": "vm/main.py", "sha256": "41d0...",
                    "params": ["x"], "written": []}],
     "pool_slots": ["main: lv1", "main: out"],
     "constants": [{"file": "constants/0.npy", "dtype": "float32", "shape": [128, 784],
                    "sha256": "c3a1..."}, ...],
     "sha256": "77be..."}

Each part (a kernel, a relax function's VM code, a constant) has the sha256 of its member's
bytes; the manifest's own ``sha256`` is that of the manifest without it (keys sorted, no
spaces), so it covers every part's hash too: the hash of the whole. Writing is deterministic,
so one executable always gives the same bytes.

Loading checks, in order, and refuses with a :class:`~mlckit.errors.SerializationError` naming
what is wrong: a file that is not a zip archive or has no manifest (not an mlckit library); a
cut-short or damaged archive; a ``format_version`` or an mlckit or code generator version other
than this one's (the VM code calls the runtime's helpers by name, so both versions are named);
a manifest whose hash does not match; a GPU file written under numba's CUDA simulator loaded on
a real GPU, or the reverse (their kernels differ); a kind of library it cannot load; a part
whose hash does not match (named: ``kernel 'linear'``, ``the VM code of 'main'``, ``constant
2``). Every part is checked before any of the file's code runs.

A runtime Module of PrimFuncs (``mlckit.build(f)``, ``lib["f"](a, b)``) exports the same way,
``lib.export_library(path)``, and loads back as a Module: its manifest's ``kind`` is
``"runtime.Module"`` (an Executable's is ``"relax.Executable"``), its kernels are listed by the
names they are called by, with ``aliases`` (the IRModule's names of functions whose
``global_symbol`` differs), and it has no ``functions``, ``constants`` or ``pool_slots``.

What the file does not carry: the IRModule (pass it with ``mlckit.ir.save_json`` where it is
needed, e.g. ``relax.training.Trainer`` reads the training module's attributes), Python
functions the code calls by name (``register_func``, registered externs: register them before
running), and C libraries kernels call (``pragma_import_llvm``): a kernel whose code binds one
(``c_extern('/path/lib.so', ...)``) is refused at export.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import re
import zipfile
from typing import TYPE_CHECKING, Any

from mlckit.errors import SerializationError

from .archive import (
    canonical_json,
    check_tensor,
    open_archive,
    read_manifest,
    read_member,
    sha256,
    tensor_bytes,
    tensor_from_bytes,
    write_archive,
)
from .gpu import simulated
from .module import Module, ParamSpec

if TYPE_CHECKING:  # imported where used: mlckit.runtime comes before the compiler
    from mlckit.relax.vm.build import Executable
    from mlckit.target import Target

FORMAT = "mlckit.library"
FORMAT_VERSION = 1
# What a library holds: relax.build's Executable, or mlckit.build's runtime Module of PrimFuncs.
EXECUTABLE = "relax.Executable"
MODULE = "runtime.Module"
_MANIFEST = "manifest.json"
_KIND = "an mlckit library"


def export_library(lib: Executable | Module, path: str | os.PathLike[str]) -> None:
    """Write ``lib`` (what ``relax.build`` or ``mlckit.build`` returned) to ``path`` as one
    library file (see the module docstring)."""
    import numba
    import numpy as np

    members: list[tuple[str, bytes]] = []

    def part(stem: str, suffix: str, data: bytes) -> dict[str, Any]:
        taken = {name for name, _ in members}
        file, copy = f"{stem}{suffix}", 1
        while file in taken:  # two PrimFuncs of a Module may share a Python name
            file, copy = f"{stem}_{copy}{suffix}", copy + 1
        members.append((file, data))
        return {"file": file, "sha256": sha256(data)}

    def kernel_entry(name: str, function: str, source: str, signature: Any) -> dict[str, Any]:
        _refuse_c_libraries(name, source)
        entry = {"name": name, "function": function}
        entry |= part(f"kernels/{function}", ".py", source.encode())
        return entry | {"signature": [dataclasses.asdict(spec) for spec in signature]}

    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": {
            **_required_versions(),
            "numba": numba.__version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
        "target": str(lib.target),
        "cuda_simulator": simulated() if lib.target.is_gpu else None,
    }
    if isinstance(lib, Module):
        manifest["kind"] = MODULE
        manifest["kernels"] = [
            kernel_entry(name, func.__name__, lib.source(name), lib.get_function(name).params)
            for name, func in lib._functions.items()
        ]
        manifest["aliases"] = lib._aliases
    else:
        manifest["kind"] = EXECUTABLE
        kernels = [
            kernel_entry(name, _function_name(k), k.source, k.signature)
            for name, k in lib.kernels.items()
        ]
        functions = []
        for name, source in lib.relax_sources.items():
            entry = {"name": name} | part(f"vm/{lib.python_names[name]}", ".py", source.encode())
            entry |= {"params": lib.params[name], "written": sorted(lib.written.get(name, ()))}
            functions.append(entry)
        constants = []
        for index, constant in enumerate(lib.constants):
            array = constant.data.numpy()
            entry = part(f"constants/{index}", ".npy", tensor_bytes(array))
            constants.append(entry | {"dtype": array.dtype.name, "shape": list(array.shape)})
        manifest |= {
            "python_names": lib.python_names,
            "kernels": kernels,
            "functions": functions,
            "pool_slots": lib.pool_slots,
            "constants": constants,
        }
    manifest["sha256"] = sha256(canonical_json(manifest))
    data = write_archive([(_MANIFEST, canonical_json(manifest)), *members])
    try:
        with open(path, "wb") as handle:
            handle.write(data)
    except OSError as err:
        raise SerializationError(f"cannot write the library {path}: {err.strerror}") from None


def load_module(path: str | os.PathLike[str]) -> Executable | Module:
    """What the library file at ``path`` holds: an Executable, for ``relax.VirtualMachine(lib,
    dev)``, or a runtime Module of PrimFuncs (``lib["f"](a, b)``).

    The file's code runs: load only files from a trusted source."""
    from mlckit.target import Target

    label = f"the library {os.fspath(path)}"
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as err:
        raise SerializationError(f"cannot read {label}: {err.strerror}") from None
    archive = open_archive(data, label, _KIND)
    manifest = read_manifest(archive, _MANIFEST, label, _KIND)
    if manifest.get("format") != FORMAT:
        raise SerializationError(
            f"{label} is not {_KIND}: its format is {manifest.get('format')!r}"
        )
    _check_versions(manifest, label)
    unhashed = {key: value for key, value in manifest.items() if key != "sha256"}
    if manifest.get("sha256") != sha256(canonical_json(unhashed)):
        raise SerializationError(f"{label} was modified: the hash of its manifest does not match")
    target = Target(manifest["target"])
    if target.is_gpu and manifest["cuda_simulator"] != simulated():
        written, here = ("numba's CUDA simulator", "a GPU")
        if not manifest["cuda_simulator"]:
            written, here = here, written
        raise SerializationError(
            f"{label} was exported under {written} and cannot run under {here}: "
            "its kernels differ; export it again where it runs"
        )

    try:
        return _loaded(archive, manifest, target, label)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        # Only a hand-made manifest whose hash was recomputed gets here.
        raise SerializationError(
            f"{label} is corrupted: its manifest lacks or mistypes a field ({err!r})"
        ) from None


def _loaded(
    archive: zipfile.ZipFile, manifest: dict[str, Any], target: Target, label: str
) -> Executable | Module:
    """The Executable or Module of a checked manifest, each part checked against its hash."""
    from mlckit.backend.kernel import Kernel, load_kernel_source
    from mlckit.relax.expr import Constant
    from mlckit.relax.vm.build import Executable

    kind = manifest["kind"]
    if kind not in (EXECUTABLE, MODULE):
        raise SerializationError(f"{label} holds a {kind!r}, which this mlckit cannot load")
    functions = manifest.get("functions", [])
    # Every part is checked before any code runs.
    parts = [(k, f"kernel {k['name']!r}") for k in manifest["kernels"]]
    parts += [(f, f"the VM code of {f['name']!r}") for f in functions]
    parts += [(c, f"constant {i}") for i, c in enumerate(manifest.get("constants", []))]
    contents: dict[str, bytes] = {}
    for entry, what in parts:
        data = read_member(archive, entry["file"], label)
        if sha256(data) != entry["sha256"]:
            raise SerializationError(f"{label}: the hash of {what} does not match")
        contents[entry["file"]] = data

    kernels = {}
    for entry in manifest["kernels"]:
        name = entry["name"]
        source = contents[entry["file"]].decode()
        func, cache_path = load_kernel_source(source, entry["function"], name, target)
        signature = tuple(_spec_from_json(spec) for spec in entry["signature"])
        kernels[name] = Kernel(name, source, target, func, None, cache_path, signature)
    if kind == MODULE:
        return Module(
            {name: k.func for name, k in kernels.items()},
            {name: k.source for name, k in kernels.items()},
            target,
            {name: k.signature for name, k in kernels.items()},
            manifest["aliases"],
        )
    relax_sources = {f["name"]: contents[f["file"]].decode() for f in functions}
    constants = []
    for index, entry in enumerate(manifest["constants"]):
        where = f"{label}: constant {index}"
        array = tensor_from_bytes(contents[entry["file"]], where)
        check_tensor(array, entry, where)
        constants.append(Constant(array))
    return Executable(
        kernels,
        relax_sources,
        manifest["python_names"],
        {f["name"]: f["params"] for f in functions},
        constants,
        target,
        {f["name"]: frozenset(f["written"]) for f in functions},
        manifest["pool_slots"],
    )


def _required_versions() -> dict[str, str]:
    """The versions a file must have been written by: the VM code calls this mlckit's runtime
    helpers by name, and the kernels are this code generator's."""
    import mlckit
    from mlckit.backend.kernel import CODEGEN_VERSION

    return {"mlckit": mlckit.__version__, "codegen": CODEGEN_VERSION}


def _check_versions(manifest: dict[str, Any], label: str) -> None:
    if manifest.get("format_version") != FORMAT_VERSION:
        raise SerializationError(
            f"{label} has library format version {manifest.get('format_version')!r}; this "
            f"mlckit reads version {FORMAT_VERSION}"
        )
    versions = manifest.get("versions")
    if not isinstance(versions, dict):
        raise SerializationError(f"{label} is corrupted: its manifest records no versions")
    mine = _required_versions()
    if any(versions.get(what) != version for what, version in mine.items()):
        raise SerializationError(
            f"{label} was written by mlckit {versions.get('mlckit')} (code generator "
            f"{versions.get('codegen')}); this is mlckit {mine['mlckit']} (code generator "
            f"{mine['codegen']}): export it again with this mlckit"
        )


def _function_name(kernel: Any) -> str:
    # A kernel loaded from a library keeps its function's name in its module only.
    if kernel.generated is not None:
        return kernel.generated.name
    return kernel.func.__name__


# How a kernel module binds a C function (mlckit.backend.extern's ExternFunction.binding):
# c_extern('/path/lib.so', 'name', ...), the strings written with ascii().
_C_BINDING = re.compile(r"""\bc_extern\((['"])(.*?)\1, (['"])(.*?)\3""")


def _refuse_c_libraries(name: str, source: str) -> None:
    """A kernel that calls a C library names the library's path on this machine, which the
    file cannot carry: refused."""
    binding = _C_BINDING.search(source)
    if binding is not None:
        raise SerializationError(
            f"kernel {name!r} calls {binding[4]} from the C library {binding[2]}, which a "
            "library file cannot carry; it cannot be exported"
        )


def _spec_from_json(entry: dict[str, Any]) -> ParamSpec:
    return ParamSpec(**{**entry, "shape": tuple(entry["shape"])})
