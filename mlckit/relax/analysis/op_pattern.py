"""What kind of loop nest a PrimFunc is: the *op pattern* that operator fusion reasons with.

A fusion pass cannot read loop nests; it needs one word per kernel saying how the kernel's
output depends on its inputs. The words form a lattice, ordered from the easiest to fuse to
the hardest (the numbers are TVM's ``OpPatternKind``, stored in the PrimFunc attribute
``op_pattern``)::

    kElemWise(0) < kBroadcast(1) < kInjective(2) < kCommReduce(3) < kOutEWiseFusable(4)
                                                                  < kTuple(7) < kOpaque(8)

* **kElemWise**: every output element reads the *same* index of its inputs
  (``C[i, j] = A[i, j] + B[i, j]``). Anything can be computed element by element inside it.
* **kBroadcast**: inputs are read at a subset of the output's indices, in order
  (``C[i, j] = A[i, j] + b[j]``: a bias add). A block that reads one input element-wise and
  another broadcast counts as element-wise, as in TVM (the output still follows one input).
* **kInjective**: each input index is a function of the output's indices only, in any order
  or arithmetic (``B[i, j] = A[j, i]``: a transpose; reshapes, slices, concatenations).
* **kCommReduce**: a reduction over axes the output does not have (``S[i] += A[i, k]``).
* **kOutEWiseFusable**: a compute-heavy reduction whose *output* can absorb element-wise work:
  matmul/conv, whose body is a multiply-add ``Y[i, j] += X[i, k] * W[k, j]`` reading each input
  at indices the output lacks (data reuse), and any function whose reduction is followed by an
  element-wise block writing the result (``matmul + bias`` written by hand, softmax).
* **kTuple**: making a tuple (only the graph has those); **kOpaque**: anything else, never
  fused (several differently indexed stores in one block, a block with no store, no blocks).

Each block is classified from its one store and its loads; a function's pattern is the
largest over its blocks (the root block is skipped), with one upgrade: an element-wise (or
broadcast/injective) block that writes a parameter after a reduction turns the function into
kOutEWiseFusable. Index comparison is by structure with variables by identity
(``tir.analysis.expr_deep_equal``), so ``A[vi + 1]`` matches ``B[vi + 1]``.
"""

from __future__ import annotations

import enum

from mlckit.tir import analysis as tir_analysis
from mlckit.tir.expr import Add as TirAdd
from mlckit.tir.expr import BufferLoad, Cast, IntImm, IterVarType, PrimExpr, Var
from mlckit.tir.expr import Mul as TirMul
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt import Block, BufferStore, Stmt
from mlckit.tir.stmt_functor import StmtExprVisitor


class OpPatternKind(enum.IntEnum):
    """TVM's operator pattern kinds; larger values are harder to fuse."""

    kElemWise = 0
    kBroadcast = 1
    kInjective = 2
    kCommReduce = 3
    kOutEWiseFusable = 4
    kTuple = 7
    kOpaque = 8


K = OpPatternKind


def _same_indices(lhs: tuple[PrimExpr, ...], rhs: tuple[PrimExpr, ...]) -> bool:
    return len(lhs) == len(rhs) and all(
        tir_analysis.expr_deep_equal(a, b) for a, b in zip(lhs, rhs)
    )


def _is_elemwise(store: BufferStore, load: BufferLoad) -> bool:
    return _same_indices(store.indices, load.indices)


def _is_broadcast(store: BufferStore, load: BufferLoad) -> bool:
    """Every load index is one of the store's indices, found in the same order."""
    j = 0
    for dim, index in zip(load.buffer.shape, load.indices):
        # A unit dimension read at 0 (``B[0, j]``) does not break a broadcast.
        if _is_const(dim, 1) and _is_const(index, 0):
            continue
        while j < len(store.indices) and not tir_analysis.expr_deep_equal(store.indices[j], index):
            j += 1
        if j == len(store.indices):
            return False
    return True


def _is_injective(store: BufferStore, load: BufferLoad) -> bool:
    """The store indexes by plain variables and the load uses no other variable."""
    if not all(isinstance(i, Var) for i in store.indices):
        return False
    store_vars = {id(v) for v in store.indices}
    return all(
        id(v) in store_vars for index in load.indices for v in tir_analysis.collect_vars(index)
    )


def _allows_reuse(store: BufferStore, load: BufferLoad) -> bool:
    """Some store variable is missing from the load: the loaded value is reused across it."""
    if not all(isinstance(i, Var) for i in store.indices):
        return False
    load_vars = {id(v) for index in load.indices for v in tir_analysis.collect_vars(index)}
    return any(id(v) not in load_vars for v in store.indices)


