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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from mlckit.errors import MLCError, StructInfoError
from mlckit.ir.module import BaseFunc, GlobalVar, IRModule
from mlckit.ir.node import set_cached
from mlckit.ir.structural import structural_equal

from .analysis.struct_info_analysis import (
    definable_tir_vars_in_struct_info,
    erase_to_well_defined,
)
from .expr import (
    Binding,
    BindingBlock,
    DataflowBlock,
    DataflowVar,
    Expr,
    Function,
    MatchCast,
    SeqExpr,
    Tuple,
    Var,
    VarBinding,
    convert_to_expr,
)
from .normalize import Normalizer
from .struct_info import ObjectStructInfo, StructInfo, TensorStructInfo
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
        for item in output.fields if isinstance(output, Tuple) else (output,):
            if isinstance(item, DataflowVar):
                raise MLCError(
                    f"the output {item.name_hint!r} of function {frame.name!r} is a dataflow "
                    "variable, which is not visible outside its dataflow block; bind it with "
                    "bb.emit_output(...) inside the block and return that"
                )
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
        name = func_name
        suffix = 1
        while name in self._mod:
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
