"""Generic TIR visitors and mutators: post_order_visit, substitute, StmtExprMutator."""

from __future__ import annotations

from mlckit import tir
from mlckit.tir import (
    Add,
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IterVar,
    Range,
    SizeVar,
    Var,
    decl_buffer,
)
from mlckit.tir.analysis import expr_deep_equal
from mlckit.tir.stmt_functor import (
    StmtExprMutator,
    StmtExprVisitor,
    post_order_visit,
    pre_order_visit,
    renew_defs,
    substitute,
)

n = Var("n")
A = decl_buffer((n, 4), "float32", "A")
B = decl_buffer((n, 4), "float32", "B")
i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")


def loop_nest():
    block = Block(
        [IterVar(Range(0, n), vi, IterVar.DataPar), IterVar(Range(0, 4), vj, IterVar.DataPar)],
        [A[vi : vi + 1, vj : vj + 1]],
        [B[vi : vi + 1, vj : vj + 1]],
        "B",
        BufferStore(B, A[vi, vj] + 1.0, [vi, vj]),
        annotations={"hint": IntImm("int32", 3)},
    )
    realize = BlockRealize([i, j], True, block)
    return For(i, 0, n, ForKind.SERIAL, For(j, 0, 4, ForKind.PARALLEL, realize))


def test_post_order_visits_children_first_and_shared_nodes_once():
    order = []
    e = Add(i, j)
    both = Add(e, e)
    post_order_visit(both, order.append)
    assert order == [i, j, e, both]


def test_post_order_visit_reaches_every_field():
    seen = []
    post_order_visit(loop_nest(), seen.append)
    kinds = {type(x).__name__ for x in seen}
    assert {
        "For",
        "BlockRealize",
        "Block",
        "BufferStore",
        "BufferLoad",
        "Add",
        "Var",
        "FloatImm",
        "IntImm",
    } <= kinds
    # block annotations and iter var domains are walked too
    assert any(isinstance(x, IntImm) and x.value == 3 for x in seen)
    # definitions are not uses: the loop var `i` is reached only through its uses
    assert sum(x is i for x in seen) == 1


def test_pre_order_visit_can_prune():
    seen = []

    def fvisit(node):
        seen.append(node)
        return not isinstance(node, BlockRealize)

    pre_order_visit(loop_nest(), fvisit)
    assert not any(isinstance(x, BufferStore) for x in seen)
    assert isinstance(seen[0], For)


def test_visitor_subclass_overrides_one_kind():
    class Loads(StmtExprVisitor):
        def __init__(self):
            self.buffers = []

        def visit_buffer_load_(self, op):
            self.buffers.append(op.buffer)
            super().visit_buffer_load_(op)

    v = Loads()
    v(loop_nest())
    assert v.buffers == [A]


def test_size_var_dispatches_to_visit_var():
    s = SizeVar("s")

    class Vars(StmtExprVisitor):
        def __init__(self):
            self.vars = []

        def visit_var_(self, op):
            self.vars.append(op)

    v = Vars()
    v(s + i)
    assert v.vars == [s, i]


def test_substitute_expression_and_identity_when_unchanged():
    e = i * 4 + j
    out = substitute(e, {j: 3})
    assert expr_deep_equal(out, i * 4 + 3)
    assert out.a is e.a  # untouched subtrees are shared
    assert substitute(e, {vi: 1}) is e
    assert substitute(e, {}) is e
    assert expr_deep_equal(substitute(e, lambda v: v * 2 if v is i else None), i * 2 * 4 + j)


def test_substitute_statement_remaps_buffers_consistently():
    stmt = loop_nest()
    out = substitute(stmt, {n: IntImm("int32", 16)})
    store = out.body.body.block.body
    load = store.value.a
    assert isinstance(load, BufferLoad)
    assert store.buffer.shape[0].value == 16 and load.buffer.shape[0].value == 16
    # one new buffer per old buffer, shared by every reference
    assert out.body.body.block.reads[0].buffer is load.buffer
    assert out.extent.value == 16
    assert out.body.body.block.iter_vars[0].dom.extent.value == 16
    # loop variables at their definition are kept
    assert out.loop_var is i


def test_mutator_rebuilds_expressions_with_new_dtypes():
    class Widen(StmtExprMutator):
        def visit_var_(self, op):
            return tir.Cast("int64", op) if op.dtype == "int32" else op

    out = Widen()(i + 1)
    assert out.dtype == "int64"
    assert Widen()(FloatImm("float32", 1.0)).dtype == "float32"


def test_ir_transform_rewrites_loops_with_callbacks():
    from mlckit import tir
    from mlckit.tir.stmt_functor import ir_transform

    i, j = tir.Var("i"), tir.Var("j")
    buf = tir.decl_buffer((4, 4), "float32", "A")
    nest = tir.For(
        i,
        0,
        4,
        tir.ForKind.SERIAL,
        tir.For(j, 0, 4, tir.ForKind.SERIAL, tir.BufferStore(buf, 0.0, [i, j])),
    )
    seen = []

    def make_parallel(loop):
        seen.append(loop.loop_var.name_hint)
        return loop.with_fields(kind=tir.ForKind.PARALLEL) if loop.loop_var is i else None

    out = ir_transform(nest, None, make_parallel, only_enable=["tir.For"])
    assert seen == ["j", "i"]  # post-order: inner loop first
    assert out.kind == tir.ForKind.PARALLEL and out.body.kind == tir.ForKind.SERIAL
    # A pre-order replacement stops the walk below it.
    stop = ir_transform(nest, lambda node: tir.Evaluate(0), None, only_enable=[tir.For])
    assert isinstance(stop, tir.Evaluate)


def test_renew_defs_gives_every_definition_a_new_variable() -> None:
    from mlckit.ir import structural_equal
    from mlckit.script import tir as T

    @T.prim_func
    def scale(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n,), "float32")
        B = T.match_buffer(b, (n,), "float32")
        for i in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                half: T.float32 = A[vi] * T.float32(0.5)
                B[vi] = half

    def variables(stmt: object) -> dict[int, Var]:
        found: dict[int, Var] = {}
        post_order_visit(stmt, lambda x: found.setdefault(id(x), x) if isinstance(x, Var) else None)
        return found

    def defined(stmt: object) -> set[int]:
        ids: set[int] = set()

        def visit(x: object) -> None:
            if isinstance(x, For):
                ids.add(id(x.loop_var))
            elif isinstance(x, Block):
                ids.update(id(iv.var) for iv in x.iter_vars)
            elif isinstance(x, tir.LetStmt):
                ids.add(id(x.var))

        post_order_visit(stmt, visit)
        return ids

    copy = renew_defs(scale.body)
    assert structural_equal(copy, scale.body)
    assert len(defined(scale.body)) == 3 and not defined(scale.body) & defined(copy)
    # What the nest uses but does not define (n, the buffers' data) is the same object.
    free = set(variables(scale.body)) - defined(scale.body)
    assert free and free <= set(variables(copy))
