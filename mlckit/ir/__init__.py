"""IR core: nodes, modules, operators and structural comparison; no dialect lives here."""

from . import dtype, instrument, transform
from .module import BaseFunc, GlobalVar, IRModule
from .node import Node, Span
from .op import Op, register_op, register_op_attr
from .serialization import load_json, save_json
from .structural import assert_structural_equal, structural_equal, structural_hash

__all__ = [
    "BaseFunc",
    "GlobalVar",
    "IRModule",
    "Node",
    "Op",
    "Span",
    "assert_structural_equal",
    "dtype",
    "instrument",
    "load_json",
    "register_op",
    "register_op_attr",
    "save_json",
    "structural_equal",
    "structural_hash",
    "transform",
]
