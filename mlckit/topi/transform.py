"""Layout and creation operators: ``reshape``, ``expand_dims``, ``squeeze``, ``transpose``,
``concatenate``, ``split``, ``full``, ``full_like``, the gather ``take``, and ``matmul`` with
numpy's batch broadcasting."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit import arith, te
from mlckit.errors import StructInfoError
from mlckit.ir.dtype import check_dtype, is_int
from mlckit.tir import op as tir_op
from mlckit.tir.expr import IntImm, PrimExpr, const, convert

from .math import cast
from .utils import (
    axis_names,
    broadcast_indices,
    broadcast_shape,
    normalize_axis,
    prod,
    same_dim,
    shape_text,
    split_bounds,
)


def ravel(indices: Sequence[PrimExpr], shape: Sequence[PrimExpr]) -> PrimExpr:
    """The row-major flat position of ``indices`` in ``shape``."""
    flat: PrimExpr = indices[0] if indices else const(0, "int32")
    for index, dim in zip(indices[1:], shape[1:]):
        flat = flat * dim + index
    return flat


def unravel(flat: PrimExpr, shape: Sequence[PrimExpr]) -> list[PrimExpr]:
    """The indices into ``shape`` of the row-major flat position ``flat`` (simplified)."""
    indices = []
    stride: PrimExpr = const(1, flat.dtype)
    for i in reversed(range(len(shape))):
        index = flat // stride
        # The outermost index needs no wrap-around: flat positions stay inside the shape.
        indices.append(arith.simplify(index % shape[i] if i else index))
        stride = stride * shape[i]
    return indices[::-1]


def reshape(a: te.Tensor, newshape: Sequence[Any]) -> te.Tensor:
    """``a`` with the same elements in row-major order under ``newshape`` (one dim may be -1)."""
    dims = [convert(d) for d in newshape]
    unknown = [i for i, d in enumerate(dims) if isinstance(d, IntImm) and d.value == -1]
    total = prod(list(a.shape))
    if len(unknown) > 1:
        raise StructInfoError(f"topi.reshape: at most one dimension may be -1, got {newshape}")
    if unknown:
        known = prod([d for i, d in enumerate(dims) if i != unknown[0]])
        dims[unknown[0]] = arith.simplify(total // known)
    if not same_dim(prod(dims), total):
        raise StructInfoError(
            f"topi.reshape: cannot reshape a tensor of shape {shape_text(a.shape)} "
            f"({total.script()} elements) to {shape_text(dims)}"
        )

    def body(*indices: PrimExpr) -> PrimExpr:
        return a[tuple(unravel(ravel(indices, dims), a.shape))]

    return te.compute(
        dims, body, name="T_reshape", tag="injective", varargs_names=axis_names(len(dims))
    )


def expand_dims(a: te.Tensor, axis: int | Sequence[int], num_newaxis: int = 1) -> te.Tensor:
    """``a`` with axes of size 1 added: ``num_newaxis`` of them from position ``axis`` of the
    result (TVM's form), or one at each position of a list ``axis``. Block ``T_expand_dims``.

    ``(4, 3)`` with ``axis=0`` gives ``(1, 4, 3)``; with ``axis=[0, 2]``, ``(1, 4, 1, 3)``.
    """
    first = axis if isinstance(axis, int) else None
    ndim = a.ndim + (num_newaxis if first is not None else len(axis))  # type: ignore[arg-type]
    if first is not None:
        start = normalize_axis(first, a.ndim + 1, "topi.expand_dims")
        new = set(range(start, start + num_newaxis))
    else:
        new = {normalize_axis(int(x), ndim, "topi.expand_dims") for x in axis}  # type: ignore[union-attr]
        if len(new) != ndim - a.ndim:
            raise StructInfoError(f"topi.expand_dims: axis {list(axis)} repeats an axis")  # type: ignore[arg-type]
    kept = [i for i in range(ndim) if i not in new]
    old = iter(a.shape)
    shape = [const(1, "int64") if i in new else next(old) for i in range(ndim)]
    return te.compute(
        shape,
        lambda *indices: a[tuple(indices[i] for i in kept)],
        name="T_expand_dims",
        tag="broadcast",
        varargs_names=axis_names(ndim),
    )


def squeeze(a: te.Tensor, axis: int | Sequence[int] | None = None) -> te.Tensor:
    """``a`` without the axes ``axis`` (each of size 1), or without every constant axis of
    size 1 when ``axis`` is None. Block ``T_squeeze``."""
    if axis is None:
        removed = {i for i, d in enumerate(a.shape) if isinstance(d, IntImm) and d.value == 1}
    else:
        items = [axis] if isinstance(axis, int) else list(axis)
        removed = {normalize_axis(int(x), a.ndim, "topi.squeeze") for x in items}
        for i in sorted(removed):
            d = a.shape[i]
            if isinstance(d, IntImm) and d.value != 1:
                raise StructInfoError(
                    f"topi.squeeze: axis {i} of a tensor of shape {shape_text(a.shape)} has "
                    f"size {d.value}, not 1"
                )
    kept = [i for i in range(a.ndim) if i not in removed]

    def body(*indices: PrimExpr) -> PrimExpr:
        at = dict(zip(kept, indices))
        return a[tuple(at.get(i, const(0, a.shape[i].dtype)) for i in range(a.ndim))]

    return te.compute(
        [a.shape[i] for i in kept],
        body,
        name="T_squeeze",
        tag="injective",
        varargs_names=axis_names(len(kept)),
    )


def transpose(a: te.Tensor, axes: Sequence[int] | None = None) -> te.Tensor:
    """``a`` with its dimensions permuted: output dim ``i`` is input dim ``axes[i]``
    (reversed when ``axes`` is None)."""
    order = list(reversed(range(a.ndim))) if axes is None else list(axes)
    order = [normalize_axis(int(x), a.ndim, "topi.transpose") for x in order]
    if sorted(order) != list(range(a.ndim)):
        raise StructInfoError(
            f"topi.transpose: axes {list(axes or [])} is not a permutation of the {a.ndim} "
            "dimensions"
        )

    def body(*indices: PrimExpr) -> PrimExpr:
        index: list[Any] = [None] * a.ndim
        for out_axis, in_axis in enumerate(order):
            index[in_axis] = indices[out_axis]
        return a[tuple(index)]

    return te.compute(
        [a.shape[x] for x in order],
        body,
        name="T_transpose",
        tag="injective",
        varargs_names=axis_names(a.ndim),
    )


def concatenate(a_tuple: Sequence[te.Tensor], axis: int | None = 0) -> te.Tensor:
    """The tensors joined along ``axis``; every other dimension must agree. With
    ``axis=None`` they are flattened first (row-major), as numpy's ``concatenate`` does.
    Block ``T_concat``."""
    if axis is None:
        return concatenate([reshape(t, [prod(list(t.shape))]) for t in a_tuple], 0)
    tensors = list(a_tuple)
    if not tensors:
        raise StructInfoError("topi.concatenate needs at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "topi.concatenate")
    for t in tensors[1:]:
        same = t.ndim == first.ndim and all(
            i == axis or same_dim(d, e) for i, (d, e) in enumerate(zip(t.shape, first.shape))
        )
        if not same or t.dtype != first.dtype:
            raise StructInfoError(
                f"topi.concatenate: a tensor of shape {shape_text(t.shape)} ({t.dtype}) cannot "
                f"join one of shape {shape_text(first.shape)} ({first.dtype}) along axis {axis}"
            )
    offsets = [const(0, first.shape[axis].dtype)]
    for t in tensors[:-1]:
        offsets.append(arith.simplify(offsets[-1] + t.shape[axis]))
    out_shape = list(first.shape)
    out_shape[axis] = arith.simplify(offsets[-1] + tensors[-1].shape[axis])

    def body(*indices: PrimExpr) -> PrimExpr:
        def part(t: te.Tensor, offset: PrimExpr) -> PrimExpr:
            index = list(indices)
            index[axis] = arith.simplify(index[axis] - offset)
            return t[tuple(index)]

        # The last tensor whose offset the index has passed holds the element.
        value = part(tensors[0], offsets[0])
        for t, offset in zip(tensors[1:], offsets[1:]):
            value = tir_op.if_then_else(indices[axis] >= offset, part(t, offset), value)
        return value

    return te.compute(
        out_shape, body, name="T_concat", tag="injective", varargs_names=axis_names(first.ndim)
    )


def split(
    ary: te.Tensor, indices_or_sections: int | Sequence[int], axis: int = 0
) -> list[te.Tensor]:
    """``ary`` cut along ``axis`` into ``k`` parts of ``ceil(size / k)`` elements (the last
    takes what remains), or at the positions ``indices_or_sections``, as numpy's ``split``:
    one block ``T_split`` (``T_split_1``, ...) per part."""
    axis = normalize_axis(axis, ary.ndim, "topi.split")

    def part(start: PrimExpr, size: PrimExpr, name: str) -> te.Tensor:
        def body(*indices: PrimExpr) -> PrimExpr:
            index = list(indices)
            index[axis] = index[axis] + start
            return ary[tuple(index)]

        shape = list(ary.shape)
        shape[axis] = size
        return te.compute(
            shape, body, name=name, tag="injective", varargs_names=axis_names(ary.ndim)
        )

    bounds = split_bounds(ary.shape[axis], indices_or_sections)
    return [
        part(start, size, "T_split" if i == 0 else f"T_split_{i}")
        for i, (start, size) in enumerate(bounds)
    ]


def take(
    a: te.Tensor, indices: te.Tensor, axis: int | None = None, mode: str = "clip"
) -> te.Tensor:
    """The slices of ``a`` at the integer ``indices`` along ``axis`` (numpy's ``take``): output
    ``[*pre, *j, *post]`` is ``a[*pre, indices[*j], *post]``, so the result has shape
    ``a.shape[:axis] + indices.shape + a.shape[axis + 1:]``. With ``axis=None`` ``a`` is read
    as flattened (row-major). Block ``T_take``.

    ``mode`` handles an index outside ``[0, size)``: ``"clip"`` clamps it, ``"wrap"`` takes it
    modulo the size, ``"fast"`` uses it as it is: the caller promises it is inside, since
    nothing checks it (an outside index reads an unspecified element or crashes).
    TVM's ``batch_dims`` is not supported.
    """
    op = "topi.take"
    if mode not in ("fast", "clip", "wrap"):
        raise StructInfoError(f"{op}: mode must be 'fast', 'clip' or 'wrap', got {mode!r}")
    if not is_int(indices.dtype):
        raise StructInfoError(f"{op}: the indices must be integers, got dtype {indices.dtype}")
    if axis is None:
        size, pre, post = prod(list(a.shape)), [], []
    else:
        axis = normalize_axis(axis, a.ndim, op)
        size, pre, post = a.shape[axis], list(a.shape[:axis]), list(a.shape[axis + 1 :])
    out_shape = [*pre, *indices.shape, *post]

    def body(*i: PrimExpr) -> PrimExpr:
        first, last = len(pre), len(pre) + indices.ndim  # the output axes of indices
        # Index arithmetic happens in the dtype of the dims (int64 in relax programs).
        index = indices[i[first:last]].astype(size.dtype)
        if mode == "clip":
            index = tir_op.min(tir_op.max(index, const(0, size.dtype)), arith.simplify(size - 1))
        elif mode == "wrap":
            index = tir_op.floormod(index, size)
        if axis is None:
            return a[tuple(unravel(index, a.shape))]
        return a[(*i[:first], index, *i[last:])]

    return te.compute(
        out_shape, body, name="T_take", tag="injective", varargs_names=axis_names(len(out_shape))
    )


def full(shape: Sequence[Any], dtype: str, fill_value: Any) -> te.Tensor:
    """A tensor of ``shape`` filled with ``fill_value``: a number, or a 0-d tensor whose value
    each element reads (converted to ``dtype``). Block ``T_full``."""
    return _filled(shape, dtype, fill_value, "T_full")


def full_like(x: te.Tensor, fill_value: Any) -> te.Tensor:
    """A tensor of ``x``'s shape and dtype filled with ``fill_value``. Block ``T_full_like``."""
    return _filled(x.shape, x.dtype, fill_value, "T_full_like")


def _filled(shape: Sequence[Any], dtype: str, fill_value: Any, name: str) -> te.Tensor:
    dtype = check_dtype(dtype)
    if isinstance(fill_value, te.Tensor):
        if fill_value.ndim != 0:
            raise StructInfoError(
                f"topi.{name.removeprefix('T_')}: the fill value must be a scalar (a 0-d "
                f"tensor), got a tensor of shape {shape_text(fill_value.shape)}"
            )
        value = fill_value[()].astype(dtype)
    else:
        value = const(fill_value, dtype)
    return te.compute(
        shape, lambda *i: value, name=name, tag="elemwise", varargs_names=axis_names(len(shape))
    )


def matmul(
    a: te.Tensor,
    b: te.Tensor,
    transpose_a: bool = False,
    transpose_b: bool = False,
    out_dtype: str | None = None,
) -> te.Tensor:
    """numpy's ``matmul``: the last two dims multiply, leading (batch) dims broadcast, a 1-d
    operand is a vector (its dim is dropped from the result). Block ``T_matmul``.

    With an ``out_dtype`` the operands do not both have (mixed precision), both are converted
    to it first, a ``T_cast`` stage each."""
    if out_dtype is not None and not out_dtype == a.dtype == b.dtype:
        a, b = cast(a, out_dtype), cast(b, out_dtype)
    if a.ndim == 0 or b.ndim == 0:
        raise StructInfoError("topi.matmul: operands must have at least one dimension")
    a_rows = a.ndim >= 2
    b_cols = b.ndim >= 2
    a_mat = (-1, -2) if transpose_a and a_rows else (-2, -1)  # (row axis, reduce axis)
    b_mat = (-1, -2) if transpose_b and b_cols else (-2, -1)  # (reduce axis, col axis)
    a_red = a.shape[a_mat[1]] if a_rows else a.shape[0]
    b_red = b.shape[b_mat[0]] if b_cols else b.shape[0]
    if not same_dim(a_red, b_red):
        raise StructInfoError(
            f"topi.matmul: the reduction dims differ: {shape_text(a.shape)} @ "
            f"{shape_text(b.shape)}{' (a transposed)' if transpose_a else ''}"
            f"{' (b transposed)' if transpose_b else ''}"
        )
    a_batch = a.shape[:-2] if a_rows else ()
    b_batch = b.shape[:-2] if b_cols else ()
    batch = broadcast_shape([a_batch, b_batch], "topi.matmul")
    out_shape = [*batch]
    if a_rows:
        out_shape.append(a.shape[a_mat[0]])
    if b_cols:
        out_shape.append(b.shape[b_mat[1]])
    k = te.reduce_axis((0, a_red), name="k")

    def body(*indices: PrimExpr) -> Any:
        batch_idx = indices[: len(batch)]
        rest = list(indices[len(batch) :])
        a_idx: list[Any] = broadcast_indices(a_batch, batch, batch_idx)
        if a_rows:
            pair = [rest.pop(0), k.var]
            a_idx += pair if a_mat == (-2, -1) else pair[::-1]
        else:
            a_idx.append(k.var)
        b_idx: list[Any] = broadcast_indices(b_batch, batch, batch_idx)
        if b_cols:
            pair = [k.var, rest.pop(0)]
            b_idx += pair if b_mat == (-2, -1) else pair[::-1]
        else:
            b_idx.append(k.var)
        return te.sum(a[tuple(a_idx)] * b[tuple(b_idx)], axis=k)

    return te.compute(out_shape, body, name="T_matmul", tag="matmul")
