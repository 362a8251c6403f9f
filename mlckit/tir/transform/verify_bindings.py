"""A block's iter vars must stay within their declared domains.

``vi = T.axis.spatial(64, i)`` under ``for i in range(128)`` declares that the block computes
64 elements while the loop asks for 128: its stores would land outside the buffer the block
was written for. The parser and the schedule keep the declaration as it is written; the code
generator checks it before compiling, where an out-of-range store would otherwise be silent
(numba does not check indices).
"""

from __future__ import annotations

from mlckit.arith import Analyzer
from mlckit.errors import BuildError

from .. import expr as E
from ..analysis import block_nests
from ..function import PrimFunc
from ..stmt_functor import substitute


def verify_block_bindings(func: PrimFunc, name: str = "") -> None:
    """Raise BuildError when a block's binding can leave its iter var's domain.

    Blocks with a predicate (``T.where``, a split's partial tile) are skipped: the predicate is
    what keeps their bindings in range. So are bindings whose range is not a constant."""
    label = name or func.attrs.get("global_symbol", "main")
    for realize, loops, bindings in block_nests(func):
        if not E.is_true(realize.predicate):
            continue
        analyzer = Analyzer()
        for loop in loops:
            analyzer.bind(loop.loop_var, E.Range.from_min_extent(loop.min, loop.extent))
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if not (isinstance(iv.dom.min, E.IntImm) and isinstance(iv.dom.extent, E.IntImm)):
                continue
            bound = analyzer.const_int_bound(substitute(value, bindings))
            low, high = iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value
            if (bound.min_value < low and bound.min_value > bound.NEG_INF) or (
                bound.max_value >= high and bound.max_value < bound.POS_INF
            ):
                raise BuildError(
                    f"{label}: block {realize.block.name_hint!r}: iter var "
                    f"{iv.var.name_hint} = {value.script()} takes values in "
                    f"[{bound.min_value}, {bound.max_value}], outside its domain [{low}, {high}); "
                    "make the loop's extent match the T.axis declaration"
                )
