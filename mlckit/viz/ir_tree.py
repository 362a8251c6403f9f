"""The IR's own tree structure, the course's figure of a relax function:
Function -> params / SeqExpr -> DataflowBlock -> VarBinding -> var / Call -> op / args.

Relax nodes show the fields that make the structure (a Call's ``op`` and ``args``, a binding's
``var`` and ``value``); struct info is written in the labels rather than drawn as subtrees. Any
other node (TensorIR included) shows every structural field that holds nodes, so the tree of
any node can be drawn.
"""

from __future__ import annotations

from typing import Any

from mlckit.ir.module import GlobalVar
from mlckit.ir.node import Node
from mlckit.ir.op import Op
from mlckit.relax import expr as rx
from mlckit.relax.struct_info import StructInfo

from . import style
from .picture import Picture
from .tree import indexed, tree_picture

_STRUCTURE = (rx.Function, rx.SeqExpr, rx.BindingBlock)
_LITERALS = (rx.Constant, rx.ShapeExpr, rx.PrimValue, rx.StringImm, rx.DataTypeImm)
_CALLEES = (Op, GlobalVar, rx.ExternFunc)


def _children(node: Any) -> list[tuple[str, Any]]:
    if isinstance(node, rx.Function):
        return [*indexed("params", node.params), ("body", node.body)]
    if isinstance(node, rx.SeqExpr):
        return [*indexed("blocks", node.blocks), ("body", node.body)]
    if isinstance(node, rx.BindingBlock):
        return indexed("bindings", node.bindings)
    if isinstance(node, rx.MatchCast):
        return [("var", node.var), ("value", node.value), ("struct_info", node.struct_info)]
    if isinstance(node, rx.VarBinding):
        return [("var", node.var), ("value", node.value)]
    if isinstance(node, rx.Call):
        return [("op", node.op), *indexed("args", node.args)]
    if isinstance(node, rx.Tuple):
        return indexed("fields", node.fields)
    if isinstance(node, rx.TupleGetItem):
        return [("tuple_value", node.tuple_value)]
    if isinstance(node, rx.If):
        return [
            ("cond", node.cond),
            ("true_branch", node.true_branch),
            ("false_branch", node.false_branch),
        ]
    if isinstance(node, (rx.Var, *_LITERALS, *_CALLEES, StructInfo)) or not isinstance(node, Node):
        return []
    return _generic_children(node)


def _generic_children(node: Node) -> list[tuple[str, Any]]:
    kids: list[tuple[str, Any]] = []
    for name, value in node.structural_fields():
        if isinstance(value, Node):
            kids.append((name, value))
        elif isinstance(value, (tuple, list)) and any(isinstance(v, Node) for v in value):
            kids += indexed(name, value)
    return kids


def _look(node: Any) -> tuple[list[str], dict[str, str]]:
    lines = [style.bold(type(node).__name__)]
    detail = _detail(node)
    if detail:
        lines.append(style.code(style.clip(detail, 40)))
    shape = "box" if _children(node) else "ellipse"
    return lines, {"shape": shape, "style": "rounded,filled", "fillcolor": _fill(node)}


def _fill(node: Any) -> str:
    if isinstance(node, _STRUCTURE):
        return style.PALE_GREY
    if isinstance(node, rx.Binding):
        return style.LIGHT_YELLOW
    if isinstance(node, rx.Var):
        return style.MINT
    if isinstance(node, _CALLEES):
        return style.PINK
    if isinstance(node, rx.Expr) and not isinstance(node, _LITERALS):
        return style.LIGHT_CYAN
    return style.WHITE


def _detail(node: Any) -> str:
    if isinstance(node, rx.Var):
        return f"{node.name_hint}: {style.compact_sinfo(node.struct_info_)}"
    if isinstance(node, Op):
        return node.name
    if isinstance(node, GlobalVar):
        return node.name_hint
    if isinstance(node, rx.ExternFunc):
        return node.global_symbol
    if isinstance(node, rx.ShapeExpr):
        return f"({style.dims_text(node.values)})"
    if isinstance(node, rx.PrimValue):
        return style.prim_text(node.value)
    if isinstance(node, (rx.StringImm, rx.DataTypeImm)):
        return repr(node.value)
    if isinstance(node, rx.TupleGetItem):
        return f"index {node.index}"
    if isinstance(node, (rx.Constant, rx.Call, StructInfo)):
        return style.compact_sinfo(node if isinstance(node, StructInfo) else node.struct_info_)
    if isinstance(node, Node):
        return _scalar_fields(node)
    return repr(node)


def _scalar_fields(node: Node) -> str:
    for attr in ("name_hint", "name", "value", "dtype"):
        value = getattr(node, attr, None)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    return ""


def ir_tree_picture(node: Any, *, max_depth: int | None = None, rankdir: str = "TB") -> Picture:
    """The tree of ``node`` (a relax function or any sub-expression, or any other node)."""
    return tree_picture(node, _children, _look, max_depth=max_depth, rankdir=rankdir)
