"""A TensorIR expression (PrimExpr) as its tree: operators over their operands."""

from __future__ import annotations

from typing import Any

from mlckit.tir import expr as te

from . import style
from .picture import Picture
from .tree import indexed, tree_picture


def _children(node: Any) -> list[tuple[str, Any]]:
    if isinstance(node, te.BinaryOpExpr):
        return [("a", node.a), ("b", node.b)]
    if isinstance(node, te.Not):
        return [("a", node.a)]
    if isinstance(node, te.Cast):
        return [("value", node.value)]
    if isinstance(node, te.Select):
        return [
            ("condition", node.condition),
            ("true", node.true_value),
            ("false", node.false_value),
        ]
    if isinstance(node, te.Let):
        return [("var", node.var), ("value", node.value), ("body", node.body)]
    if isinstance(node, te.Call):
        return indexed("args", node.args)
    if isinstance(node, te.BufferLoad):
        return indexed("indices", node.indices)
    return []


def _operator(node: Any) -> str:
    if isinstance(node, (te.Min, te.Max)):
        return type(node).__name__.lower()
    if isinstance(node, te.BinaryOpExpr):
        return node.symbol
    if isinstance(node, te.Call):
        return node.op.name.removeprefix("tir.")
    if isinstance(node, te.Cast):
        return f"cast {style.short_dtype(node.dtype)}"
    if isinstance(node, te.BufferLoad):
        return f"{node.buffer.name}[ ]"
    return type(node).__name__.lower()


def _look(node: Any) -> tuple[list[str], dict[str, str]]:
    dtype = style.small(style.short_dtype(node.dtype))
    if isinstance(node, te.Var):
        return [style.bold(node.name_hint), dtype], {
            "shape": "ellipse",
            "style": "filled",
            "fillcolor": style.MINT,
        }
    if isinstance(node, (te.IntImm, te.FloatImm, te.StringImm)):
        return [style.esc(style.prim_text(node)), dtype], {
            "shape": "ellipse",
            "style": "filled",
            "fillcolor": style.WHITE,
        }
    fill = style.LIGHT_YELLOW if isinstance(node, te.BufferLoad) else style.LIGHT_CYAN
    return [style.bold(_operator(node)), dtype], {
        "shape": "box",
        "style": "rounded,filled",
        "fillcolor": fill,
    }


def prim_expr_picture(
    expr: te.PrimExpr, *, max_depth: int | None = None, rankdir: str = "TB"
) -> Picture:
    return tree_picture(expr, _children, _look, max_depth=max_depth, rankdir=rankdir)
