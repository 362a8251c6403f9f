"""Elementwise binary ops (``relax.add``, ``relax.less``, ...) become ``topi.<same name>``.

A scalar operand (``R.prim_value`` or a 0-d constant) is folded into the kernel as a
constant instead of being passed as a tensor, as TVM does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit import topi

from ...block_builder import BlockBuilder
from ...expr import Call, Expr
from .common import register_legalize, scalar_const

_NAMES = (
    "add",
    "subtract",
    "multiply",
    "divide",
    "floor_divide",
    "power",
    "maximum",
    "minimum",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
)


def _binary(te_func: Callable[..., Any]) -> Callable[[BlockBuilder, Call], Expr]:
    def legalize(bb: BlockBuilder, call: Call) -> Expr:
        a, b = call.args
        sa, sb = scalar_const(a), scalar_const(b)
        # At least one operand stays a tensor: the kernel needs something to loop over.
        if sb is not None:
            return bb.call_te(te_func, a, sb)
        if sa is not None:
            return bb.call_te(te_func, sa, b)
        return bb.call_te(te_func, a, b)

    return legalize


for _name in _NAMES:
    register_legalize(f"relax.{_name}", _binary(getattr(topi, _name)))
