"""The look shared by every picture: a colourblind-safe palette, fonts, and label helpers.

Fills come from Paul Tol's "light" scheme, designed to stay distinguishable under the common
forms of colour blindness and to carry black text; no picture relies on colour alone (every
coloured node also says in words what it is). Colours are written with six hex digits because
some Graphviz builds warn about the three-digit form.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from mlckit.relax import struct_info as S
from mlckit.relax.analysis.op_pattern import OpPatternKind
from mlckit.relax.utils import format_dim, format_shape

FONT = "Helvetica"
CODE_FONT = "Courier"

# Paul Tol, "light" qualitative scheme.
LIGHT_BLUE = "#77AADD"
LIGHT_CYAN = "#99DDFF"
MINT = "#44BB99"
PEAR = "#BBCC33"
LIGHT_YELLOW = "#EEDD88"
ORANGE = "#EE8866"
PINK = "#FFAABB"
PALE_GREY = "#DDDDDD"
WHITE = "#FFFFFF"
INK = "#222222"

# Marking the difference of two pictures: Tol's "vibrant" red outlines what is new; what is
# gone keeps its shape but fades to grey.
NEW_OUTLINE = "#CC3311"
GONE_FILL = "#F4F4F4"
GONE_LINE = "#BBBBBB"
GONE_TEXT = "#999999"

# The four groups of op patterns that FuseOps tells apart, as the course names them.
PATTERN_GROUPS: dict[OpPatternKind, tuple[str, str]] = {
    OpPatternKind.kElemWise: ("elementwise / broadcast / injective", LIGHT_CYAN),
    OpPatternKind.kBroadcast: ("elementwise / broadcast / injective", LIGHT_CYAN),
    OpPatternKind.kInjective: ("elementwise / broadcast / injective", LIGHT_CYAN),
    OpPatternKind.kTuple: ("elementwise / broadcast / injective", LIGHT_CYAN),
    OpPatternKind.kCommReduce: ("reduction", LIGHT_YELLOW),
    OpPatternKind.kOutEWiseFusable: ("out-elementwise-fusable", ORANGE),
    OpPatternKind.kOpaque: ("opaque", PALE_GREY),
}


# An adjoint's two parts (mlckit.viz.relax_graph): what each computes, and its fill and frame.
ADJOINT_PARTS: dict[str, tuple[str, str]] = {
    "forward": ("computes the result", LIGHT_BLUE),
    "backward": ("computes the gradients", PINK),
}
# An edge from the forward part into the backward one: Tol's "vibrant" magenta, dashed.
KEPT_FOR_BACKWARD = {"color": "#EE3377", "style": "dashed", "penwidth": "1.5"}


def pattern_colour(kind: OpPatternKind | None) -> str:
    """The fill of an operator of pattern ``kind`` (white when the pattern is not known)."""
    return WHITE if kind is None else PATTERN_GROUPS[kind][1]


# ---------------------------------------------------------------------------- labels
def esc(text: Any) -> str:
    """Text made safe inside a Graphviz HTML-like label."""
    return html.escape(str(text), quote=True)


def small(text: str, size: int = 9) -> str:
    return f'<font point-size="{size}">{esc(text)}</font>'


def code(text: str, size: int = 10) -> str:
    return f'<font face="{CODE_FONT}" point-size="{size}">{esc(text)}</font>'


def bold(text: str) -> str:
    return f"<b>{esc(text)}</b>"


def html_label(lines: Iterable[str], align: str = "center") -> str:
    """Lines of already-escaped HTML as one label (Graphviz's ``<...>`` form)."""
    if align == "left":
        return "<" + "".join(f'{line}<br align="left"/>' for line in lines) + ">"
    return "<" + "<br/>".join(lines) + ">"


# ------------------------------------------------------------------- compact values
_DTYPE_SHORT = {"float": "f", "int": "i", "uint": "u", "bfloat": "bf"}


def short_dtype(dtype: str) -> str:
    """``float32`` -> ``f32``, ``int64`` -> ``i64``; other dtypes (``bool``) unchanged."""
    for long, short in _DTYPE_SHORT.items():
        bits = dtype[len(long) :]
        if dtype.startswith(long) and bits.isdigit():
            return short + bits
    return dtype


def prim_text(expr: Any) -> str:
    """A PrimExpr as a student writes it (``n``, ``784``, ``j_0 * 4 + j_1``)."""
    return format_dim(expr)


def dims_text(values: Iterable[Any]) -> str:
    return ", ".join(prim_text(v) for v in values)


def compact_sinfo(sinfo: Any) -> str:
    """Struct info in the pictures' compact spelling: ``f32[n, 128]``, ``(f32[4], i64)``."""
    if isinstance(sinfo, S.TensorStructInfo):
        values = sinfo.shape_values
        if values is not None:
            dims = dims_text(values)
        elif sinfo.ndim >= 0:
            dims = ", ".join("?" * sinfo.ndim)
        else:
            dims = "..."
        return f"{short_dtype(sinfo.dtype)}[{dims}]"
    if isinstance(sinfo, S.TupleStructInfo):
        return "(" + ", ".join(compact_sinfo(f) for f in sinfo.fields) + ")"
    if isinstance(sinfo, S.ShapeStructInfo):
        return f"shape[{dims_text(sinfo.values)}]" if sinfo.values is not None else "shape"
    if isinstance(sinfo, S.PrimStructInfo):
        dtype = short_dtype(sinfo.dtype)
        return f"{dtype} = {prim_text(sinfo.value)}" if sinfo.value is not None else dtype
    if isinstance(sinfo, S.FuncStructInfo):
        return "callable"
    return "object"


def shape_text(sinfo: Any) -> str:
    """What an edge carries: a tensor's shape ``(n, 256)``, else the compact struct info."""
    if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape_values is not None:
        return format_shape(sinfo.shape_values)
    return compact_sinfo(sinfo) if sinfo is not None else ""


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless there is one: ``1 block``, ``2 blocks``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def clip(text: str, width: int = 64) -> str:
    """One line of at most ``width`` characters (long statements end in ``...``)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."
