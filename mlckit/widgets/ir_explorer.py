"""IRExplorer: browse a module; select a function, a parameter or a binding to see its struct
info, its TVMScript and its picture.

    IRExplorer(mod)   # a live widget in a notebook

A binding that calls a function of the module (``R.call_tir(cls.linear, ...)``) is drawn as
that function, so selecting ``lv0`` shows the loop nest it runs.
"""

from __future__ import annotations

import html as htmllib
from dataclasses import dataclass

import ipywidgets as w

from mlckit import viz
from mlckit.errors import MLCError
from mlckit.ir.module import BaseFunc, GlobalVar, IRModule
from mlckit.ir.node import Node
from mlckit.relax.expr import Binding, Call, Function, MatchCast, Var
from mlckit.script.printer import highlight_html
from mlckit.tir.function import PrimFunc

from .static_html import note, panel, picture, shown_safely

_LABEL_WIDTH = 72
# No-break spaces: a browser collapses ordinary spaces at the start of a list entry.
_INDENT = "\u00a0" * 4


@dataclass(frozen=True)
class Item:
    """One selectable thing: its label in the list, what it is, the node, and its function."""

    label: str
    kind: str  # "function", "param" or "binding"
    node: Node
    function: str


def module_items(mod: IRModule) -> list[Item]:
    """The functions of ``mod`` (relax functions first, as the printer orders them), each
    followed by its parameters and bindings when it is a relax function."""
    items: list[Item] = []
    functions = sorted(mod.functions.items(), key=lambda kv: isinstance(kv[1], PrimFunc))
    for gv, func in functions:
        name = gv.name_hint
        kind = "relax function" if isinstance(func, Function) else type(func).__name__
        items.append(Item(f"{name}  ({kind})", "function", func, name))
        if not isinstance(func, Function):
            continue
        for param in func.params:
            items.append(Item(f"{_INDENT}{_one_line(_param_text(param))}", "param", param, name))
        for block in getattr(func.body, "blocks", ()):
            for binding in block.bindings:
                items.append(
                    Item(f"{_INDENT}{_one_line(binding.script())}", "binding", binding, name)
                )
    return items


def _param_text(param: Var) -> str:
    return f"{param.name_hint}: {param.struct_info.script()}"


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _LABEL_WIDTH else text[: _LABEL_WIDTH - 1] + "…"


def callee(binding: Binding, mod: IRModule) -> str | None:
    """The module function a binding calls (directly or through call_tir and its kin)."""
    value = getattr(binding, "value", None)
    if not isinstance(value, Call):
        return None
    target = value.op if isinstance(value.op, GlobalVar) else None
    if target is None and value.args and isinstance(value.args[0], GlobalVar):
        target = value.args[0]
    return target.name_hint if target is not None and target.name_hint in mod else None


def struct_info_text(item: Item) -> str:
    """What the item's struct info is, as TVMScript (a PrimFunc has none: its buffers)."""
    node = item.node
    if isinstance(node, PrimFunc):
        lines = ["# a PrimFunc has no struct info; its parameters:"]
        for param in node.params:
            buffer = node.buffer_map.get(param)
            if buffer is None:
                lines.append(f"{param.name_hint}: {param.dtype}")
            else:
                dims = [d.script() for d in buffer.shape]
                shape = f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"
                lines.append(f'{param.name_hint}: T.Buffer({shape}, "{buffer.dtype}")')
        return "\n".join(lines)
    if isinstance(node, Function):
        return node.struct_info.script()
    if isinstance(node, MatchCast):
        return f"{node.var.name_hint}: {node.struct_info.script()}  # checked by match_cast"
    if isinstance(node, Binding):
        return f"{node.var.name_hint}: {node.var.struct_info.script()}"
    if isinstance(node, Var):
        return _param_text(node)
    raise MLCError(f"IRExplorer shows functions, parameters and bindings, not {type(node)}")


class IRExplorer(w.VBox):
    """A list of the module's functions, parameters and bindings (``selector``) and, for the
    one selected, ``struct_info_view``, ``script_view`` and ``picture_view``."""

    def __init__(self, mod: IRModule | BaseFunc):
        if isinstance(mod, BaseFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise MLCError(f"IRExplorer takes an IRModule or a function, not {type(mod).__name__}")
        self.mod = mod
        self.items = module_items(mod)
        self.selector = w.Select(
            options=[(item.label, index) for index, item in enumerate(self.items)],
            rows=min(18, max(len(self.items), 2)),
            layout=w.Layout(width="42em"),
        )
        self.struct_info_view = panel()
        self.script_view = panel()
        self.picture_view = panel()
        self.title = w.HTML()
        tabs = w.Tab(children=[self.script_view, self.picture_view])
        tabs.set_title(0, "TVMScript")
        tabs.set_title(1, "picture")
        self.tabs = tabs
        self._pictures: dict[int, str] = {}
        self.selector.observe(lambda change: self.show(change["new"]), names="value")
        # The views take the width the list leaves, and no more: what is wider scrolls.
        details = w.VBox(
            [self.title, w.Label("struct info:"), self.struct_info_view, tabs],
            layout=w.Layout(flex="1 1 0%", min_width="0"),
        )
        super().__init__([w.HBox([self.selector, details])])
        if self.items:
            self.show(0)

    def select(self, name: str) -> None:
        """Select the function, parameter or binding called ``name`` (``"lv0"``, ``"main"``)."""
        for index, item in enumerate(self.items):
            node = item.node
            own = item.function if item.kind == "function" else _var_name(node)
            if own == name:
                self.selector.value = index
                return
        raise MLCError(f"IRExplorer: nothing called {name!r} in the module")

    def show(self, index: int) -> None:
        item = self.items[index]
        self.title.value = f"<b>{htmllib.escape(item.label.strip())}</b> in {item.function}"
        self.struct_info_view.value = shown_safely(lambda: highlight_html(struct_info_text(item)))
        self.script_view.value = shown_safely(lambda: self._script(item))
        if index not in self._pictures:
            self._pictures[index] = shown_safely(lambda: self._picture(item))
        self.picture_view.value = self._pictures[index]

    def _script(self, item: Item) -> str:
        if isinstance(item.node, Var):
            return viz.html(_param_text(item.node))
        return viz.html(item.node)

    def _picture(self, item: Item) -> str:
        if item.kind == "function":
            return picture(viz.svg(self.mod, function=item.function), f"picture of {item.function}")
        label = item.label.strip()
        if isinstance(item.node, Binding):
            called = callee(item.node, self.mod)
            if called is not None:
                svg = viz.svg(self.mod, function=called)
                return note(f"calls {called}:") + picture(svg, f"picture of {called}")
            return picture(viz.svg(item.node.value), f"picture of {label}")
        return picture(viz.svg(item.node.struct_info), f"struct info of {label}")


def _var_name(node: Node) -> str | None:
    if isinstance(node, Binding):
        return node.var.name_hint
    if isinstance(node, Var):
        return node.name_hint
    return None
