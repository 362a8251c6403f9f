"""Gradient: reverse-mode automatic differentiation of a relax function.

``Gradient("main")`` adds ``main_adjoint`` to the module. It takes main's parameters and
returns ``(what main returns, (d target / d p for each required p))``, where the target is
main's result, a 0-d float tensor (a loss), or the ``target_index``-th field of the tuple main
returns.

The algorithm is the adjoint method on the function's one dataflow block. The forward
bindings are copied as they are; then the target's adjoint is 1, and the bindings are walked
backwards: at ``y = op(a, b)`` with ``y_adjoint`` known, the op's gradient rule
(``relax.op._op_gradient``) gives the partial adjoints of ``a`` and ``b``, which are added to
what ``a_adjoint`` and ``b_adjoint`` already hold (a variable used twice gets two
contributions). Worked example, ``sum((a + b) * b)``::

    lv = R.add(a, b)                 gv_adjoint = R.ones(R.shape([]))        # d gv / d gv
    lv1 = R.multiply(lv, b)          lv1_adjoint = R.broadcast_to(gv_adjoint, shape)
    gv = R.sum(lv1)                  lv_adjoint = R.multiply(lv1_adjoint, b)
                                     b_adjoint = R.multiply(lv1_adjoint, lv)
                                     a_adjoint = lv_adjoint
                                     b_adjoint1 = R.add(b_adjoint, lv_adjoint)

so ``d gv / d b = b_adjoint1 = (a + b) + b``. A partial whose shape is bigger than its
argument's (``bias`` of shape ``(n,)`` broadcast in ``x + bias`` of shape ``(m, n)``) is summed
back with ``collapse_sum_to``. Tuples pass adjoints field by field: the adjoint of ``t[i]``
becomes field ``i`` of ``t``'s adjoint, whose other fields are zeros. A required variable the
target does not depend on gets zeros. Forward bindings that neither the result nor a
gradient reads are left out of the adjoint function.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mlckit.errors import TransformError
from mlckit.ir import transform
from mlckit.ir.dtype import is_float
from mlckit.ir.module import IRModule
from mlckit.ir.op import Op

from .. import op as relax_op
from ..analysis import remove_all_unused, used_vars
from ..block_builder import BlockBuilder
from ..expr import (
    Call,
    DataflowVar,
    Expr,
    Function,
    ShapeExpr,
    Tuple,
    TupleGetItem,
    Var,
)
from ..op._op_gradient import gradient_rule
from ..op._registry import op_name
from ..struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from ..utils import dims_equal, format_struct_info
from .function_copy import FunctionCopier, only_dataflow_block


def Gradient(
    func_name: str,
    require_grads: Var | Sequence[Var] | None = None,
    target_index: int = 0,
) -> transform.Pass:
    """Add ``<func_name>_adjoint``, returning ``(original result, (grad, ...))`` with one
    gradient per variable of ``require_grads``: every parameter, in order, by default; else a
    variable or a list of them, each a parameter or (as in TVM) a variable bound in the
    function. The target is the result, or field ``target_index`` of a returned tuple.

    Raises :class:`TransformError` when the function is missing, is not one dataflow block,
    its target is not a 0-d float tensor, ``require_grads`` lists a variable twice or one that
    is not the function's, or calls without a gradient rule lie on the target's path (all of
    them are named)."""

    @transform.module_pass(opt_level=0, name="Gradient")
    def gradient(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        if func_name not in mod or not isinstance(mod[func_name], Function):
            names = ", ".join(gv.name_hint for gv in mod.functions) or "none"
            raise TransformError(
                f"Gradient({func_name!r}): the module has no relax function named "
                f"{func_name!r} (its functions: {names})"
            )
        builder = _AdjointBuilder(func_name, mod[func_name], require_grads, target_index)
        mod[f"{func_name}_adjoint"] = builder.build()
        return mod

    return gradient


class _AdjointBuilder:
    def __init__(
        self,
        name: str,
        func: Function,
        require_grads: Var | Sequence[Var] | None,
        target_index: int,
    ):
        self.name = name
        self.func = func
        self.block = only_dataflow_block(func, f"function {name}", self.fail)
        self.target = self._target(target_index)
        self.required = self._required(require_grads)
        self._check_rules()
        self.bb = BlockBuilder()
        self.copier = FunctionCopier(func)
        self.remap = self.copier.remap
        self.adjoints: dict[Var, Expr] = {}

    def fail(self, message: str) -> TransformError:
        return TransformError(f"Gradient({self.name!r}): {message}")

    # ------------------------------------------------------------------ checks
    def _target(self, index: int) -> Var:
        body = self.func.body.body  # type: ignore[attr-defined]
        if isinstance(body, Tuple):
            if not 0 <= index < len(body.fields):
                raise self.fail(
                    f"target_index {index} is out of range: {self.name} returns a tuple of "
                    f"{len(body.fields)} fields"
                )
            target = body.fields[index]
        elif index != 0:
            raise self.fail(
                f"target_index {index} needs {self.name} to return a tuple, but it returns "
                f"{format_struct_info(body.struct_info_)}"
            )
        else:
            target = body
        sinfo = target.struct_info_
        scalar = isinstance(sinfo, TensorStructInfo) and sinfo.ndim == 0 and is_float(sinfo.dtype)
        if not isinstance(target, Var) or not scalar:
            label = target.name_hint if isinstance(target, Var) else type(target).__name__
            raise self.fail(
                f"the target {label} of {self.name} is {format_struct_info(sinfo)}, but it must "
                'be a 0-d float tensor such as R.Tensor((), "float32") (reduce a loss with '
                "R.sum or R.mean)"
            )
        return target

    def _required(self, require_grads: Var | Sequence[Var] | None) -> list[Var]:
        if require_grads is None:
            return list(self.func.params)
        wanted = [require_grads] if isinstance(require_grads, Var) else list(require_grads)
        known = set(self.func.params) | {b.var for b in self.block.bindings}
        seen: set[Var] = set()
        for var in wanted:
            label = var.name_hint if isinstance(var, Var) else repr(var)
            if var not in known:
                raise self.fail(
                    f"require_grads lists {label}, which is neither a parameter of "
                    f"{self.name} nor a variable bound in it"
                )
            if var in seen:
                raise self.fail(f"require_grads lists {label} twice")
            seen.add(var)
        return wanted

    def _check_rules(self) -> None:
        """Every call the target depends on needs a gradient rule; all missing ones at once."""
        needed = {self.target}
        for binding in reversed(self.block.bindings):
            if binding.var in needed:
                needed.update(used_vars(binding.value))  # type: ignore[attr-defined]
        missing = []
        for binding in self.block.bindings:
            value = binding.value  # type: ignore[attr-defined]
            if binding.var in needed and isinstance(value, Call) and not _has_rule(value):
                missing.append(f"{op_name(value)} (at {binding.var.name_hint})")
        if missing:
            raise self.fail(
                f"the target {self.target.name_hint} of {self.name} depends on calls without "
                f"a gradient rule: {', '.join(missing)}; register one with "
                "relax.op._op_gradient.register_gradient"
            )

    # ------------------------------------------------------------------ building
    def build(self) -> Function:
        func, bb = self.func, self.bb
        params = [self.copier.param(p) for p in func.params]
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"}
        private = "global_symbol" not in func.attrs
        adjoint_name = f"{self.name}_adjoint"
        with bb.function(adjoint_name, params, attrs, pure=func.is_pure, private=private):
            with bb.dataflow():
                forward = self._copy_forward()
                self._backward(forward)
                grads = [self._output(var) for var in self.required]
            result = self.copier.value(func.body.body)  # type: ignore[attr-defined]
            bb.emit_func_output(Tuple([result, Tuple(grads)]))
        # Forward bindings the result does not read go, as in TVM (so do zeros never added).
        return remove_all_unused(bb.get()[adjoint_name])

    def _copy_forward(self) -> list[Var]:
        return [
            self.copier.copy(self.bb, b, output=not isinstance(b.var, DataflowVar))
            for b in self.block.bindings
        ]

    def _backward(self, forward: list[Var]) -> None:
        target = self.remap[self.target]
        dtype = target.struct_info_.dtype  # type: ignore[union-attr]
        self.adjoints[target] = self.bb.emit(
            relax_op.ones(ShapeExpr([]), dtype), f"{target.name_hint}_adjoint"
        )
        for var in reversed(forward):
            grad = self.adjoints.get(var)
            if grad is None:
                continue
            for arg, partial in self._partials(var, self.bb.lookup_binding(var), grad):
                self._accumulate(arg, partial)

    def _partials(self, var: Var, value: Expr | None, grad: Expr) -> Iterator[tuple[Var, Expr]]:
        """(argument, its partial adjoint) for each variable ``var``'s value reads."""
        if isinstance(value, Var):  # an alias or a match_cast passes the adjoint on
            yield value, grad
        elif isinstance(value, Tuple):
            for index, field in enumerate(value.fields):
                if isinstance(field, Var):
                    yield field, self._field(grad, index)
        elif isinstance(value, TupleGetItem) and isinstance(value.tuple_value, Var):
            fields = value.tuple_value.struct_info_.fields  # type: ignore[union-attr]
            yield (
                value.tuple_value,
                Tuple([grad if i == value.index else _zeros(f) for i, f in enumerate(fields)]),
            )
        elif isinstance(value, Call):
            rule = gradient_rule(value.op.name)  # type: ignore[union-attr]
            try:
                partials = rule(var, value, grad)  # type: ignore[misc]
            except TransformError as error:
                raise self.fail(f"at {var.name_hint} = {value.op.name}(...): {error}") from None
            for arg, partial in zip(value.args, partials):
                if partial is None:
                    continue
                if isinstance(arg, Var):
                    yield arg, partial
                elif isinstance(arg, Tuple):  # concat((a, b)): the partial is a tuple too
                    parts = self.bb.emit(partial)
                    for index, field in enumerate(arg.fields):
                        if isinstance(field, Var):
                            yield field, self._field(parts, index)

    def _field(self, grad: Expr, index: int) -> Expr:
        """Field ``index`` of a tuple adjoint, read from its literal when it is one."""
        literal = self.bb.lookup_binding(grad) if isinstance(grad, Var) else grad
        if isinstance(literal, Tuple):
            return literal.fields[index]
        return TupleGetItem(grad, index)

    def _accumulate(self, arg: Var, partial: Expr) -> None:
        partial = _collapse_to(self.bb.normalize(partial), arg.struct_info_)
        name = f"{arg.name_hint}_adjoint"
        previous = self.adjoints.get(arg)
        if previous is None:
            self.adjoints[arg] = self.bb.emit(partial, name)
            return
        if not isinstance(partial, (Var, Tuple)):  # a tuple literal is added field by field
            partial = self.bb.emit(partial)
        self.adjoints[arg] = self.bb.emit(self._add(previous, partial), name)

    def _add(self, a: Expr, b: Expr) -> Expr:
        if isinstance(a.struct_info_, TupleStructInfo):
            fields = range(len(a.struct_info_.fields))
            return Tuple(
                [self.bb.emit(self._add(self._field(a, i), self._field(b, i))) for i in fields]
            )
        return relax_op.add(a, b)

    def _output(self, var: Var) -> Var:
        new = self.remap[var]
        adjoint = self.adjoints.get(new)
        if adjoint is None:  # the target does not depend on it
            adjoint = self.bb.emit(_zeros(new.struct_info_), f"{var.name_hint}_adjoint")
        return self.bb.emit_output(adjoint, f"{var.name_hint}_adjoint_out")


