"""The operator library (TVM's ``topi``): tensor operators written as tensor expressions.

Each operator takes ``te`` tensors and returns the ``te`` tensor of its result, built from
``te.compute`` stages whose names become the blocks of the lowered PrimFunc::

    A = te.placeholder((n, 4), name="A")
    B = te.placeholder((4,), name="B")
    C = topi.add(A, B)  # block "T_add", broadcasting B
    func = te.create_prim_func([A, B, C])

In a relax program, ``bb.emit_te(topi.add, x, y)`` does the same from relax values.
"""

from . import nn, utils
from .broadcast import (
    add,
    broadcast_to,
    divide,
    elementwise,
    equal,
    ewise_fma,
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
    where,
)
from .math import (
    abs,
    cast,
    ceil,
    erf,
    exp,
    floor,
    log,
    negative,
    rsqrt,
    sigmoid,
    sqrt,
    tanh,
)
from .reduction import argmax, collapse_sum, max, mean, min, sum
from .transform import (
    concatenate,
    expand_dims,
    full,
    full_like,
    matmul,
    reshape,
    split,
    squeeze,
    take,
    transpose,
)

__all__ = [
    "abs",
    "add",
    "argmax",
    "broadcast_to",
    "cast",
    "ceil",
    "collapse_sum",
    "concatenate",
    "divide",
    "elementwise",
    "equal",
    "erf",
    "ewise_fma",
    "exp",
    "expand_dims",
    "floor",
    "floor_divide",
    "full",
    "full_like",
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
    "power",
    "reshape",
    "rsqrt",
    "sigmoid",
    "split",
    "sqrt",
    "squeeze",
    "subtract",
    "sum",
    "take",
    "tanh",
    "transpose",
    "utils",
    "where",
]
