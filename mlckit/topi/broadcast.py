"""Elementwise operators with numpy broadcasting: ``add``, ``less``, ``where``, ...

One helper, :func:`elementwise`, builds every one of them: the output shape is the
broadcast of the tensor operands' shapes, each operand is read at the broadcast index (0
along its stretched dims), and Python numbers or PrimExprs act as scalars. Each operator's
block is named ``T_<op>`` and its indices ``ax0, ax1, ...``, as in TVM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlckit import te
from mlckit.errors import StructInfoError
from mlckit.ir.dtype import is_float
from mlckit.tir import op as tir_op
from mlckit.tir.expr import PrimExpr, Select, convert

from .utils import axis_names, broadcast_indices, broadcast_shape, same_dim, shape_text

Operand = te.Tensor | PrimExpr | int | float


def elementwise(
    operands: Sequence[Operand],
    fcompute: Callable[..., Any],
    name: str,
    tag: str = "broadcast",
    shape: Sequence[Any] | None = None,
) -> te.Tensor | PrimExpr:
    """``fcompute`` applied to the operands, broadcast against each other (or to ``shape``).

    With no tensor among the operands (and no ``shape``) the scalar result is returned.
    """
    tensors = [o for o in operands if isinstance(o, te.Tensor)]
    if not tensors and shape is None:
        return fcompute(*operands)
    shapes = [t.shape for t in tensors]
    if shape is None:
        out_shape = broadcast_shape(shapes, name)
    else:
        out_shape = [convert(d) for d in shape]
        for s in shapes:
            # Broadcasting to `shape` must give exactly `shape`: no operand may be larger.
            merged = broadcast_shape([s, out_shape], name)
            if len(merged) != len(out_shape) or not all(map(same_dim, merged, out_shape)):
                raise StructInfoError(
                    f"{name}: a tensor of shape {shape_text(s)} cannot be broadcast to "
                    f"{shape_text(out_shape)}"
                )

    def body(*indices: PrimExpr) -> PrimExpr:
        values = [
            o[tuple(broadcast_indices(o.shape, out_shape, indices))]
            if isinstance(o, te.Tensor)
            else o
            for o in operands
        ]
        return fcompute(*values)

    return te.compute(out_shape, body, name=name, tag=tag, varargs_names=axis_names(len(out_shape)))


def _binary(name: str, fcombine: Callable[[Any, Any], PrimExpr], doc: str) -> Callable[..., Any]:
    def op(lhs: Operand, rhs: Operand) -> te.Tensor | PrimExpr:
        return elementwise([lhs, rhs], fcombine, f"T_{name}")

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``{doc}`` elementwise, with numpy broadcasting (block ``T_{name}``)."
    return op


def _floor_divide(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    # Floats round the true quotient down; integers use floor division (numpy's //).
    if is_float(convert(a).dtype) or is_float(convert(b).dtype):
        return tir_op.floor(a / b)
    return tir_op.floordiv(a, b)


add = _binary("add", lambda a, b: a + b, "lhs + rhs")
subtract = _binary("subtract", lambda a, b: a - b, "lhs - rhs")
multiply = _binary("multiply", lambda a, b: a * b, "lhs * rhs")
divide = _binary("divide", lambda a, b: a / b, "lhs / rhs")
floor_divide = _binary("floor_divide", _floor_divide, "lhs // rhs")
power = _binary("power", tir_op.pow, "lhs ** rhs")
maximum = _binary("maximum", tir_op.max, "max(lhs, rhs)")
minimum = _binary("minimum", tir_op.min, "min(lhs, rhs)")
equal = _binary("equal", lambda a, b: a == b, "lhs == rhs")
not_equal = _binary("not_equal", lambda a, b: a != b, "lhs != rhs")
less = _binary("less", lambda a, b: a < b, "lhs < rhs")
less_equal = _binary("less_equal", lambda a, b: a <= b, "lhs <= rhs")
greater = _binary("greater", lambda a, b: a > b, "lhs > rhs")
greater_equal = _binary("greater_equal", lambda a, b: a >= b, "lhs >= rhs")


def where(condition: Operand, x: Operand, y: Operand) -> te.Tensor | PrimExpr:
    """``x`` where ``condition`` holds (is non-zero), else ``y``; all three broadcast."""

    def select(c: Any, a: Any, b: Any) -> PrimExpr:
        c = convert(c)
        return Select(c if c.dtype == "bool" else c != 0, a, b)

    return elementwise([condition, x, y], select, "T_where")


def ewise_fma(a: Operand, b: Operand, c: Operand) -> te.Tensor | PrimExpr:
    """``a * b + c`` elementwise (fused multiply-add), with broadcasting."""
    return elementwise([a, b, c], lambda x, y, z: x * y + z, "T_ewise_fma")


def broadcast_to(data: te.Tensor, shape: Sequence[Any]) -> te.Tensor:
    """``data`` broadcast to ``shape`` (numpy's ``broadcast_to``)."""
    return elementwise([data], lambda x: x, "T_broadcast_to", shape=shape)
