"""Shape manipulation: ``relax.permute_dims`` (attr ``axes``) and ``relax.reshape``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.arith import simplify
from mlckit.tir.expr import FloorDiv, IntImm, PrimExpr

from ..expr import Call, Expr, ShapeExpr
from ..struct_info import ShapeStructInfo, StructInfo, TensorStructInfo
from ..utils import const_int, dims_equal, format_dim, format_shape
from ._registry import describe_arg, fail, int_list, make_call, normalize_axis, register, tensor_arg


def _infer_permute_dims(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    axes = call.attrs["axes"] if call.attrs is not None else None
    if axes is None:
        if x.ndim < 0:  # type: ignore[union-attr]
            return TensorStructInfo(None, x.dtype, -1)
        axes = list(range(x.ndim))[::-1]  # type: ignore[union-attr]
    ndim = x.ndim  # type: ignore[union-attr]
    if ndim >= 0:
        if len(axes) != ndim:
            raise fail(
                call,
                f"axes={list(axes)} has {len(axes)} entries, but "
                f"{describe_arg(call, 0)} with {ndim} dimensions",
            )
        axes = [normalize_axis(call, a, ndim, f"axes={list(axes)}: axis") for a in axes]
        if sorted(axes) != list(range(ndim)):
            raise fail(
                call,
                f"axes={list(call.attrs['axes'])} is not a permutation of "
                f"0..{ndim - 1} (each axis must appear exactly once) for "
                f"{describe_arg(call, 0)}",
            )
    values = x.shape_values  # type: ignore[union-attr]
    if values is None:
        return TensorStructInfo(None, x.dtype, len(axes))
    return TensorStructInfo([values[a] for a in axes], x.dtype)


def _product(dims: Sequence[PrimExpr]) -> PrimExpr:
    """The number of elements: constants folded here, the symbolic rest left to the simplifier."""
    const = 1
    symbolic: PrimExpr | None = None
    for d in dims:
        value = const_int(d)
        if value is not None:
            const *= value
        else:
            symbolic = d if symbolic is None else symbolic * d
    if symbolic is None:
        return IntImm("int64", const)
    return simplify(symbolic if const == 1 else symbolic * const)


def _infer_reshape(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    shape_sinfo = call.args[1].struct_info_
    if not isinstance(shape_sinfo, ShapeStructInfo):
        raise fail(
            call,
            f"the new shape must be a shape (R.shape([...])), got {type(call.args[1]).__name__}",
        )
    new = shape_sinfo.values
    if new is None:
        return TensorStructInfo(None, x.dtype, shape_sinfo.ndim)
    old = x.shape_values  # type: ignore[union-attr]
    holes = [i for i, d in enumerate(new) if const_int(d) == -1]
    if len(holes) > 1:
        raise fail(call, f"at most one dimension of the new shape {format_shape(new)} may be -1")
    if old is None:
        return TensorStructInfo(None if holes else new, x.dtype, len(new))
    old_size = _product(old)
    if holes:
        rest = _product([d for i, d in enumerate(new) if i != holes[0]])
        n_old, n_rest = const_int(old_size), const_int(rest)
        if n_old is not None and n_rest is not None:
            if n_rest == 0 or n_old % n_rest != 0:
                raise fail(
                    call,
                    f"cannot reshape {describe_arg(call, 0)} into "
                    f"{format_shape(new)}: {n_old} elements are not a multiple "
                    f"of {n_rest}",
                )
            inferred: PrimExpr = IntImm("int64", n_old // n_rest)
        else:
            inferred = simplify(FloorDiv(old_size, rest))
        return TensorStructInfo(
            [inferred if i == holes[0] else d for i, d in enumerate(new)], x.dtype
        )
    new_size = _product(new)
    if dims_equal(old_size, new_size) is False:
        raise fail(
            call,
            (
                f"the number of elements changes: {describe_arg(call, 0)} "
                f"({format_dim(old_size)} elements) cannot become {format_shape(new)} "
                f"({format_dim(new_size)} elements)"
            ),
        )
    return TensorStructInfo(new, x.dtype)


register("relax.permute_dims", _infer_permute_dims, ("x",), ("axes",))
register("relax.reshape", _infer_reshape, ("x", "shape"))


def permute_dims(x: Expr | Any, axes: Sequence[int] | None = None) -> Call:
    """``relax.permute_dims(x, axes)``: transpose; ``axes=None`` reverses the dimensions.

    The attribute ``axes`` is a list of ints (or None) exactly as given.
    """
    return make_call(
        "relax.permute_dims", [x], {"axes": int_list(axes, "axes", "relax.permute_dims")}
    )


def reshape(x: Expr | Any, shape: Any) -> Call:
    """``relax.reshape(x, shape)``; one dimension of ``shape`` may be -1 (inferred).

    As in TVM the new shape is the second argument (a ShapeExpr or a shape-valued variable),
    so it may be symbolic.
    """
    if not isinstance(shape, Expr):
        shape = ShapeExpr(shape)
    return make_call("relax.reshape", [x, shape])


__all__ = ["permute_dims", "reshape"]
