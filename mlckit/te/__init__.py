"""Tensor expressions (TVM's ``te``): describe tensors elementwise, lower them to TensorIR.

    A = te.placeholder((n, 128), "float32", name="A")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((n, 64), lambda i, j: te.sum(A[i, k] * W[j, k], axis=k), name="C")
    func = te.create_prim_func([A, W, C])

The TensorIR intrinsics (``te.exp``, ``te.if_then_else``, ...) are re-exported for use in
``fcompute`` bodies.
"""

from mlckit.tir.expr import const
from mlckit.tir.op import (
    abs,
    erf,
    exp,
    floordiv,
    floormod,
    if_then_else,
    log,
    max_value,
    min_value,
    pow,
    sigmoid,
    sqrt,
    tanh,
)

from .create_prim_func import create_prim_func
from .operation import compute, placeholder, reduce_axis, size_var, var
from .reduction import CommReducer, Reduce, comm_reducer, max, min, sum
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

__all__ = [
    "CommReducer",
    "ComputeOp",
    "Operation",
    "PlaceholderOp",
    "Reduce",
    "Tensor",
    "abs",
    "comm_reducer",
    "compute",
    "const",
    "create_prim_func",
    "erf",
    "exp",
    "floordiv",
    "floormod",
    "if_then_else",
    "log",
    "max",
    "max_value",
    "min",
    "min_value",
    "placeholder",
    "pow",
    "reduce_axis",
    "sigmoid",
    "size_var",
    "sqrt",
    "sum",
    "tanh",
    "var",
]
