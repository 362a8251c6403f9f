"""``pad``: a tensor surrounded by a constant."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import Any

from mlckit import arith, te
from mlckit.errors import StructInfoError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import IntImm, PrimExpr, const, convert


def pad(
    data: te.Tensor,
    pad_before: Sequence[Any],
    pad_after: Sequence[Any] | None = None,
    pad_value: Any = 0.0,
    name: str = "PadInput",
) -> te.Tensor:
    """``data`` with ``pad_before[d]`` / ``pad_after[d]`` elements of ``pad_value`` added
    before / after each dimension ``d``. Reads outside ``data`` are guarded by
    ``T.if_then_else``; unpadded dimensions are copied straight."""
    before = [convert(p) for p in pad_before]
    after = before if pad_after is None else [convert(p) for p in pad_after]
    if len(before) != data.ndim or len(after) != data.ndim:
        raise StructInfoError(
            f"topi.nn.pad: a {data.ndim}-d tensor needs {data.ndim} pad widths before and "
            f"after, got {len(before)} and {len(after)}"
        )
    out_shape = [arith.simplify(d + b + a) for d, b, a in zip(data.shape, before, after)]
    fill = pad_value if isinstance(pad_value, PrimExpr) else const(pad_value, data.dtype)

    def body(*indices: PrimExpr) -> PrimExpr:
        index: list[PrimExpr] = []
        inside: list[PrimExpr] = []
        for i, dim, b, a in zip(indices, data.shape, before, after):
            if _is_zero(b) and _is_zero(a):
                index.append(i)
                continue
            index.append(arith.simplify(i - b))
            inside.append(i >= b)
            inside.append(i < arith.simplify(dim + b))
        value = data[tuple(index)]
        if not inside:
            return value
        return tir_op.if_then_else(reduce(lambda x, y: x & y, inside), value, fill)

    return te.compute(out_shape, body, name=name, tag="injective,pad")


def _is_zero(value: PrimExpr) -> bool:
    return isinstance(value, IntImm) and value.value == 0
