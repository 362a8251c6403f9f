"""TVMScript: write IR as Python (``@I.ir_module``, ``@T.prim_func``, ``@R.function``) and
print IR back as such text (``node.script()``).

``from mlckit.script import ir as I, tir as T, relax as R`` gives the three namespaces;
``tirx`` is the newer TVM name of ``tir``.
"""

from . import ir, printer, relax, tir, tirx
from .parser import from_source, ir_module, parse

__all__ = ["from_source", "ir", "ir_module", "parse", "printer", "relax", "tir", "tirx"]
