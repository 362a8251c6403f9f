"""``relax.BlockBuilder``: build relax functions binding by binding, as in TVM.

    bb = relax.BlockBuilder()
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 784), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(relax.op.matmul(x, w0))
            gv = bb.emit_output(relax.op.nn.relu(lv0))
        bb.emit_func_output(gv)
    mod = bb.get()

Every emitted expression is normalized first, so each new variable carries the inferred
struct info (and a shape error surfaces at the line that caused it). Names are unique per
builder: ``lv``, ``lv1``, ``lv2``, ... for ``emit``, ``gv``, ``gv1``, ... for outputs.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlckit import te
from mlckit.errors import MLCError, StructInfoError, warn_old_spelling
from mlckit.ir.module import BaseFunc, GlobalVar, IRModule
from mlckit.ir.name_supply import sanitize
from mlckit.ir.node import set_cached
from mlckit.ir.structural import structural_equal
from mlckit.tir import expr as tir_expr
from mlckit.tir.analysis import collect_vars
from mlckit.tir.stmt_functor import substitute

from .analysis.struct_info_analysis import (
    definable_tir_vars_in_struct_info,
    erase_to_well_defined,
)
from .expr import (
    Binding,
    BindingBlock,
    Call,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    Tuple,
    Var,
    VarBinding,
    convert_to_expr,
)
from .normalize import Normalizer
from .op.base import call_tir
from .struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
)
from .utils import format_struct_info


@dataclass
class _BlockFrame:
    is_dataflow: bool
    bindings: list[Binding] = field(default_factory=list)


@dataclass
class _FunctionFrame:
    name: str
    params: list[Var] | None
    attrs: dict[str, Any]
    private: bool
    pure: bool
    blocks: list[BindingBlock] = field(default_factory=list)
    gvar: GlobalVar | None = None


class BlockBuilder:
    """Builds relax functions into an IRModule (``BlockBuilder(mod)`` extends ``mod``)."""

    _current: ClassVar[list[BlockBuilder]] = []

    def __init__(self, mod: IRModule | None = None):
        self._mod = mod.copy() if mod is not None else IRModule()
        self._used_names: set[str] = set()
        self._next_suffix: dict[str, int] = {}
        self._blocks: list[_BlockFrame] = []
        self._func: _FunctionFrame | None = None
        self._values: dict[Var, Expr] = {}

    @staticmethod
    def current() -> BlockBuilder | None:
        """The builder whose ``with bb.function(...)`` scope is open, if any."""
        return BlockBuilder._current[-1] if BlockBuilder._current else None

    @property
    def context_mod(self) -> IRModule:
        """The module being built (not a copy); op inference reads it to check call_tir."""
        return self._mod

    # ------------------------------------------------------------------ scopes
    def function(
        self,
        name: str,
        params: Var | Sequence[Var] | None = None,
        attrs: dict[str, Any] | None = None,
        pure: bool = True,
        private: bool = False,
    ) -> _FunctionScope:
        """``with bb.function("main", [x, w]):`` opens a function; end it with
        ``bb.emit_func_output(result)``. Public functions get ``global_symbol = name``."""
        if self._func is not None:
            raise MLCError(
                f"bb.function({name!r}) inside bb.function({self._func.name!r}): "
                "functions cannot be nested; build them one after the other"
            )
        if name in self._mod:
            raise MLCError(f"the module already has a function named {name!r}")
        param_list = None if params is None else self._check_params(name, params)
        return _FunctionScope(
            self, _FunctionFrame(name, param_list, dict(attrs or {}), private, pure)
        )

    def _check_params(self, name: str, params: Var | Sequence[Var]) -> list[Var]:
        items = [params] if isinstance(params, Var) else list(params)
        for p in items:
            if not isinstance(p, Var):
                raise MLCError(
                    f"the parameters of function {name!r} must be relax.Var, got {type(p).__name__}"
                )
            if p.struct_info_ is None:
                raise MLCError(
                    f"parameter {p.name_hint!r} of function {name!r} has no struct "
                    "info: relax.Var(name, relax.TensorStructInfo(shape, dtype))"
                )
            self._used_names.add(p.name_hint)
        return items

    def dataflow(self) -> _DataflowScope:
        """``with bb.dataflow():`` groups pure bindings; results leave via ``emit_output``."""
        if self._func is None or not self._blocks:
            raise MLCError("bb.dataflow() must be used inside `with bb.function(...)`")
        if self._blocks[-1].is_dataflow:
            raise MLCError("bb.dataflow() cannot be nested in another dataflow block")
        return _DataflowScope(self)

    def begin_dataflow_block(self) -> None:
        self._blocks.append(_BlockFrame(is_dataflow=True))

    def begin_binding_block(self) -> None:
        self._blocks.append(_BlockFrame(is_dataflow=False))

    def end_block(self) -> BindingBlock:
        """Close the innermost block and return it (a DataflowBlock or a BindingBlock)."""
        if not self._blocks:
            raise MLCError("bb.end_block(): no block is open")
        frame = self._blocks.pop()
        cls = DataflowBlock if frame.is_dataflow else BindingBlock
        return cls(frame.bindings)

    def current_block_is_dataflow(self) -> bool:
        return bool(self._blocks) and self._blocks[-1].is_dataflow

    def _close_block_into_function(self) -> None:
        block = self.end_block()
        if block.bindings and self._func is not None:
            self._func.blocks.append(block)

    # ------------------------------------------------------------------ emitting
    def normalize(self, expr: Any) -> Expr:
        """``expr`` with struct info; inside a block, nested calls are bound to new variables
        first (``relu(matmul(x, w))`` emits ``lv = matmul(x, w)``)."""
        emit = self._emit_nested if self._blocks else None
        return Normalizer(self, emit).visit_expr(convert_to_expr(expr))

    def _emit_nested(self, expr: Expr) -> Var:
        return self._bind(expr, "")

    def emit(self, expr: Any, name_hint: str = "") -> Var:
        """Normalize ``expr`` and bind it to a new variable (a DataflowVar in a dataflow block)."""
        self._require_block("emit")
        return self._bind(self.normalize(expr), name_hint)

    def emit_output(self, output: Any, name_hint: str = "") -> Var:
        """Bind a dataflow block's result to a variable visible after the block."""
        if not self.current_block_is_dataflow():
            raise MLCError(
                "bb.emit_output(...) is only for results of a dataflow block "
                "(inside `with bb.dataflow():`); elsewhere use bb.emit(...)"
            )
        value = self.normalize(output)
        var = Var(self._unique_name(name_hint or "gv"), value.struct_info_)
        self._append(VarBinding(var, value), var, value)
        return var

    def emit_match_cast(self, value: Any, struct_info: StructInfo, name_hint: str = "") -> Var:
        """Bind ``value`` to a new variable of ``struct_info``, checked at run time; new symbolic
        dims in ``struct_info`` (``R.Tensor((m, 4))``) become defined from here on."""
        self._require_block("emit_match_cast")
        if not isinstance(struct_info, StructInfo):
            raise MLCError(
                "bb.emit_match_cast(value, struct_info): struct_info must be a "
                f'StructInfo such as R.Tensor((m, 4), "float32"), got '
                f"{type(struct_info).__name__}"
            )
        value = self.normalize(value)
        _check_match_cast(value.struct_info_, struct_info)
        var_cls = DataflowVar if self.current_block_is_dataflow() else Var
        var = var_cls(self._unique_name(name_hint or "lv"), struct_info)
        self._append(MatchCast(var, value, struct_info), var, value)
        return var

    def emit_normalized(self, binding: Binding) -> None:
        """Append an already normalized binding as it is."""
        self._require_block("emit_normalized")
        self._append(binding, binding.var, binding.value)  # type: ignore[attr-defined]

    def emit_func_output(self, output: Any, params: Var | Sequence[Var] | None = None) -> GlobalVar:
        """Finish the open function with ``output`` as its result; returns its GlobalVar."""
        frame = self._func
        if frame is None:
            raise MLCError("bb.emit_func_output(...) must be called inside `with bb.function(...)`")
        if frame.gvar is not None:
            raise MLCError(f"function {frame.name!r} already has its output")
        if self.current_block_is_dataflow():
            raise MLCError(
                "bb.emit_func_output(...) must be called after the dataflow block, "
                "outside `with bb.dataflow():` (return a variable from "
                "bb.emit_output)"
            )
        if params is not None:
            if frame.params is not None:
                raise MLCError(
                    f"the parameters of function {frame.name!r} were already given "
                    "to bb.function(...)"
                )
            frame.params = self._check_params(frame.name, params)
        if frame.params is None:
            raise MLCError(
                f"function {frame.name!r} has no parameter list: pass it to "
                "bb.function(name, params) or bb.emit_func_output(output, params)"
            )
        if isinstance(output, (list, tuple)):
            output = Tuple(list(output))
        output = self.normalize(output)
        if isinstance(output, Tuple):
            fields = []
            for item in output.fields:
                fields.append(self._visible_output(frame, item))
            if fields != list(output.fields):
                output = self.normalize(Tuple(fields))
        else:
            output = self._visible_output(frame, output)
        self._close_block_into_function()
        attrs = dict(frame.attrs)
        if not frame.private:
            attrs.setdefault("global_symbol", frame.name)
        body = SeqExpr(frame.blocks, output)
        # The result may only mention symbolic dims the parameters define (a dim from a
        # match_cast in the body is unknown to callers), as TVM's normalizer ensures.
        param_dims = {
            id(v) for p in frame.params for v in definable_tir_vars_in_struct_info(p.struct_info_)
        }
        ret = erase_to_well_defined(output.struct_info_, lambda v: id(v) in param_dims)
        func = Function(frame.params, body, ret, is_pure=frame.pure, attrs=attrs)
        frame.gvar = GlobalVar(frame.name)
        self._mod.update_func(frame.gvar, func)
        return frame.gvar

    def _visible_output(self, frame: _FunctionFrame, item: Expr) -> Expr:
        """``item`` as a function output: a dataflow variable is not visible after its block,
        unless ``bb.emit_output`` carried it out (``gv = lv``), which early Relax's builder
        accepted for ``lv``; then it is ``gv``."""
        if not isinstance(item, DataflowVar):
            return item
        for block in frame.blocks:
            for binding in block.bindings:
                if binding.value is item and not isinstance(binding.var, DataflowVar):
                    # Four frames up: past this method and emit_func_output, to the user's call.
                    warn_old_spelling(
                        "bb.emit_func_output(lv) for a dataflow variable lv",
                        "bb.emit_func_output(gv), with gv = bb.emit_output(lv)",
                        stacklevel=4,
                    )
                    return binding.var
        raise MLCError(
            f"the output {item.name_hint!r} of function {frame.name!r} is a dataflow "
            "variable, which is not visible outside its dataflow block; bind it with "
            "bb.emit_output(...) inside the block and return that"
        )

    def call_te(
        self,
        func: Callable[..., Any],
        *args: Any,
        primfunc_name_hint: str | None = None,
        **kwargs: Any,
    ) -> Call:
        """``R.call_tir`` of the PrimFunc that the tensor-expression function ``func`` builds.

        Relax tensors among ``args``/``kwargs`` (also inside lists, tuples and dicts) become
        ``te.placeholder``s named after their variables, with fresh copies of their symbolic
        dims; ``func`` (say ``topi.nn.dense``) is called on them and its result lowered with
        ``te.create_prim_func``. The PrimFunc is added under ``primfunc_name_hint`` (default:
        ``func``'s name), an identical one is reused; symbolic values the output needs but
        no input shape defines are passed as ``tir_vars``. ``primfunc_attrs={...}`` adds
        function attributes.
        """
        primfunc_attrs = kwargs.pop("primfunc_attrs", None)
        name = primfunc_name_hint or sanitize(getattr(func, "__name__", "te_func"))
        inputs = _TEInputs()
        result = func(*inputs.convert(args), **inputs.convert(kwargs))
        outs = [result] if isinstance(result, te.Tensor) else result
        if not isinstance(outs, (list, tuple)) or not outs:
            outs = [None]
        for out in outs:
            if not isinstance(out, te.Tensor):
                raise MLCError(
                    f"bb.call_te: {name} must return a te tensor or a list of them, got "
                    f"{type(result).__name__}"
                )
        unbound = inputs.unbound_vars(outs)
        prim_func = te.create_prim_func(
            [*inputs.params, *outs, *unbound], index_dtype_override="int64"
        )
        if primfunc_attrs:
            prim_func = prim_func.with_attr(primfunc_attrs)
        gvar = self.add_func(prim_func, name)
        # Shapes go back to the caller's symbolic variables.
        restore = inputs.restore_map()
        out_sinfo = [
            TensorStructInfo([substitute(d, restore) for d in out.shape], out.dtype) for out in outs
        ]
        tir_vars = [substitute(v, restore) for v in unbound] or None
        return call_tir(gvar, inputs.call_args, out_sinfo, tir_vars)

    def emit_te(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Var:
        """``bb.emit(bb.call_te(func, *args, **kwargs))`` (``name_hint=`` names the variable)."""
        name_hint = kwargs.pop("name_hint", "")
        return self.emit(self.call_te(func, *args, **kwargs), name_hint=name_hint)

    # ------------------------------------------------------------------ the module
    def get(self) -> IRModule:
        """The module built so far (a snapshot: later builds do not change it)."""
        if self._func is not None and self._func.gvar is None:
            raise MLCError(
                f"function {self._func.name!r} is still open; finish it with "
                "bb.emit_func_output(...)"
            )
        return self._mod.copy()

    finalize = get

    def add_func(self, func: BaseFunc, func_name: str) -> GlobalVar:
        """Add ``func`` under a fresh name based on ``func_name``; an identical function
        already in the module is reused instead of added twice."""
        if not isinstance(func, BaseFunc):
            raise MLCError(
                f"bb.add_func expects a relax.Function or tir.PrimFunc, got {type(func).__name__}"
            )
        for gv, existing in self._mod.functions.items():
            if existing is func or structural_equal(existing, func):
                return gv
        # The function being built takes its name when it is finished: keep that one free.
        taken = {self._func.name} if self._func is not None and self._func.gvar is None else set()
        name = func_name
        suffix = 1
        while name in self._mod or name in taken:
            name = f"{func_name}{suffix}"
            suffix += 1
        gvar = GlobalVar(name)
        self._mod.update_func(gvar, func)
        return gvar

    def update_func(self, gv: GlobalVar | str, func: BaseFunc) -> None:
        """Replace (or, as in TVM, add) the function ``gv`` names."""
        if not isinstance(func, BaseFunc):
            raise MLCError(
                f"bb.update_func expects a relax.Function or tir.PrimFunc, got "
                f"{type(func).__name__}"
            )
        self._mod.update_func(gv, func)
        name = gv.name_hint if isinstance(gv, GlobalVar) else gv
        sinfo = getattr(func, "struct_info_", None)
        if sinfo is not None:
            # The GlobalVar caches its function's signature; a new function may change it.
            set_cached(self._mod.get_global_var(name), "struct_info_", sinfo)

    def lookup_binding(self, var: Var) -> Expr | None:
        """The value ``var`` was bound to by this builder, or None."""
        return self._values.get(var)

    # ------------------------------------------------------------------ internals
    def _require_block(self, what: str) -> None:
        if not self._blocks:
            raise MLCError(
                f"bb.{what}(...) must be called inside `with bb.function(...)` "
                "(or after bb.begin_binding_block())"
            )

    def _bind(self, value: Expr, name_hint: str) -> Var:
        var_cls = DataflowVar if self.current_block_is_dataflow() else Var
        var = var_cls(self._unique_name(name_hint or "lv"), value.struct_info_)
        self._append(VarBinding(var, value), var, value)
        return var

    def _append(self, binding: Binding, var: Var, value: Expr) -> None:
        self._blocks[-1].bindings.append(binding)
        self._values[var] = value

    def _unique_name(self, hint: str) -> str:
        name = hint
        if name in self._used_names:
            suffix = self._next_suffix.get(hint, 1)
            while f"{hint}{suffix}" in self._used_names:
                suffix += 1
            name = f"{hint}{suffix}"
            self._next_suffix[hint] = suffix + 1
        self._used_names.add(name)
        return name


class _TEInputs:
    """Turns ``call_te``'s relax arguments into te values, remembering what the PrimFunc's
    parameters and the call's arguments are."""

    def __init__(self) -> None:
        self.params: list[te.Tensor | tir_expr.Var] = []
        self.call_args: list[Expr] = []
        # Each symbolic variable of the caller -> its copy on the PrimFunc side.
        self.copies: dict[tir_expr.Var, tir_expr.Var] = {}
        self.scalars: list[tir_expr.PrimExpr] = []

    def convert(self, value: Any) -> Any:
        if isinstance(value, Expr):
            return self._expr(value)
        if isinstance(value, list):
            return [self.convert(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.convert(v) for v in value)
        if isinstance(value, dict):
            return {k: self.convert(v) for k, v in value.items()}
        if isinstance(value, tir_expr.PrimExpr):
            value = self._copy(value)
            self.scalars.append(value)
            return value
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise MLCError(
            f"bb.call_te cannot pass a {type(value).__name__} to a te function; arguments are "
            "relax expressions, PrimExprs, numbers, strings and lists/tuples/dicts of them"
        )

    def _copy(self, expr: tir_expr.PrimExpr) -> tir_expr.PrimExpr:
        for v in collect_vars(expr):
            if v not in self.copies:
                self.copies[v] = tir_expr.Var(v.name_hint, v.dtype)
        return substitute(expr, self.copies)

    def _expr(self, value: Expr) -> Any:
        if isinstance(value, Tuple):
            return [self.convert(f) for f in value.fields]
        if isinstance(value, PrimValue):
            return self.convert(value.value)
        sinfo = value.struct_info_
        if isinstance(sinfo, TensorStructInfo):
            dims = sinfo.shape_values
            if dims is None or sinfo.dtype == "void":
                raise MLCError(
                    "bb.call_te needs tensors whose shape and dtype are known, got "
                    f"{format_struct_info(sinfo)}"
                )
            n = len(self.params)
            if isinstance(value, Var):
                name = value.name_hint
            elif n < len(string.ascii_uppercase):
                name = string.ascii_uppercase[n]
            else:
                name = f"tensor_input_{n}"
            tensor = te.placeholder([self._copy(d) for d in dims], sinfo.dtype, name)
            self.params.append(tensor)
            self.call_args.append(value)
            return tensor
        if isinstance(sinfo, ShapeStructInfo) and isinstance(value, ShapeExpr):
            return [self.convert(v) for v in value.values]
        if isinstance(sinfo, PrimStructInfo):
            if sinfo.value is not None:
                return self.convert(sinfo.value)
            name = value.name_hint if isinstance(value, Var) else "scalar"
            scalar = tir_expr.Var(name, sinfo.dtype)
            self.params.append(scalar)
            self.call_args.append(value)
            return scalar
        raise MLCError(
            "bb.call_te passes relax tensors, shapes (R.shape) and scalars (R.Prim) to te "
            f"functions, got a value of {format_struct_info(sinfo) if sinfo else 'unknown type'}"
        )

    def unbound_vars(self, outs: Sequence[te.Tensor]) -> list[tir_expr.Var]:
        """Symbolic variables used in shapes or scalar arguments that no tensor dimension
        (or scalar parameter) defines: the PrimFunc takes them as extra parameters."""
        tensors = [p for p in self.params if isinstance(p, te.Tensor)] + list(outs)
        bound = {id(p) for p in self.params if isinstance(p, tir_expr.Var)}
        bound |= {id(d) for t in tensors for d in t.shape if isinstance(d, tir_expr.Var)}
        used: dict[int, tir_expr.Var] = {}
        for expr in [*(d for t in tensors for d in t.shape), *self.scalars]:
            for v in collect_vars(expr):
                used.setdefault(id(v), v)
        return [v for key, v in used.items() if key not in bound]

    def restore_map(self) -> dict[tir_expr.Var, tir_expr.Var]:
        return {copy: original for original, copy in self.copies.items()}


def _check_match_cast(value: StructInfo | None, target: StructInfo) -> None:
    """Reject casts that can never succeed (a different kind, dtype or rank)."""
    if value is None or isinstance(value, ObjectStructInfo):
        return
    why = None
    if type(value) is not type(target):
        why = "they are different kinds of value"
    elif isinstance(value, TensorStructInfo) and isinstance(target, TensorStructInfo):
        if "void" not in (value.dtype, target.dtype) and value.dtype != target.dtype:
            why = f"dtype {value.dtype} vs {target.dtype}"
        elif value.ndim >= 0 and target.ndim >= 0 and value.ndim != target.ndim:
            why = f"{value.ndim} vs {target.ndim} dimensions"
    if why is not None:
        raise StructInfoError(
            f"relax.match_cast: a value of {format_struct_info(value)} can "
            f"never match {format_struct_info(target)} ({why})"
        )


class _FunctionScope:
    def __init__(self, builder: BlockBuilder, frame: _FunctionFrame):
        self.builder = builder
        self.frame = frame

    def __enter__(self) -> _FunctionScope:
        bb = self.builder
        bb._func = self.frame
        bb.begin_binding_block()
        BlockBuilder._current.append(bb)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        bb = self.builder
        BlockBuilder._current.remove(bb)
        finished = self.frame.gvar is not None
        if not finished:
            bb._blocks.clear()
        bb._func = None
        if exc_type is None and not finished:
            raise MLCError(
                f"function {self.frame.name!r} has no output: call "
                "bb.emit_func_output(result) before leaving `with bb.function(...)`"
            )


class _DataflowScope:
    def __init__(self, builder: BlockBuilder):
        self.builder = builder

    def __enter__(self) -> _DataflowScope:
        bb = self.builder
        bb._close_block_into_function()
        bb.begin_dataflow_block()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        bb = self.builder
        if exc_type is not None:
            return
        bb._close_block_into_function()
        bb.begin_binding_block()


__all__ = ["BlockBuilder"]
