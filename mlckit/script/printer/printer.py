"""The printer's entry point: any node to TVMScript text."""

from __future__ import annotations

from typing import Any

import numpy as np

from mlckit.ir.module import BaseFunc, GlobalVar, IRModule
from mlckit.ir.name_supply import NameSupply
from mlckit.ir.node import Node
from mlckit.relax import expr as rx
from mlckit.relax import struct_info as rs
from mlckit.tir import expr as tx
from mlckit.tir import stmt as ts
from mlckit.tir.buffer import Buffer, BufferRegion, MatchBufferRegion
from mlckit.tir.function import PrimFunc

from .base import Options, tensor_text
from .doc import FUNCTION_NAMES_RESERVED, quote
from .relax import CONSTANT_KEY, RelaxPrinter

HEADER = (
    "# from mlckit.script import ir as I",
    "# from mlckit.script import tir as T",
    "# from mlckit.script import relax as R",
)
METADATA_OMITTED = "# Metadata omitted. Use show_meta=True in script() method to show it."


class Printer(RelaxPrinter):
    """Prints one node; create a new one per :func:`script` call."""

    def inline(self, node: Node) -> str:
        if isinstance(node, tx.PrimExpr):
            return self.expr(node)
        if isinstance(node, (rx.Expr, GlobalVar)) and not isinstance(node, rx.Function):
            return self.rexpr(node)
        if isinstance(node, rs.StructInfo):
            return self.sinfo(node)
        if isinstance(node, Buffer):
            return self.buffer_name(node)
        if isinstance(node, BufferRegion):
            return self.region(node)
        if isinstance(node, tx.Range):
            return self.range_text(node)
        if isinstance(node, tx.IterVar):
            return self.iter_var_text(node)
        if isinstance(node, rx.Attrs):
            return self.value(node.fields)
        return super().inline(node)

    def run(self, node: Any) -> str:
        lines = self.lines
        if isinstance(node, (IRModule, BaseFunc)):
            for comment in HEADER:
                lines.emit(comment)
            lines.blank()
        if isinstance(node, IRModule):
            self.module(node)
        elif isinstance(node, BaseFunc):
            name = self.opts.name or _global_symbol(node) or "main"
            self.function(node, NameSupply(FUNCTION_NAMES_RESERVED).get(node, name))
        elif isinstance(node, ts.Stmt):
            self.stmt(node)
        elif isinstance(node, rx.Binding):
            self.binding(node)
        elif isinstance(node, rx.BindingBlock):
            self.block(node)
        elif isinstance(node, (rx.SeqExpr, rx.If)):
            self.seq_tail(node, lambda text: f"return {text}")
        elif isinstance(node, MatchBufferRegion):
            lines.emit(self.match_buffer_line(node))
        elif isinstance(node, Buffer):
            lines.emit(f"T.Buffer({self.buffer_args(node)})")
        elif isinstance(node, GlobalVar):
            lines.emit(f"I.GlobalVar({quote(node.name_hint)})")
        elif isinstance(node, Node):
            lines.emit(self.inline(node))
        else:
            lines.emit(self.value(node))
        self.metadata()
        return lines.text()

    def function(self, func: BaseFunc, name: str) -> None:
        if isinstance(func, PrimFunc):
            self.prim_func(func, name)
        elif isinstance(func, rx.Function):
            self.relax_func(func, name)
        else:
            self.lines.emit(self.generic(func))

    def module(self, mod: IRModule) -> None:
        namer = NameSupply(FUNCTION_NAMES_RESERVED)
        self.module_funcs = {gv.name_hint: namer.get(gv, gv.name_hint) for gv in mod.functions}
        self.lines.emit("@I.ir_module")
        self.lines.emit("class Module:")
        with self.lines.indent():
            if mod.attrs:
                self.lines.emit(f"I.module_attrs({self.value(mod.attrs)})")
            for i, (gv, func) in enumerate(mod.functions.items()):
                if i or mod.attrs:
                    self.lines.blank()
                self.function(func, self.module_funcs[gv.name_hint])
            if not mod.functions and not mod.attrs:
                self.lines.emit("pass")

    def metadata(self) -> None:
        """The constants that did not print inline: their values, or a note that they exist."""
        if not self.constants:
            return
        self.lines.blank()
        if not self.opts.show_meta:
            self.lines.emit(METADATA_OMITTED)
            return
        self.lines.emit("metadata = {")
        with self.lines.indent():
            self.lines.emit(f"{quote(CONSTANT_KEY)}: [")
            with self.lines.indent():
                for c in self.constants:
                    self.lines.emit(tensor_text(np.asarray(c.data)) + ",")
            self.lines.emit("],")
        self.lines.emit("}")


def _global_symbol(func: BaseFunc) -> str | None:
    symbol = func.attrs.get("global_symbol")  # type: ignore[attr-defined]
    return symbol if isinstance(symbol, str) else None


def script(
    node: Any,
    *,
    verbose: bool = False,
    show_meta: bool = False,
    inline_constants: int = 1,
    name: str | None = None,
) -> str:
    """``node`` as TVMScript text (docs/tvmscript.md).

    * ``verbose``: also print what the parser would infer (block reads/writes, the root block).
    * ``show_meta``: end with the ``metadata = {...}`` section holding large constants' values.
    * ``inline_constants``: relax constants with at most this many elements print inline.
    * ``name``: the name of a standalone function (default: its global_symbol, else "main").
    """
    options = Options(
        verbose=verbose, show_meta=show_meta, inline_constants=inline_constants, name=name
    )
    return Printer(options).run(node)
