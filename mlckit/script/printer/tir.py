"""Printing TensorIR: expressions, buffers, statements and PrimFuncs (docs/tvmscript.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mlckit.arith import simplify
from mlckit.ir.dtype import is_float
from mlckit.ir.node import Node
from mlckit.ir.structural import structural_equal
from mlckit.tir import expr as tx
from mlckit.tir import stmt as ts
from mlckit.tir.analysis import get_block_read_write_region
from mlckit.tir.buffer import ACCESS_MASKS, ACCESS_PTR, Buffer, BufferRegion, MatchBufferRegion
from mlckit.tir.function import PrimFunc
from mlckit.tir.op import CALL_EXTERN
from mlckit.tir.stmt_functor import post_order_visit

from .base import Frame, PrinterBase
from .doc import (
    PREC_ADD,
    PREC_AND,
    PREC_ATOM,
    PREC_CMP,
    PREC_MUL,
    PREC_NOT,
    PREC_OR,
    PREC_UNARY,
    float_literal,
    quote,
    wrap,
)

# Operators that print infix, with their Python precedence.
_INFIX: dict[type, tuple[str, int]] = {
    tx.Add: ("+", PREC_ADD),
    tx.Sub: ("-", PREC_ADD),
    tx.Mul: ("*", PREC_MUL),
    tx.FloorDiv: ("//", PREC_MUL),
    tx.FloorMod: ("%", PREC_MUL),
    tx.EQ: ("==", PREC_CMP),
    tx.NE: ("!=", PREC_CMP),
    tx.LT: ("<", PREC_CMP),
    tx.LE: ("<=", PREC_CMP),
    tx.GT: (">", PREC_CMP),
    tx.GE: (">=", PREC_CMP),
    tx.And: ("and", PREC_AND),
    tx.Or: ("or", PREC_OR),
}
# Two-operand nodes without a Python operator of the same meaning print as calls. Div is
# exact division for floats (printed `/`, see _binary) and truncating for integers.
_CALLED: dict[type, str] = {
    tx.Min: "T.min",
    tx.Max: "T.max",
    tx.Div: "T.truncdiv",
    tx.Mod: "T.truncmod",
}

_LOOP_KINDS = {
    ts.ForKind.SERIAL: "T.serial",
    ts.ForKind.PARALLEL: "T.parallel",
    ts.ForKind.VECTORIZED: "T.vectorized",
    ts.ForKind.UNROLLED: "T.unroll",
    ts.ForKind.THREAD_BINDING: "T.thread_binding",
}
_AXIS_KINDS = {
    tx.IterVarType.DataPar: "spatial",
    tx.IterVarType.CommReduce: "reduce",
    tx.IterVarType.Ordered: "scan",
    tx.IterVarType.Opaque: "opaque",
}
_REMAP_LETTERS = {tx.IterVarType.DataPar: "S", tx.IterVarType.CommReduce: "R"}
# For T.iter_var(...), the standalone form of an IterVar.
_ITER_TYPE_NAMES = {
    tx.IterVarType.DataPar: "DataPar",
    tx.IterVarType.ThreadIndex: "ThreadIndex",
    tx.IterVarType.CommReduce: "CommReduce",
    tx.IterVarType.Ordered: "Ordered",
    tx.IterVarType.Opaque: "Opaque",
}


def dtype_annotation(dtype: str) -> str:
    return f"T.{dtype}"


def _is_const(e: Any, value: int) -> bool:
    return isinstance(e, tx.IntImm) and e.value == value


def _tir_vars(node: Any) -> Iterator[tx.Var]:
    """The TensorIR variables occurring in ``node``, in traversal order (with repeats)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, tx.Var):
            yield item
        elif isinstance(item, Node):
            stack.extend(reversed([v for _, v in item.structural_fields()]))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))


def _buffer_vars(buf: Buffer) -> Iterator[tx.Var]:
    return _tir_vars([buf.shape, buf.strides, buf.elem_offset])


