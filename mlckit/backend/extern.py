"""External functions a kernel calls: ``T.call_extern(dtype, "name", *args)``.

A name resolves, when the kernel is built, to

* a C (C++) function of a library attached to the PrimFunc: a loop annotated
  ``"pragma_import_llvm"`` with source code (what ``mlckit.contrib.clang.create_llvm`` returns)
  has it compiled by the system's C++ compiler into a shared library, cached on disk by the
  hash of the source; the kernel calls the function through ctypes, which numba calls in
  nopython mode. ``buf.access_ptr(...)`` passes the address of the buffer's element at the
  offset (an integer the size of a pointer), scalars pass as their C types;
* else a Python function registered with ``mlckit.tir.op.register_extern(name)``: numba
  compiles it into the kernel (target ``llvm``), CPython calls it (target ``python``), and
  ``buf.access_ptr()`` passes the buffer's array (a strided view for a matched region).

Generated kernel modules bind each extern once, at import, with :func:`c_extern` or
:func:`python_extern`.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlckit.errors import BuildError
from mlckit.tir.op import get_extern, list_externs

# The annotation (TVM's name) whose value is source code to compile and link with the kernel.
IMPORT_ANNOTATION = "pragma_import_llvm"

# C++ compilers tried in order when none is named (TVM's create_llvm compiles C++ too).
COMPILERS = ("g++", "clang++", "c++")

# The C type of each TensorIR dtype an extern takes or returns; pointers travel as integers
# the size of a pointer (numba passes an array's address, ``arr.ctypes.data``, as one).
_C_TYPES: dict[str, Any] = {
    "handle": ctypes.c_size_t,
    "bool": ctypes.c_bool,
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8,
    "uint16": ctypes.c_uint16,
    "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def _python_alternative(name: str) -> str:
    return (
        f"or give the extern as a Python function instead, which numba compiles into the "
        f'kernel: @mlckit.tir.op.register_extern("{name}")'
    )


def find_compiler(cc: str | None = None) -> str:
    """The C++ compiler to use: ``cc`` when given, else ``$CXX``, else the first of
    :data:`COMPILERS` on the PATH. Raises BuildError naming what was looked for."""
    wanted = [cc] if cc else ([os.environ["CXX"]] if os.environ.get("CXX") else list(COMPILERS))
    for candidate in wanted:
        path = shutil.which(candidate)
        if path is not None:
            return path
    looked = ", ".join(wanted)
    raise BuildError(
        f"no C++ compiler found to compile an extern's source (looked for {looked} on the "
        f"PATH); install one (e.g. `apt install g++`), name it with cc= or $CXX, "
        f"{_python_alternative('name')}"
    )


def compile_library(
    code: str, directory: Path, cc: str | None = None, options: Sequence[str] = ()
) -> Path:
    """The shared library compiled from the C++ source ``code``, kept in ``directory`` under
    the hash of the source, compiler and options (compiled only when not there yet)."""
    options = list(options)
    key = hashlib.sha256("\0".join([code, cc or "", *options]).encode()).hexdigest()[:24]
    path = directory / f"extern_{key}.so"
    if path.exists():
        return path
    compiler = find_compiler(cc)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as work:
        source = Path(work) / "extern.cc"
        source.write_text(code, encoding="utf-8")
        built = Path(work) / "extern.so"
        command = [compiler, "-O3", "-shared", "-fPIC", *options, str(source), "-o", str(built)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(
                f"{Path(compiler).name} could not compile the extern's source:\n"
                f"{result.stderr.strip()}"
            )
        # Renamed into place: a concurrent build never loads half a library.
        os.replace(built, path)
    return path


@functools.cache
def _library(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))


def defines(library: Path, name: str) -> bool:
    """Whether the shared library exports the C symbol ``name``."""
    return hasattr(_library(library), name)


@dataclass(frozen=True)
class ExternFunction:
    """What ``call_extern``'s name resolved to: a C function of ``library``, or (library None)
    the registered Python function."""

    name: str
    library: Path | None = None

    @property
    def binder(self) -> str:
        """The function of this module that a kernel module binds the extern with (below)."""
        return "python_extern" if self.library is None else "c_extern"

    def binding(self, dtype: str, arg_dtypes: Sequence[str], compiled: bool) -> str:
        """The expression a kernel module binds the extern's name to (its text is safe:
        paths and names go in as string literals)."""
        if self.library is None:
            return f"python_extern({self.name!a}, compiled={compiled})"
        signature = f"{dtype!a}, {tuple(arg_dtypes)!r}"
        return f"c_extern({str(self.library)!a}, {self.name!a}, {signature})"

    def fingerprint(self) -> str:
        """What identifies the function's code: a kernel calling another function is another
        kernel (the library's path holds the hash of its source)."""
        if self.library is not None:
            return self.library.name
        fn = get_extern(self.name)
        fn = getattr(fn, "py_func", fn)  # a numba dispatcher's Python function
        code = getattr(fn, "__code__", None)
        text = repr((code.co_code, code.co_consts)) if code is not None else repr(fn)
        return f"{getattr(fn, '__qualname__', fn)} {hashlib.sha256(text.encode()).hexdigest()[:12]}"


def resolve_extern(name: str, libraries: Sequence[Path]) -> ExternFunction:
    """The function ``call_extern`` names: from the attached libraries first, then the
    registered Python functions. Raises BuildError naming the candidates."""
    for library in libraries:
        if defines(library, name):
            return ExternFunction(name, library)
    if get_extern(name) is not None:
        return ExternFunction(name)
    registered = ", ".join(repr(n) for n in list_externs()) or "none"
    attached = (
        f"; the {len(libraries)} C librar{'y' if len(libraries) == 1 else 'ies'} attached with "
        f'"{IMPORT_ANNOTATION}" do not export it (a C++ function needs extern "C")'
        if libraries
        else f'; no C library is attached (sch.annotate(loop, "{IMPORT_ANNOTATION}", '
        "mlckit.contrib.clang.create_llvm(code)))"
    )
    raise BuildError(
        f"call_extern: no extern function named {name!r}{attached}. Registered Python "
        f"externs: {registered}; register one with "
        f'@mlckit.tir.op.register_extern("{name}")'
    )


# ------------------------------------------------------------------ used by kernel modules
def python_extern(name: str, compiled: bool) -> Callable[..., Any]:
    """The registered Python extern ``name``: numba-compiled for a compiled kernel, else the
    plain function."""
    fn = get_extern(name)
    if fn is None:
        raise BuildError(f"the Python extern {name!r} is no longer registered")
    plain = getattr(fn, "py_func", fn)
    if not compiled:
        return plain
    return fn if hasattr(fn, "py_func") else _njit(plain)


@functools.cache
def _njit(fn: Callable[..., Any]) -> Callable[..., Any]:
    import numba

    return numba.njit(fn)


def c_extern(library: str, name: str, restype: str, argtypes: Sequence[str]) -> Any:
    """The C function ``name`` of ``library`` as a ctypes function of its own (numba calls it
    in nopython mode), typed from the TensorIR dtypes of its result and arguments."""
    fn = _library(Path(library))[name]
    fn.restype = _C_TYPES[restype]
    fn.argtypes = [_C_TYPES[t] for t in argtypes]
    return fn


def check_c_types(name: str, dtypes: Sequence[str]) -> None:
    """Raise BuildError unless every dtype of a C extern's result and arguments has a C type."""
    unsupported = sorted(set(dtypes) - set(_C_TYPES))
    if unsupported:
        raise BuildError(
            f"call_extern {name!r}: a C function cannot take or return {', '.join(unsupported)} "
            f"(supported: {', '.join(_C_TYPES)})"
        )
