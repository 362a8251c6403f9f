"""FuseOps: group the kernels of each dataflow block into fused "primitive" functions.

Calling one kernel per operator writes every intermediate tensor to memory and reads it back.
FuseOps finds groups of ``call_tir`` bindings worth running as one kernel, using the op
pattern of each callee (set by :func:`AnnotateTIROpPattern`); :func:`FuseTIR` then merges each
group's loop nests into one PrimFunc. The algorithm is TVM's:

1. **Dataflow graph.** Inside one dataflow block every binding is a node, with an edge from
   the binding that defines a variable to each binding that uses it. A node's pattern is its
   callee's ``op_pattern`` (a ``call_tir``), kInjective (taking a tuple field) or kOpaque
   (anything else). A variable visible after the block (not a DataflowVar) is an *external
   reference*: its value must stay a value of the outer program.
2. **Post-dominators.** The immediate post-dominator of a node is the nearest node that every
   path from it to the block's end passes through (external references and unused nodes flow
   straight to a virtual end node). It is where all the node's consumers meet again: in the
   diamond ``a = exp(x); b = relu(x); c = add(a, b)`` it is ``c`` for ``x``. networkx computes
   it as the dominator tree of the reversed graph.
3. **Fusion.** Walking the nodes in program order, a node is merged into the group of its
   post-dominator, together with every node on every path between them, when a rule of
   ``FUSE_RULES`` allows it. A rule names the node's pattern, the phase (matmul groups form
   in phase 0, injective nodes join in phase 1), the largest pattern on the paths, and how
   large the groups on the way and the post-dominator's group may be:

   =====================  =====  ===============================  ==========  ================
   node                   phase  largest pattern on the paths     on the way  post-dominator
   =====================  =====  ===============================  ==========  ================
   kOutEWiseFusable       0      kElemWise                        kBroadcast  kBroadcast
   kElemWise, kBroadcast  0, 1   kInjective or less, kCommReduce  kInjective  kOutEWiseFusable
   kInjective             1      any                              kInjective  kInjective
   =====================  =====  ===============================  ==========  ================

   So a matmul takes the element-wise ops that follow it, an element-wise or broadcast node
   fuses into anything up to a reduction or a matmul group, and reductions and opaque nodes
   start groups but never join one. In ``lv0 = matmul(x, w); lv1 = bias_add(lv0, b);
   gv = relu(lv1)``, ``lv0``'s post-dominator is ``lv1``, element-wise: the first rule puts
   the matmul into ``lv1``'s group, which is now a matmul group; the same rule then lets it
   join ``gv``'s, giving one group (``fused_matmul_bias_add_relu``).
   Because a node joins the group of the node *all* its paths lead to, together with every node
   on those paths, nothing is computed twice, and groups never span two dataflow blocks.
   Groups are kept in a union-find forest.
4. **Rewriting.** Each group of two or more bindings becomes a private relax function with
   attribute ``Primitive = 1`` named ``fused_<callee names>`` (made unique in the module; an
   identical function is reused). Its parameters are the values the group reads from outside,
   its results the group's values that are read outside it (one: a tensor, several: a tuple).
   The group's bindings are replaced by one call of the function, placed where the group's
   last binding was (after everything it depends on).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mlckit.ir import transform
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op
from mlckit.tir.expr import Var as TirVar
from mlckit.tir.function import PrimFunc

from ..analysis.analysis import used_vars
from ..analysis.op_pattern import OpPatternKind as K
from ..analysis.struct_info_analysis import substitute_struct_info, tir_vars_in_struct_info
from ..block_builder import BlockBuilder
from ..expr import (
    Binding,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..expr_functor import ExprMutator

_SINK = -1  # the virtual node every path from a node to the block's end ends at


@dataclass(eq=False)
class _Group:
    """A set of nodes fused together (a union-find tree; its root describes the set)."""

    pattern: K
    parent: _Group | None = None
    has_anchor: bool = False  # holds a kOutEWiseFusable node, which fixes the group's shape

    def root(self) -> _Group:
        group = self
        while group.parent is not None:
            group = group.parent
        return group


@dataclass(frozen=True)
class FuseRule:
    """A node of a pattern in ``nodes`` joins its post-dominator's group in a phase of
    ``phases`` when the largest pattern on the paths between them is in ``paths``, every
    group on the way is at most ``on_path`` and the post-dominator's group at most
    ``at_sink``."""

    nodes: frozenset[K]
    phases: frozenset[int]
    paths: frozenset[K]
    on_path: K
    at_sink: K


FUSE_RULES = (
    # A matmul (conv, ...) takes the element-wise ops that follow it, before anything else.
    FuseRule(
        nodes=frozenset({K.kOutEWiseFusable}),
        phases=frozenset({0}),
        paths=frozenset({K.kElemWise}),
        on_path=K.kBroadcast,
        at_sink=K.kBroadcast,
    ),
    # Element-wise work fuses into what follows, up to a reduction or a matmul group;
    # injective ops may sit on the way.
    FuseRule(
        nodes=frozenset({K.kElemWise, K.kBroadcast}),
        phases=frozenset({0, 1}),
        paths=frozenset({K.kElemWise, K.kBroadcast, K.kInjective, K.kCommReduce}),
        on_path=K.kInjective,
        at_sink=K.kOutEWiseFusable,
    ),
    # Injective ops (transpose, reshape) join, once the matmul groups have formed.
    FuseRule(
        nodes=frozenset({K.kInjective}),
        phases=frozenset({1}),
        paths=frozenset(K),
        on_path=K.kInjective,
        at_sink=K.kInjective,
    ),
)


def find_fuse_rule(pattern: K, phase: int, path: K) -> FuseRule | None:
    """The rule letting a node of ``pattern`` join its post-dominator in ``phase`` through
    paths whose largest pattern is ``path``; None: it may not."""
    for rule in FUSE_RULES:
        if pattern in rule.nodes and phase in rule.phases and path in rule.paths:
            return rule
    return None


def _node_pattern(value: Expr, mod: IRModule) -> K:
    if isinstance(value, TupleGetItem):
        return K.kInjective
    # A call passing tir_vars (a shape the kernel cannot read off its buffers, as in
    # broadcast_to(x, (n * 3,))) stays alone: FuseTIR merges kernels that take buffers only.
    if isinstance(value, Call) and value.op is Op.get("relax.call_tir") and len(value.args) == 2:
        callee = value.args[0]
        func = mod[callee] if isinstance(callee, GlobalVar) and callee in mod else None
        if isinstance(func, PrimFunc) and "op_pattern" in func.attrs:
            return K(func.attrs["op_pattern"])
    return K.kOpaque


class _Partitioner:
    """Steps 1-3 of the module docstring for the bindings of one dataflow block."""

    def __init__(self, bindings: tuple[Binding, ...], mod: IRModule):
        import networkx as nx  # deferred: a heavy import, needed only when fusing

        index_of = {b.var: i for i, b in enumerate(bindings)}
        self.graph = nx.DiGraph()
        self.graph.add_nodes_from(range(len(bindings)))
        for i, binding in enumerate(bindings):
            for var in used_vars(binding.value):  # type: ignore[attr-defined]
                if var in index_of:
                    self.graph.add_edge(index_of[var], i)
        self.groups = [
            _Group(_node_pattern(b.value, mod) if isinstance(b, VarBinding) else K.kOpaque)
            for b in bindings
        ]
        reverse = self.graph.reverse()
        reverse.add_edges_from(
            (_SINK, i)
            for i, b in enumerate(bindings)
            if not isinstance(b.var, DataflowVar) or self.graph.out_degree(i) == 0
        )
        idom = nx.immediate_dominators(reverse, _SINK)
        self.post_dom = {i: d for i, d in idom.items() if i != _SINK and d != _SINK}

    def _between(self, src: int, sink: int) -> Iterator[int]:
        """The nodes on the paths from ``src`` (excluded) to ``sink`` (included)."""
        seen: set[int] = set()
        stack = list(self.graph.successors(src))
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                yield node
                if node != sink:
                    stack.extend(self.graph.successors(node))

    def _commit(self, src: int, sink: int) -> None:
        """Merge ``src`` and every node between it and ``sink`` into ``sink``'s group."""
        target = self.groups[sink].root()
        for node in [src, *self._between(src, sink)]:
            child = self.groups[node].root()
            if child is not target:
                child.parent = target
                if child.has_anchor:
                    target.has_anchor = True
                    target.pattern = max(child.pattern, target.pattern)

    def run(self) -> list[_Group]:
        """Fuse; returns each node's group root."""
        for group in self.groups:
            group.has_anchor = group.pattern == K.kOutEWiseFusable
        for phase in (0, 1):
            for node, group in enumerate(self.groups):
                sink = self.post_dom.get(node)
                if sink is None or group.root() is self.groups[sink].root():
                    continue
                between = list(self._between(node, sink))
                path = max((self.groups[n].pattern for n in between), default=K.kElemWise)
                rule = find_fuse_rule(group.pattern, phase, path)
                if rule is not None and all(
                    self.groups[n].root().pattern <= (rule.at_sink if n == sink else rule.on_path)
                    for n in between
                ):
                    self._commit(node, sink)
        return [group.root() for group in self.groups]


