"""A relax function as its dataflow graph.

Parameters and constants are inputs; every binding is one node labelled with its op (or the
PrimFunc a ``call_tir`` calls, or the registered function an extern call names) and its output
struct info; edges are uses, labelled with the shape that flows along them. Dataflow blocks are
clusters, and calls of fused sub-functions (``Primitive`` relax functions made by FuseOps) are
double-bordered, or with ``expand_fused=True`` drawn inline as nested clusters.

Fill colours say how FuseOps sees an operator: its op pattern. A ``call_tir`` takes the
pattern of the PrimFunc it calls (its ``op_pattern`` attribute, or the analysis when the
attribute is missing); a high-level operator takes the pattern of the PrimFunc it legalizes to,
so the picture before LegalizeOps already shows what fusion will do.

The function ``relax.transform.Gradient`` adds (``main_adjoint``) is drawn in two parts, each a
cluster of its own in one fill: *forward*, which computes ``main``'s result, and *backward*,
which computes the gradients; the fill then says which part a node is in, instead of its op
pattern. The rule is structural, read from what the function returns, not from names: an
adjoint returns ``(result, (grad, ...))``, so a binding is *forward* when the result depends on
it (the first field reads it, directly or through other bindings) and *backward* otherwise, as
only the gradients need it. The adjoint of ``sum((a + b) * b)``::

    lv = R.add(a, b)                          forward: lv1 reads it
    lv1 = R.multiply(lv, b)                   forward: gv reads it
    gv = R.sum(lv1)                           forward: the result
    gv_adjoint = R.ones(R.shape([]))          backward: the seed, d gv / d gv
    lv1_adjoint = R.broadcast_to(gv_adjoint, R.shape([3]))
    lv_adjoint = R.multiply(lv1_adjoint, b)
    b_adjoint = R.multiply(lv1_adjoint, lv)   backward, reading the forward lv
    a_adjoint = lv_adjoint
    b_adjoint1 = R.add(b_adjoint, lv_adjoint)
    a_adjoint_out = a_adjoint                 backward: the gradients returned
    b_adjoint_out = b_adjoint1
    return (gv, (a_adjoint_out, b_adjoint_out))

The rule also places what the seed never reaches: zeros for a parameter the target does not
depend on, or a mask the nll_loss gradient computes from the labels alone. An edge from a
forward value into the backward part (``lv`` into ``b_adjoint``) is dashed and coloured: it is
what the backward pass keeps from the forward one (the activations a training step holds in
memory). The parts are drawn for a function named ``<name>_adjoint`` that returns a pair whose
second field is a tuple, or when ``backward=True`` asks for them; ``backward=False`` draws op
patterns as for any other function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op
from mlckit.relax import expr as rx
from mlckit.relax.analysis import used_vars
from mlckit.relax.analysis.op_pattern import OpPatternKind, analyze_op_pattern
from mlckit.relax.block_builder import BlockBuilder
from mlckit.relax.struct_info import TupleStructInfo
from mlckit.relax.transform.legalize_ops.common import get_legalize
from mlckit.tir.function import PrimFunc

from . import style
from .picture import Picture

_FORWARD, _BACKWARD = "forward", "backward"
_CALL_TIR_OPS = frozenset({"relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad"})
# Above this many nodes a graph is drawn for speed rather than for a textbook.
_LARGE = 60
_EXTERN_OPS = frozenset({"relax.call_dps_packed", "relax.call_pure_packed", "relax.call_packed"})

# How each kind of binding looks: a caption above the name, and the node's style.
_KIND_STYLE: dict[str, tuple[str, dict[str, str]]] = {
    "op": ("", {"style": "rounded,filled"}),
    "call_tir": ("call_tir", {"style": "rounded,filled"}),
    "extern": ("", {"style": "rounded,filled,dashed"}),
    "fused": ("fused function", {"style": "rounded,filled", "peripheries": "2"}),
    "call": ("call", {"style": "rounded,filled"}),
    "value": ("", {"style": "rounded,filled"}),
}


@dataclass
class _Binding:
    """What a binding's node shows: its kind, title, op pattern and the expressions it uses."""

    kind: str
    title: str
    pattern: OpPatternKind | None
    inputs: list[Any]
    caption: str = ""


