"""Symbolic integer arithmetic on TensorIR index and shape expressions (TVM's ``tvm.arith``).

``simplify`` brings an expression to a canonical sum-of-products form; an :class:`Analyzer`
also knows variable bounds and answers ``can_prove``, ``const_int_bound`` and ``int_set``.
"""

from .const_int_bound import ConstIntBound
from .errors import ArithError
from .int_set import IntervalSet
from .simplify import Analyzer, simplify

__all__ = ["Analyzer", "ArithError", "ConstIntBound", "IntervalSet", "simplify"]
