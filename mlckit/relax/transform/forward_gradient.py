"""ForwardGradient: forward-mode automatic differentiation of a relax function.

``ForwardGradient("main")`` adds ``main_jvp`` to the module. It takes main's parameters
followed by one tangent per differentiated parameter ``p`` (named ``p_tangent``, with ``p``'s
struct info) and returns ``(what main returns, its tangent)``: the Jacobian-vector product,
the derivative of main's result along the direction the tangents give. A tuple result gets a
tuple of tangents.

The algorithm carries a dual value through the function's one dataflow block: every binding
``y = op(a, b)`` is copied, and right after it the op's JVP rule (``relax.op._op_jvp``) gives
``y_tangent`` from the arguments' values and tangents. Worked example,
``sum((a + b) * b)`` differentiated in ``a`` only::

    lv = R.add(a, b)             lv_tangent = a_tangent
    lv1 = R.multiply(lv, b)      lv1_tangent = R.multiply(lv_tangent, b)
    gv = R.sum(lv1)              gv_tangent = R.sum(lv1_tangent)

so the result's tangent is ``sum(a_tangent * b)``. One pass forwards gives the derivative
along one direction for any number of outputs; reverse mode (``Gradient``) gives the
gradient of one scalar in every direction. For a scalar result both meet:
``jvp(x; v) = sum(grad(x) * v)``.

A variable whose tangent is known to be zero (it depends on no differentiated parameter, or
it is not a float tensor: a comparison's bools, an index) contributes nothing: its terms are
left out, not computed as zeros. Zeros are written only where a tangent must exist and is
zero: a field of a tuple whose other fields move, or a result that does not depend on the
differentiated parameters. A tangent smaller than its variable (``b`` of shape ``(4,)`` in
``y = a + b`` of shape ``(3, 4)``) is broadcast to the variable's shape. Only bindings the
result depends on get tangents. A rule of several steps binds its parts as
``<var>_tangent_part``, ``<var>_tangent_part1``, ... (the product rule of ``lv0 = x @ w``: two
matmuls, then ``lv0_tangent`` adds them), so the forward bindings keep main's names.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlckit.errors import TransformError
from mlckit.ir import transform
from mlckit.ir.dtype import is_float
from mlckit.ir.module import IRModule
from mlckit.ir.op import Op

from .. import op as relax_op
from ..analysis import remove_all_unused, used_vars
from ..block_builder import BlockBuilder
from ..expr import (
    Binding,
    Call,
    DataflowVar,
    Expr,
    Function,
    MatchCast,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from ..op._op_jvp import jvp_rule
from ..op._registry import op_name
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..utils import dims_equal, format_struct_info
from .function_copy import FunctionCopier, only_dataflow_block


def ForwardGradient(
    func_name: str, require_grads: Var | Sequence[Var] | None = None
) -> transform.Pass:
    """Add ``<func_name>_jvp``, taking the function's parameters and then a tangent
    ``<p>_tangent`` for each parameter ``p`` of ``require_grads`` (every float tensor
    parameter, or tuple of them, by default), and returning ``(original result, tangent of
    the result)``.

    Raises :class:`TransformError` when the function is missing or is not one dataflow block,
    ``require_grads`` lists a variable twice, one that is not a parameter or one that is not
    a float tensor, a parameter already has a tangent's name, or calls without a JVP rule lie
    between the differentiated parameters and the result (all of them are named)."""

    @transform.module_pass(opt_level=0, name="ForwardGradient")
    def forward_gradient(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        if func_name not in mod or not isinstance(mod[func_name], Function):
            names = ", ".join(gv.name_hint for gv in mod.functions) or "none"
            raise TransformError(
                f"ForwardGradient({func_name!r}): the module has no relax function named "
                f"{func_name!r} (its functions: {names})"
            )
        builder = _JvpBuilder(func_name, mod[func_name], require_grads)
        mod[f"{func_name}_jvp"] = builder.build()
        return mod

    return forward_gradient


class _JvpBuilder:
    def __init__(self, name: str, func: Function, require_grads: Var | Sequence[Var] | None):
        self.name = name
        self.func = func
        self.block = only_dataflow_block(func, f"function {name}", self.fail)
        self.required = self._required(require_grads)
        self._check_tangent_names()
        self.moving = self._moving_bindings()
        self._check_rules()
        self.bb = BlockBuilder()
        self.copier = FunctionCopier(func)
        self.remap = self.copier.remap
        # Original variable -> its tangent in the JVP function; absent means zero.
        self.tangents: dict[Var, Expr] = {}

    def fail(self, message: str) -> TransformError:
        return TransformError(f"ForwardGradient({self.name!r}): {message}")

    # ------------------------------------------------------------------ checks
    def _required(self, require_grads: Var | Sequence[Var] | None) -> list[Var]:
        params = list(self.func.params)
        if require_grads is None:
            return [p for p in params if _is_float_valued(p.struct_info_)]
        wanted = [require_grads] if isinstance(require_grads, Var) else list(require_grads)
        seen: set[Var] = set()
        for var in wanted:
            label = var.name_hint if isinstance(var, Var) else repr(var)
            if var not in params:
                raise self.fail(
                    f"require_grads lists {label}, which is not a parameter of {self.name}"
                )
            if var in seen:
                raise self.fail(f"require_grads lists {label} twice")
            if not _is_float_valued(var.struct_info_):
                raise self.fail(
                    f"require_grads lists {label}, which is "
                    f"{format_struct_info(var.struct_info_)}: only a float tensor (or a tuple "
                    "holding them) has a tangent"
                )
            seen.add(var)
        return wanted

    def _check_tangent_names(self) -> None:
        """A tangent parameter's name must not be one of the function's own parameters'."""
        names = {p.name_hint for p in self.func.params}
        for var in self.required:
            if f"{var.name_hint}_tangent" in names:
                raise self.fail(
                    f"{self.name} already has a parameter named {var.name_hint}_tangent, the "
                    f"name of {var.name_hint}'s tangent; rename it"
                )

    def _moving_bindings(self) -> set[Var]:
        """The bound variables that depend on a differentiated parameter, are float valued and
        that the result reads: the ones that get a tangent (unless their rule says zero)."""
        moving = set(self.required)
        for binding in self.block.bindings:
            value = binding.value  # type: ignore[attr-defined]
            reads_moving = any(v in moving for v in used_vars(value))
            if reads_moving and _is_float_valued(binding.var.struct_info_):
                moving.add(binding.var)
        needed = set(used_vars(self.func.body.body))  # type: ignore[attr-defined]
        for binding in reversed(self.block.bindings):
            if binding.var in needed:
                needed.update(used_vars(binding.value))  # type: ignore[attr-defined]
        return {b.var for b in self.block.bindings if b.var in moving and b.var in needed}

    def _check_rules(self) -> None:
        """Every call that carries a tangent needs a JVP rule; all missing ones at once."""
        missing = []
        for binding in self.block.bindings:
            value = binding.value  # type: ignore[attr-defined]
            if binding.var in self.moving and isinstance(value, Call) and not _has_rule(value):
                missing.append(f"{op_name(value)} (at {binding.var.name_hint})")
        if missing:
            raise self.fail(
                f"the result of {self.name} depends on its differentiated parameters through "
                f"calls without a JVP rule: {', '.join(missing)}; register one with "
                "relax.op._op_jvp.register_jvp"
            )

    # ------------------------------------------------------------------ building
    def build(self) -> Function:
        func, bb = self.func, self.bb
        params = [self.copier.param(p) for p in func.params]
        seeds = [self.copier.param(p, f"{p.name_hint}_tangent") for p in self.required]
        self.tangents.update(zip(self.required, seeds))
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"}
        private = "global_symbol" not in func.attrs
        jvp_name = f"{self.name}_jvp"
        with bb.function(jvp_name, params + seeds, attrs, pure=func.is_pure, private=private):
            with bb.dataflow():
                for binding in self.block.bindings:
                    self._copy(binding)
                    if binding.var in self.moving:
                        self._carry_tangent(binding)
                body = func.body.body  # type: ignore[attr-defined]
                tangent = self._result_tangent(body)
            result = self.copier.value(body)
            bb.emit_func_output(Tuple([result, tangent]))
        return remove_all_unused(bb.get()[jvp_name])

    def _copy(self, binding: Binding) -> None:
        self.copier.copy(self.bb, binding, output=not isinstance(binding.var, DataflowVar))

    def _emit(self, like: Var, value: Expr, name: str) -> Var:
        """Bind ``value`` as ``like`` is bound: a dataflow variable or a block output."""
        if isinstance(like, DataflowVar):
            return self.bb.emit(value, name)
        return self.bb.emit_output(value, name)

    def _carry_tangent(self, binding: Binding) -> None:
        var = binding.var  # type: ignore[attr-defined]
        value = binding.value  # type: ignore[attr-defined]
        name = f"{var.name_hint}_tangent"
        if isinstance(binding, MatchCast):  # the tangent has the same shape: cast it too
            tangent = self._tangent_of(value)
            if tangent is not None:
                self.tangents[var] = self.bb.emit_match_cast(
                    tangent, self.copier.struct_info(binding.struct_info), name
                )
            return
        tangent = self._value_tangent(var, value)
        if tangent is not None:
            tangent = self._broadcast_to(self._bind_parts(tangent, f"{name}_part"), self.remap[var])
            self.tangents[var] = self._emit(var, tangent, name)

    def _bind_parts(self, expr: Expr, hint: str) -> Expr:
        """``expr`` normalized, each call nested in it bound first to a variable named after
        ``hint`` (``lv4_tangent_part``): the builder's own names (``lv``, ``lv1``) would take
        the names of forward bindings still to come."""

        def bind(value: Expr) -> Expr:
            inner = self._bind_parts(value, hint)
            return self.bb.emit(inner, hint) if isinstance(inner, (Call, TupleGetItem)) else inner

        if isinstance(expr, Call):
            expr = Call(expr.op, [bind(a) for a in expr.args], expr.attrs, expr.sinfo_args)
        elif isinstance(expr, Tuple):
            expr = Tuple([bind(f) for f in expr.fields])
        elif isinstance(expr, TupleGetItem):
            expr = TupleGetItem(bind(expr.tuple_value), expr.index)
        return self.bb.normalize(expr)

    def _value_tangent(self, var: Var, value: Expr) -> Expr | None:
        """The tangent of ``var = value`` (un-normalized), None when it is zero."""
        if isinstance(value, TupleGetItem):
            tangent = self._tangent_of(value.tuple_value)
            if tangent is None:
                return None
            literal = self.bb.lookup_binding(tangent) if isinstance(tangent, Var) else tangent
            if isinstance(literal, Tuple):  # read the field's tangent where it was made
                return literal.fields[value.index]
            return TupleGetItem(tangent, value.index)
        if not isinstance(value, Call):
            return self._tangent_of(value)
        tangents = [self._tangent_of(arg) for arg in value.args]
        if all(t is None for t in tangents):  # it read a variable whose rule answered zero
            return None
        rule = jvp_rule(value.op.name)  # type: ignore[union-attr]
        copy = self.remap[var]
        try:
            return rule(copy, self.bb.lookup_binding(copy), tangents)  # type: ignore[misc, arg-type]
        except TransformError as error:
            raise self.fail(f"at {var.name_hint} = {value.op.name}(...): {error}") from None

    def _tangent_of(self, expr: Expr) -> Expr | None:
        """The tangent of an argument: a variable's, a tuple's field by field (zeros for the
        fields that do not move), None for anything else (a constant, a shape)."""
        if isinstance(expr, Var):
            return self.tangents.get(expr)
        if isinstance(expr, Tuple):
            fields = [self._tangent_of(f) for f in expr.fields]
            if all(f is None for f in fields):
                return None
            return Tuple(
                [
                    _zeros_like(self.copier.value(field)) if t is None else t
                    for field, t in zip(expr.fields, fields)
                ]
            )
        return None

    def _broadcast_to(self, tangent: Expr, var: Var) -> Expr:
        """``tangent`` (normalized) repeated up to ``var``'s shape when broadcasting made
        ``var`` bigger."""
        have, want = tangent.struct_info_, var.struct_info_
        if not isinstance(have, TensorStructInfo) or not isinstance(want, TensorStructInfo):
            return tangent
        want_shape, have_shape = want.shape_values, have.shape_values
        if want_shape is None or have_shape is None:
            return tangent
        same = len(want_shape) == len(have_shape) and all(
            dims_equal(a, b) for a, b in zip(want_shape, have_shape)
        )
        if same:
            return tangent
        if isinstance(tangent, Call):
            tangent = self.bb.emit(tangent, f"{var.name_hint}_tangent_part")
        return relax_op.broadcast_to(tangent, ShapeExpr(list(want_shape)))

    def _result_tangent(self, body: Expr) -> Expr:
        """The returned value's tangent: a tuple's field by field, zeros where it is zero."""
        if isinstance(body, Tuple):
            return Tuple([self._result_tangent(field) for field in body.fields])
        tangent = self._tangent_of(body)
        if tangent is None:
            name = f"{body.name_hint if isinstance(body, Var) else 'result'}_tangent"
            value = _zeros_like(self.copier.value(body))
            return self.bb.emit_output(self._bind_parts(value, f"{name}_part"), name)
        return tangent


def _has_rule(call: Call) -> bool:
    return isinstance(call.op, Op) and jvp_rule(call.op.name) is not None


def _is_float_valued(sinfo: StructInfo | None) -> bool:
    """A float tensor, or a tuple holding one: the values that have tangents."""
    if isinstance(sinfo, TupleStructInfo):
        return any(_is_float_valued(f) for f in sinfo.fields)
    return isinstance(sinfo, TensorStructInfo) and is_float(sinfo.dtype)


def _zeros_like(value: Expr, sinfo: StructInfo | None = None) -> Expr:
    """Zeros shaped as ``value`` (a tensor, or a tuple of them field by field), whose struct
    info is ``sinfo`` (``value``'s own when normalized)."""
    sinfo = value.struct_info_ if sinfo is None else sinfo
    if isinstance(sinfo, TupleStructInfo):
        return Tuple(
            [_zeros_like(TupleGetItem(value, i), field) for i, field in enumerate(sinfo.fields)]
        )
    return relax_op.zeros_like(value)


__all__ = ["ForwardGradient"]