class _DataflowDrawer:
    def __init__(
        self,
        mod: IRModule | None,
        expand_fused: bool,
        edge_labels: bool,
        backward: set[rx.Var] | None = None,
    ):
        self.pic = Picture()
        self.mod = mod
        self.expand_fused = expand_fused
        self.edge_labels = edge_labels
        # The backward bindings of an adjoint drawn in parts (None: no parts), the part each
        # node is in, and the part of the binding being drawn (an expanded fused call's nodes
        # take their call's part).
        self.backward = backward
        self._node_part: dict[str, str] = {}
        self._part: str | None = None
        self._pattern_cache: dict[Any, OpPatternKind | None] = {}
        # In a large graph every further use of a parameter gets a copy of its node: one
        # input feeding layers far apart (a mask, a position table) would otherwise cross the
        # whole picture, and dot's time grows with the square of such edges' lengths.
        self._param_copies: dict[rx.Var, str] = {}
        self._params_used: set[rx.Var] = set()

    # ------------------------------------------------------------------ structure
    def draw(self, func: rx.Function) -> Picture:
        env: dict[rx.Var, list[str]] = {}
        large = sum(len(block.bindings) for block in getattr(func.body, "blocks", ())) > _LARGE
        for param in func.params:
            node_id = self.pic.new_id("param", param.name_hint)
            label = style.html_label(
                [style.bold(param.name_hint), style.code(style.compact_sinfo(param.struct_info_))]
            )
            self.pic.node(node_id, label, shape="ellipse", style="filled", fillcolor=style.WHITE)
            env[param] = [node_id]
            if large:
                self._param_copies[param] = label
        results = self._draw_body(func.body, None, env, "")
        ret = self.pic.node(
            self.pic.new_id("return", ""),
            style.html_label(
                [style.bold("return"), style.code(style.compact_sinfo(func.ret_struct_info))]
            ),
            shape="ellipse",
            style="bold",
        )
        for source, sinfo in results:
            self._edge(source, ret, sinfo)
        if self.backward is not None:
            self._backward_below_forward()
        return self.pic

    def _backward_below_forward(self) -> None:
        """Invisible edges from the forward part's last nodes to the backward nodes that read
        no other binding (the seed, zeros, masks of the labels): without them dot ranks those
        at the top, beside the forward part, though the backward pass starts from its end."""
        part = self._node_part
        reads_binding = {head for tail, head, _ in self.pic.edges if tail in part}
        feeds_forward = {tail for tail, head, _ in self.pic.edges if part.get(head) == _FORWARD}
        last = [n for n, p in part.items() if p == _FORWARD and n not in feeds_forward]
        first = [n for n, p in part.items() if p == _BACKWARD and n not in reads_binding]
        for tail in last:
            for head in first:
                self.pic.edge(tail, head, style="invis")

    def _draw_body(
        self, body: rx.Expr, cluster: str | None, env: dict[rx.Var, list[str]], prefix: str
    ) -> list[tuple[str, Any]]:
        """Draw a function body's bindings; the (node id, struct info) pairs of its result."""
        if not isinstance(body, rx.SeqExpr):
            return self._sources(body, cluster, env, prefix)
        for index, block in enumerate(body.blocks):
            block_cluster = cluster
            # Inside an expanded fused function its own dataflow block adds nothing.
            if isinstance(block, rx.DataflowBlock) and not prefix:
                block_cluster = self.pic.cluster(
                    f"dataflow_{index}",
                    "dataflow",
                    cluster,
                    style="rounded,dashed",
                    color="#888888",
                    fontcolor="#555555",
                )
            part_clusters: dict[str, str] = {}
            for binding in block.bindings:
                outputs = isinstance(block, rx.DataflowBlock) and not isinstance(
                    binding.var, rx.DataflowVar
                )
                binding_cluster = block_cluster
                if self.backward is not None and not prefix:
                    self._part = _BACKWARD if binding.var in self.backward else _FORWARD
                    if self._part not in part_clusters:
                        part_clusters[self._part] = self._part_cluster(
                            self._part, index, block_cluster
                        )
                    binding_cluster = part_clusters[self._part]
                self._draw_binding(binding, binding_cluster, env, prefix, outputs and not prefix)
        return self._sources(body.body, cluster, env, prefix)

    def _part_cluster(self, part: str, block_index: int, parent: str | None) -> str:
        caption, colour = style.ADJOINT_PARTS[part]
        return self.pic.cluster(
            f"{part}_{block_index}",
            f"<{style.bold(part)}<br/>{style.small(caption)}>",
            parent,
            style="rounded",
            color=colour,
            penwidth="2",
        )

    def _draw_binding(
        self,
        binding: rx.Binding,
        cluster: str | None,
        env: dict[rx.Var, list[str]],
        prefix: str,
        is_output: bool,
    ) -> None:
        var = binding.var
        if isinstance(binding, rx.MatchCast):
            info = _Binding("op", "match_cast", None, [binding.value])
        else:
            info = self.describe(binding.value)  # type: ignore[attr-defined]
        if info.kind == "fused" and self.expand_fused:
            env[var] = self._expand(binding.value, var, cluster, env, prefix)  # type: ignore[attr-defined]
            return
        caption, attrs = _KIND_STYLE[info.kind]
        lines = []
        if info.caption or caption:
            lines.append(style.small(info.caption or caption))
        lines.append(style.bold(info.title))
        lines.append(style.code(f"{var.name_hint}: {style.compact_sinfo(var.struct_info_)}"))
        # In an adjoint drawn in parts the fill says the part, else the op pattern.
        if self._part is None:
            attrs = dict(attrs, fillcolor=style.pattern_colour(info.pattern))
        else:
            attrs = dict(attrs, fillcolor=style.ADJOINT_PARTS[self._part][1])
        if is_output:
            attrs["style"] += ",bold"
        node_id = self.pic.new_id("v", prefix + var.name_hint)
        self.pic.node(node_id, style.html_label(lines), cluster, shape="box", **attrs)
        if self._part is not None:
            self._node_part[node_id] = self._part
        for expr in info.inputs:
            for source, sinfo in self._sources(expr, cluster, env, prefix):
                self._edge(source, node_id, sinfo)
        env[var] = [node_id]

    def _expand(
        self,
        call: rx.Call,
        var: rx.Var,
        cluster: str | None,
        env: dict[rx.Var, list[str]],
        prefix: str,
    ) -> list[str]:
        callee = self.mod[call.op]  # type: ignore[index]
        inner_prefix = f"{prefix}{var.name_hint}."
        fused = self.pic.cluster(
            self.pic.new_id("fused", inner_prefix),
            f"<{style.small('fused function')}<br/>{style.bold(call.op.name_hint)}>",
            cluster,
            style="rounded,filled",
            fillcolor="#F7F7F7",
            color="#666666",
        )
        inner: dict[rx.Var, list[str]] = {}
        for param, arg in zip(callee.params, call.args):  # type: ignore[attr-defined]
            inner[param] = [source for source, _ in self._sources(arg, cluster, env, prefix)]
        results = self._draw_body(callee.body, fused, inner, inner_prefix)  # type: ignore[attr-defined]
        return [source for source, _ in results]

    def _sources(
        self, expr: Any, cluster: str | None, env: dict[rx.Var, list[str]], prefix: str
    ) -> list[tuple[str, Any]]:
        """The nodes an expression's value comes from, with the struct info each carries."""
        if isinstance(expr, rx.Var):
            if expr not in env:
                node_id = self.pic.new_id("free", expr.name_hint)
                self.pic.node(
                    node_id, style.html_label([style.bold(expr.name_hint)]), shape="ellipse"
                )
                env[expr] = [node_id]
            label = self._param_copies.get(expr)
            if label is not None and expr in self._params_used:
                node_id = self.pic.new_id("param", expr.name_hint)
                self.pic.node(node_id, label, shape="ellipse", style="filled,dashed")
                return [(node_id, expr.struct_info_)]
            self._params_used.add(expr)
            return [(source, expr.struct_info_) for source in env[expr]]
        if isinstance(expr, rx.Constant):
            node_id = self.pic.new_id("const", prefix)
            label = style.html_label(
                [style.small("constant"), style.code(style.compact_sinfo(expr.struct_info_))]
            )
            self.pic.node(
                node_id, label, cluster, shape="cylinder", style="filled", fillcolor=style.WHITE
            )
            return [(node_id, expr.struct_info_)]
        if isinstance(expr, rx.Tuple):
            return [
                pair for field in expr.fields for pair in self._sources(field, cluster, env, prefix)
            ]
        if isinstance(expr, (rx.ShapeExpr, rx.PrimValue, rx.StringImm, rx.DataTypeImm)):
            node_id = self.pic.new_id("literal", prefix)
            self.pic.node(
                node_id, style.esc(_literal_text(expr)), cluster, shape="plaintext", fontsize="10"
            )
            return [(node_id, None)]
        if isinstance(expr, (GlobalVar, rx.ExternFunc, Op)):
            return []
        return [
            pair for var in used_vars(expr) for pair in self._sources(var, cluster, env, prefix)
        ]

    def _edge(self, tail: str, head: str, sinfo: Any) -> None:
        label = style.shape_text(sinfo) if self.edge_labels and sinfo is not None else None
        parts = (self._node_part.get(tail), self._node_part.get(head))
        if parts == (_FORWARD, _BACKWARD):  # a value the backward part keeps from the forward one
            self.pic.edge(tail, head, label=label, **style.KEPT_FOR_BACKWARD)
        else:
            self.pic.edge(tail, head, label=label)

    # ------------------------------------------------------------------ what a binding is
    def describe(self, value: Any) -> _Binding:
        if isinstance(value, rx.Call):
            return self._describe_call(value)
        if isinstance(value, rx.Tuple):
            return _Binding("op", "tuple", OpPatternKind.kTuple, list(value.fields))
        if isinstance(value, rx.TupleGetItem):
            return _Binding(
                "op",
                f"[{value.index}]",
                OpPatternKind.kInjective,
                [value.tuple_value],
                "tuple item",
            )
        if isinstance(value, rx.Var):
            return _Binding("value", value.name_hint, None, [value], "alias of")
        if isinstance(value, rx.Constant):
            return _Binding("value", "constant", None, [])
        if isinstance(value, rx.LeafExpr):
            return _Binding("value", _literal_text(value), None, [])
        return _Binding("op", type(value).__name__, None, [value])

    def _describe_call(self, call: rx.Call) -> _Binding:
        op = call.op
        if isinstance(op, Op) and op.name in _CALL_TIR_OPS:
            callee = call.args[0]
            return _Binding(
                "call_tir", callee.name_hint, self._primfunc_pattern(callee), [call.args[1]]
            )  # type: ignore[union-attr]
        if isinstance(op, Op) and op.name in _EXTERN_OPS:
            target = call.args[0]
            name = (
                target.global_symbol
                if isinstance(target, rx.ExternFunc)
                else getattr(target, "value", "?")
            )
            return _Binding(
                "extern", name, OpPatternKind.kOpaque, list(call.args[1:]), op.name[len("relax.") :]
            )
        if isinstance(op, Op):
            return _Binding(
                "op", op.name.removeprefix("relax."), self._op_pattern(call), list(call.args)
            )
        if isinstance(op, rx.ExternFunc):
            return _Binding(
                "extern", op.global_symbol, OpPatternKind.kOpaque, list(call.args), "extern"
            )
        if isinstance(op, GlobalVar):
            callee_func = self.mod[op] if self.mod is not None and op in self.mod else None
            if isinstance(callee_func, rx.Function) and callee_func.attrs.get("Primitive"):
                return _Binding(
                    "fused", op.name_hint, self._fused_pattern(callee_func), list(call.args)
                )
            return _Binding("call", op.name_hint, None, list(call.args))
        return _Binding("call", getattr(op, "name_hint", type(op).__name__), None, [op, *call.args])

    def _primfunc_pattern(self, gvar: GlobalVar) -> OpPatternKind | None:
        func = self.mod[gvar] if self.mod is not None and gvar in self.mod else None
        return primfunc_pattern(func) if isinstance(func, PrimFunc) else None

    def _fused_pattern(self, func: rx.Function) -> OpPatternKind | None:
        patterns = [
            self.describe(b.value).pattern  # type: ignore[attr-defined]
            for block in getattr(func.body, "blocks", ())
            for b in block.bindings
        ]
        known = [p for p in patterns if p is not None]
        return max(known) if known else None

    def _op_pattern(self, call: rx.Call) -> OpPatternKind | None:
        """The pattern of the PrimFunc this call legalizes to (None when it does not)."""
        legalize = get_legalize(call.op)
        if legalize is None:
            return None
        key = (
            call.op.name,
            tuple(style.compact_sinfo(a.struct_info_) for a in call.args),
            repr(call.attrs.fields) if call.attrs is not None else "",
        )
        if key not in self._pattern_cache:
            self._pattern_cache[key] = _legalized_pattern(legalize, call)
        return self._pattern_cache[key]


