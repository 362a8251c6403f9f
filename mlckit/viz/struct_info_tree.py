"""Struct info as a tree: tuples and function signatures over the tensors, shapes and scalars
they are made of."""

from __future__ import annotations

from typing import Any

from mlckit.relax import struct_info as S

from . import style
from .picture import Picture
from .tree import indexed, tree_picture


def _children(node: Any) -> list[tuple[str, Any]]:
    if isinstance(node, S.TupleStructInfo):
        return indexed("fields", node.fields)
    if isinstance(node, S.FuncStructInfo):
        return [*indexed("params", node.params or ()), ("ret", node.ret)]
    return []


def _look(node: Any) -> tuple[list[str], dict[str, str]]:
    kind = type(node).__name__.removesuffix("StructInfo")
    lines = [style.bold(kind)]
    if isinstance(node, S.FuncStructInfo):
        lines.append(
            style.small("opaque" if node.is_opaque() else ("pure" if node.purity else "impure"))
        )
    elif not isinstance(node, (S.TupleStructInfo, S.ObjectStructInfo)):
        lines.append(style.code(style.compact_sinfo(node)))
    leaf = not _children(node)
    fill = style.LIGHT_CYAN if isinstance(node, S.TensorStructInfo) else style.WHITE
    return lines, {
        "shape": "ellipse" if leaf else "box",
        "style": "rounded,filled",
        "fillcolor": fill,
    }


def struct_info_picture(
    sinfo: S.StructInfo, *, max_depth: int | None = None, rankdir: str = "TB"
) -> Picture:
    return tree_picture(sinfo, _children, _look, max_depth=max_depth, rankdir=rankdir)
