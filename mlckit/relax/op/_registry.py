"""How relax operators are registered, and the helpers their struct-info inference shares.

Every relax operator is an :class:`mlckit.ir.Op` with these attributes:

* ``FInferStructInfo(call, ctx) -> StructInfo``: what the call returns, given its arguments'
  struct info; ``ctx`` is the BlockBuilder normalizing the call (or None). Bad arguments raise
  :class:`StructInfoError` naming the op, the arguments and their shapes.
* ``arg_names``: the parameter names of the Python constructor (``x1``, ``x2``), used in
  messages when an argument is not a named variable.
* ``attr_names``: the keys of ``call.attrs`` in the order the constructor takes them; the
  printer writes them as keyword arguments in this order.
* ``FPurity``: whether a call has no visible side effect (allowed in a dataflow block).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlckit.errors import StructInfoError
from mlckit.ir.op import Op, register_op

from ..expr import Attrs, Call, Expr, ShapeExpr, Var
from ..struct_info import PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo
from ..utils import format_struct_info, format_tensor_shape

InferFn = Callable[[Call, Any], StructInfo]


def register(
    name: str,
    infer: InferFn,
    arg_names: Sequence[str],
    attr_names: Sequence[str] = (),
    *,
    num_inputs: int | None = None,
    purity: bool = True,
) -> Op:
    """Register the relax operator ``name`` (``relax.add``) with its inference function."""
    return register_op(
        name,
        len(arg_names) if num_inputs is None else num_inputs,
        FInferStructInfo=infer,
        arg_names=tuple(arg_names),
        attr_names=tuple(attr_names),
        FPurity=purity,
    )


def make_call(
    name: str,
    args: Sequence[Any],
    attrs: dict[str, Any] | None = None,
    sinfo_args: Sequence[StructInfo] = (),
) -> Call:
    """An un-normalized call of the registered op ``name``; attrs keep the registered order."""
    op = Op.get(name)
    names = op.get_attr("attr_names") or ()
    call_attrs = None
    if names:
        given = attrs or {}
        call_attrs = Attrs({key: given.get(key) for key in names})
    return Call(op, args, call_attrs, sinfo_args)


def shape_arg(shape: Any) -> Expr:
    """A shape argument as a relax expression: ``(n, 4)`` becomes ``R.shape([n, 4])``; an
    expression (a ShapeExpr or a shape-valued variable) is kept, so the shape may be symbolic."""
    return shape if isinstance(shape, Expr) else ShapeExpr(shape)


# ------------------------------------------------------------------------------ messages
def fail(call: Call, message: str) -> StructInfoError:
    """A StructInfoError prefixed with the op's name (the caller raises it)."""
    return StructInfoError(f"{op_name(call)}: {message}")


def op_name(call: Call) -> str:
    op = call.op
    return op.name if isinstance(op, Op) else getattr(op, "name_hint", type(op).__name__)


def arg_label(call: Call, index: int) -> str:
    """How a message names argument ``index``: the variable's name, else the parameter name."""
    arg = call.args[index]
    if isinstance(arg, Var):
        return arg.name_hint
    names = call.op.get_attr("arg_names") if isinstance(call.op, Op) else None
    param = names[index] if names and index < len(names) else f"argument {index}"
    return f"{param} (a {type(arg).__name__})"


def describe_arg(call: Call, index: int) -> str:
    """``x has shape (n, 784)``, the phrase every shape error is built from."""
    shape = format_tensor_shape(call.args[index].struct_info_)
    return f"{arg_label(call, index)} has shape {shape}"


def tensor_arg(
    call: Call, index: int, *, allow_prim: bool = False
) -> TensorStructInfo | PrimStructInfo:
    """The struct info of argument ``index``, which must be a tensor (or a scalar if allowed)."""
    sinfo = call.args[index].struct_info_
    if isinstance(sinfo, TensorStructInfo) or (allow_prim and isinstance(sinfo, PrimStructInfo)):
        return sinfo
    wanted = "a tensor or a scalar" if allow_prim else "a tensor"
    raise fail(
        call,
        f"expects {wanted} as argument {index}, but {arg_label(call, index)} is "
        f"{format_struct_info(sinfo)}",
    )


def shape_arg_values(call: Call, index: int) -> ShapeStructInfo:
    """The struct info of the shape argument ``index``, which must be a shape."""
    sinfo = call.args[index].struct_info_
    if not isinstance(sinfo, ShapeStructInfo):
        raise fail(
            call,
            f"expects a shape such as R.shape([n, 4]) as argument {index}, but "
            f"{arg_label(call, index)} is {format_struct_info(sinfo)}",
        )
    return sinfo


def normalize_axis(call: Call, axis: Any, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[-ndim, ndim)`` as a non-negative index (``-1`` is the last axis)."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise fail(call, f"{what} must be an integer, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise fail(
            call,
            f"{what} {axis} is out of range for {describe_arg(call, 0)} "
            f"(valid: {-ndim} to {ndim - 1})",
        )
    return axis + ndim if axis < 0 else axis


def int_attr(value: Any, what: str, op: str) -> int | None:
    """A scalar integer attribute (an axis); None stays None."""
    if value is None:
        return None
    if hasattr(value, "__index__") and not isinstance(value, bool):
        return int(value.__index__())
    raise StructInfoError(f"{op}: {what} must be an integer, got {value!r}")


def float_attr(value: Any, what: str, op: str) -> float:
    """A scalar real attribute (an epsilon, a momentum)."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value)
    raise StructInfoError(f"{op}: {what} must be a number, got {value!r}")


def int_list(values: Any, what: str, op: str) -> list[int] | None:
    """Attribute lists (axes) are stored as Python lists of ints; None stays None."""
    if values is None:
        return None
    if isinstance(values, int) and not isinstance(values, bool):
        return [values]
    try:
        items = list(values)
    except TypeError:
        raise StructInfoError(f"{op}: {what} must be a list of integers, got {values!r}") from None
    out = []
    for v in items:
        if hasattr(v, "__index__") and not isinstance(v, bool):
            out.append(int(v.__index__()))
        else:
            raise StructInfoError(f"{op}: {what} must be a list of integers, got {values!r}")
    return out


def common_dtype(
    call: Call, a: StructInfo, b: StructInfo, index_a: int = 0, index_b: int = 1
) -> str:
    """The one dtype two operands share ("void" when either is unknown); differing dtypes fail.

    Relax never converts dtypes implicitly, so ``float32 + int32`` is an error.
    """
    da, db = a.dtype, b.dtype  # type: ignore[attr-defined]
    if da == "void" or db == "void":
        return "void"
    if da != db:
        raise fail(
            call,
            (
                f"the operands' dtypes differ: {arg_label(call, index_a)} has shape "
                f"{format_tensor_shape(a)} and dtype {da}, {arg_label(call, index_b)} has shape "
                f"{format_tensor_shape(b)} and dtype {db}; relax does not convert dtypes "
                "implicitly "
                '(build constants with the matching dtype, e.g. relax.const(1.0, "float32"))'
            ),
        )
    return da
