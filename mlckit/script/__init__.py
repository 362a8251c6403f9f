"""TVMScript: write IR as Python (``@I.ir_module``, ``@T.prim_func``, ``@R.function``) and
print IR back as such text (``node.script()``).

``from mlckit.script import ir as I, tir as T, relax as R`` gives the three namespaces;
``tirx`` is the newer TVM name of ``tir``.
"""

from . import ir, printer, relax, tir, tirx
from .parser import from_source, ir_module, parse

# Importing a dialect's parser registers the dialect with the parser's core, which dispatches
# on it without importing what is built on it (see parser/dialects.py).
from .parser import ir as _ir_dialect
from .parser import relax as _relax_dialect
from .parser import tir as _tir_dialect

__all__ = ["from_source", "ir", "ir_module", "parse", "printer", "relax", "tir", "tirx"]