def primfunc_pattern(func: PrimFunc) -> OpPatternKind:
    """A PrimFunc's op pattern: its ``op_pattern`` attribute, else the analysis's answer."""
    if "op_pattern" in func.attrs:
        return OpPatternKind(func.attrs["op_pattern"])
    return analyze_op_pattern(func)


def _legalized_pattern(legalize: Any, call: rx.Call) -> OpPatternKind | None:
    builder = BlockBuilder()
    try:
        legalize(builder, call)
    except MLCError:
        # A call that cannot be lowered yet (a shape it needs is unknown) has no pattern.
        return None
    funcs = [f for f in builder.get().functions.values() if isinstance(f, PrimFunc)]
    return max(analyze_op_pattern(f) for f in funcs) if funcs else None


def _literal_text(expr: Any) -> str:
    if isinstance(expr, rx.ShapeExpr):
        return f"shape({style.dims_text(expr.values)})"
    if isinstance(expr, rx.PrimValue):
        return style.prim_text(expr.value)
    return repr(getattr(expr, "value", type(expr).__name__))


def backward_bindings(func: rx.Function) -> set[rx.Var] | None:
    """The variables of ``func``'s backward bindings, when it returns ``(result, (grad, ...))``
    as an adjoint does (None otherwise): those the result does not depend on."""
    bindings = {
        binding.var: binding.value  # type: ignore[attr-defined]
        for block in getattr(func.body, "blocks", ())
        for binding in block.bindings
    }
    returned = func.body.body if isinstance(func.body, rx.SeqExpr) else func.body
    while isinstance(returned, rx.Var) and returned in bindings:
        returned = bindings[returned]
    if not (
        isinstance(returned, rx.Tuple)
        and len(returned.fields) == 2
        and isinstance(returned.fields[1].struct_info_, TupleStructInfo)
    ):
        return None
    # Walking the bindings backwards visits each one after every binding that reads it.
    forward = set(used_vars(returned.fields[0]))
    for var in reversed(bindings):
        if var in forward:
            forward.update(used_vars(bindings[var]))
    return set(bindings) - forward


