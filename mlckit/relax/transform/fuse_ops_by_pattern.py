"""FuseOpsByPattern: outline each match of a dataflow pattern into its own function.

    conv_relu = is_op("relax.nn.relu")(is_op("relax.nn.conv2d")(wildcard(), wildcard()))
    mod = FuseOpsByPattern([("dnnl.conv2d_relu", conv_relu)])(mod)

Inside every dataflow block, each binding whose value matches a pattern becomes the root of a
group: the root and the bindings its call-, tuple- and tuple-get-item sub-patterns matched.
The group moves into a private function ``fused_<op names>`` with the attributes
``Primitive=1`` and ``Composite=<pattern name>``, and the block calls it instead. A value of
the group that is also used outside it becomes an extra output (the function returns a
tuple), so nothing is computed twice. Patterns are applied one after the other, each to the
module the previous one produced, so an earlier pattern wins over a later one; within a
pattern, a later match that contains an earlier group entirely absorbs it (the larger
subgraph wins) and one that overlaps a group partially is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op

from ..dpl.pattern import CallPattern, DFPattern, TupleGetItemPattern, TuplePattern
from ..expr import (
    Binding,
    BindingBlock,
    Call,
    Constant,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    If,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..expr_functor import ExprMutator, ExprVisitor
from ..normalize import normalize

# Functions that are already the result of fusion are left alone.
_FUSED_ATTRS = ("Primitive", "Composite", "Codegen")
# The sub-patterns whose matches are computations moved into the fused function; what the
# other sub-patterns (wildcards, variables, constants) match stays outside as an input.
_GROUPED_PATTERNS = (CallPattern, TuplePattern, TupleGetItemPattern)


class FusionError(MLCError):
    """FuseOpsByPattern was given a bad pattern, or a match cannot be outlined."""


@dataclass(frozen=True)
class PatternCheckContext:
    """What a pattern's ``check`` function sees about one match.

    ``matched_expr`` is the root call; ``annotated_expr`` maps each name of the pattern's
    ``annotation_patterns`` to what that sub-pattern matched; ``matched_bindings`` maps the
    group's variables to their values; ``var_usages`` maps each variable of the block to
    the variables whose bindings use it; ``value_to_bound_var`` maps bound values to their
    variables (keys compare by identity).
    """

    matched_expr: Expr
    annotated_expr: dict[str, Expr]
    matched_bindings: dict[Var, Expr]
    var_usages: dict[Var, list[Var]]
    value_to_bound_var: dict[Expr, Var]


@dataclass(frozen=True)
class FusionPattern:
    """A named pattern (``"dnnl.conv2d_relu"``), with optional named sub-patterns for the
    check and a ``check(PatternCheckContext) -> bool`` that may reject a match."""

    name: str
    pattern: DFPattern
    annotation_patterns: Mapping[str, DFPattern] = field(default_factory=dict)
    check: Callable[[PatternCheckContext], bool] | None = None


def _as_fusion_pattern(item: Any) -> FusionPattern:
    if isinstance(item, FusionPattern):
        return item
    usage = (
        "FuseOpsByPattern takes patterns as (name, pattern), (name, pattern, check), "
        "(name, pattern, annotation_patterns) or (name, pattern, annotation_patterns, check)"
    )
    if not isinstance(item, (tuple, list)) or not 2 <= len(item) <= 4:
        raise FusionError(f"{usage}; got {item!r}")
    name, pattern, *rest = item
    if not isinstance(name, str) or not isinstance(pattern, DFPattern):
        raise FusionError(f"{usage}; got a {type(name).__name__} and a {type(pattern).__name__}")
    annotations: Mapping[str, DFPattern] = {}
    check = None
    if len(rest) == 1 and callable(rest[0]):
        check = rest[0]
    elif rest:
        annotations = rest[0] or {}
        check = rest[1] if len(rest) == 2 else None
    if not isinstance(annotations, Mapping) or (check is not None and not callable(check)):
        raise FusionError(f"{usage}; pattern {name!r} has an invalid annotation map or check")
    return FusionPattern(name, pattern, annotations, check)


@dataclass
class _Group:
    root: Var
    members: set[Var]


class _Substitute(ExprMutator):
    """Replaces expressions by identity (inputs by parameters, old variables by new ones)."""

    def __init__(self, replace: dict[int, Expr]):
        super().__init__()
        self.replace = replace

    def visit_expr(self, expr: Any) -> Any:
        new = self.replace.get(id(expr))
        return new if new is not None else super().visit_expr(expr)


class _Leaves(ExprVisitor):
    """The variables (and constants) an expression reads, in order of first appearance."""

    def __init__(self) -> None:
        self.items: dict[int, Expr] = {}

    def visit_var_(self, op: Var) -> None:
        self.items.setdefault(id(op), op)

    visit_dataflow_var_ = visit_var_
    visit_constant_ = visit_var_  # type: ignore[assignment]


def _leaves(exprs: Sequence[Expr]) -> list[Expr]:
    visitor = _Leaves()
    for expr in exprs:
        visitor.visit_expr(expr)
    return list(visitor.items.values())


class _PatternFuser:
    """Applies one fusion pattern to every relax function of a module (in place)."""

    def __init__(
        self, mod: IRModule, pattern: FusionPattern, bind_constants: bool, annotate_codegen: bool
    ):
        self.mod = mod
        self.pattern = pattern
        self.bind_constants = bind_constants
        self.annotate_codegen = annotate_codegen
        self.var2val: dict[Var, Expr] = {}
        self.bound_values: set[int] = set()

    def run(self) -> None:
        for gv, func in list(self.mod.functions.items()):
            if not isinstance(func, Function) or any(k in func.attrs for k in _FUSED_ATTRS):
                continue
            self.var2val = {
                b.var: b.value for b in _all_bindings(func.body) if isinstance(b, VarBinding)
            }
            self.bound_values = {id(value) for value in self.var2val.values()}
            body = self._expr(func.body)
            if body is not func.body:
                self.mod.update_func(gv, func.with_fields(body=body))

    # ------------------------------------------------------------------ walking
    def _expr(self, expr: Expr) -> Expr:
        if isinstance(expr, SeqExpr):
            blocks = [self._block(b) for b in expr.blocks]
            body = self._expr(expr.body)
            if body is expr.body and all(a is b for a, b in zip(blocks, expr.blocks)):
                return expr
            return expr.with_fields(blocks=tuple(blocks), body=body)
        if isinstance(expr, If):
            t, f = self._expr(expr.true_branch), self._expr(expr.false_branch)
            if t is expr.true_branch and f is expr.false_branch:
                return expr
            return expr.with_fields(true_branch=t, false_branch=f)
        return expr

    def _block(self, block: BindingBlock) -> BindingBlock:
        if not isinstance(block, DataflowBlock):
            bindings = [_with_value(b, self._expr(b.value)) for b in block.bindings]  # type: ignore[attr-defined]
            if all(a is b for a, b in zip(bindings, block.bindings)):
                return block
            return BindingBlock(bindings, span=block.span)
        groups = self._find_groups(block)
        if not groups:
            return block
        return DataflowBlock(self._rebuild(block, groups), span=block.span)

    # ------------------------------------------------------------------ matching
    def _find_groups(self, block: DataflowBlock) -> list[_Group]:
        bindings = block.bindings
        value_to_var = {id(b.value): b.var for b in bindings if isinstance(b, VarBinding)}
        usages = _usages(bindings)
        groups: list[_Group] = []
        group_of: dict[Var, _Group] = {}
        for binding in bindings:
            if not isinstance(binding, VarBinding) or not isinstance(binding.value, Call):
                continue
            matches = self.pattern.pattern.extract_matched_expr(binding.value, self.var2val)
            if matches is None:
                continue
            members = {binding.var}
            for pat, expr in matches.items():
                if isinstance(pat, _GROUPED_PATTERNS):
                    var = value_to_var.get(id(expr))
                    if var is not None:
                        members.add(var)
                    elif id(expr) in self.bound_values:
                        break  # computed in another block: cannot be moved
                    # Otherwise it is written inline in a member, e.g. call_tir's argument tuple.
            else:
                # Every value moved must be read by the group itself: one reached through an
                # alias (``y1 = y``) would stay needed outside, so that match is not fused.
                if any(
                    not any(user in members for user in usages.get(v, ()))
                    for v in members
                    if v is not binding.var
                ):
                    continue
                overlapping = {id(g): g for v in members if (g := group_of.get(v)) is not None}
                if any(not g.members <= members for g in overlapping.values()):
                    continue
                if not self._check(binding, matches, members, usages, value_to_var):
                    continue
                groups = [g for g in groups if id(g) not in overlapping]
                group = _Group(binding.var, members)
                groups.append(group)
                group_of.update(dict.fromkeys(members, group))
        return groups

    def _check(
        self,
        root: VarBinding,
        matches: dict[DFPattern, Expr],
        members: set[Var],
        usages: dict[Var, list[Var]],
        value_to_var: dict[int, Var],
    ) -> bool:
        check = self.pattern.check
        if check is None:
            return True
        annotated = {
            name: matches[pat]
            for name, pat in self.pattern.annotation_patterns.items()
            if pat in matches
        }
        context = PatternCheckContext(
            matched_expr=root.value,
            annotated_expr=annotated,
            matched_bindings={v: self.var2val[v] for v in members},
            var_usages=usages,
            value_to_bound_var={self.var2val[v]: v for v in value_to_var.values()},
        )
        return bool(check(context))

    # ------------------------------------------------------------------ rewriting
    def _rebuild(self, block: DataflowBlock, groups: list[_Group]) -> list[Binding]:
        import networkx as nx  # deferred: a heavy import, needed only when fusing

        bindings = block.bindings
        position = {b.var: i for i, b in enumerate(bindings)}
        usages = _usages(bindings)
        group_of = {v: g for g in groups for v in g.members}

        # Units are the kept bindings and the groups; the new block orders them topologically,
        # each as close to its original position (a group: its root's) as dependencies allow.
        units: list[Binding | _Group] = [b for b in bindings if b.var not in group_of]
        units += groups
        unit_of: dict[Var, int] = {}
        for index, unit in enumerate(units):
            for var in unit.members if isinstance(unit, _Group) else (unit.var,):
                unit_of[var] = index
        graph = nx.DiGraph()
        graph.add_nodes_from(range(len(units)))
        for index, unit in enumerate(units):
            members = unit.members if isinstance(unit, _Group) else {unit.var}
            for var in members:
                for used in _leaves([bindings[position[var]].value]):  # type: ignore[attr-defined]
                    source = unit_of.get(used)  # type: ignore[arg-type]
                    if source is not None and source != index:
                        graph.add_edge(source, index)

        def key(index: int) -> int:
            unit = units[index]
            return position[unit.root if isinstance(unit, _Group) else unit.var]

        try:
            order = list(nx.lexicographical_topological_sort(graph, key=key))
        except nx.NetworkXUnfeasible:
            raise FusionError(
                f"FuseOpsByPattern: pattern {self.pattern.name!r}: a cyclic dependency was "
                "detected: a match reads a value that itself depends on the match. Make the "
                "pattern cover that value too, or reject such matches with a check function"
            ) from None
        result: list[Binding] = []
        for index in order:
            unit = units[index]
            if isinstance(unit, _Group):
                result.extend(self._outline(unit, bindings, position, usages))
            else:
                result.append(unit)
        return result

    def _outline(
        self,
        group: _Group,
        bindings: Sequence[Binding],
        position: dict[Var, int],
        usages: dict[Var, list[Var]],
    ) -> list[Binding]:
        members = [bindings[i] for i in sorted(position[v] for v in group.members)]
        values = [b.value for b in members]  # type: ignore[attr-defined]
        inputs = [
            leaf
            for leaf in _leaves(values)
            if (isinstance(leaf, Var) and leaf not in group.members)
            or (isinstance(leaf, Constant) and not self.bind_constants)
        ]
        params: list[Var] = []
        for leaf in inputs:
            if isinstance(leaf, Var):
                params.append(Var(leaf.name_hint, leaf.struct_info_))
            else:
                params.append(Var(f"param_{len(params)}", leaf.struct_info_))
        outputs = [
            b.var
            for b in members
            if b.var is group.root
            or not isinstance(b.var, DataflowVar)
            or any(user not in group.members for user in usages.get(b.var, ()))
        ]

        replace: dict[int, Expr] = {id(old): new for old, new in zip(inputs, params)}
        body_bindings: list[Binding] = []
        for binding in members:
            old_var = binding.var
            var_cls = Var if old_var in outputs else DataflowVar
            new_var = var_cls(old_var.name_hint, old_var.struct_info_)
            value = _Substitute(replace).visit_expr(binding.value)  # type: ignore[attr-defined]
            body_bindings.append(VarBinding(new_var, value))
            replace[id(old_var)] = new_var
        results = [replace[id(v)] for v in outputs]
        body = results[0] if len(results) == 1 else Tuple(results)
        func = Function(
            params,
            SeqExpr([DataflowBlock(body_bindings)], body),
            body.struct_info_,
            attrs={"Primitive": 1, "Composite": self.pattern.name},
        )
        gvar = self._add_function(func, values)

        call = normalize(Call(gvar, inputs))
        if len(outputs) == 1:
            return [VarBinding(outputs[0], call)]
        tuple_var = DataflowVar("lv", call.struct_info_)
        new_bindings: list[Binding] = [VarBinding(tuple_var, call)]
        for index, var in enumerate(outputs):
            new_bindings.append(VarBinding(var, normalize(TupleGetItem(tuple_var, index))))
        return new_bindings

    def _add_function(self, func: Function, values: Sequence[Expr]) -> GlobalVar:
        ops = [
            v.op.name.replace(".", "_")
            for v in values
            if isinstance(v, Call) and isinstance(v.op, Op)
        ]
        base = "_".join(["fused", *ops])
        codegen = self.pattern.name.split(".")[0]
        suffix = f"_{codegen}" if self.annotate_codegen else ""
        name, count = base + suffix, 0
        while name in self.mod:
            count += 1
            name = f"{base}{count}{suffix}"
        if self.annotate_codegen:
            func = _wrap_for_codegen(func, name, codegen)
        gvar = GlobalVar(name)
        self.mod.update_func(gvar, func)
        return gvar


def _wrap_for_codegen(func: Function, name: str, codegen: str) -> Function:
    """The composite function as a local function of a public ``Codegen=<codegen>`` one, the
    form an external code generator (BYOC) receives."""
    inner = Function(
        func.params,
        func.body,
        func.ret_struct_info,
        attrs={"Composite": func.attrs["Composite"]},
    )
    params = [Var(p.name_hint, p.struct_info_) for p in func.params]
    local = Var("local_func", inner.struct_info_)
    call = normalize(Call(local, params))
    result = Var("output", call.struct_info_)
    block = BindingBlock([VarBinding(local, inner), VarBinding(result, call)])
    return Function(
        params,
        SeqExpr([block], result),
        func.ret_struct_info,
        attrs={"Codegen": codegen, "global_symbol": name},
    )


# ---------------------------------------------------------------------------- helpers
def _with_value(binding: Binding, value: Expr) -> Binding:
    if value is binding.value:  # type: ignore[attr-defined]
        return binding
    return binding.with_fields(value=value)  # type: ignore[return-value]


def _usages(bindings: Sequence[Binding]) -> dict[Var, list[Var]]:
    """Each variable mapped to the variables of the bindings (in this block) that read it."""
    users: dict[Var, list[Var]] = {}
    for binding in bindings:
        for leaf in _leaves([binding.value]):  # type: ignore[attr-defined]
            if isinstance(leaf, Var):
                users.setdefault(leaf, []).append(binding.var)
    return users


def _all_bindings(expr: Expr) -> list[Binding]:
    found: list[Binding] = []
    if isinstance(expr, SeqExpr):
        for block in expr.blocks:
            for binding in block.bindings:
                found.append(binding)
                found.extend(_all_bindings(binding.value))  # type: ignore[attr-defined]
        found.extend(_all_bindings(expr.body))
    elif isinstance(expr, If):
        found.extend(_all_bindings(expr.true_branch))
        found.extend(_all_bindings(expr.false_branch))
    return found


def FuseOpsByPattern(
    patterns: Sequence[Any], bind_constants: bool = True, annotate_codegen: bool = False
) -> transform.Pass:
    """Outline every match of ``patterns`` (tuples ``(name, pattern[, annotations][, check])``
    or FusionPattern) into a composite function.

    ``bind_constants=False`` passes constants of a match in as parameters (``param_0``, ...)
    instead of keeping them in the function. ``annotate_codegen=True`` wraps each composite
    function in a public function with ``Codegen=<the pattern name's prefix>``.
    """
    fusion_patterns = [_as_fusion_pattern(p) for p in patterns]

    @transform.module_pass(opt_level=0, name="FuseOpsByPattern")
    def fuse(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        for pattern in fusion_patterns:
            _PatternFuser(mod, pattern, bind_constants, annotate_codegen).run()
        return mod

    return fuse


__all__ = ["FuseOpsByPattern", "FusionError", "FusionPattern", "PatternCheckContext"]
