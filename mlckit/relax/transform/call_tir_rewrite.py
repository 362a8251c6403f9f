"""CallTIRRewrite: make the outputs of destination-passing calls explicit allocations.

``R.call_tir`` hides two steps: allocate the outputs, then run the kernel writing into them.
This pass spells them out, as TVM's pass of the same name does::

    lv = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((n, 256), dtype="float32"))

becomes ::

    alloc = R.builtin.alloc_tensor(R.shape([n, 256]), R.dtype("float32"), R.prim_value(0))
    _ = cls.relu(x, alloc)          # the kernel called directly, outputs as extra arguments
    lv = alloc

``R.call_dps_packed("env.f", (x,), ...)`` likewise becomes a call of ``R.ExternFunc("env.f")``
with the outputs appended. A call with several outputs allocates each and binds ``lv`` to the
tuple of them. ``call_tir``'s ``tir_vars`` become trailing scalar arguments of the kernel call
(TVM routes them through ``relax.vm.call_tir_dyn``; mlckit's VM calls the kernel directly).

The direct kernel call writes into its arguments, so it is not a pure computation: the pass
only rewrites plain binding blocks and refuses dataflow blocks. In TVM's pipeline it runs after
ToNonDataflow for that reason.
"""

from __future__ import annotations

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import IRModule
from mlckit.ir.op import Op

from ..expr import (
    Call,
    DataflowBlock,
    Expr,
    Function,
    PrimValue,
    ShapeExpr,
    Tuple,
    TupleGetItem,
)
from ..expr_functor import ExprMutator
from ..op.memory import builtin
from ..struct_info import TensorStructInfo, TupleStructInfo
from ..utils import format_struct_info

_DPS_OPS = ("relax.call_tir", "relax.call_dps_packed")
# CallTIRRewrite allocates on the first device of the module, as TVM does without vdevices.
_DEVICE_INDEX = 0


class CallTIRMutator(ExprMutator):
    """Rewrites every ``call_tir`` / ``call_dps_packed`` of one relax function of ``mod``."""

    def __init__(self, mod: IRModule, func_name: str):
        super().__init__(mod)
        self.func_name = func_name

    def visit_dataflow_block_(self, block: DataflowBlock) -> DataflowBlock:
        for binding in block.bindings:
            value = getattr(binding, "value", None)
            if isinstance(value, Call) and isinstance(value.op, Op) and value.op.name in _DPS_OPS:
                raise MLCError(
                    f"CallTIRRewrite: in function {self.func_name!r}, "
                    f"{binding.var.name_hint} = R.{value.op.name.removeprefix('relax.')}(...) is "
                    "inside a dataflow block, but its rewritten form calls the kernel with "
                    "preallocated outputs, which a dataflow block may not contain; run "
                    "relax.transform.ToNonDataflow() first"
                )
        return super().visit_dataflow_block_(block)

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        if not (isinstance(call.op, Op) and call.op.name in _DPS_OPS):
            return call
        outputs = [self.allocate(sinfo) for sinfo in self.output_sinfos(call)]
        args = self.argument_list(call.args[1]) + outputs
        if len(call.args) > 2:
            shape = call.args[2]
            if not isinstance(shape, ShapeExpr):
                raise MLCError(
                    f"CallTIRRewrite: in function {self.func_name!r}, call_tir's tir_vars must "
                    f"be a shape literal such as R.shape([n]), got {type(shape).__name__}"
                )
            args += [PrimValue(value) for value in shape.values]
        self.builder_.emit(Call(call.args[0], args), "_")
        return outputs[0] if len(outputs) == 1 else self.builder_.normalize(Tuple(outputs))

    def output_sinfos(self, call: Call) -> list[TensorStructInfo]:
        sinfo = call.struct_info_
        fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
        for field in fields:
            if not isinstance(field, TensorStructInfo) or field.shape is None:
                raise MLCError(
                    f"CallTIRRewrite: in function {self.func_name!r}, every output of "
                    f"{call.op.name} needs a known shape to be allocated, got "  # type: ignore[union-attr]
                    f"{format_struct_info(field)}"
                )
        return list(fields)  # type: ignore[arg-type]

    def allocate(self, sinfo: TensorStructInfo) -> Expr:
        alloc = builtin.alloc_tensor(sinfo.shape, sinfo.dtype, _DEVICE_INDEX)
        return self.builder_.emit(alloc, "alloc")

    def argument_list(self, args: Expr) -> list[Expr]:
        """The inputs one by one: a tuple literal's fields, else each field of the tuple value."""
        if isinstance(args, Tuple):
            return list(args.fields)
        sinfo = args.struct_info_
        count = len(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else 0
        return [self.builder_.normalize(TupleGetItem(args, i)) for i in range(count)]


def CallTIRRewrite() -> transform.Pass:
    """The pass: explicit ``R.builtin.alloc_tensor`` + direct kernel call for each
    ``call_tir`` / ``call_dps_packed`` (run it after ToNonDataflow)."""

    @transform.module_pass(opt_level=0, name="CallTIRRewrite")
    def rewrite(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                # A mutator per function, so that each names its allocations from alloc on.
                mod[gv] = CallTIRMutator(mod, gv.name_hint).visit_expr(func)
        return mod

    return rewrite


__all__ = ["CallTIRMutator", "CallTIRRewrite"]
