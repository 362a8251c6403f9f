"""FuseTIR: turn each fused relax function (``Primitive = 1``) into one TensorIR function.

After :func:`FuseOps`, a group of kernels is a relax function calling several PrimFuncs::

    def fused_matmul_add(x, w, b):          # R.func_attr({"Primitive": 1})
        lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((1, 128)))
        gv = R.call_tir(cls.add, (lv, b), out_sinfo=R.Tensor((1, 128)))
        return gv

FuseTIR writes the loop nests of the callees one after the other into a single PrimFunc
``fused_matmul_add(x, w, b, T_add)``:

* its parameters are the relax function's parameters followed by its results (destination
  passing, as every ``call_tir`` callee); a parameter's buffer is the callee buffer it is
  first passed to, renamed after the relax parameter;
* a tensor passed from one callee to the next (``lv``) becomes a ``T.alloc_buffer`` of the
  root block, named after the buffer of the callee that writes it;
* each callee's buffers are replaced by those buffers; its symbolic shape variables are
  matched against the shapes of the relax values passed in, so ``n`` in one callee and ``m``
  in the next become the same variable when they describe the same dimension;
* loop and block variables are copied fresh for every inlined body (the same PrimFunc may be
  called twice), and a block name already used gets a suffix (``T_add_1``).

Every call of the relax function (``cls.fused_matmul_add(x, w, b)``) becomes
``R.call_tir(cls.fused_matmul_add, (x, w, b), out_sinfo=...)``; the relax function and the
PrimFuncs only it called are removed from the module.
"""

from __future__ import annotations

from typing import Any

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op
from mlckit.tir.buffer import Buffer
from mlckit.tir.expr import Cast, IntImm, IterVar, PrimExpr, Var
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt import Block, BlockRealize, For, LetStmt, SeqStmt, Stmt
from mlckit.tir.stmt_functor import StmtExprMutator, substitute

from ..analysis.analysis import all_global_vars
from ..expr import Call, DataflowBlock, Expr, Function, Tuple, TupleGetItem, VarBinding
from ..expr import Var as RelaxVar
from ..expr_functor import ExprMutator
from ..op.base import call_tir
from ..struct_info import TensorStructInfo


def _cast(expr: PrimExpr, dtype: str) -> PrimExpr:
    if expr.dtype == dtype:
        return expr
    return IntImm(dtype, expr.value) if isinstance(expr, IntImm) else Cast(dtype, expr)


class _Inliner(StmtExprMutator):
    """Copies one callee's body into the fused function (see the module docstring)."""

    def __init__(self, vmap: dict[int, PrimExpr], buffers: dict[int, Buffer], names: set[str]):
        self.vmap = vmap
        self.buffers = buffers
        self.block_names = names

    def copy_buffer(self, buffer: Buffer, name: str) -> Buffer:
        """``buffer`` under ``name``, with its shape in the fused function's variables."""
        return Buffer(
            Var(name, "handle"),
            buffer.dtype,
            [self.visit(s) for s in buffer.shape],
            [self.visit(s) for s in buffer.strides],
            None if buffer.elem_offset is None else self.visit(buffer.elem_offset),
            name,
            buffer.scope,
        )

    def visit_var_(self, op: Var) -> PrimExpr:
        return self.vmap.get(id(op), op)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        if id(buffer) not in self.buffers:  # allocated inside the callee
            self.buffers[id(buffer)] = self.copy_buffer(buffer, buffer.name)
        return self.buffers[id(buffer)]

    def _renew(self, var: Var) -> Var:
        new = Var(var.name_hint, var.dtype)
        self.vmap[id(var)] = new
        return new

    def visit_for_(self, op: For) -> Stmt:
        loop_var = self._renew(op.loop_var)
        return self.generic_visit(op).with_fields(loop_var=loop_var)

    def visit_let_stmt_(self, op: LetStmt) -> Stmt:
        var = self._renew(op.var)
        return self.generic_visit(op).with_fields(var=var)

    def visit_iter_var_(self, op: IterVar) -> IterVar:
        var = self._renew(op.var)
        return self.generic_visit(op).with_fields(var=var)

    def visit_block_(self, op: Block) -> Stmt:
        name, suffix = op.name_hint, 0
        while name in self.block_names:
            suffix += 1
            name = f"{op.name_hint}_{suffix}"
        self.block_names.add(name)
        return self.generic_visit(op).with_fields(name_hint=name)