def _strip_casts(expr: PrimExpr) -> PrimExpr:
    while isinstance(expr, Cast):
        expr = expr.value
    return expr


def _is_multiply_add(body: Stmt) -> bool:
    """``C[i, j] = C[i, j] + A[i, k] * B[k, j]``, each factor reused across an output axis."""
    if not isinstance(body, BufferStore):
        return False
    add = _strip_casts(body.value)
    if not isinstance(add, TirAdd):
        return False
    acc, mul = _strip_casts(add.a), _strip_casts(add.b)
    if not (
        isinstance(acc, BufferLoad)
        and acc.buffer is body.buffer
        and _same_indices(acc.indices, body.indices)
        and isinstance(mul, TirMul)
    ):
        return False
    lhs, rhs = _strip_casts(mul.a), _strip_casts(mul.b)
    return (
        isinstance(lhs, BufferLoad)
        and isinstance(rhs, BufferLoad)
        and _allows_reuse(body, lhs)
        and _allows_reuse(body, rhs)
    )


def _is_pure_reduce(reduce_vars: list[Var], indices: tuple[PrimExpr, ...]) -> bool:
    """Every index that mentions a reduction variable *is* that variable (not pooling's
    ``A[i * 2 + k]``)."""
    reduce_ids = {id(v) for v in reduce_vars}
    for index in indices:
        used = [v for v in tir_analysis.collect_vars(index) if id(v) in reduce_ids]
        if used and index is not used[0]:
            return False
    return True


def _is_const(expr: PrimExpr, value: int) -> bool:
    return isinstance(expr, IntImm) and expr.value == value


class _PatternAnalyzer(StmtExprVisitor):
    def __init__(self, func: PrimFunc):
        self.param_buffers = {id(b) for b in func.buffer_map.values()}
        self.kind = K.kElemWise
        self.saw_block = False
        self.store: BufferStore | None = None
        self.loads: list[BufferLoad] = []

    def visit_buffer_store_(self, op: BufferStore) -> None:
        if self.store is not None and not _same_indices(op.indices, self.store.indices):
            self.kind = K.kOpaque
            return
        self.store = op
        self.generic_visit(op)

    def visit_buffer_load_(self, op: BufferLoad) -> None:
        self.loads.append(op)
        self.generic_visit(op)

    def visit_block_(self, op: Block) -> None:
        if op.name_hint == "root":
            self.visit(op.body)
            return
        self.saw_block = True
        self.store, self.loads = None, []
        # The init only writes the reduction's identity: the body decides the pattern.
        self.visit(op.body)
        if self.store is None:
            self.kind = K.kOpaque
            return
        self.kind = max(self.kind, self._classify_block(op, self.store))

    def _classify_block(self, block: Block, store: BufferStore) -> OpPatternKind:
        pattern, any_elemwise = K.kElemWise, False
        for load in self.loads:
            if _is_elemwise(store, load):
                any_elemwise = True
            elif _is_broadcast(store, load):
                pattern = max(pattern, K.kBroadcast)
            elif _is_injective(store, load):
                pattern = max(pattern, K.kInjective)
            else:
                pattern = K.kOpaque
                break
        if pattern == K.kBroadcast and any_elemwise:
            pattern = K.kElemWise
        if pattern != K.kOpaque:
            # A reduction followed by a block writing the output (softmax, matmul + bias).
            if self.kind == K.kCommReduce and self._writes_param(block):
                return K.kOutEWiseFusable
            return pattern
        reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == IterVarType.CommReduce]
        if not reduce_vars:
            return K.kOpaque
        if _is_multiply_add(block.body):
            return K.kOutEWiseFusable
        if not all(_is_pure_reduce(reduce_vars, load.indices) for load in self.loads):
            return K.kOutEWiseFusable  # pooling-like windows
        return K.kCommReduce

    def _writes_param(self, block: Block) -> bool:
        writes = block.writes or tir_analysis.get_block_read_write_region(block)[1]
        return any(id(region.buffer) in self.param_buffers for region in writes)


def analyze_op_pattern(func: PrimFunc) -> OpPatternKind:
    """The :class:`OpPatternKind` of ``func`` (see the module docstring for the rules)."""
    analyzer = _PatternAnalyzer(func)
    analyzer.visit(func.body)
    # The rules read blocks; a function without any (hand-written loops) is not understood.
    return analyzer.kind if analyzer.saw_block else K.kOpaque


__all__ = ["OpPatternKind", "analyze_op_pattern"]
