"""Shape manipulation: ``relax.permute_dims`` (attr ``axes``), ``relax.reshape``,
``relax.flatten``, ``relax.expand_dims`` and ``relax.squeeze`` (attr ``axis``: the size-1
axes added or removed), ``relax.concat`` (attr ``axis``) and its inverse ``relax.split`` (attrs
``indices_or_sections``, ``axis``; a tuple of tensors), ``relax.broadcast_to``, its inverse in
gradients ``relax.collapse_sum_to`` / ``relax.collapse_sum_like``, and the gather
``relax.take`` (attrs ``axis``, ``mode``).

Collapsing undoes broadcasting. ``x + b`` with ``x: (4, 3)`` and ``b: (1, 3)`` reads each
element of ``b`` four times, so the gradient of ``b`` adds up the four contributions:
``collapse_sum_to(g, (1, 3))`` sums ``g: (4, 3)`` over axis 0, keeping it as size 1. The rule,
numpy's broadcasting read backwards: the leading axes the target lacks are summed away, and
an axis where the target has 1 (and the data does not) is summed keeping its dimension::

    g: (2, 4, 3)  ->  collapse_sum_to(g, (4, 1))  =  g.sum(axis=0).sum(axis=1, keepdims=True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.arith import simplify
from mlckit.errors import StructInfoError
from mlckit.ir.dtype import is_int
from mlckit.tir.expr import FloorDiv, IntImm, PrimExpr
from mlckit.topi.utils import split_bounds

from ..expr import Call, Expr, Tuple, Var, convert_to_expr
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..utils import (
    const_int,
    dims_equal,
    format_dim,
    format_shape,
    format_struct_info,
    format_tensor_shape,
    is_const_one,
)
from ._registry import (
    describe_arg,
    fail,
    int_attr,
    int_list,
    make_call,
    normalize_axis,
    register,
    shape_arg,
    shape_arg_values,
    tensor_arg,
)


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


def shape_product(dims: Sequence[PrimExpr]) -> PrimExpr:
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
    shape_sinfo = shape_arg_values(call, 1)
    new = shape_sinfo.values
    if new is None:
        return TensorStructInfo(None, x.dtype, shape_sinfo.ndim)
    old = x.shape_values  # type: ignore[union-attr]
    holes = [i for i, d in enumerate(new) if const_int(d) == -1]
    if len(holes) > 1:
        raise fail(call, f"at most one dimension of the new shape {format_shape(new)} may be -1")
    if old is None:
        return TensorStructInfo(None if holes else new, x.dtype, len(new))
    old_size = shape_product(old)
    if holes:
        rest = shape_product([d for i, d in enumerate(new) if i != holes[0]])
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
    new_size = shape_product(new)
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


def _infer_flatten(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    values = x.shape_values  # type: ignore[union-attr]
    if values is None:
        return TensorStructInfo(None, x.dtype, 1)
    return TensorStructInfo([shape_product(values)], x.dtype)


def _distinct_axes(call: Call, axes: Sequence[int], ndim: int) -> list[int]:
    """``axes`` as non-negative indices below ``ndim``, each named once."""
    normalized = [normalize_axis(call, a, ndim, f"axis={list(axes)}: axis") for a in axes]
    if len(set(normalized)) != len(normalized):
        raise fail(call, f"axis={list(axes)} names an axis twice for {describe_arg(call, 0)}")
    return normalized


def _infer_expand_dims(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    axes = call.attrs["axis"]  # type: ignore[index]
    if x.ndim < 0:  # type: ignore[union-attr]
        return TensorStructInfo(None, x.dtype, -1)
    # The axes index the result, which has len(axes) more dimensions.
    ndim = x.ndim + len(axes)  # type: ignore[union-attr]
    new = set(_distinct_axes(call, axes, ndim))
    values = x.shape_values  # type: ignore[union-attr]
    if values is None:
        return TensorStructInfo(None, x.dtype, ndim)
    old = iter(values)
    return TensorStructInfo(
        [IntImm("int64", 1) if i in new else next(old) for i in range(ndim)], x.dtype
    )


def _infer_squeeze(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    axes = call.attrs["axis"]  # type: ignore[index]
    ndim, values = x.ndim, x.shape_values  # type: ignore[union-attr]
    if ndim < 0 or (values is None and axes is None):
        return TensorStructInfo(None, x.dtype, -1)
    if axes is None:
        # Every dimension of size 1; a symbolic one may or may not be, so the rank is unknown.
        if any(const_int(d) is None for d in values):  # type: ignore[union-attr]
            return TensorStructInfo(None, x.dtype, -1)
        return TensorStructInfo([d for d in values if not is_const_one(d)], x.dtype)  # type: ignore[union-attr]
    removed = set(_distinct_axes(call, axes, ndim))
    if values is None:
        return TensorStructInfo(None, x.dtype, ndim - len(removed))
    for a in sorted(removed):
        if dims_equal(values[a], IntImm("int64", 1)) is False:
            raise fail(
                call,
                f"{describe_arg(call, 0)}, whose axis {a} has size {format_dim(values[a])}; "
                "only axes of size 1 can be squeezed",
            )
    return TensorStructInfo([d for i, d in enumerate(values) if i not in removed], x.dtype)


def _tensor_fields(call: Call) -> list[TensorStructInfo]:
    """The tensors of concat's tuple argument."""
    sinfo = call.args[0].struct_info_
    if not isinstance(sinfo, TupleStructInfo) or not sinfo.fields:
        raise fail(
            call,
            "expects a non-empty tuple of tensors such as (x, y), got " + format_struct_info(sinfo),
        )
    for i, field in enumerate(sinfo.fields):
        if not isinstance(field, TensorStructInfo):
            raise fail(
                call,
                f"every field of the tuple must be a tensor, but {_field_label(call, i)} is "
                + format_struct_info(field),
            )
    return list(sinfo.fields)  # type: ignore[arg-type]