class _FusedFuncBuilder:
    """Builds the PrimFunc for one ``Primitive`` relax function."""

    def __init__(self, name: str, mod: IRModule):
        self.name = name
        self.mod = mod
        self.shape_vars: dict[int, Var] = {}  # relax-level symbolic var -> fused function's var
        self.buffers: dict[int, Buffer | list[Buffer]] = {}  # relax var -> its buffer(s)
        self.allocs: list[Buffer] = []
        self.stmts: list[Stmt] = []
        self.block_names: set[str] = set()
        self.callees: set[str] = set()

    def error(self, why: str) -> MLCError:
        return MLCError(f"FuseTIR: cannot fuse {self.name!r}: {why}")

    def dims(self, sinfo: Any) -> list[PrimExpr]:
        """The shape of a relax value of struct info ``sinfo``, in the fused function's vars."""
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape_values is None:
            raise self.error("every value must be a tensor of known rank and shape")

        def fresh(var: Var) -> Var:
            return self.shape_vars.setdefault(id(var), Var(var.name_hint, var.dtype))

        return [substitute(dim, fresh) for dim in sinfo.shape_values]

    def build(self, func: Function) -> PrimFunc:
        for block in func.body.blocks:  # type: ignore[attr-defined]
            if not isinstance(block, DataflowBlock):
                raise self.error("its bindings must be in a dataflow block")
            for binding in block.bindings:
                self.add_binding(binding)
        result = func.body.body  # type: ignore[attr-defined]
        outputs = result.fields if isinstance(result, Tuple) else (result,)
        out_buffers = [self.buffers.get(id(v)) for v in outputs]
        if not all(isinstance(b, Buffer) and b in self.allocs for b in out_buffers):
            raise self.error("its results must be tensors computed by its call_tirs")
        params: list[Var] = []
        buffer_map: dict[Var, Buffer] = {}
        for param in func.params:
            buffer = self.buffers.get(id(param))
            if buffer is None:  # a parameter no kernel reads still takes its place
                shape = self.dims(param.struct_info_)
                dtype = param.struct_info_.dtype  # type: ignore[union-attr]
                buffer = Buffer(None, dtype, shape, name=param.name_hint)
            params.append(Var(f"p_{param.name_hint}", "handle"))
            buffer_map[params[-1]] = buffer  # type: ignore[assignment]
        for buffer in out_buffers:
            self.allocs.remove(buffer)  # type: ignore[arg-type]
            params.append(Var(f"p_{buffer.name}", "handle"))  # type: ignore[union-attr]
            buffer_map[params[-1]] = buffer  # type: ignore[assignment]
        root = Block([], [], [], "root", SeqStmt.flatten(self.stmts), None, self.allocs)
        body = BlockRealize([], True, root)
        attrs: dict[str, Any] = {"tir.noalias": True}
        if "global_symbol" in func.attrs:  # a public relax function gives a public PrimFunc
            attrs["global_symbol"] = func.attrs["global_symbol"]
        return PrimFunc(params, body, None, buffer_map, attrs)

    def add_binding(self, binding: Any) -> None:
        value = binding.value if isinstance(binding, VarBinding) else None
        if isinstance(value, TupleGetItem):
            self.buffers[id(binding.var)] = self.buffers[id(value.tuple_value)][value.index]  # type: ignore[index]
        elif isinstance(value, Call) and value.op is Op.get("relax.call_tir"):
            self.add_call(binding.var, value)
        else:
            raise self.error(
                "a fused function may only hold R.call_tir bindings (and tuple items); "
                "lower its operators to TensorIR first (LegalizeOps)"
            )

    def add_call(self, var: RelaxVar, call: Call) -> None:
        name = call.args[0].name_hint
        callee = self.mod[name]
        args = call.args[1].fields if isinstance(call.args[1], Tuple) else ()
        if (
            not isinstance(callee, PrimFunc)
            or len(call.args) > 2
            or not all(p in callee.buffer_map for p in callee.params)
            or not all(isinstance(a, RelaxVar) for a in args)
        ):
            raise self.error(
                f"{name} must be a PrimFunc taking only buffers, called with tensor variables "
                "and without tir_vars"
            )
        self.callees.add(name)
        n_out = len(call.sinfo_args)
        if len(callee.params) != len(args) + n_out:
            raise self.error(f"{name} does not take {len(args)} inputs")
        inner = [callee.buffer_map[p] for p in callee.params]
        vmap: dict[int, PrimExpr] = {}
        remap: dict[int, Buffer] = {}
        inliner = _Inliner(vmap, remap, self.block_names)
        outer_dims = [self.dims(a.struct_info_) for a in args] + [
            self.dims(s) for s in call.sinfo_args
        ]
        for buffer, dims in zip(inner, outer_dims):
            if len(buffer.shape) != len(dims):
                raise self.error(f"buffer {buffer.name} of {name} has the wrong rank")
            for inner_dim, dim in zip(buffer.shape, dims):
                if isinstance(inner_dim, Var) and id(inner_dim) not in vmap:
                    vmap[id(inner_dim)] = _cast(dim, inner_dim.dtype)
        for buffer, arg in zip(inner, args):
            if id(arg) not in self.buffers:  # a parameter of the relax function, first used here
                self.buffers[id(arg)] = inliner.copy_buffer(buffer, arg.name_hint)  # type: ignore[attr-defined]
            remap[id(buffer)] = self.buffers[id(arg)]  # type: ignore[assignment]
        outs = [inliner.copy_buffer(b, b.name) for b in inner[len(args) :]]
        remap.update((id(b), new) for b, new in zip(inner[len(args) :], outs))
        self.allocs.extend(outs)
        self.buffers[id(var)] = outs[0] if n_out == 1 else outs
        body = callee.body
        if isinstance(body, BlockRealize) and body.block.name_hint == "root":
            self.allocs.extend(inliner.visit_buffer(b) for b in body.block.alloc_buffers)
            body = body.block.body
        self.stmts.append(inliner.visit(body))


