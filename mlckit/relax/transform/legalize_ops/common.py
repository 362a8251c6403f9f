"""How legalizations are registered, and the helpers the op families share.

A legalization is a function ``(bb, call) -> Expr`` stored as the ``FLegalize`` attribute of
the op it lowers. It usually returns ``bb.call_te(topi.<op>, *call.args, ...)``: ``call_te``
traces the tensor expression on placeholders shaped like the arguments (symbolic dims
included), adds the resulting PrimFunc to the module and returns the ``R.call_tir`` of it.
Returning ``call`` itself means "leave this call as it is".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit.ir.op import Op, register_op
from mlckit.tir import expr as texpr

from ...block_builder import BlockBuilder
from ...expr import Call, Constant, Expr, PrimValue

LegalizeFunc = Callable[[BlockBuilder, Call], Expr]


def register_legalize(op_name: str, legalize: LegalizeFunc | None = None) -> Any:
    """Set ``legalize`` as the ``FLegalize`` attribute of ``op_name``; without ``legalize``,
    a decorator that does so."""

    def attach(fn: LegalizeFunc) -> LegalizeFunc:
        register_op(op_name).attrs["FLegalize"] = fn
        return fn

    return attach if legalize is None else attach(legalize)


def get_legalize(op: Op) -> LegalizeFunc | None:
    """The legalization registered for ``op`` (its ``FLegalize`` attribute), or None."""
    return op.get_attr("FLegalize")


def call_topi(te_func: Callable[..., Any], name: str | None = None) -> LegalizeFunc:
    """The legalization that passes the call's arguments to ``te_func`` and nothing else."""

    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        return bb.call_te(te_func, *call.args, primfunc_name_hint=name)

    return legalize


def reduce_topi(te_func: Callable[..., Any]) -> LegalizeFunc:
    """The legalization of a reduction ``op(x, axis, keepdims)``: ``te_func(x, axis, keepdims)``."""

    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        return bb.call_te(te_func, call.args[0], call.attrs["axis"], call.attrs["keepdims"])

    return legalize


def scalar_const(expr: Expr) -> texpr.PrimExpr | None:
    """A scalar operand as a PrimExpr to fold into the kernel: an ``R.prim_value`` or a 0-d
    constant; None for anything else (a tensor the kernel must read)."""
    if isinstance(expr, PrimValue):
        return expr.value
    if isinstance(expr, Constant) and expr.data.numpy().ndim == 0:
        value = expr.data.numpy()[()]
        dtype = str(value.dtype)
        return texpr.const(value.item(), dtype)
    return None
