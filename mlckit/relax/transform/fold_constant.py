"""FoldConstant: compute at compile time what depends only on constants.

A ``call_tir`` whose tensor arguments are all constants (and whose output shapes are known)
is run once now: its PrimFunc is built for the plain-Python target and called, and the call
is replaced by the result, a ``relax.Constant``. Inside dataflow blocks, a high-level
operator whose arguments are all constants is first lowered through its ``FLegalize``
attribute (``FLegalize(bb, call)``, as LegalizeOps uses it) when it has one and the lowering
is a single ``call_tir``. Variables bound to constants are replaced by the constants, so
their bindings disappear; the PrimFuncs stay in the module (DeadCodeElimination removes the
ones no longer called).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlckit.backend.kernel import build_kernels
from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.ir.op import Op
from mlckit.target import Target
from mlckit.tir.function import PrimFunc

from ..block_builder import BlockBuilder
from ..expr import (
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataTypeImm,
    Expr,
    Function,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..expr_functor import ExprMutator
from ..struct_info import TensorStructInfo
from ..utils import const_int
from .legalize_ops.common import get_legalize

# Folding runs each kernel once: the reference interpreter needs no compilation.
PYTHON = Target("python")

# Arguments a legalized operator may take besides constant tensors: compile-time values.
_STATIC_LEAVES = (Constant, PrimValue, ShapeExpr, StringImm, DataTypeImm)


class _ConstantFolder(ExprMutator):
    def __init__(self, mod: IRModule):
        super().__init__(mod)
        self.mod = mod
        self.in_dataflow = False
        # Keyed by the function itself, which keeps it alive: an id() could be reused by a
        # later function once a legalization's temporary one is gone.
        self.kernels: dict[PrimFunc, Any] = {}

    # ------------------------------------------------------------------ bindings
    def visit_dataflow_block_(self, block: DataflowBlock) -> BindingBlock:
        self.in_dataflow = True
        try:
            return super().visit_dataflow_block_(block)
        finally:
            self.in_dataflow = False

    def visit_var_binding_(self, binding: VarBinding) -> None:
        value = self._normalized(self.visit_expr(binding.value))
        if isinstance(value, Constant):
            # Every use reads the constant itself; the binding is no longer needed.
            self.var_remap_[binding.var] = value
            return
        var = self._var_for(self.visit_var_def(binding.var), value.struct_info_)
        if value is binding.value and var is binding.var:
            self.builder_.emit_normalized(binding)
        else:
            self.builder_.emit_normalized(VarBinding(var, value))

    # ------------------------------------------------------------------ expressions
    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        node = self.visit_expr_post_order(op)
        tup = node.tuple_value
        if isinstance(tup, Var):
            tup = self.lookup_binding(tup)
        if isinstance(tup, Tuple) and isinstance(tup.fields[node.index], Constant):
            return tup.fields[node.index]
        return node

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        if not isinstance(call, Call) or not isinstance(call.op, Op):
            return call
        if call.op.name == "relax.call_tir":
            folded = self._run_call_tir(call, self.mod)
        elif self.in_dataflow:
            folded = self._legalize_and_run(call)
        else:
            folded = None
        return call if folded is None else folded

    # ------------------------------------------------------------------ evaluation
    def _legalize_and_run(self, call: Call) -> Expr | None:
        legalize = get_legalize(call.op)
        if legalize is None or not call.args:
            return None
        if not all(isinstance(a, _STATIC_LEAVES) for a in call.args):
            return None
        if not any(isinstance(a, Constant) for a in call.args):
            return None
        bb = BlockBuilder(self.mod)
        bb.begin_binding_block()
        lowered = legalize(bb, call)
        if bb.end_block().bindings or not isinstance(lowered, Call):
            return None  # lowered to several steps: left for LegalizeOps
        lowered = bb.normalize(lowered)
        if not (isinstance(lowered.op, Op) and lowered.op.name == "relax.call_tir"):
            return None
        return self._run_call_tir(lowered, bb.context_mod)

    def _run_call_tir(self, call: Call, mod: IRModule) -> Expr | None:
        gvar, args = call.args[0], call.args[1]
        if not isinstance(args, Tuple) or not all(isinstance(a, Constant) for a in args.fields):
            return None
        if gvar.name_hint not in mod or not isinstance(mod[gvar.name_hint], PrimFunc):
            return None
        shapes = [_static_shape(s) for s in call.sinfo_args]
        if any(s is None for s in shapes):
            return None
        scalars: list[int] = []
        if len(call.args) > 2:
            values = [const_int(v) for v in call.args[2].values]  # type: ignore[attr-defined]
            if any(v is None for v in values):
                return None
            scalars = values  # type: ignore[assignment]
        kernel = self._kernel(gvar.name_hint, mod[gvar.name_hint])
        outputs = [
            np.empty(shape, sinfo.dtype)  # type: ignore[arg-type]
            for shape, sinfo in zip(shapes, call.sinfo_args)
        ]
        kernel(*[a.data.numpy() for a in args.fields], *outputs, *scalars)
        constants = [Constant(out) for out in outputs]
        return constants[0] if len(constants) == 1 else Tuple(constants)

    def _kernel(self, name: str, func: PrimFunc) -> Any:
        kernel = self.kernels.get(func)
        if kernel is None:
            kernel = build_kernels(IRModule({name: func}), PYTHON)[name]
            self.kernels[func] = kernel
        return kernel


def _static_shape(sinfo: Any) -> tuple[int, ...] | None:
    if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype == "void":
        return None
    values = sinfo.shape_values
    if values is None:
        return None
    dims = [const_int(v) for v in values]
    return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[arg-type]


def FoldConstant() -> transform.Pass:
    """Evaluate calls whose inputs are all constants and bind their results as constants."""

    @transform.module_pass(opt_level=0, name="FoldConstant")
    def fold_constant(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        folder = _ConstantFolder(mod)
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                mod.update_func(gv, folder.visit_expr(func))
        return mod

    return fold_constant


__all__ = ["FoldConstant"]
