"""AnnotateTIROpPattern: label every PrimFunc with its op pattern for FuseOps.

FuseOps decides what to fuse from one word per kernel; this pass computes it from the loop
nest (:func:`mlckit.relax.analysis.op_pattern.analyze_op_pattern`, whose docstring explains the
lattice) and stores it as the integer attribute ``op_pattern``, as TVM does:
``T.func_attr({"op_pattern": 4})`` on a matmul. A function that already carries the attribute
keeps it, so a hand-written label wins over the analysis.
"""

from __future__ import annotations

from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.tir.function import PrimFunc

from ..analysis.op_pattern import analyze_op_pattern


@transform.module_pass(opt_level=0, name="AnnotateTIROpPattern")
def _annotate(mod: IRModule, ctx: transform.PassContext) -> IRModule:
    for gv, func in list(mod.functions.items()):
        if isinstance(func, PrimFunc) and "op_pattern" not in func.attrs:
            mod.update_func(gv, func.with_attr("op_pattern", int(analyze_op_pattern(func))))
    return mod


def AnnotateTIROpPattern() -> transform.Pass:
    """The pass setting ``op_pattern`` on each PrimFunc of a module."""
    return _annotate
