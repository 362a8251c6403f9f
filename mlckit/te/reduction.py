"""Reductions: ``te.sum``, ``te.max``, ``te.min`` and user-defined ``te.comm_reducer``.

A reduction is the whole body of a ``te.compute``: ``te.sum(A[i, k] * B[k, j], axis=k)``
returns a :class:`Reduce`, which :func:`mlckit.te.create_prim_func` lowers to a block with a
``T.init()`` (the reducer's identity) and an update ``C[i, j] = combine(C[i, j], value)``.
A reducer over tuples (``argmax`` combines (index, value) pairs) gives a compute with several
outputs, written by one block.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mlckit.errors import IRError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import IterVar, IterVarType, PrimExpr, Var, const, convert
from mlckit.tir.stmt_functor import substitute


@dataclass(frozen=True, eq=False)
class CommReducer:
    """A commutative reducer: ``result`` combines ``lhs`` and ``rhs``; ``identity_element`` is
    the value a reduction starts from."""

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[PrimExpr, ...]
    identity_element: tuple[PrimExpr, ...]

    def __call__(self, a: Sequence[PrimExpr], b: Sequence[PrimExpr]) -> list[PrimExpr]:
        """The combined values for ``a`` (the running values) and ``b`` (the new ones)."""
        vmap = dict(zip(self.lhs, a)) | dict(zip(self.rhs, b))
        return [substitute(r, vmap) for r in self.result]


@dataclass(frozen=True, eq=False)
class Reduce:
    """Reduce ``source`` over ``axis`` with ``combiner``; this is output ``value_index``."""

    combiner: CommReducer
    source: tuple[PrimExpr, ...]
    axis: tuple[IterVar, ...]
    condition: PrimExpr
    value_index: int
    init: tuple[PrimExpr, ...] = ()

    @property
    def dtype(self) -> str:
        return self.source[self.value_index].dtype

    def _misuse(self, *args: Any) -> Any:
        raise IRError(
            "a reduction (te.sum / te.max / ...) must be the whole body of te.compute; to "
            "combine it with other values, compute it into its own tensor first (as topi.mean "
            "does: a sum, then a second te.compute that divides)"
        )

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _misuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __neg__ = _misuse


Reducer = Callable[..., Any]


def comm_reducer(
    fcombine: Callable[[Any, Any], Any], fidentity: Callable[..., Any], name: str = "reduce"
) -> Reducer:
    """Make a reducer from ``fcombine(x, y)`` and ``fidentity(dtype)``, as TVM's
    ``te.comm_reducer``.

    The reducer is called as ``reducer(expr, axis, where=None, init=None)``; with tuples
    (``fcombine((x0, x1), (y0, y1))`` returning a tuple, ``fidentity(t0, t1)`` likewise) it
    returns one :class:`Reduce` per element. Called with two expressions
    (``te.max(a, b)``), it combines them directly.
    """

    def reducer(
        expr: Any, axis: Any, where: Any = None, init: Any = None
    ) -> Reduce | tuple[Reduce, ...] | PrimExpr:
        if isinstance(axis, (PrimExpr, int, float)):
            return fcombine(expr, axis)
        axes = _as_axis_list(axis, name)
        multi = isinstance(expr, (tuple, list))
        sources = tuple(convert(e) for e in (expr if multi else (expr,)))
        dtypes = [s.dtype for s in sources]
        lhs = tuple(Var(f"x{i}" if multi else "x", t) for i, t in enumerate(dtypes))
        rhs = tuple(Var(f"y{i}" if multi else "y", t) for i, t in enumerate(dtypes))
        result = fcombine(lhs, rhs) if multi else (fcombine(lhs[0], rhs[0]),)
        identity = fidentity(*dtypes) if multi else (fidentity(dtypes[0]),)
        combiner = CommReducer(
            lhs,
            rhs,
            tuple(convert(r, t) for r, t in zip(result, dtypes)),
            tuple(convert(v, t) for v, t in zip(identity, dtypes)),
        )
        condition = convert(True if where is None else where)
        if condition.dtype != "bool":
            raise IRError(f"te.{name}(..., where=...) needs a boolean condition")
        inits = () if init is None else tuple(init if multi else (init,))
        inits = tuple(convert(v, t) for v, t in zip(inits, dtypes))
        reduces = tuple(
            Reduce(combiner, sources, axes, condition, i, inits) for i in range(len(sources))
        )
        return reduces if multi else reduces[0]

    reducer.__name__ = name
    reducer.__doc__ = (
        f"``te.{name}(expr, axis, where=None, init=None)``: reduce ``expr`` over ``axis`` "
        "(one reduce_axis or a list); with two expressions, combine them elementwise."
    )
    return reducer


def _as_axis_list(axis: Any, name: str) -> tuple[IterVar, ...]:
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if not axes:
        raise IRError(f"te.{name} needs at least one reduce axis (te.reduce_axis((0, n)))")
    for iv in axes:
        if not isinstance(iv, IterVar) or iv.iter_type != IterVarType.CommReduce:
            raise IRError(
                f"te.{name}(expr, axis=...): each axis must come from te.reduce_axis, got {iv!r}"
            )
    return axes


sum = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), name="sum")
max = comm_reducer(tir_op.max, tir_op.min_value, name="max")
min = comm_reducer(tir_op.min, tir_op.max_value, name="min")
