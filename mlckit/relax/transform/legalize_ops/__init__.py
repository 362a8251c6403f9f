"""LegalizeOps: lower every high-level relax operator to a TensorIR function it calls.

Before this pass a program says *what* to compute (``R.nn.relu(x)``); the VM can only run
functions whose loops exist. For each call of an op with a legalization (its ``FLegalize``
attribute, registered from the table of :mod:`.table`: op name -> topi kernel and where its
arguments come from) the pass asks that function for a replacement, typically
``bb.call_te(topi.nn.relu, x)``: the loop nest is generated from a tensor expression, added
to the module as a PrimFunc (``relu``; a second, different one becomes ``relu1``) and the
call becomes ``R.call_tir(cls.relu, (x,), ...)`` with the same struct info as the original
call.

A call is left as it is when its op has no legalization, or when a shape it involves is not
known (a tensor of unknown shape has no loop bounds to generate). ``call_tir`` and the packed
calls are already low-level and are never touched.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.ir.op import Op
from mlckit.ir.structural import structural_equal

from ...expr import Call, Expr, Function
from ...expr_functor import ExprMutator
from ...struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from ...utils import format_struct_info
from .common import LegalizeFunc, get_legalize, register_legalize
from .table import LEGALIZATIONS

# Calls that already name the code they run: never legalized, and not worth a warning.
_LOW_LEVEL_OPS = frozenset({"relax.call_tir", "relax.call_dps_packed", "relax.call_pure_packed"})


def _shapes_known(sinfo: StructInfo | None) -> bool:
    """Whether every tensor and shape in ``sinfo`` has its dims (maybe symbolic) known."""
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.shape_values is not None
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.values is not None
    if isinstance(sinfo, TupleStructInfo):
        return all(_shapes_known(f) for f in sinfo.fields)
    return True


class _Legalizer(ExprMutator):
    def __init__(
        self, mod: IRModule, custom: Mapping[str, LegalizeFunc], enable_warning: bool
    ) -> None:
        super().__init__(mod)
        self.mod = mod
        self.custom = dict(custom)
        self.enable_warning = enable_warning

    def transform(self) -> IRModule:
        for gvar, func in self.mod.functions.items():
            if isinstance(func, Function):
                self.builder_.update_func(gvar, self.visit_expr(func))
        return self.builder_.get()

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        if not isinstance(call.op, Op) or call.op.name in _LOW_LEVEL_OPS:
            return call
        legalize = self.custom.get(call.op.name) or get_legalize(call.op)
        if legalize is None:
            if self.enable_warning:
                warnings.warn(
                    f"LegalizeOps: {call.op.name} has no legalization; the call is kept",
                    stacklevel=2,
                )
            return call
        if not all(_shapes_known(a.struct_info_) for a in call.args) or not _shapes_known(
            call.struct_info_
        ):
            return call
        result = legalize(self.builder_, call)
        if result is call:
            return call
        result = self.builder_.normalize(result)
        # Later bindings rely on the variable's struct info, so a replacement must keep it.
        if not structural_equal(result.struct_info_, call.struct_info_):
            raise MLCError(
                f"LegalizeOps: the legalization of {call.op.name} gives "
                f"{format_struct_info(result.struct_info_)}, but the call has "
                f"{format_struct_info(call.struct_info_)}"
            )
        # A legalization may return other high-level ops (a composite); lower those too.
        return self.visit_expr(result)


def LegalizeOps(
    customize_legalize_map: Mapping[str, LegalizeFunc] | None = None,
    enable_warning: bool = False,
) -> transform.Pass:
    """The pass lowering high-level relax ops to ``call_tir`` of generated PrimFuncs.

    ``customize_legalize_map`` maps op names (``"relax.add"``) to legalizations
    ``f(bb, call) -> Expr`` used instead of the registered ones. With ``enable_warning``, each
    op left without a legalization is reported with a warning.
    """

    @transform.module_pass(opt_level=0, name="LegalizeOps")
    def legalize_ops(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return _Legalizer(mod, customize_legalize_map or {}, enable_warning).transform()

    return legalize_ops


__all__ = ["LEGALIZATIONS", "LegalizeOps", "register_legalize"]
