"""Elementwise unary operators (``relax.exp``, ``relax.nn.relu``, ...): the output has the
input's struct info.

``unary(op_name, float_only)`` registers one op with the shared inference and returns its
constructor; the ``nn`` namespace builds its activations with the same function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlckit.ir.dtype import is_float

from ..expr import Call, Expr
from ..struct_info import StructInfo
from ._registry import describe_arg, fail, make_call, register, tensor_arg


def _make_infer(float_only: bool) -> Callable[[Call, Any], StructInfo]:
    def infer(call: Call, ctx: Any) -> StructInfo:
        x = tensor_arg(call, 0)
        # Transcendental functions are defined on floats only (as in TVM); an integer input
        # is almost always a missing cast.
        if float_only and x.dtype != "void" and not is_float(x.dtype):
            raise fail(
                call,
                f"needs a floating-point tensor, but {describe_arg(call, 0)} and dtype {x.dtype}",
            )
        return x

    return infer


def unary(op_name: str, float_only: bool = False) -> Callable[[Any], Call]:
    """Register the elementwise op ``op_name`` (``relax.exp``) and return its constructor."""
    register(op_name, _make_infer(float_only), ("x",))
    short = op_name.rsplit(".", 1)[-1]

    def constructor(x: Expr | Any) -> Call:
        return make_call(op_name, [x])

    constructor.__name__ = constructor.__qualname__ = short
    constructor.__doc__ = f"``{op_name}(x)``, elementwise (an un-normalized relax.Call)."
    return constructor


negative = unary("relax.negative")
abs = unary("relax.abs")
exp = unary("relax.exp", float_only=True)
log = unary("relax.log", float_only=True)
sqrt = unary("relax.sqrt", float_only=True)
sigmoid = unary("relax.sigmoid", float_only=True)
tanh = unary("relax.tanh", float_only=True)
# The Gauss error function, 2 / sqrt(pi) * integral of exp(-t^2) from 0 to x: exact GELU is
# x * (1 + erf(x / sqrt(2))) / 2, and its gradient needs erf itself.
erf = unary("relax.erf", float_only=True)

__all__ = ["abs", "erf", "exp", "log", "negative", "sigmoid", "sqrt", "tanh"]
