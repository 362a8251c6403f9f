"""A PrimFunc (or any TensorIR statement) as its loop nest drawn as a tree.

Loops are square boxes saying ``for i in range(n)``; a loop that is not serial is filled and
names its kind (parallel, vectorized, unrolled, or the thread it is bound to). Blocks are
rounded boxes with their iteration variables (spatial ``S`` or reduction ``R``, bound to loop
expressions), the regions they read and write, and their statement. Buffers are cylinders with
dtype, shape and scope, hung from the function (parameters and the root block's allocations) or
from the block that allocates them. Statements that are neither (``if``, ``let``, ...) show their
header. Children are ordered as in the program, so a picture reads left to right.
"""

from __future__ import annotations

from typing import Any

from mlckit.tir import stmt as ts
from mlckit.tir.buffer import Buffer, BufferRegion
from mlckit.tir.expr import IterVarType, is_true
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt_functor import pre_order_visit

from . import style
from .picture import Picture

_KIND_LOOK: dict[ts.ForKind, tuple[str, dict[str, str]]] = {
    ts.ForKind.SERIAL: ("", {"style": "filled", "fillcolor": style.WHITE}),
    ts.ForKind.PARALLEL: ("parallel", {"style": "filled,bold", "fillcolor": style.MINT}),
    ts.ForKind.VECTORIZED: (
        "vectorized",
        {"style": "filled", "fillcolor": style.LIGHT_BLUE, "peripheries": "2"},
    ),
    ts.ForKind.UNROLLED: ("unrolled", {"style": "filled,dashed", "fillcolor": style.LIGHT_YELLOW}),
    ts.ForKind.THREAD_BINDING: ("thread", {"style": "filled,bold", "fillcolor": style.PINK}),
}

_ITER_KIND = {IterVarType.DataPar: "S", IterVarType.CommReduce: "R"}


class _LoopDrawer:
    def __init__(self, show_buffers: bool, max_depth: int | None):
        self.pic = Picture()
        self.show_buffers = show_buffers
        self.max_depth = max_depth

    def draw_func(self, func: PrimFunc, name: str) -> None:
        root = self.pic.node(
            self.pic.new_id("func", name),
            style.html_label([style.small("T.prim_func"), style.bold(name)]),
            shape="box",
            style="rounded,filled",
            fillcolor=style.PALE_GREY,
        )
        if self.show_buffers:
            for param in func.params:
                if param in func.buffer_map:
                    self._buffer(func.buffer_map[param], root, "param")
        body = func.body
        # The implicit root block holds the function's allocations; it is not a student's block.
        if isinstance(body, ts.BlockRealize) and body.block.name_hint == "root":
            if self.show_buffers:
                for buffer in body.block.alloc_buffers:
                    self._buffer(buffer, root, "alloc_buffer")
            body = body.block.body
        self.stmt(body, root, 1)

    def stmt(self, stmt: ts.Stmt, parent: str | None, depth: int) -> None:
        if isinstance(stmt, ts.SeqStmt):
            for child in stmt.seq:
                self.stmt(child, parent, depth)
            return
        if self.max_depth is not None and depth > self.max_depth:
            self._link(parent, self.pic.node(self.pic.new_id("more", ""), "...", shape="plaintext"))
            return
        if isinstance(stmt, ts.For):
            self._link(parent, node := self._loop(stmt))
            self.stmt(stmt.body, node, depth + 1)
        elif isinstance(stmt, ts.BlockRealize):
            self._link(parent, node := self._block(stmt))
            block = stmt.block
            if self.show_buffers:
                for buffer in block.alloc_buffers:
                    self._buffer(buffer, node, "alloc_buffer")
            if not isinstance(block.body, ts.BufferStore):
                self.stmt(block.body, node, depth + 1)
        elif isinstance(stmt, ts.IfThenElse):
            node = self._plain("if", f"if {style.prim_text(stmt.condition)}", shape="diamond")
            self._link(parent, node)
            self.stmt(stmt.then_case, node, depth + 1)
            if stmt.else_case is not None:
                self._link(node, else_node := self._plain("else", "else", shape="plaintext"))
                self.stmt(stmt.else_case, else_node, depth + 1)
        elif isinstance(stmt, ts.LetStmt):
            text = f"{stmt.var.name_hint} = {style.prim_text(stmt.value)}"
            self._link(parent, node := self._plain("let", text))
            self.stmt(stmt.body, node, depth + 1)
        elif isinstance(stmt, ts.AssertStmt):
            text = f"assert {style.prim_text(stmt.condition)}"
            self._link(parent, node := self._plain("assert", text))
            self.stmt(stmt.body, node, depth + 1)
        elif isinstance(stmt, ts.Allocate):
            extents = style.dims_text(stmt.extents)
            text = (
                f"allocate {stmt.buffer_var.name_hint}: {style.short_dtype(stmt.dtype)}[{extents}]"
            )
            self._link(parent, node := self._plain("alloc", text))
            self.stmt(stmt.body, node, depth + 1)
        else:
            self._link(parent, self._plain("stmt", _stmt_text(stmt)))

    # ------------------------------------------------------------------ nodes
    def _loop(self, loop: ts.For) -> str:
        name = loop.loop_var.name_hint
        caption, attrs = _KIND_LOOK[loop.kind]
        if loop.kind == ts.ForKind.THREAD_BINDING and loop.thread_binding is not None:
            caption = loop.thread_binding.thread_tag or caption
        start, extent = style.prim_text(loop.min), style.prim_text(loop.extent)
        bounds = extent if start == "0" else f"{start}, {start} + {extent}"
        lines = [f"for {style.bold(name)} in range({style.esc(bounds)})"]
        if caption:
            lines.append(style.small(caption, 10))
        # A loop is known by its variable and the first block it encloses ("j" of block "Y"):
        # loop names repeat between nests, block names do not, and splitting a loop or
        # reordering others leaves both names of the loops that stay.
        node_id = self.pic.new_id("loop", f"{name}_of_{_first_block(loop)}")
        return self.pic.node(node_id, style.html_label(lines), shape="box", **attrs)

    def _block(self, realize: ts.BlockRealize) -> str:
        block = realize.block
        lines = [style.bold(f'block "{block.name_hint}"')]
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            kind = _ITER_KIND.get(iter_var.iter_type, "O")
            dom = iter_var.dom
            lines.append(
                style.code(
                    f"{iter_var.var.name_hint} = {style.prim_text(value)}"
                    f"  {kind}[{style.prim_text(dom.min)}, {style.prim_text(dom.extent)})"
                )
            )
        if not is_true(realize.predicate):
            lines.append(style.code(f"where {style.prim_text(realize.predicate)}"))
        lines.append(style.code("reads  " + _regions(block.reads)))
        lines.append(style.code("writes " + _regions(block.writes)))
        if block.init is not None:
            lines.append(style.code("init: " + _stmt_text(block.init)))
        if isinstance(block.body, ts.BufferStore):
            lines.append(style.code(_stmt_text(block.body)))
        node_id = self.pic.new_id("block", block.name_hint)
        label = style.html_label(lines, align="left")
        return self.pic.node(
            node_id, label, shape="box", style="rounded,filled", fillcolor=style.LIGHT_CYAN
        )

    def _buffer(self, buffer: Buffer, owner: str, role: str) -> None:
        dims = style.dims_text(buffer.shape)
        lines = [
            style.small(f"{role}, {buffer.scope}"),
            style.bold(buffer.name),
            style.code(f"{style.short_dtype(buffer.dtype)}[{dims}]"),
        ]
        node_id = self.pic.new_id("buffer", buffer.name)
        self.pic.node(
            node_id,
            style.html_label(lines),
            shape="cylinder",
            style="filled",
            fillcolor=style.LIGHT_YELLOW,
        )
        self.pic.edge(owner, node_id, style="dotted", arrowhead="none")

    def _plain(self, prefix: str, text: str, shape: str = "box") -> str:
        node_id = self.pic.new_id(prefix, text)
        return self.pic.node(node_id, style.code(style.clip(text)).join("<>"), shape=shape)

    def _link(self, parent: str | None, child: str) -> None:
        if parent is not None:
            self.pic.edge(parent, child)


