"""How legalizations are registered, and the vocabulary of the legalization table's rows.

A legalization is a function ``(bb, call) -> Expr`` stored as the ``FLegalize`` attribute of
the op it lowers. It usually returns ``bb.call_te(topi.<op>, ...)``: ``call_te`` traces the
tensor expression on placeholders shaped like the relax arguments (symbolic dims included),
adds the resulting PrimFunc to the module and returns the ``R.call_tir`` of it. Returning
``call`` itself means "leave this call as it is".

Most ops lower the same way, differing only in the topi function and in where its arguments
come from, so a legalization is usually a :class:`Lowering`: a row naming the topi function
and its arguments in order, each either an :class:`Arg` read from the call (``ARGS``,
``attr("axis")``, ``OUT_SHAPE``, ...) or a literal value passed as it is::

    Lowering(topi.sum, (ARGS, attr("axis"), attr("keepdims")))
    # relax.sum(x, axis=[1], keepdims=True) -> bb.call_te(topi.sum, x, [1], True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlckit.ir.op import Op, register_op
from mlckit.tir import expr as texpr

from ...block_builder import BlockBuilder
from ...expr import Call, Constant, Expr, PrimValue

LegalizeFunc = Callable[[BlockBuilder, Call], Expr]


def register_legalize(op_name: str, legalize: LegalizeFunc | None = None) -> Any:
    """Set ``legalize`` as the ``FLegalize`` attribute of ``op_name``; without ``legalize``,
    a decorator that does so."""

    def attach(fn: LegalizeFunc) -> LegalizeFunc:
        register_op(op_name).attrs["FLegalize"] = fn
        return fn

    return attach if legalize is None else attach(legalize)


def get_legalize(op: Op) -> LegalizeFunc | None:
    """The legalization registered for ``op`` (its ``FLegalize`` attribute), or None."""
    return op.get_attr("FLegalize")


def scalar_const(expr: Expr) -> texpr.PrimExpr | None:
    """A scalar operand as a PrimExpr to fold into the kernel: an ``R.prim_value`` or a 0-d
    constant; None for anything else (a tensor the kernel must read)."""
    if isinstance(expr, PrimValue):
        return expr.value
    if isinstance(expr, Constant) and expr.data.numpy().ndim == 0:
        value = expr.data.numpy()[()]
        dtype = str(value.dtype)
        return texpr.const(value.item(), dtype)
    return None


@dataclass(frozen=True)
class Arg:
    """Where some of a topi function's arguments come from in the call being lowered:
    ``read(call)`` gives them (usually one)."""

    name: str
    read: Callable[[Call], list[Any]]

    def __repr__(self) -> str:
        return self.name


def _operands(call: Call) -> list[Any]:
    a, b = call.args
    sa, sb = scalar_const(a), scalar_const(b)
    # At least one operand stays a tensor: the kernel needs something to loop over.
    if sb is not None:
        return [a, sb]
    if sa is not None:
        return [sa, b]
    return [a, b]


def _fill_value(call: Call) -> list[Any]:
    value = scalar_const(call.args[1])
    return [call.args[1] if value is None else value]


ARGS = Arg("ARGS", lambda call: list(call.args))
"""The call's arguments, in order (each tensor becomes a placeholder of the kernel)."""
DATA = Arg("DATA", lambda call: [call.args[0]])
"""The first argument alone (the others are shapes that the result's struct info holds)."""
OPERANDS = Arg("OPERANDS", _operands)
"""The two operands of a binary op, a scalar one (``R.prim_value`` or a 0-d constant) folded
into the kernel as a constant instead of passed as a tensor, as TVM does."""
FILL_VALUE = Arg("FILL_VALUE", _fill_value)
"""The fill value (second argument): folded as a constant, or read by the kernel when it is
computed."""
OUT_SHAPE = Arg("OUT_SHAPE", lambda call: [list(call.struct_info.shape_values)])  # type: ignore[attr-defined]
"""The result's shape as inference gave it (``-1`` resolved, sizes multiplied out)."""
OUT_DTYPE = Arg("OUT_DTYPE", lambda call: [call.struct_info.dtype])  # type: ignore[attr-defined]
"""The result's dtype."""


def attr(name: str) -> Arg:
    """The value of the call's attribute ``name``."""
    return Arg(f"attr({name!r})", lambda call: [call.attrs[name]])  # type: ignore[index]


@dataclass(frozen=True)
class Lowering:
    """A row of the legalization table: ``bb.call_te(kernel, *args)``, each of ``args`` an
    :class:`Arg` read from the call or a value passed as it is. The PrimFunc is named
    ``name``, or after ``kernel`` when that is None."""

    kernel: Callable[..., Any]
    args: tuple[Any, ...] = (ARGS,)
    name: str | None = None

    def __call__(self, bb: BlockBuilder, call: Call) -> Expr:
        values: list[Any] = []
        for arg in self.args:
            values += arg.read(call) if isinstance(arg, Arg) else [arg]
        return bb.call_te(self.kernel, *values, primfunc_name_hint=self.name)
