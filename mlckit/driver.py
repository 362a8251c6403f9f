"""``mlckit.build`` and ``mlckit.compile``: compile a module for a target.

``build(mod, target)`` compiles a module of PrimFuncs as written (TVM's ``tvm.build``): each
goes through the target's TIR pipeline and code generator, and the result is a runtime Module
(``lib["mm_relu"](a, b, c)``). A module with relax functions goes to ``relax.build``.
``compile(mod, target)`` is TVM's newer entry point: for a relax module it also runs the
default relax pipeline (legalize, fuse, FuseTIR) first, so a model written with high-level
operators compiles in one call.
"""

from __future__ import annotations

from typing import Any

from mlckit import relax
from mlckit.backend.kernel import build_kernels
from mlckit.errors import BuildError
from mlckit.ir.module import IRModule
from mlckit.ir.transform import Pass
from mlckit.runtime.module import Module
from mlckit.target import Target
from mlckit.tir.function import PrimFunc


def build(
    mod: Any, target: Any = "llvm", tir_pipeline: str | Pass | None = "default", **kwargs: Any
) -> Any:
    """Compile ``mod`` (an IRModule or a PrimFunc) for ``target``.

    A module of PrimFuncs (or a single PrimFunc) gives a runtime Module: ``lib["f"](a, b, c)``.
    A module with relax functions goes through ``relax.build`` and gives an Executable.
    ``tir_pipeline`` is ``"default"`` (lowering only: the loops run as written) or a Pass run on
    the module first (``tir.transform.DefaultGPUSchedule()``, as ``relax.build`` applies it).
    """
    mod = _as_module(mod)
    if _has_relax_functions(mod):
        return relax.build(mod, target, tir_pipeline=tir_pipeline, **kwargs)
    if kwargs:
        raise BuildError(
            f"build of a module of PrimFuncs takes no {', '.join(map(repr, kwargs))} "
            "(those are relax.build's)"
        )
    target = Target(target)
    kernels = build_kernels(mod, target, tir_pipeline)
    symbols = _global_symbols(mod)
    return Module(
        {symbols[name]: kernel.func for name, kernel in kernels.items()},
        {symbols[name]: kernel.source for name, kernel in kernels.items()},
        target,
        {symbols[name]: kernel.signature for name, kernel in kernels.items()},
        {name: symbol for name, symbol in symbols.items() if name != symbol},
    )


def _global_symbols(mod: IRModule) -> dict[str, str]:
    """The name each function of ``mod`` is called by once built: its ``global_symbol``, as in
    TVM, or else its name in the module."""
    symbols: dict[str, str] = {}
    for gv, func in mod.functions.items():
        symbol = str(func.attrs.get("global_symbol", gv.name_hint))
        twin = next((name for name, s in symbols.items() if s == symbol), None)
        if twin is not None:
            raise BuildError(
                f"functions {twin!r} and {gv.name_hint!r} of the module both have the "
                f"global_symbol {symbol!r}: a built module needs one name per function; "
                "rename one with func.with_attr('global_symbol', ...)"
            )
        symbols[gv.name_hint] = symbol
    return symbols


def compile(
    mod: Any,
    target: Any = "llvm",
    relax_pipeline: str | Pass | None = "default",
    tir_pipeline: str | Pass | None = "default",
    **kwargs: Any,
) -> Any:
    """TVM's ``tvm.compile``: ``relax.build`` with the ``relax_pipeline`` (default:
    ``relax.get_pipeline("default")``) for a module with relax functions, else ``build``."""
    mod = _as_module(mod)
    if _has_relax_functions(mod):
        return relax.build(
            mod, target, relax_pipeline=relax_pipeline, tir_pipeline=tir_pipeline, **kwargs
        )
    return build(mod, target, tir_pipeline, **kwargs)


def _as_module(mod: Any) -> IRModule:
    if isinstance(mod, PrimFunc):
        return IRModule({mod.attrs.get("global_symbol", "main"): mod})
    if not isinstance(mod, IRModule):
        raise BuildError(f"build takes an IRModule or a PrimFunc, not {type(mod).__name__}")
    return mod


def _has_relax_functions(mod: IRModule) -> bool:
    return any(not isinstance(f, PrimFunc) for f in mod.functions.values())
