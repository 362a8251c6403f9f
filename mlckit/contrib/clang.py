"""``create_llvm``: source code for a kernel to link with, as TVM's ``tvm.contrib.clang``.

In TVM, ``create_llvm(code)`` compiles C++ with clang to LLVM IR text, and
``sch.annotate(loop, "pragma_import_llvm", ir)`` links that IR into the kernel, whose
``T.call_extern("name", ...)`` then calls the function. mlckit's kernels are numba code, which
calls C functions through ctypes: here ``create_llvm`` compiles the C++ source with the
system's compiler into a shared library (kept in the kernel cache under the hash of the
source) and returns the source itself, which the annotation carries and the kernel build
compiles (finds) again. Without a compiler, register the extern as a Python function instead
(``@mlckit.tir.op.register_extern("name")``), which numba compiles into the kernel.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mlckit.backend.kernel import extern_library


def create_llvm(
    inputs: str | Sequence[str],
    output: str | None = None,
    options: Sequence[str] | None = None,
    cc: str | None = None,
) -> str:
    """Compile C++ source code (or files) for ``"pragma_import_llvm"``; returns the code.

    ``inputs`` is source code or the path of a source file, or a list of them (one translation
    unit). ``output``, when given, receives the code. ``cc`` names the compiler (default
    ``$CXX``, else g++, clang++ or c++) and ``options`` its extra flags, for this compilation:
    the kernel build compiles the code with the default ones. Functions the kernel calls are
    declared ``extern "C"``. Raises BuildError without a compiler or when the code does not
    compile.
    """
    parts = [inputs] if isinstance(inputs, str) else list(inputs)
    code = "\n".join(_read(part) for part in parts)
    extern_library(code, cc, tuple(options or ()))
    if output is not None:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(code)
    return code


def _read(part: str) -> str:
    """A source file's text, or the code itself."""
    if "\n" not in part and os.path.isfile(part):
        with open(part, encoding="utf-8") as handle:
            return handle.read()
    return part