class _Fusor(ExprMutator):
    """Step 4: rewrites each dataflow block, adding the grouped functions to the module."""

    def visit_dataflow_block_(self, block: DataflowBlock) -> DataflowBlock:
        import networkx as nx  # deferred: a heavy import, needed only when fusing

        bindings = block.bindings
        roots = _Partitioner(bindings, self.builder_.context_mod).run()
        index_of = {b.var: i for i, b in enumerate(bindings)}
        for i, binding in enumerate(bindings):
            value = binding.value  # type: ignore[attr-defined]
            j = index_of.get(value.tuple_value) if isinstance(value, TupleGetItem) else i
            if j is None or roots[j] is not roots[i]:
                # A field of a tuple made outside the group is taken out before the call, so
                # that the fused function (and the kernel FuseTIR makes) receives a tensor.
                roots[i] = _Group(K.kOpaque)
        members: dict[int, list[int]] = {}
        for i, root in enumerate(roots):
            members.setdefault(id(root), []).append(i)
        # Each group is emitted where its last binding was: its unit is that index.
        unit = [members[id(root)][-1] for root in roots]
        order = nx.DiGraph()
        order.add_nodes_from(set(unit))
        for i, binding in enumerate(bindings):
            for var in used_vars(binding.value):  # type: ignore[attr-defined]
                j = index_of.get(var)
                if j is not None and unit[j] != unit[i]:
                    order.add_edge(unit[j], unit[i])
        self.builder_.begin_dataflow_block()
        for u in nx.lexicographical_topological_sort(order, key=lambda u: u):
            group = members[id(roots[u])]
            if len(group) == 1:
                self.visit_binding(bindings[u])
            else:
                self._emit_group([bindings[i] for i in group], bindings)
        return self.builder_.end_block()  # type: ignore[return-value]

    def _emit_group(self, group: list[Binding], block: tuple[Binding, ...]) -> None:
        defined = {b.var for b in group}
        used_outside = {v for b in block if b not in group for v in used_vars(b.value)}  # type: ignore[attr-defined]
        outputs = [
            b.var for b in group if not isinstance(b.var, DataflowVar) or b.var in used_outside
        ]
        args: list[Expr] = []
        remap: dict[int, Expr] = {}
        # The new function gets symbolic shape variables of its own, as every function does.
        dims: dict[TirVar, TirVar] = {}

        def renew(sinfo: Any) -> Any:
            for v in tir_vars_in_struct_info(sinfo):
                dims.setdefault(v, TirVar(v.name_hint, v.dtype))
            return substitute_struct_info(sinfo, dims)

        def param_for(expr: Expr) -> Expr:
            if isinstance(expr, Tuple):
                return Tuple([param_for(f) for f in expr.fields])
            if isinstance(expr, (Var, Constant)) and expr not in defined:
                if id(expr) not in remap:
                    name = expr.name_hint if isinstance(expr, Var) else f"param_{len(args)}"
                    remap[id(expr)] = Var(name, renew(expr.struct_info_))
                    args.append(expr)
                return remap[id(expr)]
            return remap.get(id(expr), expr)

        names = [
            b.value.args[0].name_hint  # type: ignore[attr-defined]
            for b in group
            if not isinstance(b.value, TupleGetItem)  # type: ignore[attr-defined]
        ]
        name = "fused_" + "_".join(names)
        bb = BlockBuilder()
        with bb.function(name, attrs={"Primitive": 1}, private=True):
            with bb.dataflow():
                for b in group:
                    value: Any = b.value  # type: ignore[attr-defined]
                    if isinstance(value, TupleGetItem):
                        value = TupleGetItem(param_for(value.tuple_value), value.index)
                    else:
                        new_args = [value.args[0], param_for(value.args[1])]
                        new_args += [
                            ShapeExpr(renew(a.struct_info_).values) for a in value.args[2:]
                        ]
                        sinfo_args = [renew(s) for s in value.sinfo_args]
                        value = Call(value.op, new_args, value.attrs, sinfo_args)
                    emit = bb.emit_output if b.var in outputs else bb.emit
                    remap[id(b.var)] = emit(value, b.var.name_hint)
            results = [remap[id(v)] for v in outputs]
            params = [remap[id(a)] for a in args]
            bb.emit_func_output(results[0] if len(results) == 1 else results, params)
        gv = self.builder_.add_func(bb.get()[name], name)
        call = self.builder_.normalize(Call(gv, [self.visit_expr(a) for a in args]))
        if len(outputs) == 1:
            self.builder_.emit_normalized(
                VarBinding(self._var_for(outputs[0], call.struct_info_), call)
            )
            return
        result = DataflowVar("lv", call.struct_info_)
        self.builder_.emit_normalized(VarBinding(result, call))
        for k, var in enumerate(outputs):
            item = self.builder_.normalize(TupleGetItem(result, k))
            self.builder_.emit_normalized(VarBinding(self._var_for(var, item.struct_info_), item))


def FuseOps(fuse_opt_level: int = -1) -> transform.Pass:
    """The pass fusing kernels by op pattern (``fuse_opt_level=-1``: the PassContext's
    opt_level; at 0 nothing is fused)."""

    @transform.module_pass(opt_level=0, name="FuseOps")
    def fuse_ops(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        level = ctx.opt_level if fuse_opt_level == -1 else fuse_opt_level
        if level == 0:
            return mod
        fusor = _Fusor(mod)
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function) and not func.attrs.get("Primitive"):
                fusor.builder_.update_func(gv, fusor.visit_expr(func))
        return fusor.builder_.get()

    return fuse_ops
