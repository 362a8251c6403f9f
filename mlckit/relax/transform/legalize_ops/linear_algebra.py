"""``relax.matmul`` becomes ``topi.matmul`` (numpy's matmul: batch dims broadcast, 1-D
operands) and ``relax.nn.dense`` becomes ``topi.nn.dense`` (``x @ w.T``)."""

from __future__ import annotations

from mlckit import te, topi

from ...block_builder import BlockBuilder
from ...expr import Call, Expr
from .common import register_legalize


def _matmul_in(a: te.Tensor, b: te.Tensor, out_dtype: str) -> te.Tensor:
    """Mixed precision (``out_dtype`` differs from the inputs'): convert the operands first."""
    return topi.matmul(topi.cast(a, out_dtype), topi.cast(b, out_dtype))


@register_legalize("relax.matmul")
def _matmul(bb: BlockBuilder, call: Call) -> Expr:
    a, b = call.args
    out_dtype = call.struct_info.dtype  # type: ignore[attr-defined]
    if out_dtype == a.struct_info.dtype == b.struct_info.dtype:  # type: ignore[attr-defined]
        return bb.call_te(topi.matmul, a, b)
    return bb.call_te(_matmul_in, a, b, out_dtype, primfunc_name_hint="matmul")


@register_legalize("relax.nn.dense")
def _dense(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.nn.dense, *call.args)
