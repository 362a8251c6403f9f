"""Tensor creation: ``relax.zeros``, ``relax.ones`` and ``relax.full`` (attr ``dtype``), and
``relax.zeros_like``, ``relax.ones_like`` and ``relax.full_like``, shaped like a tensor.

The shape is an argument (a ShapeExpr, so it may be symbolic), as in TVM; ``full`` also takes
its fill value as an argument, a 0-d tensor. The ``_like`` forms take the shape of a tensor
argument and, unless ``dtype`` says otherwise (the attribute is then ``"void"``), its dtype:
``zeros_like(x)`` is a gradient's starting value for ``x``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit.ir.dtype import check_dtype

from ..expr import Call, Expr, const
from ..struct_info import StructInfo, TensorStructInfo
from ._registry import (
    describe_arg,
    fail,
    make_call,
    register,
    shape_arg,
    shape_arg_values,
    tensor_arg,
)


def _tensor_of_shape(call: Call, dtype: str) -> TensorStructInfo:
    shape = shape_arg_values(call, 0)
    if shape.values is None:
        return TensorStructInfo(None, dtype, shape.ndim)
    return TensorStructInfo(shape.values, dtype)


def _scalar_fill(call: Call) -> None:
    value = tensor_arg(call, 1)
    if value.ndim not in (-1, 0):  # type: ignore[union-attr]
        raise fail(
            call,
            f"the fill value must be a scalar (a 0-d tensor such as R.const(1.0, "
            f'"float32")), but {describe_arg(call, 1)}',
        )


def _void_or_dtype(dtype: str | None) -> str:
    return "void" if dtype in (None, "void") else check_dtype(dtype)


def _infer_fill(call: Call, ctx: Any) -> StructInfo:
    return _tensor_of_shape(call, call.attrs["dtype"])  # type: ignore[index]


def _infer_full(call: Call, ctx: Any) -> StructInfo:
    _scalar_fill(call)
    dtype = call.attrs["dtype"]  # type: ignore[index]
    value_dtype = call.args[1].struct_info_.dtype  # type: ignore[union-attr]
    return _tensor_of_shape(call, value_dtype if dtype == "void" else dtype)


def _filled(name: str) -> Callable[[Any, str], Call]:
    op_name = f"relax.{name}"
    register(op_name, _infer_fill, ("shape",), ("dtype",))

    def constructor(shape: Any, dtype: str) -> Call:
        return make_call(op_name, [shape_arg(shape)], {"dtype": check_dtype(dtype)})

    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (
        f"``{op_name}(shape, dtype)``: a new tensor of ``shape`` filled with {name}."
    )
    return constructor


zeros = _filled("zeros")
ones = _filled("ones")
register("relax.full", _infer_full, ("shape", "fill_value"), ("dtype",))


def full(shape: Any, fill_value: Expr | float | int, dtype: str | None = None) -> Call:
    """``relax.full(shape, fill_value, dtype=None)``: a tensor of ``shape`` filled with
    ``fill_value`` (a 0-d tensor; a Python number becomes ``relax.const``). Without ``dtype``
    the result has the fill value's dtype (the attribute is then ``"void"``, as in TVM)."""
    out = _void_or_dtype(dtype)
    if not isinstance(fill_value, Expr):
        fill_value = const(fill_value, None if out == "void" else out)
    return make_call("relax.full", [shape_arg(shape), fill_value], {"dtype": out})


def _infer_like(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    if len(call.args) > 1:
        _scalar_fill(call)
    dtype = call.attrs["dtype"]  # type: ignore[index]
    return TensorStructInfo(x.shape, x.dtype if dtype == "void" else dtype, x.ndim)  # type: ignore[union-attr]


def _filled_like(name: str) -> Callable[..., Call]:
    op_name = f"relax.{name}_like"
    register(op_name, _infer_like, ("x",), ("dtype",))

    def constructor(x: Expr | Any, dtype: str | None = None) -> Call:
        return make_call(op_name, [x], {"dtype": _void_or_dtype(dtype)})

    constructor.__name__ = constructor.__qualname__ = f"{name}_like"
    constructor.__doc__ = (
        f"``{op_name}(x, dtype=None)``: a new tensor of ``x``'s shape filled with {name}, of "
        "``x``'s dtype unless ``dtype`` is given."
    )
    return constructor


zeros_like = _filled_like("zeros")
ones_like = _filled_like("ones")
register("relax.full_like", _infer_like, ("x", "fill_value"), ("dtype",))


def full_like(x: Expr | Any, fill_value: Expr | float | int, dtype: str | None = None) -> Call:
    """``relax.full_like(x, fill_value, dtype=None)``: a tensor of ``x``'s shape filled with
    ``fill_value`` (a 0-d tensor; a Python number becomes ``relax.const``), of ``x``'s dtype
    unless ``dtype`` is given."""
    out = _void_or_dtype(dtype)
    if not isinstance(fill_value, Expr):
        # The result takes x's dtype (or dtype), whatever the constant's: the kernel casts.
        fill_value = const(fill_value, None if out == "void" else out)
    return make_call("relax.full_like", [x, fill_value], {"dtype": out})


__all__ = ["full", "full_like", "ones", "ones_like", "zeros", "zeros_like"]
