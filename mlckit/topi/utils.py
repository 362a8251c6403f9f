"""Shape helpers shared by the operators: axes, broadcasting, constant dims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit import arith
from mlckit.errors import StructInfoError
from mlckit.ir.dtype import is_float
from mlckit.te.tensor import shape_text
from mlckit.tir.expr import Cast, IntImm, PrimExpr, const, convert


def axis_names(ndim: int) -> list[str]:
    """``ax0, ax1, ...``: the index names TVM's operator library gives output dimensions."""
    return [f"ax{i}" for i in range(ndim)]


def is_one(dim: PrimExpr) -> bool:
    return isinstance(dim, IntImm) and dim.value == 1


def same_dim(a: PrimExpr, b: PrimExpr) -> bool:
    """Whether two dims are provably equal (``n`` and ``n``, ``4`` and ``T.int64(4)``)."""
    return arith.Analyzer().can_prove_equal(a, b)


def normalize_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise StructInfoError(f"{op}: axis {axis} is out of range for a {ndim}-d tensor")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | Sequence[int] | None, ndim: int, op: str) -> list[int]:
    """Sorted, distinct, non-negative axes; None means all of them."""
    if axis is None:
        return list(range(ndim))
    items = [axis] if isinstance(axis, int) else list(axis)
    axes = sorted({normalize_axis(int(a), ndim, op) for a in items})
    if len(axes) != len(items):
        raise StructInfoError(f"{op}: axis {list(items)} repeats an axis")
    return axes


def broadcast_shape(shapes: Sequence[Sequence[PrimExpr]], op: str) -> list[PrimExpr]:
    """numpy's broadcasting of ``shapes`` (right-aligned; a dim of 1 stretches)."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[PrimExpr] = []
    for axis in range(ndim):
        dims = [s[len(s) - ndim + axis] for s in shapes if len(s) - ndim + axis >= 0]
        stretched = [d for d in dims if not is_one(d)]
        if not stretched:
            out.append(dims[0])
            continue
        for d in stretched[1:]:
            if not same_dim(stretched[0], d):
                raise StructInfoError(
                    f"{op}: shapes {' and '.join(shape_text(s) for s in shapes)} do not "
                    f"broadcast (dimension {d.script()} vs {stretched[0].script()})"
                )
        out.append(stretched[0])
    return out


def broadcast_indices(
    shape: Sequence[PrimExpr], out_shape: Sequence[PrimExpr], indices: Sequence[PrimExpr]
) -> list[PrimExpr]:
    """The indices into a tensor of ``shape`` broadcast to ``out_shape`` at ``indices``."""
    offset = len(out_shape) - len(shape)
    return [
        const(0, dim.dtype)
        if is_one(dim) and not is_one(out_shape[offset + i])
        else indices[offset + i]
        for i, dim in enumerate(shape)
    ]


def prod(dims: Sequence[Any]) -> PrimExpr:
    """The product of dims, simplified (1 for none)."""
    result: PrimExpr = convert(1, dims[0].dtype if dims and isinstance(dims[0], PrimExpr) else None)
    for d in dims:
        result = result * d
    return arith.simplify(result)


def as_float(value: PrimExpr, dtype: str) -> PrimExpr:
    """An integer count as a ``dtype`` value: a constant when it is one, else a cast."""
    if not is_float(dtype):
        return value
    if isinstance(value, IntImm):
        return const(float(value.value), dtype)
    return Cast(dtype, value)


def get_const_tuple(shape: Sequence[Any]) -> tuple[Any, ...]:
    """Dims as Python ints where they are constants (symbolic dims stay PrimExprs)."""
    return tuple(d.value if isinstance(d, IntImm) else d for d in shape)
