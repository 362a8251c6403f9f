"""The TensorIR dialect: a ``@T.prim_func`` definition becomes a ``tir.PrimFunc``.

Statements build TensorIR statements in source order. Some statements instead describe the
enclosing block or function (``T.axis.remap``, ``T.reads``, ``T.func_attr``, ...); they update
a frame that is turned into a ``Block`` (or the ``PrimFunc``) when it ends.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MethodType
from typing import Any

import numpy as np

from mlckit.arith import simplify
from mlckit.errors import MLCError
from mlckit.ir.dtype import is_int
from mlckit.ir.node import Span
from mlckit.script import tir as T
from mlckit.tir.analysis import collect_vars, get_block_read_write_region
from mlckit.tir.buffer import Buffer, BufferRegion, MatchBufferRegion
from mlckit.tir.expr import (
    BufferLoad,
    Cast,
    IntImm,
    IterVar,
    IterVarType,
    PrimExpr,
    Range,
    Var,
    convert,
    make_const,
)
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt import (
    AssertStmt,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

from .core import MISSING, Environment, Parser, is_docstring, single_target
from .diagnostics import Source
from .dialects import Dialect, register_dialect
from .evaluator import binary
from .markers import DType, ScriptStatement

_LOOP_KINDS = {
    T.serial: ForKind.SERIAL,
    T.parallel: ForKind.PARALLEL,
    T.vectorized: ForKind.VECTORIZED,
    T.unroll: ForKind.UNROLLED,
    T.thread_binding: ForKind.THREAD_BINDING,
}
_AXIS_KINDS = {
    T.axis.spatial: IterVarType.DataPar,
    T.axis.reduce: IterVarType.CommReduce,
    T.axis.scan: IterVarType.Ordered,
    T.axis.opaque: IterVarType.Opaque,
}
_REMAP_KINDS = {"S": IterVarType.DataPar, "R": IterVarType.CommReduce}
# The methods of a buffer a script may call.
_BUFFER_METHODS = frozenset({"access_ptr"})


@dataclass
class _BlockFrame:
    """What the statements of a ``with T.block(name):`` body say about the block."""

    name: str
    iter_vars: list[IterVar] = field(default_factory=list)
    iter_values: list[PrimExpr] = field(default_factory=list)
    predicate: PrimExpr | None = None
    reads: list[BufferRegion] | None = None
    writes: list[BufferRegion] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    alloc_buffers: list[Buffer] = field(default_factory=list)
    match_buffers: list[MatchBufferRegion] = field(default_factory=list)
    init: Stmt | None = None


@dataclass
class _Loop:
    min: PrimExpr
    extent: PrimExpr


@dataclass
class _Let:
    """An assignment of a scalar: the rest of the statement list is the LetStmt's body."""

    var: Var
    value: PrimExpr


@dataclass
class _Assert:
    """``assert cond, "message"``: the rest of the statement list is the AssertStmt's body."""

    condition: PrimExpr
    message: str


def parse_prim_func(
    source: Source,
    node: ast.FunctionDef,
    env: Environment,
    options: dict[str, Any],
    base: dict[str, Any] | None = None,
) -> PrimFunc:
    return TIRParser(source, env, base).parse(node, options)


register_dialect(
    Dialect("T", T, T.prim_func, parse_prim_func, ("mlckit.script.tir", "mlckit.script.tirx"))
)


def _seq(stmts: list[Stmt]) -> Stmt:
    return SeqStmt.flatten(stmts) if stmts else Evaluate(0)


def _with_dtype(value: Any, dtype: str) -> PrimExpr:
    """``value`` as an expression of ``dtype`` (constants are re-typed, others cast)."""
    if isinstance(value, IntImm) or (isinstance(value, int) and not isinstance(value, bool)):
        return make_const(int(value), dtype)
    value = convert(value)
    return value if value.dtype == dtype else Cast(dtype, value)


def _simplified(rng: Range) -> Range:
    """``rng`` with its extent simplified, as the script's ranges read: ``range(1, n + 1)``
    runs ``n`` times."""
    return Range.from_min_extent(rng.min, simplify(rng.extent))


