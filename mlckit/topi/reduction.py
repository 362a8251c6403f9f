"""Reductions along axes: ``sum``, ``max``, ``min``, ``mean``, ``argmax``, and
``collapse_sum``, the sum that undoes a broadcast.

``topi.sum(A, axis=1)`` is one block named ``A_red`` (after the input) whose reduce axes are
``k<axis>``. ``argmax`` reduces (index, value) pairs in a two-output block ``A_red_temp`` and
copies the indices out in ``A_red``, as TVM does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlckit import te
from mlckit.errors import StructInfoError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import IterVar, PrimExpr, Select, const, convert

from .broadcast import divide
from .utils import as_float, axis_names, is_one, normalize_axes, prod

Axis = int | Sequence[int] | None


def _reduce_layout(
    data: te.Tensor, axis: Axis, keepdims: bool, op: str
) -> tuple[list[int], list[IterVar], list[PrimExpr], Callable[..., tuple[Any, ...]]]:
    """The reduced axes, their reduce axes, the output shape, and the map from an output
    index (and the reduce vars) to the input index."""
    axes = normalize_axes(axis, data.ndim, op)
    raxes = [te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in axes]
    out_shape = [
        const(1, d.dtype) if a in axes else d
        for a, d in enumerate(data.shape)
        if keepdims or a not in axes
    ]

    def input_index(indices: Sequence[PrimExpr]) -> tuple[Any, ...]:
        out = iter(indices)
        index = []
        for a in range(data.ndim):
            if a in axes:
                index.append(raxes[axes.index(a)].var)
                if keepdims:
                    next(out)
            else:
                index.append(next(out))
        return tuple(index)

    return axes, raxes, out_shape, input_index


def _comm_reduce(data: te.Tensor, axis: Axis, keepdims: bool, reducer: Any, op: str) -> te.Tensor:
    _, raxes, out_shape, input_index = _reduce_layout(data, axis, keepdims, op)
    return te.compute(
        out_shape,
        lambda *i: reducer(data[input_index(i)], axis=raxes),
        name=f"{data.op.name}_red",
        tag="comm_reduce",
        varargs_names=axis_names(len(out_shape)),
    )


def sum(data: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """The sum over ``axis`` (all axes when None)."""
    return _comm_reduce(data, axis, keepdims, te.sum, "topi.sum")


def max(data: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """The maximum over ``axis`` (all axes when None)."""
    return _comm_reduce(data, axis, keepdims, te.max, "topi.max")


def min(data: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """The minimum over ``axis`` (all axes when None)."""
    return _comm_reduce(data, axis, keepdims, te.min, "topi.min")


def mean(data: te.Tensor, axis: Axis = None, keepdims: bool = False) -> te.Tensor:
    """The mean over ``axis``: a sum, then a division by the number of elements reduced."""
    axes = normalize_axes(axis, data.ndim, "topi.mean")
    total = sum(data, axes, keepdims)
    count = prod([data.shape[a] for a in axes]) if axes else const(1, "int32")
    return divide(total, as_float(count, data.dtype))


def collapse_sum(data: te.Tensor, target_shape: Sequence[Any]) -> te.Tensor:
    """``data`` summed down to ``target_shape``, a shape it broadcasts from: the leading axes
    the target lacks are summed away and an axis where the target has 1 (and the data not) is
    summed keeping its dimension. ``data: (2, 4, 3)`` to ``(4, 1)`` sums axes 0 and 2.

    With nothing to sum the result is a copy. The other dims must equal the data's; the
    relax op ``collapse_sum_to`` checks that before lowering here.
    """
    lead = data.ndim - len(target_shape)
    if lead < 0:
        raise StructInfoError(
            f"topi.collapse_sum: the target shape has {len(target_shape)} dimensions, more "
            f"than the data's {data.ndim}"
        )
    summed = [
        a
        for a in range(data.ndim)
        if a < lead or (is_one(convert(target_shape[a - lead])) and not is_one(data.shape[a]))
    ]
    raxes = {a: te.reduce_axis((0, data.shape[a]), name=f"k{a}") for a in summed}

    def value(*index: PrimExpr) -> PrimExpr:
        at = tuple(raxes[a].var if a in raxes else index[a - lead] for a in range(data.ndim))
        return te.sum(data[at], axis=list(raxes.values())) if raxes else data[at]

    return te.compute(
        list(target_shape),
        value,
        name=f"{data.op.name}_red",
        tag="comm_reduce" if raxes else "elemwise",
        varargs_names=axis_names(len(target_shape)),
    )


def _argmax_reducer(select_last_index: bool) -> Any:
    def fcombine(x: Sequence[PrimExpr], y: Sequence[PrimExpr]) -> tuple[PrimExpr, PrimExpr]:
        # x holds the running (index, value), y the candidate; ties keep the first index
        # (or the last one with select_last_index).
        bigger = x[1] > y[1]
        earlier = x[0] > y[0] if select_last_index else x[0] < y[0]
        keep = bigger | ((x[1] == y[1]) & earlier)
        return Select(keep, x[0], y[0]), Select(bigger, x[1], y[1])

    def fidentity(index_dtype: str, value_dtype: str) -> tuple[PrimExpr, PrimExpr]:
        return const(-1, index_dtype), tir_op.min_value(value_dtype)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def argmax(
    data: te.Tensor, axis: Axis = None, keepdims: bool = False, select_last_index: bool = False
) -> te.Tensor:
    """The index of the maximum over ``axis``; over several axes (or all, when None) the
    index into those axes flattened, as numpy's ``argmax`` of a flattened array."""
    axes, raxes, out_shape, input_index = _reduce_layout(data, axis, keepdims, "topi.argmax")
    flat = raxes[0].var
    for a, rv in zip(axes[1:], raxes[1:]):
        flat = flat * data.shape[a] + rv.var
    reducer = _argmax_reducer(select_last_index)
    names = axis_names(len(out_shape))
    indices, _ = te.compute(
        out_shape,
        lambda *i: reducer((flat, data[input_index(i)]), axis=raxes),
        name=f"{data.op.name}_red_temp",
        tag="comm_reduce_idx",
        varargs_names=names,
    )
    return te.compute(
        out_shape,
        lambda *i: indices[i],
        name=f"{data.op.name}_red",
        tag="comm_reduce_idx",
        varargs_names=names,
    )
