"""How numba's LLVM is set up while it compiles a kernel for the ``llvm`` target.

numba's defaults suit hand-written Python; a kernel is a loop nest a schedule has shaped, and
two of those defaults undo the schedule. Measured on 2 cores with AVX-512, each time against
the same program compiled with numba's defaults:

* **The SLP vectorizer is on.** numba leaves it off (numba PR #8852: it miscompiled code with
  the LLVM of 2023). Without it, a short vector loop that LLVM unrolls fully before its loop
  vectorizer runs stays scalar: the median of 64 random schedules of a 512^3 float32 matmul
  went from 11 to 38-42 GFLOP/s. ``NUMBA_SLP_VECTORIZE`` set in the environment wins.
* **No scatters** (x86's ``prefer-no-scatter``). Once the vectorized loop is unrolled, LLVM's
  loop vectorizer may vectorize the loop around it instead, across the rows of an accumulator
  tile, loading them with AVX-512 gathers and storing them with scatters: a 4x32 accumulator
  tile under its reduction loop ran at 5.7 GFLOP/s that way and at 122 without scatters. The
  loop a schedule vectorizes stores contiguously; a scatter means LLVM vectorized another
  one. Gathers stay allowed: they read strided inputs well (without them, the course's MLP for
  one image, with the default schedule, took 62 µs a call instead of 22).

Both are settings of numba's one code generator, which every numba function in the process
shares, so they hold only while a kernel compiles, under numba's compiler lock. A kernel
loaded from numba's cache was compiled with them. (Fused multiply-adds, the third difference
from numba's defaults, are a per-function option: ``kernel_source`` writes it into the
``@njit`` line.)
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

_NO_SCATTERS = "+prefer-no-scatter"


@contextlib.contextmanager
def kernel_compilation() -> Iterator[None]:
    """numba's LLVM set up for kernels while the block compiles them."""
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock

    codegen = _cpu_codegen()
    with global_compiler_lock:
        saved = config.SLP_VECTORIZE, codegen._tm
        if "NUMBA_SLP_VECTORIZE" not in os.environ:
            config.SLP_VECTORIZE = 1
        # LLVM's optimization passes ask this target machine what the CPU does well.
        codegen._tm = _target_machine_without_scatters(codegen)
        try:
            yield
        finally:
            config.SLP_VECTORIZE, codegen._tm = saved


def _cpu_codegen() -> Any:
    from numba.core.registry import cpu_target

    return cpu_target.target_context.codegen()


@functools.cache
def _target_machine_without_scatters(codegen: Any) -> Any:
    """numba's target machine, told to avoid scatters (itself on a CPU other than x86)."""
    import llvmlite.binding as llvm
    from numba.core import config

    if not llvm.get_process_triple().startswith("x86_64"):
        return codegen._tm
    options: dict[str, Any] = {"opt": config.OPT}
    codegen._customize_tm_options(options)  # numba's CPU name, features, relocation, code model
    options["features"] = ",".join(filter(None, [options.get("features", ""), _NO_SCATTERS]))
    return llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(**options)