def _region(value: Any) -> list[BufferRegion]:
    """The regions a ``T.reads``/``T.writes`` argument stands for."""
    if isinstance(value, BufferRegion):
        regions = [value]
    elif isinstance(value, BufferLoad):
        regions = [BufferRegion.from_indices(value.buffer, value.indices)]
    elif isinstance(value, Buffer):
        regions = [BufferRegion.full_region(value)]
    elif isinstance(value, (list, tuple)):
        return [region for item in value for region in _region(item)]
    else:
        raise MLCError(f"expected a buffer region such as A[vi, 0:K], got {type(value).__name__}")
    for rng in regions[0].region:
        for bound in (rng.min, rng.extent):
            if not is_int(bound.dtype):
                raise MLCError(
                    f"the bounds of a region of {regions[0].buffer.name} are integers, "
                    f"got {bound.dtype}"
                )
    return regions


def _renamed(buffer: Buffer, name: str) -> Buffer:
    """A parameter's buffer declared by ``T.Buffer(...)``, under the parameter's name."""
    return Buffer(
        None,
        buffer.dtype,
        buffer.shape,
        buffer.strides,
        buffer.elem_offset,
        name,
        buffer.scope,
        buffer.offset_factor,
    )


class TIRParser(Parser):
    dialect = "T.prim_func"

    def __init__(self, source: Source, env: Environment, base: dict[str, Any] | None = None):
        super().__init__(source, env, base)
        self.params: list[Var] = []
        self.buffer_map: dict[Var, Buffer] = {}
        self.attrs: dict[str, Any] = {}
        self.root_allocs: list[Buffer] = []
        # The buffers the function declares (by id): its parameters', allocated and matched.
        self.declared: set[int] = set()
        # How many blocks enclose the definition of each loop, let and iterator variable.
        self.defined_at: dict[int, int] = {}
        # The variables defined for the whole function (by id): parameters, symbolic ones.
        self.function_vars: set[int] = set()
        self.blocks: list[_BlockFrame] = []
        self.loops: dict[int, _Loop] = {}
        self.finished_loop_vars: set[str] = set()
        # What each named TensorIR object is, by id, for "cannot assign to ..." messages.
        self.roles: dict[int, str] = {}
        self.has_block = False
        # True while evaluating what binds a block to its loops (T.axis, T.where).
        self.binding_context = False
        self.with_statements: dict[ScriptStatement, Callable[..., Any]] = {
            T.block: self.parse_block,
            T.init: self.parse_init,
        }
        self.expr_statements: dict[ScriptStatement, Callable[..., Any]] = {
            T.where: self.stmt_where,
            T.reads: self.stmt_reads,
            T.writes: self.stmt_writes,
            T.block_attr: self.stmt_block_attr,
            T.func_attr: self.stmt_func_attr,
        }
        self.assign_statements: dict[ScriptStatement, Callable[..., Any]] = {
            T.match_buffer: self.assign_match_buffer,
            T.alloc_buffer: self.assign_alloc_buffer,
            T.axis.remap: self.assign_remap,
            **{marker: self.assign_axis for marker in _AXIS_KINDS},
        }

    # ------------------------------------------------------------------ function
    def parse(self, node: ast.FunctionDef, options: dict[str, Any]) -> PrimFunc:
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error(
                node,
                "a T.prim_func takes plain parameters (no defaults, *args, "
                "keyword-only or positional-only parameters)",
            )
        for arg in args.args:
            self.add_param(arg)
        if node.returns is not None and not (
            isinstance(node.returns, ast.Constant) and node.returns.value is None
        ):
            raise self.error(
                node.returns,
                "a T.prim_func returns nothing: write `-> None` or leave out the return annotation",
            )
        with self.vars.frame():
            body = _seq(self.parse_stmts(node.body))
        if self._is_root_block(body):
            # A root block written out is the implicit one: it reads and writes nothing.
            body = body.with_fields(block=body.block.with_fields(reads=(), writes=()))
        elif self.has_block or self.root_allocs:
            root = Block([], [], [], "root", body, None, self.root_allocs)
            body = BlockRealize([], True, root)
        if not options.get("private", False):
            self.attrs.setdefault("global_symbol", node.name)
        span = Span(self.source.filename, node.lineno, node.col_offset)
        return PrimFunc(self.params, body, None, self.buffer_map, self.attrs, span=span)

    def _is_root_block(self, body: Stmt) -> bool:
        # A script that writes the root block itself (`with T.block("root"):`) keeps it.
        return (
            not self.root_allocs
            and isinstance(body, BlockRealize)
            and body.block.name_hint == "root"
            and not body.block.iter_vars
        )

    def add_param(self, arg: ast.arg) -> None:
        name = arg.arg
        if arg.annotation is None:
            raise self.error(
                arg,
                f"parameter {name!r} needs a type: `{name}: T.handle`, "
                f'`{name}: T.Buffer((128,), "float32")` or `{name}: T.int32`',
            )
        annotation = self.eval(arg.annotation)
        if isinstance(annotation, DType):
            var = Var(name, annotation.dtype)
            self.vars.add(name, var)
        elif isinstance(annotation, Buffer):
            var = Var(name, "handle")
            buffer = _renamed(annotation, name)
            self.buffer_map[var] = buffer
            self.declared.add(id(buffer))
            self.vars.add(name, buffer)
            self.roles[id(buffer)] = "a function parameter"
        else:
            raise self.error(
                arg.annotation,
                "a T.prim_func parameter's type is T.handle, "
                "T.Buffer(shape, dtype) or a scalar type such as "
                f"T.int32, not {ast.unparse(arg.annotation)}",
            )
        self.roles[id(var)] = "a function parameter"
        self.params.append(var)
        self.function_vars.add(id(var))

    # ------------------------------------------------------------------ names
    def attribute(self, owner: Any, node: ast.Attribute) -> Any:
        # A buffer's methods that build expressions (A.access_ptr("r")) are part of the
        # dialect, in TVMScript text too.
        if isinstance(owner, Buffer) and node.attr in _BUFFER_METHODS:
            return getattr(owner, node.attr)
        return super().attribute(owner, node)

    def call_value(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        if (
            isinstance(func, MethodType)
            and isinstance(func.__self__, Buffer)
            and func.__name__ in _BUFFER_METHODS
        ):
            self.check_declared(func.__self__)
            return func(*args, **kwargs)
        return super().call_value(node, func, args, kwargs)

    def lookup(self, name: str, node: ast.AST) -> Any:
        value = super().lookup(name, node)
        if isinstance(value, Var) and not self.binding_context:
            depth = self.defined_at.get(id(value), len(self.blocks))
            if id(value) in self.loops and depth < len(self.blocks):
                inner = self.blocks[depth:]
                if any(frame.iter_vars for frame in inner):
                    raise self.error(
                        node,
                        (
                            f"loop variable {name!r} is used directly inside block "
                            f"{inner[-1].name!r}; bind it to a block iterator with T.axis.remap "
                            f"or T.axis.spatial/reduce and use that instead"
                        ),
                    )
        return value

    def undefined_name(self, name: str, node: ast.AST) -> Any:
        if name in self.finished_loop_vars:
            raise self.error(node, f"loop variable {name!r} is used outside its loop")
        return super().undefined_name(name, node)

    # ------------------------------------------------------------------ statement lists
    def parse_stmts(self, stmts: list[ast.stmt]) -> list[Stmt]:
        out: list[Stmt] = []
        for index, stmt in enumerate(stmts):
            result = self.visit_stmt(stmt)
            if isinstance(result, _Let):
                self.defined_at[id(result.var)] = len(self.blocks)
                with self.vars.frame():
                    self.vars.add(result.var.name_hint, result.var)
                    rest = self.parse_stmts(stmts[index + 1 :])
                out.append(LetStmt(result.var, result.value, _seq(rest)))
                break
            if isinstance(result, _Assert):
                rest = self.parse_stmts(stmts[index + 1 :])
                out.append(AssertStmt(result.condition, result.message, _seq(rest)))
                break
            if isinstance(result, Stmt):
                out.append(result)
        return out

    def visit_Pass(self, node: ast.Pass) -> None:
        return None

    def visit_Assert(self, node: ast.Assert) -> _Assert:
        condition = self.eval(node.test)
        with self.guard(node.test):
            condition = convert(condition)
            if condition.dtype != "bool":
                raise MLCError(f"an assert condition must be boolean, got dtype {condition.dtype}")
        message = "" if node.msg is None else self.eval(node.msg)
        if not isinstance(message, str):
            raise self.error(node.msg, "the message of an assert is a string literal")
        return _Assert(condition, message)

    def visit_Return(self, node: ast.Return) -> None:
        raise self.error(
            node, "a T.prim_func does not return a value; write results into an output buffer"
        )

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        raise self.error(node, "functions cannot be defined inside a T.prim_func")

    # ------------------------------------------------------------------ expression statements
    def visit_Expr(self, node: ast.Expr) -> Stmt | None:
        if is_docstring(node):
            return None
        func = self.callee(node.value)
        if isinstance(func, ScriptStatement):
            handler = self.expr_statements.get(func)
            if handler is None:
                raise self.wrong_statement(node, func)
            handler(node.value, func)
            return None
        value = self.eval(node.value) if func is MISSING else self.finish_call(node.value, func)
        if isinstance(value, Stmt):
            return value
        if isinstance(value, PrimExpr):
            return Evaluate(value)
        raise self.error(
            node,
            "this expression statement has no effect in TensorIR; "
            "statements are stores (A[i] = ...), loops, blocks and T.* calls",
        )

    def current_block(self, node: ast.AST, builder: ScriptStatement) -> _BlockFrame:
        if not self.blocks:
            raise self.error(node, f"{builder.name} can only be used inside a `with T.block(...)`")
        return self.blocks[-1]

    def stmt_where(self, node: ast.Call, marker: ScriptStatement) -> None:
        frame = self.current_block(node, marker)
        predicate = self._bind_iterators(node, marker)["predicate"]
        with self.guard(node):
            predicate = convert(predicate)
            if predicate.dtype != "bool":
                raise MLCError(f"T.where needs a boolean condition, got dtype {predicate.dtype}")
            frame.predicate = predicate

    def stmt_reads(self, node: ast.Call, marker: ScriptStatement) -> None:
        frame = self.current_block(node, marker)
        regions = self.bind_statement(node, marker)["regions"]
        with self.guard(node):
            frame.reads = self.declared_regions(regions)

    def stmt_writes(self, node: ast.Call, marker: ScriptStatement) -> None:
        frame = self.current_block(node, marker)
        regions = self.bind_statement(node, marker)["regions"]
        with self.guard(node):
            frame.writes = self.declared_regions(regions)

    def stmt_block_attr(self, node: ast.Call, marker: ScriptStatement) -> None:
        frame = self.current_block(node, marker)
        frame.annotations.update(self._attr_dict(node, marker))

    def stmt_func_attr(self, node: ast.Call, marker: ScriptStatement) -> None:
        for key, value in self._attr_dict(node, marker).items():
            # TVM's newer dialect spells the namespace "tirx".
            self.attrs["tir." + key[5:] if key.startswith("tirx.") else key] = value

    def _attr_dict(self, node: ast.Call, marker: ScriptStatement) -> dict[str, Any]:
        return self.attributes(node, marker.name, self.bind_statement(node, marker)["attrs"])

    # ------------------------------------------------------------------ assignments
    def visit_Assign(self, node: ast.Assign) -> _Let | Stmt | None:
        target = single_target(self, node)
        declared = self.symbolic_declarations(target, node.value)
        if declared is not None:
            for name_node, var in declared:
                self.check_assignable(name_node)
                self.vars.add(name_node.id, var)
                self.function_vars.add(id(var))
            return None
        func = self.callee(node.value)
        if isinstance(func, ScriptStatement):
            handler = self.assign_statements.get(func)
            if handler is None:
                raise self.wrong_statement(node, func)
            handler(node, target, func)
            return None
        value = self.eval(node.value) if func is MISSING else self.finish_call(node.value, func)
        return self.bind_value(target, value, node)

    def check_assignable(self, name_node: ast.Name) -> None:
        existing = self.vars.get(name_node.id)
        role = self.roles.get(id(existing)) if existing is not MISSING else None
        if role is not None:
            raise self.error(
                name_node,
                f"cannot assign to {name_node.id!r}: it is {role}; "
                "TensorIR variables cannot be reassigned",
            )

    def target_name(self, target: ast.expr, what: str) -> str:
        if not isinstance(target, ast.Name):
            raise self.error(target, f"{what} is assigned to a single name")
        self.check_assignable(target)
        return target.id

    def bind_value(self, target: ast.expr, value: Any, node: ast.stmt) -> _Let | Stmt | None:
        if isinstance(target, ast.Subscript):
            return self.store(target, value, node)
        if isinstance(target, ast.Tuple):
            values = list(value) if isinstance(value, (tuple, list)) else None
            if values is None or len(values) != len(target.elts):
                raise self.error(node, f"cannot unpack this value into {len(target.elts)} names")
            if any(isinstance(v, PrimExpr) for v in values):
                raise self.error(
                    node,
                    "assign TensorIR expressions one name at a time (each becomes a let binding)",
                )
            for elt, v in zip(target.elts, values):
                self.bind_value(elt, v, node)
            return None
        name = self.target_name(target, "a value")
        if isinstance(value, PrimExpr):
            return _Let(Var(name, value.dtype), value)
        if isinstance(value, Buffer) and id(value) not in self.declared:
            # TVM's `B = T.Buffer(..., data=A.data)` views A's memory; mlckit has no such views.
            raise self.error(
                node,
                f"`{name} = T.Buffer(...)` declares no memory: T.Buffer is a parameter's "
                f"annotation; to allocate a buffer write `{name} = T.alloc_buffer(shape, dtype)`",
            )
        self.vars.add(name, value)  # `B = A`: another name for A
        return None

    def visit_AnnAssign(self, node: ast.AnnAssign) -> _Let:
        annotation = self.eval(node.annotation)
        if not isinstance(annotation, DType):
            raise self.error(
                node.annotation,
                "an annotated assignment in TensorIR declares a scalar, e.g. `x: T.int32 = ...`",
            )
        if node.value is None:
            raise self.error(node, "an annotated scalar needs a value: `x: T.int32 = ...`")
        name = self.target_name(node.target, "a scalar")
        value = convert(self.eval(node.value), annotation.dtype)
        if value.dtype != annotation.dtype:
            raise self.error(
                node.value,
                f"the value has dtype {value.dtype}, but {name!r} is "
                f"declared {annotation.dtype}; use T.Cast",
            )
        return _Let(Var(name, annotation.dtype), value)

    def visit_AugAssign(self, node: ast.AugAssign) -> Stmt:
        if not isinstance(node.target, ast.Subscript):
            raise self.error(
                node,
                "TensorIR variables cannot be reassigned; only buffer "
                "elements can be updated (A[i] += x)",
            )
        current = self.eval(node.target)
        update = self.eval(node.value)
        with self.guard(node):
            value = binary(node.op, current, update)
        return self.store(node.target, value, node)

    def store(self, target: ast.Subscript, value: Any, node: ast.stmt) -> Stmt:
        buffer = self.eval(target.value)
        if not isinstance(buffer, Buffer):
            raise self.error(
                target.value,
                f"{ast.unparse(target.value)} is not a buffer; only "
                "buffer elements can be assigned (A[i, j] = value)",
            )
        with self.guard(target.value):
            self.check_declared(buffer)
        index = self.eval(target.slice)
        indices = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, slice) for i in indices):
            raise self.error(
                target, "a store writes one element; a region (with `:`) cannot be assigned"
            )
        with self.guard(node):
            return BufferStore(buffer, convert(value, buffer.dtype), indices)

    # ------------------------------------------------------------------ buffers
    def declare_buffer(
        self, node: ast.Call, marker: ScriptStatement, name: str, **bound: Any
    ) -> Buffer:
        """The buffer a T.alloc_buffer / T.match_buffer statement declares, named ``name``."""
        with self.guard(node):
            fields = T.buffer_fields(marker.name, **bound)
            buffer = Buffer(name=name, **fields)
        if fields["elem_offset"] is None and buffer.elem_offset is not None:
            # The variable an offset_factor implies is defined by the buffer itself.
            self.function_vars.add(id(buffer.elem_offset))
        if not self.blocks:
            # The function's own buffers exist before its body runs: their shapes can use
            # parameters and symbolic variables, not a loop's or a let's variable.
            sizes = [*buffer.shape, *buffer.strides, buffer.elem_offset]
            for var in collect_vars([e for e in sizes if e is not None]):
                if id(var) not in self.function_vars:
                    raise self.error(
                        node,
                        f"{marker.name}: the shape of {name!r} uses {var.name_hint!r}, which "
                        "is bound inside the function; a function's buffers are sized by its "
                        "parameters and symbolic variables (n = T.int64())",
                    )
        self.declared.add(id(buffer))
        self.roles[id(buffer)] = "a buffer"
        self.vars.add(name, buffer)
        return buffer

    def assign_alloc_buffer(
        self, node: ast.Assign, target: ast.expr, marker: ScriptStatement
    ) -> None:
        call: ast.Call = node.value  # type: ignore[assignment]
        bound = self.bind_statement(call, marker)
        name = self.target_name(target, "T.alloc_buffer")
        buffer = self.declare_buffer(call, marker, name, **bound)
        (self.blocks[-1].alloc_buffers if self.blocks else self.root_allocs).append(buffer)

    def assign_match_buffer(
        self, node: ast.Assign, target: ast.expr, marker: ScriptStatement
    ) -> None:
        call: ast.Call = node.value  # type: ignore[assignment]
        bound = self.bind_statement(call, marker)
        name = self.target_name(target, "T.match_buffer")
        param = bound.pop("param")
        if self.blocks:
            # In a block: the buffer views a region of another buffer.
            with self.guard(call):
                source = _region(param)
                if len(source) != 1:
                    raise MLCError("T.match_buffer in a block matches one buffer region")
                self.check_declared(source[0].buffer)
            if bound["shape"] is None:
                bound["shape"] = [r.extent for r in source[0].region]
            buffer = self.declare_buffer(call, marker, name, **bound)
            self.blocks[-1].match_buffers.append(MatchBufferRegion(buffer, source[0]))
            return
        if not any(param is p for p in self.params) or param.dtype != "handle":
            raise self.error(
                call.args[0] if call.args else call,
                "T.match_buffer at function level takes a T.handle parameter of the function",
            )
        if param in self.buffer_map:
            raise self.error(call, f"parameter {param.name_hint!r} already has a buffer")
        if bound["shape"] is None:
            raise self.error(call, "T.match_buffer needs the buffer's shape")
        self.buffer_map[param] = self.declare_buffer(call, marker, name, **bound)

    def declared_regions(self, value: Any) -> list[BufferRegion]:
        regions = _region(list(value))
        for region in regions:
            self.check_declared(region.buffer)
        return regions

    def convert_leaf(self, value: Any) -> Any:
        if isinstance(value, (BufferLoad, BufferRegion)):
            self.check_declared(value.buffer)
        if isinstance(value, BufferRegion):
            # A slice spans its simplified extent, as in TVM: A[vi * 4 : vi * 4 + 4] spans 4.
            return BufferRegion(value.buffer, [_simplified(r) for r in value.region])
        return value

    def check_declared(self, buffer: Buffer) -> None:
        """A buffer used in the function is one of its parameters' or one it allocates."""
        if id(buffer) not in self.declared:
            raise MLCError(
                f"buffer {buffer.name!r} is not declared in this function: a buffer is a "
                "parameter (A: T.Buffer(...)), T.match_buffer(...) or T.alloc_buffer(...)"
            )

    # ------------------------------------------------------------------ block iterators
    def _bind_iterators(self, node: ast.Call, marker: ScriptStatement) -> dict[str, Any]:
        # Iterators are bound to loop variables outside the block: evaluate them as such.
        self.binding_context = True
        try:
            bound = self.bind_statement(node, marker)
        finally:
            self.binding_context = False
        values = [v for v in bound.values() if isinstance(v, (PrimExpr, Range, list, tuple))]
        for var in collect_vars(values):
            if self.defined_at.get(id(var), -1) >= len(self.blocks):
                raise self.error(
                    node,
                    f"{marker.name} uses {var.name_hint!r}, which is defined inside block "
                    f"{self.blocks[-1].name!r}; a block's iterators and its T.where are "
                    "bound to the loops around the block",
                )
        return bound

    def _add_iter_var(
        self, frame: _BlockFrame, name: str, dom: Range, value: PrimExpr, kind: int
    ) -> None:
        var = Var(name, value.dtype)
        frame.iter_vars.append(IterVar(dom, var, kind))
        frame.iter_values.append(value)
        self.defined_at[id(var)] = len(self.blocks)
        self.roles[id(var)] = "a block iterator"
        self.vars.add(name, var)

    def assign_remap(self, node: ast.Assign, target: ast.expr, marker: ScriptStatement) -> None:
        call: ast.Call = node.value  # type: ignore[assignment]
        frame = self.current_block(node, marker)
        bound = self._bind_iterators(call, marker)
        kinds, values = bound["kinds"], bound["bindings"]
        if not isinstance(kinds, str):
            raise self.error(call, 'T.axis.remap takes the kinds as a string such as "SSR"')
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        if len(kinds) != len(values):
            raise self.error(
                call,
                f"T.axis.remap got {len(kinds)} kinds {kinds!r} for "
                f"{len(values)} loop variables; give one letter per variable",
            )
        for letter in kinds:
            if letter not in _REMAP_KINDS:
                raise self.error(
                    call,
                    f"T.axis.remap: unknown iterator kind {letter!r} in "
                    f"{kinds!r}; use S (spatial) or R (reduce)",
                )
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(names) != len(values):
            raise self.error(
                target,
                f"T.axis.remap declares {len(values)} iterators but "
                f"{len(names)} names are assigned",
            )
        for name_node, letter, value in zip(names, kinds, values):
            loop = self.loops.get(id(value)) if isinstance(value, Var) else None
            if loop is None:
                raise self.error(
                    call,
                    "T.axis.remap binds block iterators to loop variables "
                    f"of enclosing loops; {value!r} is not one",
                )
            name = self.target_name(name_node, "a block iterator")
            self._add_iter_var(
                frame,
                name,
                Range.from_min_extent(loop.min, loop.extent),
                value,
                _REMAP_KINDS[letter],
            )

    def assign_axis(self, node: ast.Assign, target: ast.expr, marker: ScriptStatement) -> None:
        call: ast.Call = node.value  # type: ignore[assignment]
        frame = self.current_block(node, marker)
        bound = self._bind_iterators(call, marker)
        name = self.target_name(target, marker.name)
        with self.guard(call):
            value = convert(bound["binding"])
            dom = bound["dom"]
            if isinstance(dom, Range):
                dom = Range.from_min_extent(
                    _with_dtype(dom.min, value.dtype), _with_dtype(dom.extent, value.dtype)
                )
            elif isinstance(dom, (tuple, list)):
                if len(dom) != 2:
                    raise MLCError(f"{marker.name}: a domain is an extent or a (min, max) pair")
                dom = _simplified(
                    Range(_with_dtype(dom[0], value.dtype), _with_dtype(dom[1], value.dtype))
                )
            else:
                dom = Range.from_min_extent(
                    make_const(0, value.dtype), _with_dtype(dom, value.dtype)
                )
        self._add_iter_var(frame, name, dom, value, _AXIS_KINDS[marker])

    # ------------------------------------------------------------------ with
    def visit_With(self, node: ast.With) -> Stmt | None:
        if len(node.items) != 1:
            raise self.error(node, "a TensorIR `with` statement has exactly one item")
        item = node.items[0]
        func = self.callee(item.context_expr)
        handler = self.with_statements.get(func) if isinstance(func, ScriptStatement) else None
        if handler is None:
            raise self.error(
                item.context_expr,
                "TensorIR's `with` statements are `with T.block(name):` and `with T.init():`",
            )
        if item.optional_vars is not None:
            raise self.error(item.optional_vars, f"`with {func.name}(...)` binds no name")
        return handler(node, self.bind_statement(item.context_expr, func))  # type: ignore[arg-type]

    def parse_block(self, node: ast.With, bound: dict[str, Any]) -> Stmt:
        name = bound["name"]
        if not isinstance(name, str):
            raise self.error(node.items[0].context_expr, "a block's name is a string")
        frame = _BlockFrame(name)
        self.blocks.append(frame)
        self.has_block = True
        try:
            with self.vars.frame():
                body = _seq(self.parse_stmts(node.body))
        finally:
            self.blocks.pop()
        with self.guard(node):
            block = Block(
                frame.iter_vars,
                frame.reads or [],
                frame.writes or [],
                name,
                body,
                frame.init,
                frame.alloc_buffers,
                frame.match_buffers,
                frame.annotations,
            )
            if frame.reads is None or frame.writes is None:
                reads, writes = get_block_read_write_region(block)
                block = block.with_fields(
                    reads=tuple(reads if frame.reads is None else frame.reads),
                    writes=tuple(writes if frame.writes is None else frame.writes),
                )
            return BlockRealize(frame.iter_values, frame.predicate, block)

    def parse_init(self, node: ast.With, bound: dict[str, Any]) -> None:
        frame = self.current_block(node, T.init)
        if frame.init is not None:
            raise self.error(node, f"block {frame.name!r} already has a T.init()")
        with self.vars.frame():
            frame.init = _seq(self.parse_stmts(node.body))

    # ------------------------------------------------------------------ for
    def visit_For(self, node: ast.For) -> Stmt:
        if node.orelse:
            raise self.error(node.orelse[0], "a for loop has no `else` in TensorIR")
        func = self.callee(node.iter)
        call: ast.Call = node.iter  # type: ignore[assignment]
        if func is range:
            args, kwargs = self.evaluator.call_arguments(call)
            if kwargs or not 1 <= len(args) <= 2:
                raise self.error(
                    call, "range takes one or two arguments here: range(n) or range(start, stop)"
                )
            loops = [(args[0], args[1] if len(args) > 1 else None, ForKind.SERIAL, None, None)]
        elif func is T.grid:
            extents = self.bind_statement(call, T.grid)["extents"]
            loops = [(e, None, ForKind.SERIAL, None, None) for e in extents]
        elif isinstance(func, ScriptStatement) and func in _LOOP_KINDS:
            bound = self.bind_statement(call, func)
            kind = _LOOP_KINDS[func]
            thread = bound.get("thread")
            if kind == ForKind.THREAD_BINDING and not isinstance(thread, str):
                raise self.error(
                    call, 'T.thread_binding needs the thread axis, e.g. thread="threadIdx.x"'
                )
            annotations = bound["annotations"]
            if annotations is not None:
                annotations = self.attributes(call, f"{func.name}'s annotations", annotations)
            loops = [(bound["start"], bound["stop"], kind, thread, annotations)]
        else:
            raise self.error(
                node.iter,
                "a TensorIR loop iterates over range(...), "
                "T.grid(...), T.serial(...), T.parallel(...), "
                "T.vectorized(...), T.unroll(...) or "
                "T.thread_binding(...)",
            )
        names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if len(names) != len(loops):
            raise self.error(
                node.target,
                f"{len(loops)} nested loops need {len(loops)} loop variables, got {len(names)}",
            )
        made: list[tuple[Var, PrimExpr, PrimExpr, ForKind, str | None, Any]] = []
        with self.vars.frame():
            for name_node, (start, stop, kind, thread, annotations) in zip(names, loops):
                if not isinstance(name_node, ast.Name):
                    raise self.error(name_node, "a loop variable is a name")
                with self.guard(call):
                    begin, extent = self._loop_range(ast.unparse(call.func), start, stop)
                var = Var(name_node.id, extent.dtype)
                self.vars.add(name_node.id, var)
                self.roles[id(var)] = "a loop variable"
                self.loops[id(var)] = _Loop(begin, extent)
                self.defined_at[id(var)] = len(self.blocks)
                made.append((var, begin, extent, kind, thread, annotations))
            try:
                body = _seq(self.parse_stmts(node.body))
            finally:
                for var, *_ in made:
                    del self.loops[id(var)]
                    self.finished_loop_vars.add(var.name_hint)
        for var, begin, extent, kind, thread, annotations in reversed(made):
            binding = None
            if kind == ForKind.THREAD_BINDING:
                binding = IterVar(
                    None,
                    Var(thread, var.dtype),  # type: ignore[arg-type]
                    IterVarType.ThreadIndex,
                    thread,
                )
            body = For(var, begin, extent, kind, body, binding, annotations)
        return body

    @staticmethod
    def _loop_range(what: str, start: Any, stop: Any) -> tuple[PrimExpr, PrimExpr]:
        for bound in (start,) if stop is None else (start, stop):
            if not T.is_index(bound):
                kind = "extents" if stop is None else "bounds"
                raise MLCError(f"{what} expects integer {kind}, got {bound!r}")
        if stop is None:
            extent = convert(start)
            return make_const(0, extent.dtype), extent
        rng = _simplified(Range(start, stop))
        return rng.min, rng.extent

    # ------------------------------------------------------------------ if
    def visit_If(self, node: ast.If) -> Stmt | None:
        cond = self.eval(node.test)
        if isinstance(cond, (bool, np.bool_)):
            # A Python condition (a flag of the enclosing code) is decided now, as in TVM: only
            # the branch it picks is TensorIR, so a `with T.init():` under `if False:` is not.
            branch = node.body if cond else node.orelse
            if not branch:
                return None
            with self.vars.frame():
                stmts = self.parse_stmts(branch)
            return _seq(stmts) if stmts else None
        with self.guard(node.test):
            cond = convert(cond)
            if cond.dtype != "bool":
                raise MLCError(f"an if condition must be boolean, got dtype {cond.dtype}")
        with self.vars.frame():
            then_case = _seq(self.parse_stmts(node.body))
        else_case = None
        if node.orelse:
            with self.vars.frame():
                else_case = _seq(self.parse_stmts(node.orelse))
        return IfThenElse(cond, then_case, else_case)
