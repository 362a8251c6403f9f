"""State shared by the TensorIR and Relax halves of the printer, and Python-value printing."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlckit.ir.module import GlobalVar
from mlckit.ir.name_supply import NameSupply
from mlckit.ir.node import Node
from mlckit.ir.op import Op
from mlckit.runtime.ndarray import NDArray
from mlckit.tir import expr as tx

from .doc import RESERVED_NAMES, Lines, float_literal, quote


@dataclass(frozen=True)
class Options:
    """What :func:`mlckit.script.printer.script` was asked for."""

    verbose: bool = False
    show_meta: bool = False
    inline_constants: int = 1
    name: str | None = None


@dataclass
class Frame:
    """The naming scope of one function (or of a standalone statement or expression).

    ``free_vars`` lists the TensorIR variables that were used before anything defined them, in
    order of first use; a function prints a declaration for each (``n = T.int64()``).
    """

    namer: NameSupply = field(default_factory=lambda: NameSupply(RESERVED_NAMES))
    free_vars: list[tx.Var] = field(default_factory=list)
    free_names: dict[int, str] = field(default_factory=dict)
    uses_cls: bool = False
    # Enclosing loops by id of their loop variable, for T.axis.remap.
    loops: dict[int, Any] = field(default_factory=dict)
    # The buffers named so far by id of their data variable, for A.access_ptr(...).
    buffers_by_data: dict[int, Any] = field(default_factory=dict)


class PrinterBase:
    """Holds the output, the current frame, the module context and the metadata table."""

    def __init__(self, options: Options) -> None:
        self.opts = options
        self.lines = Lines()
        self.frame = Frame()
        # Printed names of the functions of the module being printed; None outside a module.
        self.module_funcs: dict[str, str] | None = None
        self.constants: list[Any] = []
        self.constant_index: dict[int, int] = {}

    # ----------------------------------------------------------------------- names
    def define(self, obj: Any, hint: str) -> str:
        return self.frame.namer.get(obj, hint)

    def tir_var(self, var: tx.Var) -> str:
        name = self.frame.namer.lookup(var) or self.frame.free_names.get(id(var))
        if name is None:
            # Declared for the whole function: its name outlives the loop it is first used in.
            name = self.frame.namer.fresh(var.name_hint)
            self.frame.free_names[id(var)] = name
            self.frame.free_vars.append(var)
        return name

    def global_var(self, gv: GlobalVar) -> str:
        if self.module_funcs is not None and gv.name_hint in self.module_funcs:
            self.frame.uses_cls = True
            return f"cls.{self.module_funcs[gv.name_hint]}"
        return gv.name_hint

    # ----------------------------------------------------------------------- values
    def value(self, v: Any) -> str:
        """A Python value as used in attributes (``func_attr``, op attrs, annotations)."""
        if isinstance(v, Node):
            return self.inline(v)
        if v is None or isinstance(v, (bool, np.bool_)):
            return repr(None if v is None else bool(v))
        if isinstance(v, (int, np.integer)):
            return str(int(v))
        if isinstance(v, np.floating) and np.isfinite(v):
            # numpy writes the shortest text that reads back as the same float32/float16.
            return str(v)
        if isinstance(v, (float, np.floating)):
            return float_literal(float(v))
        if isinstance(v, str):
            return quote(v)
        if isinstance(v, list):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, tuple):
            return self.tuple_text([self.value(x) for x in v])
        if isinstance(v, dict):
            items = (f"{self.value(k)}: {self.value(x)}" for k, x in v.items())
            return "{" + ", ".join(items) + "}"
        if isinstance(v, np.ndarray):
            return self.value(v.tolist())
        if isinstance(v, NDArray):  # a module's tensors (a trainer's initial optimizer state)
            return tensor_text(v.numpy())
        return repr(v)

    @staticmethod
    def tuple_text(items: list[str]) -> str:
        if len(items) == 1:
            return f"({items[0]},)"
        return "(" + ", ".join(items) + ")"

    def generic(self, node: Node) -> str:
        """Any other node: its class and structural fields, so that nothing fails to print."""
        fields = ", ".join(f"{k}={self.value(v)}" for k, v in node.structural_fields())
        return f"{type(node).__name__}({fields})"

    def inline(self, node: Node) -> str:
        """A node inside some larger text; the printer class routes it by dialect."""
        if isinstance(node, GlobalVar):
            return self.global_var(node)
        if isinstance(node, Op):
            return f"Op({quote(node.name)})"
        return self.generic(node)


def tensor_text(data: np.ndarray) -> str:
    """``I.tensor(dtype, shape, base64)`` of the little-endian C-order bytes of ``data``."""
    raw = np.asarray(data, dtype=data.dtype.newbyteorder("<"), order="C").tobytes()
    shape = "(" + ", ".join(str(d) for d in data.shape) + ("," if data.ndim == 1 else "") + ")"
    encoded = base64.b64encode(raw).decode("ascii")
    return f"I.tensor({quote(data.dtype.name)}, {shape}, {quote(encoded)})"
