"""``te.create_prim_func``: lower a graph of tensor expressions to one TensorIR PrimFunc.

Each ``te.compute`` becomes one loop nest with one block named after the compute::

    for i, j, k in T.grid(n, m, l):
        with T.block("T_matmul_NT"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            with T.init():
                T_matmul_NT[v_i, v_j] = T.float32(0.0)
            T_matmul_NT[v_i, v_j] = T_matmul_NT[v_i, v_j] + A[v_i, v_k] * B[v_j, v_k]

The loops take the compute's index names, the block iter vars the same names with a ``v_``
prefix. Tensors in the argument list become parameters (in that order); the other computed
tensors become allocations of the root block. The function is private (no ``global_symbol``):
whoever adds it to a module names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlckit.errors import IRError
from mlckit.ir.dtype import bits, is_int
from mlckit.tir.analysis import infer_block_regions
from mlckit.tir.buffer import Buffer
from mlckit.tir.expr import BufferLoad, Cast, IntImm, IterVar, PrimExpr, Range, Var
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)
from mlckit.tir.stmt_functor import StmtExprMutator, substitute

from .reduction import Reduce
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor

# The compute attribute naming inputs whose layout a schedule may change (dense's weight);
# it becomes the function attribute "layout_free_buffers" (their parameter positions).
_LAYOUT_FREE = "layout_free_placeholders"


def create_prim_func(
    ops: Sequence[Tensor | Var], index_dtype_override: str | None = None
) -> PrimFunc:
    """A PrimFunc computing the tensors in ``ops`` from the placeholders in ``ops``.

    ``ops`` lists the parameters in order: tensors (inputs and outputs) and scalar ``tir.Var``
    parameters. Every placeholder the outputs depend on must be among them.
    ``index_dtype_override="int64"`` makes every loop, iter var, shape and index int64 (what
    ``bb.call_te`` asks for, as relax shapes are int64).
    """
    args = list(ops)
    tensors = [a for a in args if isinstance(a, Tensor)]
    for a in args:
        if not isinstance(a, (Tensor, Var)):
            raise IRError(
                "te.create_prim_func takes a list of te tensors (and scalar tir.Var "
                f"parameters), got a {type(a).__name__}"
            )
    arg_buffers = {id(t.buffer) for t in tensors}
    if len(arg_buffers) != len(tensors):
        raise IRError("te.create_prim_func: a tensor appears twice in the argument list")
    ordered = _ops_in_dependency_order(tensors)
    for op in ordered:
        if isinstance(op, PlaceholderOp) and id(op.output(0).buffer) not in arg_buffers:
            raise IRError(
                f"te.create_prim_func: the computation reads placeholder {op.name!r}, which is "
                "not in the argument list"
            )
    computes = [op for op in ordered if isinstance(op, ComputeOp)]
    if not computes:
        raise IRError("te.create_prim_func: the arguments contain no te.compute to lower")

    lower = _Lowering(index_dtype_override)
    params: list[Var] = []
    buffer_map: dict[Var, Buffer] = {}
    for a in args:
        if isinstance(a, Tensor):
            buffer = lower.visit_buffer(a.buffer)
            param = Var(f"var_{buffer.name}", "handle")
            buffer_map[param] = buffer
            params.append(param)
        else:
            params.append(a)
    allocs = [
        lower.visit_buffer(t.buffer)
        for op in computes
        for t in op.outputs
        if id(t.buffer) not in arg_buffers
    ]
    nests = [lower.loop_nest(op) for op in computes]
    root = Block([], [], [], "root", SeqStmt.flatten(nests), None, allocs)
    attrs: dict[str, Any] = {"tir.noalias": True}
    layout_free = _layout_free_positions(args, computes)
    if layout_free:
        attrs["layout_free_buffers"] = layout_free
    return PrimFunc(params, BlockRealize([], True, root), None, buffer_map, attrs)


def _ops_in_dependency_order(outputs: list[Tensor]) -> list[Operation]:
    """Every operation the tensors depend on, each after the operations it reads."""
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for t in outputs:
        visit(t.op)
    return order


def _layout_free_positions(args: list[Tensor | Var], computes: list[ComputeOp]) -> list[int]:
    free = {id(t.buffer) for op in computes for t in op.attrs.get(_LAYOUT_FREE, ())}
    return [i for i, a in enumerate(args) if isinstance(a, Tensor) and id(a.buffer) in free]


class _Lowering(StmtExprMutator):
    """Builds the loop nest of each compute; with an index dtype, also rewrites buffer shapes
    and access indices to it (as TVM's IndexDataTypeNormalizer), leaving values alone."""

    def __init__(self, index_dtype: str | None):
        self.index_dtype = index_dtype
        self.buffers: dict[int, Buffer] = {}

    # ------------------------------------------------------------------ index dtype
    def index(self, expr: PrimExpr) -> PrimExpr:
        target = self.index_dtype
        if target is None or expr.dtype == target or not is_int(expr.dtype):
            return expr
        widened = _Widen(target).visit(expr)
        return widened if widened.dtype == target else Cast(target, widened)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        new = self.buffers.get(id(buffer))
        if new is None:
            shape = tuple(self.index(d) for d in buffer.shape)
            changed = any(a is not b for a, b in zip(shape, buffer.shape))
            new = buffer.with_fields(shape=shape) if changed else buffer
            self.buffers[id(buffer)] = new
        return new

    def visit_buffer_load_(self, op: BufferLoad) -> PrimExpr:
        indices = [self.index(self.visit(i)) for i in op.indices]
        return BufferLoad(self.visit_buffer(op.buffer), indices)

    def visit_buffer_store_(self, op: BufferStore) -> Stmt:
        indices = [self.index(self.visit(i)) for i in op.indices]
        return BufferStore(self.visit_buffer(op.buffer), self.visit(op.value), indices)

    # ------------------------------------------------------------------ one compute
    def loop_nest(self, op: ComputeOp) -> Stmt:
        iters = [self._iter(iv) for iv in (*op.axis, *op.reduce_axis)]
        vmap = {iv.var: block_iv.var for iv, block_iv, _ in iters}
        indices = [block_iv.var for _, block_iv, _ in iters[: len(op.axis)]]
        outputs = [t.buffer for t in op.outputs]
        first = op.body[0]
        if isinstance(first, Reduce):
            init, body = _reduction_body(first, outputs, indices, vmap)
        else:
            init = None
            body = SeqStmt.flatten(
                [BufferStore(b, substitute(v, vmap), indices) for b, v in zip(outputs, op.body)]
            )
        annotations = {k: v for k, v in op.attrs.items() if k != _LAYOUT_FREE}
        block = Block(
            [block_iv for _, block_iv, _ in iters],
            [],
            [],
            op.name,
            self.visit(body),
            None if init is None else self.visit(init),
            annotations=annotations,
        )
        loop_vars = [loop_var for _, _, loop_var in iters]
        stmt: Stmt = BlockRealize(loop_vars, True, infer_block_regions(block))
        for _, block_iv, loop_var in reversed(iters):
            stmt = For(loop_var, block_iv.dom.min, block_iv.dom.extent, ForKind.SERIAL, stmt)
        return stmt

    def _iter(self, iv: IterVar) -> tuple[IterVar, IterVar, Var]:
        """The block iter var ``v_<name>`` and the loop var ``<name>`` for a compute axis."""
        dom = Range.from_min_extent(self.index(iv.dom.min), self.index(iv.dom.extent))
        dtype = dom.extent.dtype
        name = iv.var.name_hint
        block_iv = IterVar(dom=dom, var=Var(f"v_{name}", dtype), iter_type=iv.iter_type)
        return iv, block_iv, Var(name, dtype)


def _reduction_body(
    reduce: Reduce, outputs: list[Buffer], indices: list[Var], vmap: dict[Var, Var]
) -> tuple[Stmt, Stmt]:
    """``T.init()`` stores the identity (or the given init values); the update stores
    ``combine(out[indices], source)``, through one let per output when there are several
    (every combined value must read the *old* outputs)."""
    sources = [substitute(s, vmap) for s in reduce.source]
    running = [BufferLoad(b, indices) for b in outputs]
    combined = reduce.combiner(running, sources)
    starts = reduce.init or reduce.combiner.identity_element
    init = SeqStmt.flatten([BufferStore(b, v, indices) for b, v in zip(outputs, starts)])
    if len(outputs) == 1:
        update: Stmt = BufferStore(outputs[0], combined[0], indices)
    else:
        lets = [Var(f"v_{b.name}", b.dtype) for b in outputs]
        update = SeqStmt.flatten([BufferStore(b, v, indices) for b, v in zip(outputs, lets)])
        for let, value in reversed(list(zip(lets, combined))):
            update = LetStmt(let, value, update)
    condition = substitute(reduce.condition, vmap)
    if not (isinstance(condition, IntImm) and condition.value == 1):
        update = IfThenElse(condition, update, None)
    return init, update


class _Widen(StmtExprMutator):
    """Integer constants and variables narrower than the index dtype, widened to it."""

    def __init__(self, dtype: str):
        self.dtype = dtype

    def visit_int_imm_(self, op: IntImm) -> PrimExpr:
        if is_int(op.dtype) and bits(op.dtype) < bits(self.dtype):
            return IntImm(self.dtype, op.value)
        return op

    def visit_var_(self, op: Var) -> PrimExpr:
        if is_int(op.dtype) and bits(op.dtype) < bits(self.dtype):
            return Cast(self.dtype, op)
        return op
