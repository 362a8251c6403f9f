"""Printing Relax: struct info, expressions, bindings and functions (docs/tvmscript.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mlckit.ir.module import GlobalVar
from mlckit.ir.op import Op
from mlckit.relax import expr as rx
from mlckit.relax import struct_info as rs

from .base import Frame
from .doc import quote
from .tir import TIRPrinter

# Destination-passing calls print as R.call_tir(callee, (args,), out_sinfo=..., tir_vars=...).
_DPS_OPS = frozenset({"relax.call_tir", "relax.call_dps_packed"})
# Ops whose first argument, a runtime function, prints as its name: R.call_pure_packed("f", x).
_NAMED_CALLEE_OPS = frozenset({"relax.call_dps_packed", "relax.call_pure_packed"})

CONSTANT_KEY = "relax.expr.Constant"


class RelaxPrinter(TIRPrinter):
    """The Relax half of the printer (Relax embeds TensorIR shapes, so it builds on TIR's)."""

    # ------------------------------------------------------------------ struct info
    def sinfo(self, s: rs.StructInfo | None) -> str:
        if s is None or isinstance(s, rs.ObjectStructInfo):
            return "R.Object"
        if isinstance(s, rs.TensorStructInfo):
            parts = []
            if isinstance(s.shape, rx.ShapeExpr):
                parts.append(self.dims(s.shape.values, as_list=False))
            elif s.shape is not None:
                parts.append(self.rexpr(s.shape))
            if s.dtype != "void":
                parts.append(f"dtype={quote(s.dtype)}")
            if s.shape is None and s.ndim != -1:
                parts.append(f"ndim={s.ndim}")
            return f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"
        if isinstance(s, rs.TupleStructInfo):
            return "R.Tuple(" + ", ".join(self.sinfo(f) for f in s.fields) + ")"
        if isinstance(s, rs.ShapeStructInfo):
            if s.values is not None:
                return f"R.Shape({self.dims(s.values, as_list=True)})"
            return f"R.Shape(ndim={s.ndim})" if s.ndim != -1 else "R.Shape"
        if isinstance(s, rs.PrimStructInfo):
            if s.value is not None:
                return f"R.Prim(value={self.expr(s.value)})"
            return f"R.Prim({quote(s.dtype)})"
        if isinstance(s, rs.FuncStructInfo):
            params = (
                "None" if s.params is None else self.tuple_text([self.sinfo(p) for p in s.params])
            )
            purity = "" if s.purity else ", purity=False"
            return f"R.Callable({params}, {self.sinfo(s.ret)}{purity})"
        return self.generic(s)

    def dims(self, values: Sequence, *, as_list: bool) -> str:
        """Relax shape dims: int64, so int64 constants print bare."""
        texts = [self.expr(v, bare_int="int64") for v in values]
        return "[" + ", ".join(texts) + "]" if as_list else self.tuple_text(texts)

    def sinfo_list(self, sinfos: Sequence[rs.StructInfo]) -> str:
        """One struct info bare, several as a list (``out_sinfo=``, ``sinfo_args=``)."""
        if len(sinfos) == 1:
            return self.sinfo(sinfos[0])
        return "[" + ", ".join(self.sinfo(s) for s in sinfos) + "]"

    # ------------------------------------------------------------------ expressions
    def rexpr(self, e: rx.Expr | GlobalVar) -> str:
        if isinstance(e, rx.Var):
            return self.define(e, e.name_hint)
        if isinstance(e, rx.Call):
            return self._call(e)
        if isinstance(e, GlobalVar):
            return self.global_var(e)
        if isinstance(e, rx.Tuple):
            return self.tuple_text([self.rexpr(f) for f in e.fields])
        if isinstance(e, rx.TupleGetItem):
            return f"{self.rexpr(e.tuple_value)}[{e.index}]"
        if isinstance(e, rx.Constant):
            return self._constant(e)
        if isinstance(e, rx.ShapeExpr):
            return f"R.shape({self.dims(e.values, as_list=True)})"
        if isinstance(e, rx.PrimValue):
            return f"R.prim_value({self.typed_value(e.value, typed_ints=True)})"
        if isinstance(e, rx.StringImm):
            return f"R.str({quote(e.value)})"
        if isinstance(e, rx.DataTypeImm):
            return f"R.dtype({quote(e.value)})"
        if isinstance(e, rx.ExternFunc):
            return f"R.ExternFunc({quote(e.global_symbol)})"
        return self.generic(e)

    def _constant(self, c: rx.Constant) -> str:
        data = np.asarray(c.data)
        if data.ndim == 0 or data.size <= self.opts.inline_constants:
            return f"R.const({self._array_literal(data)}, {quote(data.dtype.name)})"
        index = self.constant_index.get(id(c))
        if index is None:
            index = self.constant_index[id(c)] = len(self.constants)
            self.constants.append(c)
        return f"metadata[{quote(CONSTANT_KEY)}][{index}]"

    def _array_literal(self, data: np.ndarray) -> str:
        if data.ndim == 0:
            return self.value(data[()])
        return "[" + ", ".join(self._array_literal(row) for row in data) + "]"

    def _call(self, call: rx.Call) -> str:
        op = call.op
        args = [self.rexpr(a) for a in call.args]
        kwargs: list[str] = []
        if isinstance(op, Op):
            name = op.name
            if name in _NAMED_CALLEE_OPS and call.args and isinstance(call.args[0], rx.ExternFunc):
                args[0] = quote(call.args[0].global_symbol)
            if name in _DPS_OPS:
                kwargs.append(f"out_sinfo={self.sinfo_list(call.sinfo_args)}")
                if len(args) > 2:
                    kwargs.append(f"tir_vars={args[2]}")
                    args = args[:2]
            else:
                kwargs.extend(self._attr_kwargs(op, call.attrs))
                if call.sinfo_args:
                    kwargs.append(f"sinfo_args={self.sinfo_list(call.sinfo_args)}")
            callee = (
                "R." + name.removeprefix("relax.") if name.startswith("relax.") else self.inline(op)
            )
        elif isinstance(op, rx.ExternFunc) and call.sinfo_args:
            # R.call_packed("f", x, sinfo_args=...) builds exactly this call.
            callee = "R.call_packed"
            args.insert(0, quote(op.global_symbol))
            kwargs.append(f"sinfo_args={self.sinfo_list(call.sinfo_args)}")
        else:
            callee = self.rexpr(op)
            if call.sinfo_args:
                kwargs.append(f"sinfo_args={self.sinfo_list(call.sinfo_args)}")
        return f"{callee}({', '.join(args + kwargs)})"

    def _attr_kwargs(self, op: Op, attrs: rx.Attrs | None) -> list[str]:
        """Attributes as keyword arguments, in the order the op's constructor takes them."""
        if attrs is None:
            return []
        fields = attrs.fields
        order = [k for k in (op.get_attr("attr_names") or ()) if k in fields]
        order += [k for k in fields if k not in order]
        return [f"{k}={self.value(fields[k])}" for k in order]

    # ------------------------------------------------------------------ bindings
    def binding(self, b: rx.Binding) -> None:
        value = getattr(b, "value", None)
        if isinstance(b, rx.VarBinding) and isinstance(value, rx.Function):
            self.relax_func(value, self.define(b.var, b.var.name_hint), nested=True)
            return
        name = self.define(b.var, b.var.name_hint)
        annotation = "" if b.var.struct_info_ is None else f": {self.sinfo(b.var.struct_info_)}"
        if isinstance(b, rx.MatchCast):
            text = f"R.match_cast({self.rexpr(value)}, {self.sinfo(b.struct_info)})"
            self.lines.emit(f"{name}{annotation} = {text}")
        elif isinstance(b, rx.VarBinding):
            self.seq_tail(value, lambda text: f"{name}{annotation} = {text}")
        else:
            self.lines.emit(self.generic(b))

    def seq_tail(self, e: rx.Expr, finish: Callable[[str], str]) -> None:
        """Print ``e`` in a statement position: a SeqExpr's blocks, then ``finish(result)``;
        an If as ``if``/``else`` whose branches each end in ``finish``."""
        if isinstance(e, rx.SeqExpr):
            for block in e.blocks:
                self.block(block)
            e = e.body
        if isinstance(e, rx.If):
            self.lines.emit(f"if {self.rexpr(e.cond)}:")
            with self.lines.indent():
                self.seq_tail(e.true_branch, finish)
            self.lines.emit("else:")
            with self.lines.indent():
                self.seq_tail(e.false_branch, finish)
        else:
            self.lines.emit(finish(self.rexpr(e)))

    def block(self, block: rx.BindingBlock) -> None:
        if not isinstance(block, rx.DataflowBlock):
            for b in block.bindings:
                self.binding(b)
            return
        self.lines.emit("with R.dataflow():")
        with self.lines.indent():
            for b in block.bindings:
                self.binding(b)
            outputs = [
                self.define(b.var, b.var.name_hint)
                for b in block.bindings
                if not isinstance(b.var, rx.DataflowVar)
            ]
            self.lines.emit(f"R.output({', '.join(outputs)})")

    # ------------------------------------------------------------------ functions
    def relax_func(self, func: rx.Function, name: str, *, nested: bool = False) -> None:
        """A decorated def. A nested function (a binding's value) shares its parent's scope."""
        if not nested:
            self.frame = Frame()
        options = []
        if func.is_private:
            options.append("private=True")
        if not func.is_pure:
            options.append("pure=False")
        self.lines.emit("@R.function" + (f"({', '.join(options)})" if options else ""))
        params = [
            f"{self.define(p, p.name_hint)}: {self.sinfo(p.struct_info_)}" for p in func.params
        ]
        self.lines.emit_def(name, params, f" -> {self.sinfo(func.ret_struct_info)}")
        with self.lines.indent():
            declarations_at = self.lines.mark()
            self.func_attr("R", func.attrs, name)
            cls_at = self.lines.mark()
            self.seq_tail(func.body, lambda text: f"return {text}")
            if not nested:
                # Inserted bottom-up so that the earlier position stays valid.
                if self.frame.uses_cls:
                    self.lines.insert(cls_at, ["cls = Module"])
                self.declare_free_vars(declarations_at, one_line=False)
