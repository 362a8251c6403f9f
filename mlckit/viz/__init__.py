"""Pictures and text views of every IR node.

``graph(obj, **options)`` returns a ``graphviz.Digraph`` for any node (and for a schedule or
its trace); which picture depends on what ``obj`` is:

=============================  ============================================================
IRModule                       its functions and who calls whom (``function="main"`` draws
                               that one function instead, with the module to resolve calls)
relax.Function                 the dataflow graph (``rankdir``, ``expand_fused``,
                               ``edge_labels``, ``legend``, ``mod``; an adjoint in its
                               forward and backward parts, ``backward``)
tir.PrimFunc, TensorIR stmt    the loop nest as a tree (``show_buffers``, ``max_depth``)
PrimExpr                       the expression tree (``max_depth``)
StructInfo                     the struct info tree
tir.Schedule, Trace            the trace as a chain of steps
any other node                 the IR's own tree; ``tree=True`` forces it for any node
=============================  ============================================================

``graph_diff(before, after)`` draws ``after`` with what is new outlined and what is gone greyed;
``svg(obj)`` renders a picture and ``svg_image(svg, description)`` writes it into HTML as an
``<img>`` that fits its column; ``html(obj)`` is highlighted TVMScript; ``diff(before, after)``
compares two printed programs. ``mimebundle(node)`` is what a notebook shows for a node. This
package is imported only when one of these is used (the core never imports it).
"""

from __future__ import annotations

import warnings
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import IRModule
from mlckit.ir.node import Node
from mlckit.relax.expr import Function
from mlckit.relax.struct_info import StructInfo
from mlckit.tir.expr import PrimExpr
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule.schedule import Schedule
from mlckit.tir.schedule.trace import Trace
from mlckit.tir.stmt import Stmt

from .dot import GraphvizMissingWarning, dot_program, render
from .embed import Digraph, svg_image
from .ir_tree import ir_tree_picture
from .loop_tree import loop_picture
from .module_graph import module_picture
from .picture import Picture, diff_pictures
from .prim_expr_tree import prim_expr_picture
from .relax_graph import dataflow_picture
from .struct_info_tree import struct_info_picture
from .text import ScriptDiff, diff, html
from .trace_graph import trace_picture


def picture(
    obj: Any, *, tree: bool = False, function: str | None = None, **options: Any
) -> Picture:
    """The picture :func:`graph` draws, before it becomes Graphviz (see the module doc)."""
    if tree:
        return ir_tree_picture(obj, **options)
    if isinstance(obj, IRModule):
        if function is None:
            return module_picture(obj, **options)
        func = obj[function]
        if isinstance(func, Function):
            return dataflow_picture(func, obj, **options)
        return loop_picture(func, name=function, **options)  # type: ignore[arg-type]
    if isinstance(obj, Schedule):
        obj = obj.trace
    if isinstance(obj, Trace):
        return trace_picture(obj, **options)
    if isinstance(obj, Function):
        return dataflow_picture(obj, **options)
    if isinstance(obj, (PrimFunc, Stmt)):
        return loop_picture(obj, **options)
    if isinstance(obj, PrimExpr):
        return prim_expr_picture(obj, **options)
    if isinstance(obj, StructInfo):
        return struct_info_picture(obj, **options)
    if isinstance(obj, Node):
        return ir_tree_picture(obj, **options)
    raise MLCError(f"mlckit.viz.graph draws IR nodes and schedules, not {type(obj).__name__}")


def graph(obj: Any, **options: Any) -> Any:
    """A ``graphviz.Digraph`` of ``obj`` (:class:`Digraph`); in a notebook it shows itself as
    a picture that fits the column, also in a notebook JupyterLab does not trust."""
    dot_program()  # points the graphviz bindings at a dot program if only graphviz-pure has one
    return picture(obj, **options).to_digraph()


def graph_diff(before: Any, after: Any, **options: Any) -> Any:
    """``after`` drawn with its new nodes outlined and ``before``'s lost nodes and edges greyed;
    both are drawn with the same ``options`` (two steps of a pipeline, or of a schedule)."""
    dot_program()
    return diff_pictures(picture(before, **options), picture(after, **options)).to_digraph()


def svg(obj: Any, **options: Any) -> str | None:
    """The picture of ``obj`` as SVG text, or None (after one warning) without a dot program."""
    data = render(graph(obj, **options), "svg")
    return None if data is None else data.decode("utf-8")


def mimebundle(node: Any, include: Any = None, exclude: Any = None) -> dict[str, str]:
    """A notebook's views of ``node``: ``text/plain`` (TVMScript), ``text/html`` (highlighted
    TVMScript, with the picture folded under it) and ``image/svg+xml`` (when a dot program is
    there). ``include``/``exclude`` are IPython's lists of MIME types to keep or drop."""

    def wanted(mime: str) -> bool:
        return (include is None or mime in include) and (exclude is None or mime not in exclude)

    bundle: dict[str, str] = {}
    if wanted("text/plain"):
        bundle["text/plain"] = repr(node)
    picture_svg = _display_svg(node) if wanted("image/svg+xml") or wanted("text/html") else None
    if picture_svg is not None and wanted("image/svg+xml"):
        bundle["image/svg+xml"] = picture_svg
    if wanted("text/html"):
        page = html(node)
        if picture_svg is not None:
            summary = '<summary style="cursor: pointer">picture</summary>'
            image = svg_image(picture_svg, f"picture of this {type(node).__name__}")
            page += f"<details>{summary}{image}</details>"
        bundle["text/html"] = page
    return bundle


def _display_svg(node: Any) -> str | None:
    try:
        return svg(node)
    except Exception as err:  # a display hook must not raise: the text views still show
        warnings.warn(
            f"mlckit.viz could not draw this {type(node).__name__} ({err}); showing text only",
            stacklevel=2,
        )
        return None


__all__ = [
    "Digraph",
    "GraphvizMissingWarning",
    "Picture",
    "ScriptDiff",
    "diff",
    "dot_program",
    "graph",
    "graph_diff",
    "html",
    "mimebundle",
    "picture",
    "svg",
    "svg_image",
]
