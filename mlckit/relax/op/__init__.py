"""Relax operators (``relax.op.add``, ``relax.op.nn.relu``, ``relax.op.call_tir``, ...).

Each constructor returns an un-normalized :class:`relax.Call` of a registered
:class:`mlckit.ir.Op`; its struct info is inferred when the call is normalized
(``bb.emit(...)`` or ``relax.BlockBuilder().normalize(...)``). The registration of each op
(name, inference, attribute names) lives next to its constructor; see ``_registry``.
"""

from ..expr import register_operators
from . import grad, memory, nn
from .base import call_dps_packed, call_packed, call_pure_packed, call_tir
from .binary import (
    add,
    divide,
    equal,
    floor_divide,
    greater,
    greater_equal,
    less,
    less_equal,
    maximum,
    minimum,
    multiply,
    not_equal,
    power,
    subtract,
)
from .create import full, full_like, ones, ones_like, zeros, zeros_like
from .datatype import astype
from .linear_algebra import dense, linear, matmul
from .manipulate import (
    broadcast_to,
    collapse_sum_like,
    collapse_sum_to,
    concat,
    expand_dims,
    flatten,
    permute_dims,
    reshape,
    split,
    squeeze,
    take,
)
from .memory import builtin
from .nn import relu
from .search import argmax, where
from .statistical import max, mean, min, sum
from .ternary import ewise_fma
from .unary import abs, erf, exp, log, negative, sigmoid, sqrt, tanh

register_operators(
    add=add,
    subtract=subtract,
    multiply=multiply,
    divide=divide,
    floor_divide=floor_divide,
    power=power,
    matmul=matmul,
    negative=negative,
    less=less,
    less_equal=less_equal,
    greater=greater,
    greater_equal=greater_equal,
    astype=astype,
)

__all__ = [
    "abs",
    "add",
    "argmax",
    "astype",
    "broadcast_to",
    "builtin",
    "call_dps_packed",
    "call_packed",
    "call_pure_packed",
    "call_tir",
    "collapse_sum_like",
    "collapse_sum_to",
    "concat",
    "dense",
    "divide",
    "equal",
    "erf",
    "ewise_fma",
    "exp",
    "expand_dims",
    "flatten",
    "floor_divide",
    "full",
    "full_like",
    "grad",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "linear",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "memory",
    "min",
    "minimum",
    "multiply",
    "negative",
    "nn",
    "not_equal",
    "ones",
    "ones_like",
    "permute_dims",
    "power",
    "relu",
    "reshape",
    "sigmoid",
    "split",
    "sqrt",
    "squeeze",
    "subtract",
    "sum",
    "take",
    "tanh",
    "where",
    "zeros",
    "zeros_like",
]
