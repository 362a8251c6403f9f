"""Relax operators (``relax.op.add``, ``relax.op.nn.relu``, ``relax.op.call_tir``, ...).

Each constructor returns an un-normalized :class:`relax.Call` of a registered
:class:`mlckit.ir.Op`; its struct info is inferred when the call is normalized
(``bb.emit(...)`` or ``relax.BlockBuilder().normalize(...)``). The registration of each op
(name, inference, attribute names) lives next to its constructor; see ``_registry``.
"""

from . import nn
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
from .datatype import astype
from .linear_algebra import dense, matmul
from .manipulate import permute_dims, reshape
from .nn import relu
from .statistical import max, mean, min, sum
from .ternary import ewise_fma
from .unary import abs, exp, log, negative, sigmoid, sqrt, tanh

__all__ = [
    "abs",
    "add",
    "astype",
    "call_dps_packed",
    "call_packed",
    "call_pure_packed",
    "call_tir",
    "dense",
    "divide",
    "equal",
    "ewise_fma",
    "exp",
    "floor_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "multiply",
    "negative",
    "nn",
    "not_equal",
    "permute_dims",
    "power",
    "relu",
    "reshape",
    "sigmoid",
    "sqrt",
    "subtract",
    "sum",
    "tanh",
]
