"""``te.placeholder``, ``te.compute`` and ``te.reduce_axis``: declaring tensor expressions."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from mlckit.arith import simplify
from mlckit.errors import IRError
from mlckit.ir.dtype import check_dtype, is_int
from mlckit.tir.expr import IterVar, IterVarType, PrimExpr, Range, SizeVar, Var, convert

from .reduction import Reduce
from .tensor import ComputeOp, PlaceholderOp, Tensor


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` and ``dtype`` (a parameter of the PrimFunc)."""
    dims = _shape(shape, "te.placeholder")
    return PlaceholderOp(name, dims, check_dtype(dtype or "float32")).output(0)


def compute(
    shape: Any,
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
    varargs_names: Sequence[str] | None = None,
) -> Tensor | tuple[Tensor, ...]:
    """A tensor whose element at index ``(i, j, ...)`` is ``fcompute(i, j, ...)``.

    The index variables take the names of ``fcompute``'s parameters (``lambda i, j:``); a
    ``*indices`` parameter gets ``i0, i1, ...`` or ``varargs_names``. ``fcompute`` may return
    a reduction (``te.sum(..., axis=k)``) or a tuple of values (several outputs).
    """
    dims = _shape(shape, "te.compute")
    names = _index_names(fcompute, len(dims), varargs_names)
    axis = [
        IterVar(
            dom=Range.from_min_extent(convert(0, dim.dtype), dim),
            var=Var(var_name, dim.dtype),
            iter_type=IterVarType.DataPar,
        )
        for var_name, dim in zip(names, dims)
    ]
    result = fcompute(*[iv.var for iv in axis])
    values = list(result) if isinstance(result, (tuple, list)) else [result]
    if not values:
        raise IRError(f"te.compute {name!r}: fcompute returned no values")
    reduces = [v for v in values if isinstance(v, Reduce)]
    if reduces:
        _check_reduction(name, values)
        body = values
    else:
        body = [convert(v) for v in values]
    op = ComputeOp(name, tag, attrs, axis, body)
    return op.output(0) if op.num_outputs == 1 else op.outputs


def reduce_axis(dom: Any, name: str = "k") -> IterVar:
    """A reduction axis over ``dom``: ``(begin, end)`` or a Range."""
    if isinstance(dom, Range):
        rng = dom
    elif isinstance(dom, (tuple, list)) and len(dom) == 2:
        # Bounds share one dtype: `(0, n)` with an int64 `n` is an int64 range; `(1, n + 1)`
        # spans n.
        given = Range(*_shape(dom, "te.reduce_axis"))
        rng = Range.from_min_extent(given.min, simplify(given.extent))
    else:
        raise IRError(f"te.reduce_axis needs (begin, end) or a Range, got {dom!r}")
    if not is_int(rng.min.dtype):
        raise IRError(f"te.reduce_axis: the bounds must be integers, got dtype {rng.min.dtype}")
    return IterVar(dom=rng, var=Var(name, rng.min.dtype), iter_type=IterVarType.CommReduce)


def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A symbolic scalar variable (a shape dimension or a scalar parameter)."""
    return Var(name, dtype)


def size_var(name: str = "size", dtype: str = "int32") -> Var:
    """A symbolic variable known to be non-negative."""
    return SizeVar(name, dtype)


def _shape(shape: Any, what: str) -> tuple[PrimExpr, ...]:
    """The dims as integer PrimExprs; Python ints take int64 when any dim is int64."""
    items = (shape,) if isinstance(shape, (PrimExpr, int)) else tuple(shape)
    wide = any(isinstance(d, PrimExpr) and d.dtype == "int64" for d in items)
    dims = []
    for d in items:
        if isinstance(d, bool) or not isinstance(d, (int, PrimExpr)):
            raise IRError(f"{what}: a shape dimension must be an integer, got {d!r}")
        dim = convert(d, "int64" if wide else "int32")
        if not is_int(dim.dtype):
            raise IRError(f"{what}: a shape dimension must be an integer, got dtype {dim.dtype}")
        dims.append(dim)
    return tuple(dims)


def _index_names(
    fcompute: Callable[..., Any], ndim: int, varargs_names: Sequence[str] | None
) -> list[str]:
    spec = inspect.getfullargspec(fcompute)
    if spec.varkw is not None or spec.kwonlyargs or spec.defaults:
        raise IRError(
            "te.compute: fcompute takes only index parameters (no defaults, **kwargs or "
            "keyword-only parameters)"
        )
    names = list(spec.args)
    if inspect.ismethod(fcompute):  # the bound `self` is not an index
        names = names[1:]
    if spec.varargs is not None:
        rest = ndim - len(names)
        if varargs_names is not None:
            if len(varargs_names) != rest:
                raise IRError(
                    f"te.compute: {rest} index names are needed for *{spec.varargs}, "
                    f"got varargs_names of length {len(varargs_names)}"
                )
            names += list(varargs_names)
        else:
            names += [f"i{i}" for i in range(rest)]
    if len(names) != ndim:
        raise IRError(
            f"te.compute: fcompute takes {len(names)} indices but the shape has {ndim} dimensions"
        )
    return names


def _check_reduction(name: str, values: list[Any]) -> None:
    first = values[0]
    for i, v in enumerate(values):
        if not isinstance(v, Reduce):
            raise IRError(
                f"te.compute {name!r}: a reduction must be the whole body; output {i} is not "
                "a reduction while another is"
            )
        if v.combiner is not first.combiner or v.value_index != i:
            raise IRError(
                f"te.compute {name!r}: several reductions in one compute must be the "
                "elements of one tuple reduction (reducer((a, b), axis=k))"
            )
