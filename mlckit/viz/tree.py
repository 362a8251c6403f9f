"""Drawing any tree: a root, a rule for its children (with edge names), a rule for a node's look.

The IR tree, PrimExpr trees and StructInfo trees are all this drawer with different rules. A
node's id is the path of edge names from the root (``body.blocks[0].bindings[1]``), so the same
tree drawn twice, or two versions of it, share ids wherever their shapes agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import style
from .picture import Picture

Children = Callable[[Any], list[tuple[str, Any]]]
Look = Callable[[Any], tuple[list[str], dict[str, str]]]


def tree_picture(
    root: Any,
    children: Children,
    look: Look,
    *,
    max_depth: int | None = None,
    rankdir: str = "TB",
) -> Picture:
    """Draw ``root`` and its descendants; ``look(node)`` gives label lines (escaped HTML) and
    Graphviz attributes; below ``max_depth`` levels a subtree is drawn as ``...``."""
    pic = Picture({"rankdir": rankdir, "nodesep": "0.2", "ranksep": "0.35"})

    def visit(node: Any, path: str, depth: int) -> str:
        lines, attrs = look(node)
        node_id = pic.node(pic.new_id("n", path), style.html_label(lines), **attrs)
        kids = children(node)
        if kids and max_depth is not None and depth >= max_depth:
            more = pic.node(pic.new_id("more", path), "...", shape="plaintext")
            pic.edge(node_id, more)
            return node_id
        for name, child in kids:
            child_id = visit(child, f"{path}.{name}" if path else name, depth + 1)
            pic.edge(node_id, child_id, label=name, fontcolor="#555555")
        return node_id

    visit(root, "", 0)
    return pic


def indexed(name: str, values: Any) -> list[tuple[str, Any]]:
    """``name[0]``, ``name[1]``, ... for the items of a sequence field."""
    return [(f"{name}[{i}]", value) for i, value in enumerate(values)]
