"""Normalization: give every relax expression its struct info, bottom-up.

``normalize(expr)`` fills ``struct_info_`` on the expression and its un-normalized
sub-expressions: a call of an Op asks the op's ``FInferStructInfo``; a call of a function
derives the result from the callee's ``FuncStructInfo`` (matching its symbolic dims against
the arguments); tuples, ``t[i]``, ``if`` and sequences combine their parts' struct info.

Nodes are immutable, but struct info is a cache that is empty until normalization, so it is
filled in place on the node the caller built. The BlockBuilder normalizes with itself as
context: it knows the module (to check ``call_tir`` against the PrimFunc) and, inside a
block, binds nested calls to fresh variables first (``relu(matmul(x, w))`` becomes
``lv = matmul(x, w); relu(lv)``), which is the form every later pass expects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlckit.errors import MLCError, StructInfoError
from mlckit.ir.module import GlobalVar
from mlckit.ir.node import set_cached
from mlckit.ir.op import Op
from mlckit.tir import expr as texpr

from .analysis.struct_info_analysis import (
    definable_tir_vars_in_struct_info,
    erase_to_well_defined,
    struct_info_lca,
    substitute_prim_expr,
    substitute_struct_info,
    tir_vars_in_struct_info,
)
from .dispatch import ExprFunctor
from .expr import (
    Call,
    Expr,
    ExternFunc,
    Function,
    If,
    MatchCast,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    convert_to_expr,
    tuple_field_struct_info,
)
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from .utils import dims_equal, format_dim, format_struct_info

if TYPE_CHECKING:
    from .block_builder import BlockBuilder


def normalize(expr: Any, ctx: BlockBuilder | None = None) -> Expr:
    """``expr`` with its struct info (and that of every sub-expression) filled in.

    Arguments that are variables must already carry struct info. Raises StructInfoError when
    an operator rejects its arguments.
    """
    return Normalizer(ctx).visit_expr(convert_to_expr(expr))


class Normalizer(ExprFunctor):
    """Fills struct info; ``emit`` (given by a BlockBuilder inside a block) binds nested
    non-leaf arguments to variables, giving A-normal form."""

    def __init__(self, ctx: BlockBuilder | None = None, emit: Callable[[Expr], Var] | None = None):
        self.ctx = ctx
        self.emit = emit

    # ------------------------------------------------------------------ arguments
    def _argument(self, arg: Any) -> Any:
        arg = self.visit_expr(arg)
        # TVM's normal form: a call's arguments are leaves or tuples of leaves.
        if self.emit is not None and isinstance(arg, (Call, If, SeqExpr, TupleGetItem)):
            return self.emit(arg)
        return arg

    def _nested(self) -> Normalizer:
        """For bodies with their own scope (branches, functions): infer, do not emit."""
        return Normalizer(self.ctx)

    # ------------------------------------------------------------------ leaves
    def visit_var_(self, op: Var) -> Var:
        if op.struct_info_ is None:
            raise MLCError(
                f"variable {op.name_hint!r} has no struct info: create it with one, e.g. "
                f'relax.Var({op.name_hint!r}, relax.TensorStructInfo((1, 784), "float32")), '
                "or get it from bb.emit(...)"
            )
        return op

    visit_dataflow_var_ = visit_var_

    def _leaf(self, op: Any) -> Any:
        return op

    visit_constant_ = visit_shape_expr_ = visit_extern_func_ = _leaf
    visit_prim_value_ = visit_string_imm_ = visit_data_type_imm_ = visit_op_ = _leaf

    def visit_global_var_(self, op: GlobalVar) -> GlobalVar:
        return op

    # ------------------------------------------------------------------ composites
    def visit_tuple_(self, op: Tuple) -> Expr:
        if op.struct_info_ is not None:
            return op
        fields = [self._argument(f) for f in op.fields]
        if any(a is not b for a, b in zip(fields, op.fields)):
            return Tuple(fields, span=op.span)
        set_cached(op, "struct_info_", TupleStructInfo([f.struct_info_ for f in fields]))
        return op

    def visit_call_(self, op: Call) -> Expr:
        if op.struct_info_ is not None:
            return op
        args = [self._argument(a) for a in op.args]
        call = op
        if any(a is not b for a, b in zip(args, op.args)):
            call = Call(op.op, args, op.attrs, op.sinfo_args, span=op.span)
        set_cached(call, "struct_info_", infer_call_struct_info(call, self.ctx))
        return call

    def visit_tuple_getitem_(self, op: TupleGetItem) -> Expr:
        if op.struct_info_ is not None:
            return op
        value = self._argument(op.tuple_value)
        node = op if value is op.tuple_value else TupleGetItem(value, op.index, span=op.span)
        set_cached(node, "struct_info_", tuple_field_struct_info(value, op.index))
        return node

    def visit_if_(self, op: If) -> Expr:
        if op.struct_info_ is not None:
            return op
        cond = self._argument(op.cond)
        inner = self._nested()
        true_branch = inner.visit_expr(op.true_branch)
        false_branch = inner.visit_expr(op.false_branch)
        _check_condition(cond)
        node = op
        if (
            cond is not op.cond
            or true_branch is not op.true_branch
            or (false_branch is not op.false_branch)
        ):
            node = If(cond, true_branch, false_branch, span=op.span)
        set_cached(
            node,
            "struct_info_",
            struct_info_lca(true_branch.struct_info_, false_branch.struct_info_),
        )
        return node

    def visit_seq_expr_(self, op: SeqExpr) -> Expr:
        if op.struct_info_ is not None:
            return op
        inner = self._nested()
        for block in op.blocks:
            for binding in block.bindings:
                inner._binding(binding)
        body = inner.visit_expr(op.body)
        node = op if body is op.body else SeqExpr(op.blocks, body, span=op.span)
        # Symbolic dims that a match_cast inside defines are unknown outside the sequence.
        inner_dims = {
            id(v)
            for block in op.blocks
            for b in block.bindings
            if isinstance(b, MatchCast)
            for v in definable_tir_vars_in_struct_info(b.struct_info)
        }
        sinfo = body.struct_info_
        if inner_dims:
            sinfo = erase_to_well_defined(sinfo, lambda v: id(v) not in inner_dims)
        set_cached(node, "struct_info_", sinfo)
        return node

    def _binding(self, binding: Any) -> None:
        value = self.visit_expr(binding.value)
        if value is not binding.value:
            raise MLCError("internal: normalizing a bound value without a builder replaced it")
        if binding.var.struct_info_ is None:
            # A binding made without struct info (e.g. by hand) takes its value's.
            sinfo = binding.struct_info if isinstance(binding, MatchCast) else value.struct_info_
            set_cached(binding.var, "struct_info_", sinfo)

    def visit_function_(self, op: Function) -> Expr:
        for param in op.params:
            if param.struct_info_ is None:
                raise MLCError(
                    f"parameter {param.name_hint!r} of a relax function has no struct info"
                )
        self._nested().visit_expr(op.body)
        return op


# ---------------------------------------------------------------------------------- calls
def infer_call_struct_info(call: Call, ctx: BlockBuilder | None = None) -> StructInfo:
    """The struct info of ``call``, whose arguments are already normalized."""
    for index, arg in enumerate(call.args):
        if not isinstance(arg, GlobalVar) and arg.struct_info_ is None:
            raise MLCError(f"argument {index} of the call has no struct info; normalize it first")
    callee = call.op
    if isinstance(callee, Op):
        infer = callee.get_attr("FInferStructInfo")
        if infer is None:
            raise MLCError(
                f"operator {callee.name} cannot be used in relax: it has no struct info inference"
            )
        if callee.num_inputs >= 0 and len(call.args) != callee.num_inputs:
            names = ", ".join(callee.get_attr("arg_names") or ())
            raise StructInfoError(
                f"{callee.name} takes {callee.num_inputs} arguments ({names}), got {len(call.args)}"
            )
        return infer(call, ctx)
    func_sinfo = _callee_struct_info(callee, ctx)
    if func_sinfo is None:
        return call.sinfo_args[0] if call.sinfo_args else ObjectStructInfo()
    if not isinstance(func_sinfo, FuncStructInfo):
        raise StructInfoError(
            f"{_callee_name(callee)} is not a function, it is "
            f"{format_struct_info(func_sinfo)}; it cannot be called"
        )
    if func_sinfo.is_opaque():
        return call.sinfo_args[0] if call.sinfo_args else func_sinfo.ret
    return derive_call_ret_struct_info(func_sinfo, call)


def _callee_struct_info(callee: Any, ctx: BlockBuilder | None) -> StructInfo | None:
    sinfo = getattr(callee, "struct_info_", None)
    if sinfo is None and isinstance(callee, GlobalVar) and ctx is not None:
        mod = ctx.context_mod
        if callee.name_hint in mod:
            sinfo = getattr(mod[callee.name_hint], "struct_info_", None)
    return sinfo


def _callee_name(callee: Any) -> str:
    if isinstance(callee, (Var, GlobalVar)):
        return callee.name_hint
    if isinstance(callee, ExternFunc):
        return f'R.ExternFunc("{callee.global_symbol}")'
    return type(callee).__name__


def derive_call_ret_struct_info(func_sinfo: FuncStructInfo, call: Call) -> StructInfo:
    """The callee's return struct info with its symbolic dims solved from the arguments.

    A callee ``f(x: R.Tensor((n, 4)))  -> R.Tensor((n * 2,))`` called with a ``(8, 4)`` tensor
    returns ``R.Tensor((16,))``: ``n`` is bound by the first parameter dim it appears in alone,
    and every other use of a bound variable must agree with its argument.
    """
    name = _callee_name(call.op)
    params = func_sinfo.params or ()
    if len(params) != len(call.args):
        raise StructInfoError(f"{name} takes {len(params)} arguments, got {len(call.args)}")
    vmap: dict[texpr.Var, texpr.PrimExpr] = {}
    for index, (param, arg) in enumerate(zip(params, call.args)):
        _match(param, arg.struct_info_, vmap, name, index, call)
    ret = substitute_struct_info(func_sinfo.ret, vmap)
    # A callee variable the arguments did not determine means nothing at the call site.
    unbound = {id(v) for p in params for v in tir_vars_in_struct_info(p) if v not in vmap}
    if not unbound:
        return ret
    return erase_to_well_defined(ret, lambda v: id(v) not in unbound)


def _match(
    param: StructInfo,
    arg: StructInfo | None,
    vmap: dict[texpr.Var, texpr.PrimExpr],
    name: str,
    index: int,
    call: Call,
) -> None:
    def mismatch(why: str) -> StructInfoError:
        return StructInfoError(
            f"{name}: argument {index} does not match the parameter: expected "
            f"{format_struct_info(param)}, got {format_struct_info(arg)} ({why})"
        )

    if isinstance(param, ObjectStructInfo) or isinstance(arg, ObjectStructInfo) or arg is None:
        return
    if isinstance(param, TensorStructInfo):
        if not isinstance(arg, TensorStructInfo):
            raise mismatch("not a tensor")
        if "void" not in (param.dtype, arg.dtype) and param.dtype != arg.dtype:
            raise mismatch(f"dtype {param.dtype} vs {arg.dtype}")
        if param.ndim >= 0 and arg.ndim >= 0 and param.ndim != arg.ndim:
            raise mismatch(f"{param.ndim} vs {arg.ndim} dimensions")
        _match_dims(param.shape_values, arg.shape_values, vmap, mismatch)
    elif isinstance(param, ShapeStructInfo):
        if not isinstance(arg, ShapeStructInfo):
            raise mismatch("not a shape")
        if param.ndim >= 0 and arg.ndim >= 0 and param.ndim != arg.ndim:
            raise mismatch(f"{param.ndim} vs {arg.ndim} dimensions")
        _match_dims(param.values, arg.values, vmap, mismatch)
    elif isinstance(param, PrimStructInfo):
        if not isinstance(arg, PrimStructInfo):
            raise mismatch("not a scalar")
        if param.value is not None and arg.value is not None:
            _match_dims((param.value,), (arg.value,), vmap, mismatch)
    elif isinstance(param, TupleStructInfo):
        if not isinstance(arg, TupleStructInfo) or len(arg.fields) != len(param.fields):
            raise mismatch(
                "a tuple of a different length"
                if isinstance(arg, TupleStructInfo)
                else "not a tuple"
            )
        for p, a in zip(param.fields, arg.fields):
            _match(p, a, vmap, name, index, call)
    elif isinstance(param, FuncStructInfo) and not isinstance(arg, FuncStructInfo):
        raise mismatch("not a function")


def _match_dims(
    params: Any,
    args: Any,
    vmap: dict[texpr.Var, texpr.PrimExpr],
    mismatch: Callable[[str], StructInfoError],
) -> None:
    if params is None or args is None:
        return
    for p, a in zip(params, args):
        if isinstance(p, texpr.Var) and p not in vmap:
            vmap[p] = a
            continue
        expected = p
        if vmap:
            expected = substitute_prim_expr(p, vmap)
        if dims_equal(expected, a) is False:
            raise mismatch(f"dimension {format_dim(expected)} vs {format_dim(a)}")


# ---------------------------------------------------------------------------------- others
def _check_condition(cond: Expr) -> None:
    sinfo = cond.struct_info_
    ok = isinstance(sinfo, (PrimStructInfo, ObjectStructInfo)) or (
        isinstance(sinfo, TensorStructInfo) and sinfo.ndim in (-1, 0)
    )
    if not ok:
        raise StructInfoError(
            f"If: the condition must be a scalar (R.Prim or a 0-d tensor), "
            f"got {format_struct_info(sinfo)}"
        )


__all__ = ["Normalizer", "derive_call_ret_struct_info", "infer_call_struct_info", "normalize"]
