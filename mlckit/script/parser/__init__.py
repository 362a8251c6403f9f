"""The TVMScript parser: Python ``ast`` → IRModule / PrimFunc / relax Function.

One handler module per dialect (``ir``, ``tir``, ``relax``) on a shared core: the expression
evaluator, the error formatting (``diagnostics``) and the decorators that capture source.
"""

from .decorator import from_source, function, ir_module, parse, prim_func

__all__ = ["from_source", "function", "ir_module", "parse", "prim_func"]
