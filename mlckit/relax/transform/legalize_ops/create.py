"""Creation ops become ``topi.full`` over the inferred shape: ``relax.zeros`` fills 0,
``relax.ones`` 1, and ``relax.full`` its fill value (a constant is folded into the kernel; a
computed 0-d tensor is read by it)."""

from __future__ import annotations

from typing import Any

from mlckit import te, topi

from ...block_builder import BlockBuilder
from ...expr import Call, Expr
from .common import register_legalize, scalar_const


def _shape_and_dtype(call: Call) -> tuple[list[Any], str]:
    sinfo = call.struct_info
    return list(sinfo.shape_values), sinfo.dtype  # type: ignore[attr-defined]


def _filled(value: float) -> Any:
    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        shape, dtype = _shape_and_dtype(call)
        return bb.call_te(
            topi.full, shape, dtype, value, primfunc_name_hint=call.op.name.removeprefix("relax.")
        )

    return legalize


register_legalize("relax.zeros", _filled(0.0))
register_legalize("relax.ones", _filled(1.0))


def _full_from_tensor(value: te.Tensor, shape: list[Any], dtype: str) -> te.Tensor:
    return te.compute(shape, lambda *_: value[()].astype(dtype), name="T_full")


@register_legalize("relax.full")
def _full(bb: BlockBuilder, call: Call) -> Expr:
    shape, dtype = _shape_and_dtype(call)
    fill = scalar_const(call.args[1])
    if fill is not None:
        return bb.call_te(topi.full, shape, dtype, fill, primfunc_name_hint="full")
    return bb.call_te(_full_from_tensor, call.args[1], shape, dtype, primfunc_name_hint="full")