def _field_label(call: Call, i: int) -> str:
    tup = call.args[0]
    if isinstance(tup, Tuple) and isinstance(tup.fields[i], Var):
        return tup.fields[i].name_hint  # type: ignore[attr-defined]
    return f"tensors[{i}]"


def _describe_field(call: Call, i: int, sinfo: TensorStructInfo) -> str:
    return f"{_field_label(call, i)} has shape {format_tensor_shape(sinfo)}"


def _infer_concat(call: Call, ctx: Any) -> StructInfo:
    fields = _tensor_fields(call)
    dtype = fields[0].dtype
    for i, field in enumerate(fields[1:], 1):
        if "void" in (dtype, field.dtype):
            dtype = "void"
        elif field.dtype != dtype:
            raise fail(
                call,
                f"the tensors' dtypes differ: {_describe_field(call, 0, fields[0])} and dtype "
                f"{fields[0].dtype}, {_describe_field(call, i, field)} and dtype {field.dtype}",
            )
    axis = call.attrs["axis"] if call.attrs is not None else 0
    shapes = [f.shape_values for f in fields]
    if axis is None:
        # TVM's axis=None: every tensor is flattened first.
        if any(s is None for s in shapes):
            return TensorStructInfo(None, dtype, 1)
        return TensorStructInfo([simplify(_sum(shape_product(s) for s in shapes))], dtype)
    ndims = {f.ndim for f in fields if f.ndim >= 0}
    if len(ndims) > 1:
        raise fail(
            call,
            "the tensors must have the same rank, but "
            + ", ".join(_describe_field(call, i, f) for i, f in enumerate(fields)),
        )
    if not ndims:
        return TensorStructInfo(None, dtype, -1)
    ndim = ndims.pop()
    if ndim == 0:
        raise fail(call, f"cannot concatenate 0-d tensors: {_describe_field(call, 0, fields[0])}")
    if isinstance(axis, bool) or not isinstance(axis, int) or not -ndim <= axis < ndim:
        raise fail(
            call,
            f"axis {axis!r} is out of range for {_describe_field(call, 0, fields[0])} "
            f"(valid: {-ndim} to {ndim - 1})",
        )
    axis = axis + ndim if axis < 0 else axis
    if any(s is None for s in shapes):
        return TensorStructInfo(None, dtype, ndim)
    first = shapes[0]
    for i, shape in enumerate(shapes[1:], 1):
        for d, (a, b) in enumerate(zip(first, shape)):  # type: ignore[arg-type]
            if d != axis and dims_equal(a, b) is False:
                raise fail(
                    call,
                    f"all dimensions but axis {axis} must agree, but "
                    f"{_describe_field(call, 0, fields[0])} and "
                    f"{_describe_field(call, i, fields[i])} "
                    f"(dimension {d}: {format_dim(a)} vs {format_dim(b)})",
                )
    out = list(first)  # type: ignore[arg-type]
    out[axis] = simplify(_sum(s[axis] for s in shapes))  # type: ignore[index]
    return TensorStructInfo(out, dtype)


