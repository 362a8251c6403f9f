"""A block's iter vars must stay within their declared domains.

``vi = T.axis.spatial(64, i)`` under ``for i in range(128)`` declares that the block computes
64 elements while the loop asks for 128: the schedule reasons about the block with the
declaration, the loops run something else. The parser and the schedule keep the declaration as
it is written; this check runs before compiling and refuses a binding that surely leaves its
domain. It proves each binding in range where it can (loops bound outermost first, so an
extent like ``9 - yy`` is understood; under the predicates and conditions around the block);
what it cannot prove is refused only when nothing guards the block and every loop extent is a
constant, where the binding's bounds are the values it takes. Anything else is left alone:
every buffer access is proved or checked in bounds by :mod:`.verify_bounds` regardless.
"""

from __future__ import annotations

from contextlib import ExitStack

from mlckit.arith import Analyzer
from mlckit.errors import BuildError

from .. import expr as E
from ..analysis import block_nests
from ..function import PrimFunc


def verify_block_bindings(func: PrimFunc, name: str = "") -> None:
    """Raise BuildError for a block binding that leaves its iter var's constant domain."""
    label = name or func.attrs.get("global_symbol", "main")
    for realize, loops, bindings, guards in block_nests(func):
        analyzer = Analyzer()
        for loop in loops:
            analyzer.bind(loop.loop_var, E.Range.from_min_extent(loop.min, loop.extent))
        exact = not guards and all(isinstance(loop.extent, E.IntImm) for loop in loops)
        with ExitStack() as scopes:
            for guard in guards:
                scopes.enter_context(analyzer.constraint_scope(guard))
            for iv in realize.block.iter_vars:
                dom, value = iv.dom, bindings[iv.var]
                if not (isinstance(dom.min, E.IntImm) and isinstance(dom.extent, E.IntImm)):
                    continue
                low, high = dom.min.value, dom.min.value + dom.extent.value
                if analyzer.can_prove(value >= low) and analyzer.can_prove(value < high):
                    continue
                bound = analyzer.const_int_bound(value)
                finite = bound.min_value > bound.NEG_INF and bound.max_value < bound.POS_INF
                if exact and finite and (bound.min_value < low or bound.max_value >= high):
                    raise BuildError(
                        f"{label}: block {realize.block.name_hint!r}: iter var "
                        f"{iv.var.name_hint} = {value.script()} takes values in "
                        f"[{bound.min_value}, {bound.max_value}], outside its domain "
                        f"[{low}, {high}); make the loop's extent match the T.axis declaration"
                    )
