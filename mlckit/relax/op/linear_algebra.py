"""Matrix products: ``relax.matmul`` (numpy semantics), ``relax.nn.dense`` (``x @ w.T``) and
``linear`` (``x @ w.T + b``, built from matmul, permute_dims and add)."""

from __future__ import annotations

from typing import Any

from mlckit.ir.dtype import check_dtype
from mlckit.tir.expr import PrimExpr

from ..expr import Call, Expr
from ..struct_info import StructInfo, TensorStructInfo
from ..utils import dims_equal, format_dim
from ._registry import common_dtype, describe_arg, fail, make_call, register, tensor_arg
from .binary import add, broadcast_shapes
from .manipulate import permute_dims


def _check_reduction(call: Call, k_x: PrimExpr, k_w: PrimExpr) -> None:
    if dims_equal(k_x, k_w) is False:
        raise fail(
            call,
            (
                f"the reduction dimensions differ: {describe_arg(call, 0)} and "
                f"{describe_arg(call, 1)} ({format_dim(k_x)} vs {format_dim(k_w)})"
            ),
        )


def _out_dtype(call: Call, x: TensorStructInfo, w: TensorStructInfo) -> str:
    out_dtype = call.attrs["out_dtype"] if call.attrs is not None else "void"
    # With an explicit out_dtype the inputs may differ (mixed precision); else they must agree.
    return out_dtype if out_dtype not in (None, "void") else common_dtype(call, x, w)


def _infer_matmul(call: Call, ctx: Any) -> StructInfo:
    x, w = tensor_arg(call, 0), tensor_arg(call, 1)
    dtype = _out_dtype(call, x, w)  # type: ignore[arg-type]
    if x.ndim == 0 or w.ndim == 0:  # type: ignore[union-attr]
        raise fail(
            call,
            f"needs tensors with at least one dimension, but {describe_arg(call, 0)} "
            f"and {describe_arg(call, 1)}",
        )
    sx, sw = x.shape_values, w.shape_values  # type: ignore[union-attr]
    if sx is None or sw is None:
        nx, nw = x.ndim, w.ndim  # type: ignore[union-attr]
        if nx < 0 or nw < 0:
            return TensorStructInfo(None, dtype, -1)
        ndim = max(nx - 2, nw - 2, 0) + (nx >= 2) + (nw >= 2)
        return TensorStructInfo(None, dtype, ndim)
    # numpy: a 1-D left operand is a row vector, a 1-D right operand a column vector, and the
    # dimension they add is dropped from the result.
    _check_reduction(call, sx[-1], sw[-2] if len(sw) >= 2 else sw[0])
    batch = broadcast_shapes(call, sx[:-2], sw[:-2])
    out = list(batch)
    if len(sx) >= 2:
        out.append(sx[-2])
    if len(sw) >= 2:
        out.append(sw[-1])
    return TensorStructInfo(out, dtype)


def _infer_dense(call: Call, ctx: Any) -> StructInfo:
    x, w = tensor_arg(call, 0), tensor_arg(call, 1)
    dtype = common_dtype(call, x, w)
    if w.ndim not in (-1, 2):  # type: ignore[union-attr]
        raise fail(
            call, "the weight must be 2-D (units, in_features), but " + describe_arg(call, 1)
        )
    if x.ndim == 0:  # type: ignore[union-attr]
        raise fail(call, f"the data must have at least one dimension, but {describe_arg(call, 0)}")
    sx, sw = x.shape_values, w.shape_values  # type: ignore[union-attr]
    if sx is None or sw is None:
        return TensorStructInfo(None, dtype, x.ndim)  # type: ignore[union-attr]
    _check_reduction(call, sx[-1], sw[1])
    return TensorStructInfo([*sx[:-1], sw[0]], dtype)


register("relax.matmul", _infer_matmul, ("x1", "x2"), ("out_dtype",))
register("relax.nn.dense", _infer_dense, ("x", "w"))


def matmul(x1: Expr | Any, x2: Expr | Any, out_dtype: str | None = None) -> Call:
    """``relax.matmul(x1, x2)``: numpy's matmul (batch broadcasting, 1-D operands).

    ``out_dtype`` (default: the inputs' dtype) is stored as the attribute ``out_dtype``
    (``"void"`` when not given, as in TVM).
    """
    out = "void" if out_dtype is None else check_dtype(out_dtype, "out_dtype")
    return make_call("relax.matmul", [x1, x2], {"out_dtype": out})


def dense(x: Expr | Any, w: Expr | Any) -> Call:
    """``relax.nn.dense(x, w)`` = ``x @ w.T``: x (..., K), w (N, K) -> (..., N).

    The operator of TVM's earlier Relax (the course's ``relax.op.dense``); newer TVM spells it
    ``relax.op.linear`` / ``R.matmul(x, R.permute_dims(w))``.
    """
    return make_call("relax.nn.dense", [x, w])


def linear(
    data: Expr | Any,
    weight: Expr | Any,
    bias: Expr | Any | None = None,
    out_dtype: str | None = None,
) -> Expr:
    """``relax.op.linear(data, weight, bias=None)`` = ``data @ weight.T + bias``.

    As in TVM this is not an operator of its own: it builds
    ``add(matmul(data, permute_dims(weight)), bias)``, which normalization binds call by call.
    """
    out = matmul(data, permute_dims(weight), out_dtype=out_dtype)
    return out if bias is None else add(out, bias)


__all__ = ["dense", "linear", "matmul"]