def _first_block(stmt: ts.Stmt) -> str:
    blocks: list[str] = []

    def visit(node: Any) -> bool:
        if isinstance(node, ts.Block) and not blocks:
            blocks.append(node.name_hint)
        return not blocks  # once one is found, nothing further down matters

    pre_order_visit(stmt, visit)
    return blocks[0] if blocks else ""


def _regions(regions: tuple[BufferRegion, ...]) -> str:
    return ", ".join(_region(r) for r in regions) or "-"


def _region(region: BufferRegion) -> str:
    parts = []
    for rng in region.region:
        start, extent = style.prim_text(rng.min), style.prim_text(rng.extent)
        parts.append(start if extent == "1" else f"{start}:{start} + {extent}")
    return f"{region.buffer.name}[{', '.join(parts)}]"


def _stmt_text(stmt: ts.Stmt) -> str:
    if isinstance(stmt, ts.BufferStore):
        indices = style.dims_text(stmt.indices)
        return style.clip(f"{stmt.buffer.name}[{indices}] = {style.prim_text(stmt.value)}")
    return style.clip(stmt.script())


def loop_picture(
    node: PrimFunc | ts.Stmt,
    *,
    name: str | None = None,
    rankdir: str = "TB",
    show_buffers: bool = True,
    max_depth: int | None = None,
) -> Picture:
    """The loop tree of a PrimFunc (named ``name``, else its ``global_symbol``, else ``main``)
    or of a statement; ``max_depth`` cuts the tree ``max_depth`` loops/blocks deep."""
    drawer = _LoopDrawer(show_buffers, max_depth)
    if isinstance(node, PrimFunc):
        drawer.draw_func(node, name or node.attrs.get("global_symbol", "main"))
    else:
        drawer.stmt(node, None, 1)
    drawer.pic.graph_attrs.update(rankdir=rankdir, nodesep="0.25", ranksep="0.3")
    return drawer.pic
