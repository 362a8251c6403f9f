"""``mlckit.build`` / ``mlckit.compile``: the one entry point that compiles a module."""

from __future__ import annotations

from typing import Any

from mlckit.backend.kernel import compile_kernel
from mlckit.errors import BuildError
from mlckit.ir.module import IRModule
from mlckit.ir.name_supply import sanitize
from mlckit.runtime.module import Module
from mlckit.target import Target
from mlckit.tir.function import PrimFunc


def build(mod: Any, target: Any = "llvm", **kwargs: Any) -> Any:
    """Compile ``mod`` for ``target``.

    A module of PrimFuncs (or a single PrimFunc) gives a runtime Module: ``lib["f"](a, b, c)``.
    A module with relax functions goes through ``relax.build`` and gives an Executable.
    """
    if isinstance(mod, PrimFunc):
        name = mod.attrs.get("global_symbol", "main")
        mod = IRModule({name: mod})
    if not isinstance(mod, IRModule):
        raise BuildError(f"build takes an IRModule or a PrimFunc, not {type(mod).__name__}")
    if any(not isinstance(f, PrimFunc) for f in mod.functions.values()):
        from mlckit import relax

        return relax.build(mod, target, **kwargs)
    return build_prim_funcs(mod, Target(target))


def build_prim_funcs(mod: IRModule, target: Target) -> Module:
    """Compile every PrimFunc of ``mod``; functions are looked up by their names in ``mod``."""
    functions, sources, signatures = {}, {}, {}
    for gv, func in mod.functions.items():
        if not isinstance(func, PrimFunc):
            continue
        kernel = compile_kernel(func, sanitize(gv.name_hint), target)
        functions[gv.name_hint] = kernel.func
        sources[gv.name_hint] = kernel.source
        signatures[gv.name_hint] = kernel.signature
    return Module(functions, sources, target, signatures)


# Newer TVM spelling.
compile = build
