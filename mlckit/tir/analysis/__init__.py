"""Analyses of TensorIR (TVM's ``tvm.tir.analysis``).

* ``get_block_read_write_region`` / ``infer_block_regions``: which buffer regions a block reads
  and writes (what fills ``T.reads``/``T.writes`` when a script omits them);
* ``collect_vars`` / ``expr_deep_equal``: the variables an expression uses, and equality of
  expression trees with variables compared by identity;
* ``footprint``: the bytes of each buffer one iteration of each loop touches, and
  ``block_nests``: every block with the loops around it.
"""

from .analysis import (
    collect_vars,
    expr_deep_equal,
    get_block_read_write_region,
    infer_block_regions,
)
from .loop_footprint import BlockNest, Footprint, FootprintRow, block_nests, footprint

__all__ = [
    "BlockNest",
    "Footprint",
    "FootprintRow",
    "block_nests",
    "collect_vars",
    "expr_deep_equal",
    "footprint",
    "get_block_read_write_region",
    "infer_block_regions",
]