def _function_name(func: rx.Function, mod: IRModule | None) -> str:
    if mod is not None:
        for gvar, member in mod.functions.items():
            if member is func:
                return gvar.name_hint
    return str(func.attrs.get("global_symbol", ""))


def dataflow_picture(
    func: rx.Function,
    mod: IRModule | None = None,
    *,
    rankdir: str = "TB",
    expand_fused: bool = False,
    edge_labels: bool = True,
    legend: bool = False,
    backward: bool | None = None,
) -> Picture:
    """The dataflow graph of ``func``; ``mod`` (the module it is in) resolves the functions it
    calls, for their op patterns and for drawing fused sub-functions. ``backward`` draws the
    forward and backward parts of an adjoint (see the module doc): None draws them for a
    function named ``*_adjoint`` that returns ``(result, (grad, ...))``."""
    if expand_fused and mod is None:
        raise MLCError("expand_fused=True needs the module that holds the fused functions: mod=")
    parts = None
    if backward is not False:
        parts = backward_bindings(func)
        if backward is None and not _function_name(func, mod).endswith("_adjoint"):
            parts = None
        elif backward and parts is None:
            returns = style.compact_sinfo(func.ret_struct_info)
            raise MLCError(
                "backward=True draws an adjoint, a function returning (result, (grad, ...)) as "
                f"relax.transform.Gradient makes; {_function_name(func, mod) or 'this one'} "
                f"returns {returns}"
            )
    pic = _DataflowDrawer(mod, expand_fused, edge_labels, parts).draw(func)
    if len(pic.nodes) > _LARGE:
        # dot lays an edge label out as a node of its own, which makes big graphs (long edges
        # from a widely used input above all) slow to draw; an xlabel is placed afterwards.
        pic.edges = [
            (tail, head, {("xlabel" if k == "label" else k): v for k, v in attrs.items()})
            for tail, head, attrs in pic.edges
        ]
    pic.graph_attrs.update(rankdir=rankdir, nodesep="0.3", ranksep="0.35")
    if legend:
        add_legend(pic, adjoint=parts is not None)
    return pic


