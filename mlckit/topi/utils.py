"""Shape helpers shared by the operators: axes, broadcasting, constant dims."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from mlckit import arith
from mlckit.errors import StructInfoError
from mlckit.ir.dtype import is_float
from mlckit.te.tensor import shape_text
from mlckit.tir import op as tir_op
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


def split_bounds(dim: PrimExpr, indices_or_sections: int | Sequence[int]) -> list[tuple[Any, Any]]:
    """The ``(start, size)`` of each part when a dimension of size ``dim`` is split, shared by
    ``topi.split`` and the struct info of ``relax.split`` so that both give the same shapes.

    ``k`` sections have ``ceil(dim / k)`` elements each, the last what remains: 10 in 3 gives
    4, 4, 2. Indices ``[2, 5]`` cut before elements 2 and 5: 10 gives 2, 3, 5. With a constant
    ``dim`` the cuts are clamped to it, as numpy clamps slices (an empty part has size 0); a
    symbolic ``dim`` is taken to be at least the largest index.
    """
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if sections <= 0:
            raise StructInfoError(
                f"split: the number of sections must be positive, got {indices_or_sections}"
            )
        seg = arith.simplify((dim + (sections - 1)) // sections)
        cuts: list[Any] = [arith.simplify(seg * i) for i in range(1, sections)]
    else:
        cuts = [int(i) for i in indices_or_sections]
    edges = [0, *cuts, dim]
    size = dim.value if isinstance(dim, IntImm) else None
    if size is not None:
        values = [min(max(int(arith.simplify(_int64(e)).value), 0), size) for e in edges]
        # A cut before an earlier one leaves an empty part, as numpy's a[5:2].
        return [
            (const(lo, "int64"), const(max(hi - lo, 0), "int64"))
            for lo, hi in itertools.pairwise(values)
        ]
    return [
        (_int64(lo), arith.simplify(_int64(hi) - _int64(lo)))
        for lo, hi in itertools.pairwise(edges)
    ]


def _int64(value: Any) -> PrimExpr:
    """A dim as an int64 PrimExpr (shapes are int64; a Python int would convert to int32)."""
    return const(value, "int64") if isinstance(value, int) else value


def window_count(
    size: Any,
    pad_before: Any,
    pad_after: Any,
    kernel: Any,
    stride: int,
    dilation: int,
    ceil_mode: bool = False,
) -> PrimExpr:
    """How many windows of ``kernel`` taps (``dilation`` apart), ``stride`` apart, fit in
    ``size`` padded by ``pad_before`` and ``pad_after``: ``(span) // stride + 1``. With
    ``ceil_mode`` a last, partial window counts too, unless it would start in the padding
    after the input, as torch and TVM decide: size 5, padding 1 and 1, kernel 2, stride 2
    give 3 windows (starting at -1, 1, 3), not 4 (the fourth would start at 5)."""
    span = size + pad_before + pad_after - (kernel - 1) * dilation - 1
    if not ceil_mode:
        return arith.simplify(span // stride + 1)
    rounded_up = arith.simplify((span + stride - 1) // stride + 1)
    starts_in_padding = (rounded_up - 1) * stride >= size + pad_before
    return arith.simplify(tir_op.if_then_else(starts_in_padding, rounded_up - 1, rounded_up))