def _infer_split(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    parts = call.attrs["indices_or_sections"]  # type: ignore[index]
    count = parts if isinstance(parts, int) else len(parts) + 1
    if count <= 0:
        raise fail(call, f"the number of sections must be positive, got {parts}")
    ndim, values = x.ndim, x.shape_values  # type: ignore[union-attr]
    axis = call.attrs["axis"]  # type: ignore[index]
    if ndim >= 0:
        axis = normalize_axis(call, axis, ndim)
    if count == 1:
        return TupleStructInfo([x])
    if values is None:
        return TupleStructInfo([TensorStructInfo(None, x.dtype, ndim)] * count)
    fields = []
    for _, size in split_bounds(values[axis], parts):
        shape = list(values)
        shape[axis] = size
        fields.append(TensorStructInfo(shape, x.dtype))
    return TupleStructInfo(fields)


def _sum(dims: Any) -> PrimExpr:
    total: PrimExpr = IntImm("int64", 0)
    for d in dims:
        total = total + d
    return total


def _infer_broadcast_to(call: Call, ctx: Any) -> StructInfo:
    x = tensor_arg(call, 0)
    target = shape_arg_values(call, 1)
    new = target.values
    if new is None:
        return TensorStructInfo(None, x.dtype, target.ndim)
    old = x.shape_values  # type: ignore[union-attr]
    if x.ndim > len(new):  # type: ignore[union-attr]
        raise fail(
            call,
            f"cannot broadcast {describe_arg(call, 0)} to the shape {format_shape(new)} "
            "with fewer dimensions",
        )
    if old is not None:
        for a, b in zip(reversed(old), reversed(new)):
            if not is_const_one(a) and dims_equal(a, b) is False:
                raise fail(
                    call,
                    f"cannot broadcast {describe_arg(call, 0)} to the shape "
                    f"{format_shape(new)} (dimension {format_dim(a)} vs {format_dim(b)}; "
                    "each dimension must equal the target or be 1)",
                )
    return TensorStructInfo(new, x.dtype)


def _collapse_result(call: Call, new: Sequence[PrimExpr] | None, ndim: int) -> StructInfo:
    """The collapsed data: the target's dims ``new`` (None when only its rank ``ndim`` is
    known) and the data's dtype, after checking the data broadcasts from them: aligned from
    the right, each target dim provably equals the data's or is 1, and the target has no more
    dims."""
    x = tensor_arg(call, 0)
    if new is None:
        return TensorStructInfo(None, x.dtype, ndim)
    old = x.shape_values  # type: ignore[union-attr]
    problem = None
    if x.ndim >= 0 and x.ndim < len(new):  # type: ignore[union-attr]
        problem = f"{len(new)} dimensions, the data only {x.ndim}"  # type: ignore[union-attr]
    elif old is not None:
        for a, b in zip(reversed(old), reversed(new)):
            equal = is_const_one(b) or dims_equal(a, b)
            if equal is False:
                problem = f"dimension {format_dim(a)} vs {format_dim(b)}"
            elif equal is None:
                # As TVM: the kernel reads data at the target's indices, so a symbolic dim must
                # provably be the data's.
                problem = (
                    f"dimension {format_dim(a)} vs {format_dim(b)} are not provably equal; "
                    "R.match_cast the data to the target's dims first"
                )
            if problem is not None:
                break
    if problem is not None:
        raise fail(
            call,
            f"{describe_arg(call, 0)}, which does not broadcast from the shape "
            f"{format_shape(new) if new else '()'}, so it cannot be summed down to it "
            f"({problem}; aligned from the right, each dimension of the shape must equal the "
            "data's or be 1)",
        )
    return TensorStructInfo(new, x.dtype)


def _infer_collapse_sum_to(call: Call, ctx: Any) -> StructInfo:
    target = shape_arg_values(call, 1)
    return _collapse_result(call, target.values, target.ndim)


def _infer_collapse_sum_like(call: Call, ctx: Any) -> StructInfo:
    target = tensor_arg(call, 1)
    return _collapse_result(call, target.shape_values, target.ndim)  # type: ignore[union-attr]


# How take treats an index outside [0, size): "fast" trusts it is inside (no check, so an
# outside index reads an unspecified element), "clip" clamps it, "wrap" takes it modulo size.
_TAKE_MODES = ("fast", "clip", "wrap")


def _infer_take(call: Call, ctx: Any) -> StructInfo:
    x, indices = tensor_arg(call, 0), tensor_arg(call, 1)
    if indices.dtype != "void" and not is_int(indices.dtype):
        raise fail(
            call,
            f"the indices must have an integer dtype, but {describe_arg(call, 1)} and dtype "
            f"{indices.dtype}",
        )
    axis = call.attrs["axis"]  # type: ignore[index]
    if axis is None:
        # As in TVM, axis=None is only for a 1-D x (its one axis).
        if x.ndim not in (-1, 1):  # type: ignore[union-attr]
            raise fail(
                call,
                f"axis=None needs a 1-D tensor, but {describe_arg(call, 0)}; give the axis, or "
                "flatten x first with R.reshape(x, (-1,))",
            )
        return TensorStructInfo(indices.shape, x.dtype, indices.ndim)  # type: ignore[union-attr]
    ndim = x.ndim  # type: ignore[union-attr]
    if ndim < 0 or indices.ndim < 0:  # type: ignore[union-attr]
        return TensorStructInfo(None, x.dtype, -1)
    axis = normalize_axis(call, axis, ndim)
    values, index_values = x.shape_values, indices.shape_values  # type: ignore[union-attr]
    if values is None or index_values is None:
        return TensorStructInfo(None, x.dtype, ndim - 1 + indices.ndim)  # type: ignore[union-attr]
    # The indexed axis of x is replaced by all the axes of indices.
    return TensorStructInfo([*values[:axis], *index_values, *values[axis + 1 :]], x.dtype)


register("relax.permute_dims", _infer_permute_dims, ("x",), ("axes",))
register("relax.reshape", _infer_reshape, ("x", "shape"))
register("relax.flatten", _infer_flatten, ("x",))
register("relax.expand_dims", _infer_expand_dims, ("x",), ("axis",))
register("relax.squeeze", _infer_squeeze, ("x",), ("axis",))
register("relax.concat", _infer_concat, ("tensors",), ("axis",))
register("relax.split", _infer_split, ("x",), ("indices_or_sections", "axis"))
register("relax.broadcast_to", _infer_broadcast_to, ("x", "shape"))
register("relax.collapse_sum_to", _infer_collapse_sum_to, ("data", "shape"))
register("relax.collapse_sum_like", _infer_collapse_sum_like, ("data", "collapse_target"))
register("relax.take", _infer_take, ("x", "indices"), ("axis", "mode"))


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
    return make_call("relax.reshape", [x, shape_arg(shape)])


def flatten(x: Expr | Any) -> Call:
    """``relax.flatten(x)``: all elements in one dimension, ``(prod(shape),)``."""
    return make_call("relax.flatten", [x])


def expand_dims(x: Expr | Any, axis: int | Sequence[int]) -> Call:
    """``relax.expand_dims(x, axis)``: ``x`` with new axes of size 1 at the positions ``axis``
    of the result (an int or a list; negative counts from the result's end).

    ``x: (4, 3)`` gives ``(1, 4, 3)`` for ``axis=0``, ``(4, 3, 1)`` for ``axis=-1`` and
    ``(1, 4, 1, 3)`` for ``axis=[0, 2]``: the inverse of ``squeeze``.
    """
    axes = int_list(axis, "axis", "relax.expand_dims")
    return make_call("relax.expand_dims", [x], {"axis": axes})


def squeeze(x: Expr | Any, axis: int | Sequence[int] | None = None) -> Call:
    """``relax.squeeze(x, axis=None)``: ``x`` without the axes ``axis``, each of size 1;
    ``axis=None`` removes every axis of size 1. ``x: (1, 4, 1)`` gives ``(4,)``, or
    ``(4, 1)`` for ``axis=0``."""
    return make_call("relax.squeeze", [x], {"axis": int_list(axis, "axis", "relax.squeeze")})


def concat(tensors: Expr | Sequence[Expr], axis: int | None = 0) -> Call:
    """``relax.concat(tensors, axis=0)``: join a tuple of tensors along ``axis``; with
    ``axis=None`` the tensors are flattened first."""
    attr = int_attr(axis, "axis", "relax.concat")
    return make_call("relax.concat", [convert_to_expr(tensors)], {"axis": attr})


def split(x: Expr | Any, indices_or_sections: int | Sequence[int], axis: int = 0) -> Call:
    """``relax.split(x, indices_or_sections, axis=0)``: a tuple of the parts of ``x`` along
    ``axis``, numpy's ``split``: an int ``k`` gives ``k`` parts of ``ceil(size / k)`` elements,
    the last taking what remains (10 in 3: 4, 4, 2); a list of indices cuts before each
    (``[2, 5]`` of 10: 2, 3, 5). ``concat`` of the parts along ``axis`` gives ``x`` back.
    """
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        if indices_or_sections <= 0:
            raise StructInfoError(
                f"relax.split: the number of sections must be positive, got {indices_or_sections}"
            )
        parts: int | list[int] = indices_or_sections
    else:
        parts = int_list(indices_or_sections, "indices_or_sections", "relax.split")  # type: ignore[assignment]
    attrs = {"indices_or_sections": parts, "axis": int_attr(axis, "axis", "relax.split")}
    return make_call("relax.split", [x], attrs)


def broadcast_to(x: Expr | Any, shape: Any) -> Call:
    """``relax.broadcast_to(x, shape)``: repeat ``x`` along dims of size 1 (and new leading
    dims) to ``shape``, with numpy's broadcasting rule."""
    return make_call("relax.broadcast_to", [x, shape_arg(shape)])


def collapse_sum_to(data: Expr | Any, shape: Any) -> Call:
    """``relax.collapse_sum_to(data, shape)``: sum ``data`` down to ``shape``, a shape it
    broadcasts from (the adjoint of ``broadcast_to``): the leading axes ``shape`` lacks are
    summed away, and each axis where ``shape`` has 1 is summed keeping its dimension.

    ``collapse_sum_to(g, (1, 3))`` with ``g: (4, 3)`` is ``g.sum(axis=0, keepdims=True)``;
    ``collapse_sum_to(g, (3,))`` is ``g.sum(axis=0)``. ``shape`` may be symbolic.
    """
    return make_call("relax.collapse_sum_to", [data, shape_arg(shape)])


def collapse_sum_like(data: Expr | Any, collapse_target: Expr | Any) -> Call:
    """``relax.collapse_sum_like(data, collapse_target)``: ``collapse_sum_to`` with the shape
    of the tensor ``collapse_target``; the result keeps ``data``'s dtype.

    In a gradient, ``collapse_sum_like(g, b)`` gives ``b``'s share of ``g``, the adjoint of
    ``a + b`` with ``b`` broadcast: ``g: (4, 3)``, ``b: (3,)`` gives ``g.sum(axis=0)``.
    """
    return make_call("relax.collapse_sum_like", [data, collapse_target])


def take(x: Expr | Any, indices: Expr | Any, axis: int | None = None, mode: str = "fast") -> Call:
    """``relax.take(x, indices, axis=None, mode="fast")``: the slices of ``x`` at ``indices``
    along ``axis``, numpy's ``take``: the result has shape
    ``x.shape[:axis] + indices.shape + x.shape[axis + 1:]`` and ``x``'s dtype, so
    ``take(weight, ids, axis=0)`` is an embedding lookup. ``axis=None`` needs a 1-D ``x``.

    ``mode`` says what an index outside ``[0, x.shape[axis])`` does: ``"fast"`` (default)
    promises there is none and checks nothing (such an index reads an unspecified element),
    ``"clip"`` clamps it to the range, ``"wrap"`` takes it modulo the size (so -1 is the last).
    """
    if mode not in _TAKE_MODES:
        raise StructInfoError(
            f"relax.take: mode must be one of {', '.join(map(repr, _TAKE_MODES))}, got {mode!r}"
        )
    attrs = {"axis": int_attr(axis, "axis", "relax.take"), "mode": mode}
    return make_call("relax.take", [x, indices], attrs)


__all__ = [
    "broadcast_to",
    "collapse_sum_like",
    "collapse_sum_to",
    "concat",
    "expand_dims",
    "flatten",
    "permute_dims",
    "reshape",
    "shape_product",
    "split",
    "squeeze",
    "take",
]