def add_legend(pic: Picture, adjoint: bool = False) -> None:
    """A key to the fills (op patterns, or an adjoint's parts) and borders (kinds of call), as
    the graph's label: a node would take a rank and stretch the picture around it."""
    fills: dict[str, str] = {}
    if adjoint:
        fills = {
            f"{part}: {caption}": colour for part, (caption, colour) in style.ADJOINT_PARTS.items()
        }
    else:
        for name, colour in style.PATTERN_GROUPS.values():
            fills.setdefault(name, colour)
    rows = ['<tr><td colspan="2"><b>key</b></td></tr>']
    rows += [
        f'<tr><td bgcolor="{colour}" width="18"> </td><td align="left">{style.esc(name)}</td></tr>'
        for name, colour in fills.items()
    ]
    borders = [*_BORDERS, _KEPT] if adjoint else _BORDERS
    rows += [
        f'<tr><td>{style.esc(border)}</td><td align="left">{style.esc(meaning)}</td></tr>'
        for border, meaning in borders
    ]
    table = '<table border="0" cellborder="1" cellspacing="2" cellpadding="3">'
    pic.graph_attrs.update(label=f"<{table}{''.join(rows)}</table>>", labeljust="r", fontsize="10")


_BORDERS = [
    ("caption", "call_tir: the PrimFunc called"),
    ("dashed", "extern (packed) call"),
    ("double", "fused function"),
    ("thick", "function output"),
]
_KEPT = ("dashed arrow", "a forward value the backward part reads")