def _has_rule(call: Call) -> bool:
    return isinstance(call.op, Op) and gradient_rule(call.op.name) is not None


def _zeros(sinfo: StructInfo | None) -> Expr:
    """Zeros of a tensor's (or a tuple of tensors') struct info."""
    if isinstance(sinfo, TupleStructInfo):
        return Tuple([_zeros(f) for f in sinfo.fields])
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape_values is not None:
        return relax_op.zeros(ShapeExpr(list(sinfo.shape_values)), sinfo.dtype)
    raise TransformError(
        f"Gradient: cannot make a zero adjoint for {format_struct_info(sinfo)}, whose shape "
        "is unknown"
    )


def _collapse_to(partial: Expr, sinfo: StructInfo | None) -> Expr:
    """``partial`` summed back to ``sinfo``'s shape when broadcasting made it bigger."""
    have = partial.struct_info_
    if not isinstance(have, TensorStructInfo) or not isinstance(sinfo, TensorStructInfo):
        return partial
    want_shape, have_shape = sinfo.shape_values, have.shape_values
    if want_shape is None or have_shape is None:
        return partial
    same = len(want_shape) == len(have_shape) and all(
        dims_equal(a, b) for a, b in zip(want_shape, have_shape)
    )
    if same:
        return partial
    return relax_op.collapse_sum_to(partial, ShapeExpr(list(want_shape)))


__all__ = ["Gradient"]