def _implied_elem_offset(buf: Buffer) -> bool:
    """Whether ``buf``'s elem_offset is the variable its offset_factor implies when no offset
    is given (which the declaration then leaves out)."""
    offset = buf.elem_offset
    return (
        buf.offset_factor != 0
        and isinstance(offset, tx.Var)
        and offset.name_hint == f"{buf.name}_elem_offset"
    )


def _contains_block(stmt: ts.Stmt) -> bool:
    found = False

    def visit(node: Any) -> None:
        nonlocal found
        found = found or isinstance(node, ts.BlockRealize)

    post_order_visit(stmt, visit)
    return found


def range_end(begin: tx.PrimExpr, extent: tx.PrimExpr) -> tx.PrimExpr:
    """``begin + extent``, folded where that is easy, for printing ``range(begin, end)``."""
    if _is_const(begin, 0):
        return extent
    if isinstance(begin, tx.IntImm) and isinstance(extent, tx.IntImm):
        return tx.IntImm(begin.dtype, begin.value + extent.value)
    return simplify(begin + extent)


class TIRPrinter(PrinterBase):
    """The TensorIR half of the printer."""

    # ------------------------------------------------------------------ expressions
    def prim(self, e: tx.PrimExpr, bare_int: str = "int32") -> tuple[str, int]:
        """``e`` as text with its precedence. Integer constants of ``bare_int`` print bare:
        int32 in TensorIR, int64 in Relax shapes."""
        cls = type(e)
        infix = _INFIX.get(cls)
        if infix is None and cls is tx.Div and is_float(e.dtype):
            infix = ("/", PREC_MUL)
        if infix is not None:
            return self._infix(e, infix[0], infix[1], bare_int)
        if cls in _CALLED:
            args = f"{self.prim(e.a, bare_int)[0]}, {self.prim(e.b, bare_int)[0]}"
            return f"{_CALLED[cls]}({args})", PREC_ATOM
        if isinstance(e, tx.Var):
            return self.tir_var(e), PREC_ATOM
        if isinstance(e, tx.IntImm):
            return self._int_literal(e, bare_int)
        if isinstance(e, tx.FloatImm):
            return f"T.{e.dtype}({float_literal(e.value)})", PREC_ATOM
        if isinstance(e, tx.StringImm):
            return quote(e.value), PREC_ATOM
        if isinstance(e, tx.BufferLoad):
            return self._subscript(e.buffer, e.indices), PREC_ATOM
        if isinstance(e, tx.Not):
            return f"not {wrap(*self.prim(e.a, bare_int), PREC_NOT)}", PREC_NOT
        if isinstance(e, tx.Cast):
            return f"T.Cast({quote(e.dtype)}, {self.prim(e.value, bare_int)[0]})", PREC_ATOM
        if isinstance(e, tx.Select):
            args = ", ".join(
                self.prim(x, bare_int)[0] for x in (e.condition, e.true_value, e.false_value)
            )
            return f"T.Select({args})", PREC_ATOM
        if isinstance(e, tx.Call):
            return self._tir_call(e, bare_int), PREC_ATOM
        if isinstance(e, tx.Let):
            var = self.define(e.var, e.var.name_hint)
            body = self.prim(e.body, bare_int)[0]
            return f"T.Let({body}, where={{{var}: {self.prim(e.value, bare_int)[0]}}})", PREC_ATOM
        return self.generic(e), PREC_ATOM

    def _tir_call(self, e: tx.Call, bare_int: str) -> str:
        if e.op is ACCESS_PTR:
            text = self._access_ptr(e)
            if text is not None:
                return text
        args = [self.prim(x, bare_int)[0] for x in e.args]
        if e.op is CALL_EXTERN:
            args.insert(0, quote(e.dtype))
        return f"T.{e.op.name.removeprefix('tir.')}({', '.join(args)})"

    def _access_ptr(self, e: tx.Call) -> str | None:
        """``A.access_ptr("w", offset=...)``, the form the call was built with; None when its
        data is no buffer's of this function."""
        data, offset, extent, mask = e.args
        buf = self.frame.buffers_by_data.get(id(data))
        if buf is None or not isinstance(mask, tx.IntImm):
            return None
        modes = {value: key for key, value in ACCESS_MASKS.items()}
        parts = [quote(modes[mask.value])]
        if not _is_const(offset, 0):
            parts.append(f"offset={self.expr(offset)}")
        if not structural_equal(extent, buf.default_extent(offset)):
            parts.append(f"extent={self.expr(extent)}")
        return f"{self.buffer_name(buf)}.access_ptr({', '.join(parts)})"

    def _infix(self, e: tx.BinaryOpExpr, symbol: str, prec: int, bare_int: str) -> tuple[str, int]:
        # Left-associative operators accept an equal-precedence left operand; Python chains
        # comparisons (`a < b < c`), so a comparison accepts no comparison operand unwrapped.
        left_needs = prec + 1 if prec == PREC_CMP else prec
        left = wrap(*self.prim(e.a, bare_int), left_needs)
        right = wrap(*self.prim(e.b, bare_int), prec + 1)
        return f"{left} {symbol} {right}", prec

    @staticmethod
    def _int_literal(e: tx.IntImm, bare_int: str) -> tuple[str, int]:
        if e.dtype == "bool":
            return repr(bool(e.value)), PREC_ATOM
        if e.dtype == bare_int:
            return str(e.value), PREC_UNARY if e.value < 0 else PREC_ATOM
        return f"T.{e.dtype}({e.value})", PREC_ATOM

    def expr(self, e: tx.PrimExpr, bare_int: str = "int32") -> str:
        return self.prim(e, bare_int)[0]

    def typed_value(self, e: tx.PrimExpr, *, typed_ints: bool) -> str:
        """``e`` where a bare literal would be read with another dtype: a statement's value
        (a bare ``True`` is not a bool IntImm there) and ``R.prim_value`` (a bare ``3`` is int64
        there) print their constant with its dtype, ``T.bool(True)`` / ``T.int32(3)``."""
        if isinstance(e, tx.IntImm) and (typed_ints or e.dtype == "bool"):
            value = bool(e.value) if e.dtype == "bool" else e.value
            return f"T.{e.dtype}({value})"
        return self.expr(e)

    # ------------------------------------------------------------------ buffers
    def buffer_name(self, buf: Buffer) -> str:
        self.frame.buffers_by_data.setdefault(id(buf.data), buf)
        return self.define(buf, buf.name)

    def _subscript(self, buf: Buffer, indices: tuple[tx.PrimExpr, ...]) -> str:
        inner = ", ".join(self.expr(i) for i in indices) if indices else "()"
        return f"{self.buffer_name(buf)}[{inner}]"

    def buffer_args(self, buf: Buffer) -> str:
        """The arguments that declare ``buf``: shape, dtype and any non-default layout."""
        parts = [self.tuple_text([self.expr(d) for d in buf.shape]), quote(buf.dtype)]
        if buf.strides:
            parts.append(f"strides={self.tuple_text([self.expr(s) for s in buf.strides])}")
        if buf.elem_offset is not None and not _implied_elem_offset(buf):
            parts.append(f"elem_offset={self.expr(buf.elem_offset)}")
        if buf.scope != "global":
            parts.append(f"scope={quote(buf.scope)}")
        if buf.offset_factor:
            parts.append(f"offset_factor={buf.offset_factor}")
        return ", ".join(parts)

    def region(self, region: BufferRegion) -> str:
        dims = []
        for rng in region.region:
            if _is_const(rng.extent, 1):
                dims.append(self.expr(rng.min))
            else:
                end = range_end(rng.min, rng.extent)
                dims.append(f"{self.expr(rng.min)}:{self.expr(end)}")
        return f"{self.buffer_name(region.buffer)}[{', '.join(dims)}]"

    def range_args(self, begin: tx.PrimExpr, extent: tx.PrimExpr) -> str:
        """``extent`` for a range from 0, else ``begin, end``."""
        if _is_const(begin, 0):
            return self.expr(extent)
        return f"{self.expr(begin)}, {self.expr(range_end(begin, extent))}"

    def match_buffer_line(self, match: MatchBufferRegion) -> str:
        source = self.region(match.source)
        name = self.buffer_name(match.buffer)
        return f"{name} = T.match_buffer({source}, {self.buffer_args(match.buffer)})"

    def iter_var_text(self, iv: tx.IterVar) -> str:
        var = self.define(iv.var, iv.var.name_hint)
        kind = quote(_ITER_TYPE_NAMES.get(iv.iter_type, str(iv.iter_type)))
        return f"T.iter_var({var}, {self.range_text(iv.dom)}, {kind}, {quote(iv.thread_tag)})"

    def range_text(self, rng: tx.Range) -> str:
        """``T.Range(begin, end)``, the standalone form of a Range."""
        return f"T.Range({self.expr(rng.min)}, {self.expr(range_end(rng.min, rng.extent))})"

    # ------------------------------------------------------------------ statements
    def stmt(self, s: ts.Stmt | None) -> None:
        emit = self.lines.emit
        if s is None or (isinstance(s, ts.SeqStmt) and not s.seq):
            emit("pass")
        elif isinstance(s, ts.SeqStmt):
            for item in s.seq:
                self.stmt(item)
        elif isinstance(s, ts.BufferStore):
            value = self.typed_value(s.value, typed_ints=False)
            emit(f"{self._subscript(s.buffer, s.indices)} = {value}")
        elif isinstance(s, ts.For):
            self._for(s)
        elif isinstance(s, ts.BlockRealize):
            self._block(s.block, s)
        elif isinstance(s, ts.Block):
            self._block(s, None)
        elif isinstance(s, ts.IfThenElse):
            # T.bool(True), not True: a bare Python bool is decided when parsed.
            emit(f"if {self.typed_value(s.condition, typed_ints=False)}:")
            with self.lines.indent():
                self.stmt(s.then_case)
            if s.else_case is not None:
                emit("else:")
                with self.lines.indent():
                    self.stmt(s.else_case)
        elif isinstance(s, ts.LetStmt):
            value = self.typed_value(s.value, typed_ints=False)
            var = self.define(s.var, s.var.name_hint)
            emit(f"{var}: {dtype_annotation(s.var.dtype)} = {value}")
            self.stmt(s.body)
        elif isinstance(s, ts.AssertStmt):
            emit(f"assert {self.typed_value(s.condition, typed_ints=False)}, {quote(s.message)}")
            self.stmt(s.body)
        elif isinstance(s, ts.Evaluate):
            emit(f"T.evaluate({self.typed_value(s.value, typed_ints=False)})")
        elif isinstance(s, ts.Allocate):
            self._allocate(s)
        else:
            emit(self.generic(s))

    def _allocate(self, s: ts.Allocate) -> None:
        extents = "[" + ", ".join(self.expr(e) for e in s.extents) + "]"
        parts = [extents, quote(s.dtype)]
        if s.condition is not None and not _is_const(s.condition, 1):
            parts.append(f"condition={self.expr(s.condition)}")
        if s.annotations:
            parts.append(f"annotations={self.value(s.annotations)}")
        var = self.define(s.buffer_var, s.buffer_var.name_hint)
        self.lines.emit(f"{var} = T.allocate({', '.join(parts)})")
        self.stmt(s.body)

    @staticmethod
    def _plain_serial(loop: ts.For) -> bool:
        return (
            loop.kind == ts.ForKind.SERIAL and not loop.annotations and loop.thread_binding is None
        )

    def _for(self, loop: ts.For) -> None:
        chain = [loop]
        if self._plain_serial(loop) and _is_const(loop.min, 0):
            # T.grid evaluates every extent before any loop runs, so an inner loop whose
            # extent uses an outer loop variable cannot join the grid.
            chain_vars = {id(loop.loop_var)}
            inner = loop.body
            while (
                isinstance(inner, ts.For)
                and self._plain_serial(inner)
                and _is_const(inner.min, 0)
                and not any(id(v) in chain_vars for v in _tir_vars(inner.extent))
            ):
                chain.append(inner)
                chain_vars.add(id(inner.loop_var))
                inner = inner.body
        if len(chain) > 1:
            iterable = "T.grid(" + ", ".join(self.expr(f.extent) for f in chain) + ")"
        else:
            iterable = self._loop_iterable(loop)
        # Names defined in the loop are free again after it: sibling loops both use `i`.
        scope = self.frame.namer.checkpoint()
        names = [self.define(f.loop_var, f.loop_var.name_hint) for f in chain]
        self.lines.emit(f"for {', '.join(names)} in {iterable}:")
        loops = self.frame.loops
        for f in chain:
            loops[id(f.loop_var)] = f
        with self.lines.indent():
            self.stmt(chain[-1].body)
        for f in chain:
            loops.pop(id(f.loop_var), None)
        self.frame.namer.restore(scope)

    def _loop_iterable(self, loop: ts.For) -> str:
        args = self.range_args(loop.min, loop.extent)
        if self._plain_serial(loop):
            return f"range({args})"
        if loop.kind == ts.ForKind.THREAD_BINDING:
            tag = loop.thread_binding.thread_tag if loop.thread_binding is not None else ""
            args += f", thread={quote(tag)}"
        if loop.annotations:
            args += f", annotations={self.value(loop.annotations)}"
        return f"{_LOOP_KINDS[loop.kind]}({args})"

    def _block(self, block: ts.Block, realize: ts.BlockRealize | None) -> None:
        emit = self.lines.emit
        emit(f"with T.block({quote(block.name_hint)}):")
        with self.lines.indent():
            self._iter_vars(block, realize)
            if realize is not None and not _is_const(realize.predicate, 1):
                emit(f"T.where({self.expr(realize.predicate)})")
            if self.opts.verbose or not self.regions_match_inferred(block):
                emit("T.reads(" + ", ".join(self.region(r) for r in block.reads) + ")")
                emit("T.writes(" + ", ".join(self.region(r) for r in block.writes) + ")")
            if block.annotations:
                emit(f"T.block_attr({self.value(block.annotations)})")
            for buf in block.alloc_buffers:
                emit(self.alloc_line(buf))
            for match in block.match_buffers:
                emit(self.match_buffer_line(match))
            if block.init is not None:
                emit("with T.init():")
                with self.lines.indent():
                    self.stmt(block.init)
            self.stmt(block.body)

    def _iter_vars(self, block: ts.Block, realize: ts.BlockRealize | None) -> None:
        if not block.iter_vars:
            return
        names = [self.define(iv.var, iv.var.name_hint) for iv in block.iter_vars]
        kinds = self._remap_kinds(block, realize)
        if kinds is not None:
            values = ", ".join(self.expr(v) for v in realize.iter_values)  # type: ignore[union-attr]
            self.lines.emit(f"{', '.join(names)} = T.axis.remap({quote(kinds)}, [{values}])")
            return
        for i, (name, iv) in enumerate(zip(names, block.iter_vars)):
            if _is_const(iv.dom.min, 0):
                dom = self.expr(iv.dom.extent)
            else:
                dom = f"({self.range_args(iv.dom.min, iv.dom.extent)})"
            value = "" if realize is None else f", {self.expr(realize.iter_values[i])}"
            kind = _AXIS_KINDS.get(iv.iter_type, "opaque")
            self.lines.emit(f"{name} = T.axis.{kind}({dom}{value})")

    def _remap_kinds(self, block: ts.Block, realize: ts.BlockRealize | None) -> str | None:
        """The T.axis.remap kinds ("SSR") when every iter var is bound to a distinct enclosing
        loop variable whose loop covers exactly its domain; otherwise None."""
        if realize is None:
            return None
        letters = []
        seen: set[int] = set()
        for iv, value in zip(block.iter_vars, realize.iter_values):
            letter = _REMAP_LETTERS.get(iv.iter_type)
            loop = self.frame.loops.get(id(value)) if isinstance(value, tx.Var) else None
            if letter is None or loop is None or id(value) in seen:
                return None
            if not (
                _is_const(iv.dom.min, 0)
                and _is_const(loop.min, 0)
                and structural_equal(iv.dom.extent, loop.extent)
            ):
                return None
            seen.add(id(value))
            letters.append(letter)
        return "".join(letters)

    def regions_match_inferred(self, block: ts.Block) -> bool:
        """Whether the block's reads/writes equal what the parser infers when they are omitted."""
        try:
            reads, writes = get_block_read_write_region(block)
        except Exception:  # a half-built block still prints, with explicit regions
            return False
        return structural_equal(tuple(block.reads), tuple(reads)) and structural_equal(
            tuple(block.writes), tuple(writes)
        )

    def alloc_line(self, buf: Buffer) -> str:
        return f"{self.buffer_name(buf)} = T.alloc_buffer({self.buffer_args(buf)})"

    def _implicit_root(self, body: ts.Stmt) -> ts.Block | None:
        """The root block the parser adds by itself, when ``body`` is exactly that block."""
        if not isinstance(body, ts.BlockRealize):
            return None
        block = body.block
        plain = (
            block.name_hint == "root"
            and not block.iter_vars
            and block.init is None
            and not block.match_buffers
            and not block.annotations
            and _is_const(body.predicate, 1)
        )
        no_regions = not block.reads and not block.writes
        # The parser adds a root block only around blocks or root allocations.
        needed = bool(block.alloc_buffers) or _contains_block(block.body)
        if plain and needed and (no_regions or self.regions_match_inferred(block)):
            return block
        return None

    # ------------------------------------------------------------------ functions
    def prim_func(self, func: PrimFunc, name: str) -> None:
        self.frame = Frame()
        emit = self.lines.emit
        emit("@T.prim_func(private=True)" if func.is_private else "@T.prim_func")
        params: list[str] = []
        matched: list[tuple[tx.Var, Buffer]] = []
        scalars: set[int] = set()
        for p in func.params:
            buf = func.buffer_map.get(p)
            if buf is None:
                params.append(f"{self.define(p, p.name_hint)}: {dtype_annotation(p.dtype)}")
                scalars.add(id(p))
            elif all(id(v) in scalars for v in _buffer_vars(buf)):
                buf_name = self.buffer_name(buf)
                self.frame.namer.alias(p, buf_name)
                params.append(f"{buf_name}: T.Buffer({self.buffer_args(buf)})")
            else:
                params.append(f"{self.define(p, p.name_hint)}: T.handle")
                matched.append((p, buf))
        ret = f" -> {dtype_annotation(func.ret_type)}" if isinstance(func.ret_type, str) else ""
        self.lines.emit_def(name, params, ret)
        with self.lines.indent():
            self.func_attr("T", func.attrs, name)
            declarations_at = self.lines.mark()
            for p, buf in matched:
                buf_name = self.buffer_name(buf)
                emit(
                    f"{buf_name} = T.match_buffer({self.define(p, p.name_hint)}, "
                    f"{self.buffer_args(buf)})"
                )
            body = func.body
            root = self._implicit_root(body)
            if root is not None:
                if self.opts.verbose:
                    emit('# with T.block("root"):')
                for buf in root.alloc_buffers:
                    emit(self.alloc_line(buf))
                body = root.body
            self.stmt(body)
            self.declare_free_vars(declarations_at, one_line=True)

    def declare_free_vars(self, at: int, *, one_line: bool) -> None:
        """Declare, at line ``at``, the TensorIR variables the function used without defining."""
        free = self.frame.free_vars
        if not free:
            return
        names = [self.frame.free_names[id(v)] for v in free]
        makers = [
            f"T.{v.dtype}({'is_size_var=True' if isinstance(v, tx.SizeVar) else ''})" for v in free
        ]
        if one_line:
            self.lines.insert(at, [f"{', '.join(names)} = {', '.join(makers)}"])
        else:
            self.lines.insert(at, [f"{n} = {m}" for n, m in zip(names, makers)])

    def func_attr(self, prefix: str, attrs: dict[str, Any], name: str) -> None:
        """``T.func_attr({...})``: every attribute but a global_symbol equal to the name."""
        shown = {
            k: v
            for k, v in attrs.items()
            if not (k == "global_symbol" and isinstance(v, str) and v == name)
        }
        if shown:
            self.lines.emit(f"{prefix}.func_attr({self.value(shown)})")
