"""An IRModule as its functions and who calls whom.

Relax functions are white rounded boxes (fused sub-functions double-bordered), PrimFuncs are
boxes filled with their op pattern's colour, registered (extern) functions are dashed; each says
how big it is (bindings, or blocks and loops). An edge says how one function reaches another
(``call_tir``, a direct call, ``call_dps_packed``, ...) and how many times.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op
from mlckit.relax import expr as rx
from mlckit.relax.expr_functor import ExprVisitor
from mlckit.tir import stmt as ts
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt_functor import post_order_visit

from . import style
from .picture import Picture
from .relax_graph import primfunc_pattern


def module_picture(mod: IRModule, *, rankdir: str = "LR") -> Picture:
    pic = Picture({"rankdir": rankdir, "nodesep": "0.25"})
    ids: dict[str, str] = {}
    for gvar, func in sorted(mod.functions.items(), key=lambda item: item[0].name_hint):
        name = gvar.name_hint
        ids[name] = pic.new_id("fn", name)
        if isinstance(func, PrimFunc):
            blocks, loops = _count_tir(func)
            counts = f"{style.counted(blocks, 'block')}, {style.counted(loops, 'loop')}"
            lines = [
                style.small("T.prim_func"),
                style.bold(name),
                style.small(counts, 10),
            ]
            pattern = primfunc_pattern(func)
            pic.node(
                ids[name],
                style.html_label(lines),
                shape="box",
                style="filled",
                fillcolor=style.pattern_colour(pattern),
            )
        else:
            fused = bool(getattr(func, "attrs", {}).get("Primitive"))
            bindings = sum(len(block.bindings) for block in getattr(func.body, "blocks", ()))
            caption = "fused R.function" if fused else "R.function"
            lines = [
                style.small(caption),
                style.bold(name),
                style.small(style.counted(bindings, "binding"), 10),
            ]
            pic.node(
                ids[name],
                style.html_label(lines),
                shape="box",
                style="rounded,filled,bold" if not fused else "rounded,filled",
                fillcolor=style.WHITE,
                peripheries="2" if fused else None,
            )
    for gvar, func in mod.functions.items():
        if not isinstance(func, rx.Function):
            continue
        for (how, callee), count in Counter(_calls(func)).items():
            label = how if count == 1 else f"{how} x{count}"
            if callee not in ids:
                ids[callee] = pic.new_id("extern", callee)
                pic.node(
                    ids[callee],
                    style.html_label([style.small("registered function"), style.bold(callee)]),
                    shape="box",
                    style="rounded,dashed",
                )
            pic.edge(ids[gvar.name_hint], ids[callee], label=label)
    return pic


def _count_tir(func: PrimFunc) -> tuple[int, int]:
    counts = Counter()

    def visit(node: Any) -> None:
        if isinstance(node, ts.Block):
            counts["blocks"] += 1
        elif isinstance(node, ts.For):
            counts["loops"] += 1

    post_order_visit(func.body, visit)
    # The implicit root block is not one a student wrote.
    root = isinstance(func.body, ts.BlockRealize) and func.body.block.name_hint == "root"
    return counts["blocks"] - int(root), counts["loops"]


def _calls(func: rx.Function) -> list[tuple[str, str]]:
    """(how, callee name) for every call of another function in ``func``, in order."""
    found: list[tuple[str, str]] = []

    class Calls(ExprVisitor):
        def visit_call_(self, call: rx.Call) -> None:
            target = _callee(call)
            if target is not None:
                found.append(target)
            super().visit_call_(call)

    Calls().visit_expr(func)
    return found


def _callee(call: rx.Call) -> tuple[str, str] | None:
    op = call.op
    if isinstance(op, GlobalVar):
        return "call", op.name_hint
    if isinstance(op, rx.ExternFunc):
        return "call", op.global_symbol
    if isinstance(op, Op) and call.args:
        first = call.args[0]
        how = op.name.removeprefix("relax.")
        if isinstance(first, GlobalVar):
            return how, first.name_hint
        if isinstance(first, rx.ExternFunc):
            return how, first.global_symbol
    return None