class _CallRewriter(ExprMutator):
    """Replaces each call of a fused relax function by a call_tir of its PrimFunc."""

    def __init__(self, mod: IRModule, fused: dict[str, GlobalVar]):
        super().__init__(mod)
        self.fused = fused

    def visit_call_(self, op: Call) -> Expr:
        call = self.visit_expr_post_order(op)
        if isinstance(call.op, GlobalVar) and call.op.name_hint in self.fused:
            return call_tir(self.fused[call.op.name_hint], list(call.args), call.struct_info_)
        return call


def FuseTIR() -> transform.Pass:
    """The pass merging each ``Primitive`` relax function's kernels into one PrimFunc."""

    @transform.module_pass(opt_level=0, name="FuseTIR")
    def fuse_tir(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        result = IRModule(attrs=mod.attrs, global_infos=mod.global_infos)
        fused: dict[str, GlobalVar] = {}
        callees: set[str] = set()
        for gv, func in mod.functions.items():
            # A function made for an external library (FuseOpsByPattern) is not ours to lower.
            external = "Composite" in func.attrs or "Codegen" in func.attrs
            if isinstance(func, Function) and func.attrs.get("Primitive") and not external:
                builder = _FusedFuncBuilder(gv.name_hint, mod)
                fused[gv.name_hint] = GlobalVar(gv.name_hint)
                result[fused[gv.name_hint]] = builder.build(func)
                callees |= builder.callees
            else:
                result[gv] = func
        rewriter = _CallRewriter(result, fused)
        for gv, func in list(result.functions.items()):
            if isinstance(func, Function):
                rewriter.builder_.update_func(gv, rewriter.visit_expr(func))
        result = rewriter.builder_.get()
        used = {
            gv.name_hint
            for func in result.functions.values()
            if isinstance(func, Function)
            for gv in all_global_vars(func)
        }
        for name in callees - used - set(fused):
            result.remove(name)
        return result

    return fuse_tir
