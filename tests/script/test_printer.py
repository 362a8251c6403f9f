"""The TVMScript printer: every node kind, the spec's example modules (golden files), expression
parentheses, names, constants and metadata. IR is built with the node constructors only."""

from __future__ import annotations

import io
import types

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mlckit import relax, tir
from mlckit.ir import GlobalVar, IRModule, Op, assert_structural_equal
from mlckit.relax import op as rop
from mlckit.script.printer import highlight as highlight_module
from mlckit.script.printer import highlight_html, script, show
from mlckit.tir import (
    Add,
    And,
    BufferLoad,
    BufferRegion,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    IterVar,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    Range,
    Select,
    SizeVar,
    StringImm,
    Sub,
    Var,
    decl_buffer,
)
from mlckit.tir.buffer import MatchBufferRegion
from mlckit.tir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
)

I64 = "int64"
F32 = "float32"
S, RD = IterVar.DataPar, IterVar.CommReduce


# ------------------------------------------------------------------------------ builders
def i64(value: int) -> IntImm:
    return IntImm(I64, value)


def point(buf, *indices) -> BufferRegion:
    return BufferRegion.from_indices(buf, indices)


def realize(
    name,
    iters,
    values,
    body,
    reads,
    writes,
    *,
    init=None,
    allocs=(),
    predicate=True,
    match_buffers=(),
    annotations=None,
) -> BlockRealize:
    """A block bound to ``values``; ``iters`` are (var, extent, kind) with domains from 0."""
    ivs = [
        IterVar(Range.from_min_extent(IntImm(ext.dtype, 0), ext), var, kind)
        for var, ext, kind in iters
    ]
    block = Block(ivs, reads, writes, name, body, init, allocs, match_buffers, annotations)
    return BlockRealize(values, predicate, block)


def grid(loop_vars, extents, body):
    for var, ext in reversed(list(zip(loop_vars, extents))):
        body = For(var, IntImm(ext.dtype, 0), ext, ForKind.SERIAL, body)
    return body


def root(body, allocs=()) -> BlockRealize:
    return BlockRealize([], True, Block([], [], [], "root", body, alloc_buffers=allocs))


def linear_symbolic() -> tir.PrimFunc:
    """Module.linear of the spec: Y = X @ W, Z = Y + B with symbolic M, N, K."""
    M, N, K = Var("M", I64), Var("N", I64), Var("K", I64)
    x, w, b, z = (Var(n, "handle") for n in "xwbz")
    X, W = decl_buffer((M, K), F32, "X"), decl_buffer((K, N), F32, "W")
    B, Z = decl_buffer((N,), F32, "B"), decl_buffer((M, N), F32, "Z")
    Y = decl_buffer((M, N), F32, "Y")
    i, j, k = Var("i", I64), Var("j", I64), Var("k", I64)
    vi, vj, vk = Var("v_i", I64), Var("v_j", I64), Var("v_k", I64)
    y_block = realize(
        "Y",
        [(vi, M, S), (vj, N, S), (vk, K, RD)],
        [i, j, k],
        BufferStore(Y, Y[vi, vj] + X[vi, vk] * W[vk, vj], [vi, vj]),
        [point(X, vi, vk), point(W, vk, vj)],
        [point(Y, vi, vj)],
        init=BufferStore(Y, FloatImm(F32, 0.0), [vi, vj]),
    )
    i2, j2, vi2, vj2 = Var("i", I64), Var("j", I64), Var("v_i", I64), Var("v_j", I64)
    z_block = realize(
        "Z",
        [(vi2, M, S), (vj2, N, S)],
        [i2, j2],
        BufferStore(Z, Y[vi2, vj2] + B[vj2], [vi2, vj2]),
        [point(Y, vi2, vj2), point(B, vj2)],
        [point(Z, vi2, vj2)],
    )
    body = SeqStmt([grid([i, j, k], [M, N, K], y_block), grid([i2, j2], [M, N], z_block)])
    return tir.PrimFunc([x, w, b, z], root(body, [Y]), buffer_map={x: X, w: W, b: B, z: Z})


def relu_symbolic() -> tir.PrimFunc:
    M, N = Var("M", I64), Var("N", I64)
    x, y = Var("x", "handle"), Var("y", "handle")
    X, Y = decl_buffer((M, N), F32, "X"), decl_buffer((M, N), F32, "Y")
    i, j, vi, vj = Var("i", I64), Var("j", I64), Var("v_i", I64), Var("v_j", I64)
    block = realize(
        "Y",
        [(vi, M, S), (vj, N, S)],
        [i, j],
        BufferStore(Y, tir.op.max(X[vi, vj], FloatImm(F32, 0.0)), [vi, vj]),
        [point(X, vi, vj)],
        [point(Y, vi, vj)],
    )
    return tir.PrimFunc([x, y], root(grid([i, j], [M, N], block)), buffer_map={x: X, y: Y})


def tensor(shape, dtype=F32) -> relax.TensorStructInfo:
    return relax.TensorStructInfo(shape, dtype)


def bind(var, value) -> relax.VarBinding:
    return relax.VarBinding(var, value)


def mlp_module() -> IRModule:
    """The spec's MLP: two symbolic-shape prim_funcs and a main calling them with call_tir."""
    n = Var("n", I64)
    x = relax.Var("x", tensor((n, 784)))
    w0, b0 = relax.Var("w0", tensor((784, 256))), relax.Var("b0", tensor((256,)))
    w1, b1 = relax.Var("w1", tensor((256, 10))), relax.Var("b1", tensor((10,)))
    linear, relu = GlobalVar("linear"), GlobalVar("relu")
    lv0 = relax.DataflowVar("lv0", tensor((n, 256)))
    lv1 = relax.DataflowVar("lv1", tensor((n, 256)))
    lv2 = relax.Var("lv2", tensor((n, 10)))
    block = relax.DataflowBlock(
        [
            bind(lv0, rop.call_tir(linear, (x, w0, b0), tensor((n, 256)))),
            bind(lv1, rop.call_tir(relu, (lv0,), tensor((n, 256)))),
            bind(lv2, rop.call_tir(linear, (lv1, w1, b1), tensor((n, 10)))),
        ]
    )
    main = relax.Function(
        [x, w0, b0, w1, b1],
        relax.SeqExpr([block], lv2),
        tensor((n, 10)),
        attrs={"global_symbol": "main"},
    )
    return IRModule({linear: linear_symbolic(), relu: relu_symbolic(), "main": main})


def my_module() -> IRModule:
    """The spec's MyModule: multiply then add in a dataflow block."""
    x, y = relax.Var("x", tensor((3, 4))), relax.Var("y", tensor((3, 4)))
    lv0 = relax.DataflowVar("lv0", tensor((3, 4)))
    gv0 = relax.Var("gv0", tensor((3, 4)))
    block = relax.DataflowBlock([bind(lv0, rop.multiply(x, y)), bind(gv0, rop.add(lv0, y))])
    main = relax.Function(
        [x, y], relax.SeqExpr([block], gv0), tensor((3, 4)), attrs={"global_symbol": "main"}
    )
    return IRModule({"main": main})


def _static_func(name: str, params, buffers, body) -> tir.PrimFunc:
    return tir.PrimFunc(
        params,
        body,
        buffer_map=dict(zip(params, buffers)),
        attrs={"global_symbol": name, "tir.noalias": True},
    )


def legacy_module() -> IRModule:
    """The spec's MyModuleLegacy: static shapes (T.Buffer params), public prim_funcs."""
    X, Y = decl_buffer((1, 128), F32, "X"), decl_buffer((1, 128), F32, "Y")
    i, j, vi, vj = Var("i"), Var("j"), Var("vi"), Var("vj")
    relu_block = realize(
        "Y",
        [(vi, IntImm("int32", 1), S), (vj, IntImm("int32", 128), S)],
        [i, j],
        BufferStore(Y, tir.op.max(X[vi, vj], FloatImm(F32, 0.0)), [vi, vj]),
        [point(X, vi, vj)],
        [point(Y, vi, vj)],
    )
    relu0 = _static_func(
        "relu0",
        [Var("X", "handle"), Var("Y", "handle")],
        [X, Y],
        root(grid([i, j], [IntImm("int32", 1), IntImm("int32", 128)], relu_block)),
    )

    X2, W = decl_buffer((1, 784), F32, "X"), decl_buffer((128, 784), F32, "W")
    B, Z = decl_buffer((128,), F32, "B"), decl_buffer((1, 128), F32, "Z")
    Y2 = decl_buffer((1, 128), F32, "Y")
    i, j, k, vi, vj, vk = (Var(n) for n in ("i", "j", "k", "vi", "vj", "vk"))
    one, e128, e784 = IntImm("int32", 1), IntImm("int32", 128), IntImm("int32", 784)
    y_block = realize(
        "Y",
        [(vi, one, S), (vj, e128, S), (vk, e784, RD)],
        [i, j, k],
        BufferStore(Y2, Y2[vi, vj] + X2[vi, vk] * W[vj, vk], [vi, vj]),
        [point(X2, vi, vk), point(W, vj, vk)],
        [point(Y2, vi, vj)],
        init=BufferStore(Y2, FloatImm(F32, 0.0), [vi, vj]),
    )
    i2, j2, vi2, vj2 = Var("i"), Var("j"), Var("vi"), Var("vj")
    z_block = realize(
        "Z",
        [(vi2, one, S), (vj2, e128, S)],
        [i2, j2],
        BufferStore(Z, Y2[vi2, vj2] + B[vj2], [vi2, vj2]),
        [point(Y2, vi2, vj2), point(B, vj2)],
        [point(Z, vi2, vj2)],
    )
    body = SeqStmt(
        [grid([i, j, k], [one, e128, e784], y_block), grid([i2, j2], [one, e128], z_block)]
    )
    linear0 = _static_func(
        "linear0", [Var(n, "handle") for n in "XWBZ"], [X2, W, B, Z], root(body, [Y2])
    )

    x = relax.Var("x", tensor((1, 784)))
    w0, b0 = relax.Var("w0", tensor((128, 784))), relax.Var("b0", tensor((128,)))
    g_linear, g_relu = GlobalVar("linear0"), GlobalVar("relu0")
    lv0 = relax.DataflowVar("lv0", tensor((1, 128)))
    out = relax.Var("out", tensor((1, 128)))
    block = relax.DataflowBlock(
        [
            bind(lv0, rop.call_tir(g_linear, (x, w0, b0), tensor((1, 128)))),
            bind(out, rop.call_tir(g_relu, (lv0,), tensor((1, 128)))),
        ]
    )
    main = relax.Function(
        [x, w0, b0], relax.SeqExpr([block], out), tensor((1, 128)), attrs={"global_symbol": "main"}
    )
    return IRModule({g_relu: relu0, g_linear: linear0, "main": main})


def statements_func() -> tir.PrimFunc:
    """A function exercising every loop kind and statement form."""
    n = Var("n")
    a, b = Var("a", "handle"), Var("b", "handle")
    A = decl_buffer((n, 16), F32, "A")
    Bb = decl_buffer((16,), F32, "B")
    i, j, t, u, v, w = (Var(s) for s in ("i", "j", "t", "u", "v", "w"))
    vi, vj = Var("vi"), Var("vj")
    local = decl_buffer((4,), F32, "A_local", scope="local")
    sub = decl_buffer((4,), F32, "A_sub")
    c16, c4 = IntImm("int32", 16), IntImm("int32", 4)
    # Block bound to i * 4 + j with a predicate: printed with T.axis.spatial and T.where.
    split_block = realize(
        "B",
        [(vi, c16, S)],
        [i * 4 + j],
        BufferStore(Bb, Bb[vi] + local[0], [vi]),
        [point(Bb, vi)],
        [point(Bb, vi)],
        allocs=[local],
        predicate=i * 4 + j < 10,
        annotations={"meta_schedule.unroll": 4},
        match_buffers=[
            MatchBufferRegion(sub, BufferRegion(A, [Range.from_min_extent(0, 1), Range(0, 4)]))
        ],
    )
    inner = For(j, 0, c4, ForKind.SERIAL, split_block, annotations={"pragma_unroll": True})
    stores = SeqStmt(
        [
            BufferStore(A, FloatImm(F32, 1.5), [t, u]),
            IfThenElse(
                t < 2,
                BufferStore(A, FloatImm(F32, 0.0), [t, u]),
                Evaluate(tir.Call("float32", "tir.exp", [FloatImm(F32, 1.0)])),
            ),
            LetStmt(w, t * 2, BufferStore(A, Cast(F32, w), [t, u])),
        ]
    )
    body = SeqStmt(
        [
            For(i, 0, c4, ForKind.PARALLEL, inner),
            For(t, 2, n, ForKind.SERIAL, For(u, 0, c16, ForKind.VECTORIZED, stores)),
            For(
                v,
                0,
                n,
                ForKind.THREAD_BINDING,
                Evaluate(0),
                thread_binding=IterVar(
                    None, Var("threadIdx.x"), IterVar.ThreadIndex, "threadIdx.x"
                ),
            ),
            For(Var("v"), 1, c4, ForKind.UNROLLED, Evaluate(IntImm("bool", 1))),
        ]
    )
    return tir.PrimFunc(
        [n, a, b], root(body), buffer_map={a: A, b: Bb}, attrs={"global_symbol": "stmts"}
    )


# ------------------------------------------------------------------------------ modules (golden)
def test_mlp_module(golden):
    golden("printer/mlp_module", mlp_module().script())


def test_mlp_module_verbose(golden):
    golden("printer/mlp_module_verbose", mlp_module().script(verbose=True))


def test_my_module(golden):
    golden("printer/my_module", my_module().script())


def test_legacy_module(golden):
    golden("printer/legacy_module", legacy_module().script())


def test_statements(golden):
    golden("printer/statements", statements_func().script())


def test_mlp_module_layout_details():
    text = mlp_module().script()
    assert text.startswith(
        "# from mlckit.script import ir as I\n"
        "# from mlckit.script import tir as T\n"
        "# from mlckit.script import relax as R\n\n@I.ir_module\nclass Module:\n"
    )
    # Symbolic shapes: handles plus match_buffer, shape vars declared once, in first-use order.
    assert "def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):" in text
    assert "        M, K, N = T.int64(), T.int64(), T.int64()\n" in text
    assert '        X = T.match_buffer(x, (M, K), "float32")\n' in text
    assert '        Y = T.alloc_buffer((M, N), "float32")\n' in text
    assert "for i, j, k in T.grid(M, N, K):" in text
    assert 'v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])' in text
    # Inferred regions are elided; the root block is implicit.
    assert "T.reads" not in text and 'T.block("root")' not in text
    # Relax: n declared first, then cls; public main has no private=True / global_symbol.
    # A long signature prints one parameter per line.
    assert '    @R.function\n    def main(\n        x: R.Tensor((n, 784), dtype="float32"),' in text
    assert "        n = T.int64()\n        cls = Module\n        with R.dataflow():" in text
    assert "R.output(lv2)" in text and text.endswith("        return lv2")
    assert "global_symbol" not in text


def test_verbose_shows_regions_and_root():
    text = mlp_module().script(verbose=True)
    assert '# with T.block("root"):' in text
    assert "T.reads(X[v_i, v_k], W[v_k, v_j])" in text
    assert "T.writes(Y[v_i, v_j])" in text


def test_regions_print_when_they_differ_from_inferred():
    A = decl_buffer((8,), F32, "A")
    B = decl_buffer((8,), F32, "B")
    i, vi = Var("i"), Var("vi")
    c8 = IntImm("int32", 8)
    # Declares the whole of A as read although only A[vi] is.
    block = realize(
        "B",
        [(vi, c8, S)],
        [i],
        BufferStore(B, A[vi], [vi]),
        [BufferRegion.full_region(A)],
        [point(B, vi)],
    )
    text = script(For(i, 0, c8, ForKind.SERIAL, block))
    assert "T.reads(A[0:8])" in text and "T.writes(B[vi])" in text


def test_standalone_prim_func_name_and_attrs():
    func = relu_symbolic()
    text = func.script()
    assert "@T.prim_func(private=True)\ndef main(x: T.handle, y: T.handle):" in text
    assert "def relu(" in func.script(name="relu")
    public = func.with_attr({"global_symbol": "relu", "tir.noalias": True})
    text = public.script()
    assert "@T.prim_func\ndef relu(" in text
    assert '    T.func_attr({"tir.noalias": True})\n    M, N = T.int64(), T.int64()' in text
    # A global_symbol other than the printed name must survive.
    assert 'T.func_attr({"global_symbol": "relu", "tir.noalias": True})' in public.script(name="f")


def test_scalar_and_buffer_params():
    n = Var("n")
    a = Var("a", "handle")
    A = decl_buffer((n, 4), "int8", "A")
    func = tir.PrimFunc([n, a], Evaluate(0), buffer_map={a: A})
    # A's shape uses only the earlier scalar param, so it is declared in the signature.
    assert 'def main(n: T.int32, A: T.Buffer((n, 4), "int8")):' in func.script()
    func = tir.PrimFunc([a, n], Evaluate(0), buffer_map={a: A})
    text = func.script()
    # A later scalar param is not yet defined in the signature, but is in the body.
    assert 'def main(a: T.handle, n: T.int32):\n    A = T.match_buffer(a, (n, 4), "int8")' in text


def test_buffer_layout_arguments():
    s = SizeVar("s", I64)
    A = decl_buffer((s, 4), F32, "A", strides=(4, 1), elem_offset=0, scope="shared")
    a = Var("a", "handle")
    text = tir.PrimFunc([a], Evaluate(0), buffer_map={a: A}).script()
    assert "s = T.int64(is_size_var=True)" in text
    assert (
        'A = T.match_buffer(a, (s, 4), "float32", strides=(4, 1), elem_offset=0, scope="shared")'
    ) in text
    assert script(A) == 'T.Buffer((s, 4), "float32", strides=(4, 1), elem_offset=0, scope="shared")'


# ------------------------------------------------------------------------------ statements
def test_statement_kinds_print_alone():
    n = Var("n")
    A = decl_buffer((n,), F32, "A")
    i = Var("i")
    assert script(BufferStore(A, FloatImm(F32, 2.0), [i])) == "A[i] = T.float32(2.0)"
    assert script(Evaluate(IntImm("bool", 0))) == "T.evaluate(T.bool(False))"
    assert script(Evaluate(0)) == "T.evaluate(0)"
    assert script(LetStmt(i, n + 1, Evaluate(i))) == "i: T.int32 = n + 1\nT.evaluate(i)"
    assert script(IfThenElse(n > 0, Evaluate(1), None)) == "if n > 0:\n    T.evaluate(1)"
    assert script(SeqStmt([])) == "pass"
    loop = For(i, 0, n, ForKind.SERIAL, BufferStore(A, A[i] * 2.0, [i]))
    assert script(loop) == "for i in range(n):\n    A[i] = A[i] * T.float32(2.0)"
    buf_var = Var("buf", "handle")
    alloc = Allocate(buf_var, F32, (IntImm("int32", 16),), IntImm("bool", 1), Evaluate(0))
    assert script(alloc) == 'buf = T.allocate([16], "float32")\nT.evaluate(0)'


def test_bool_store_is_typed():
    M = decl_buffer((4,), "bool", "M")
    i = Var("i")
    assert script(BufferStore(M, IntImm("bool", 1), [i])) == "M[i] = T.bool(True)"
    assert script(BufferStore(M, i < 2, [i])) == "M[i] = i < 2"


def test_grid_stops_at_dependent_extent():
    i, j, k = Var("i"), Var("j"), Var("k")
    A = decl_buffer((8, 8), F32, "A")
    body = BufferStore(A, FloatImm(F32, 0.0), [i, j])
    c8 = IntImm("int32", 8)
    nest = For(i, 0, c8, ForKind.SERIAL, For(j, 0, i + 1, ForKind.SERIAL, body))
    assert script(nest).splitlines()[:2] == ["for i in range(8):", "    for j in range(i + 1):"]
    nest = For(
        k, 0, c8, ForKind.SERIAL, For(i, 0, c8, ForKind.SERIAL, For(j, 1, c8, ForKind.SERIAL, body))
    )
    assert script(nest).splitlines()[:2] == [
        "for k, i in T.grid(8, 8):",
        "    for j in range(1, 9):",
    ]


def test_axis_forms_without_remap():
    A = decl_buffer((16,), F32, "A")
    i, vi, vk = Var("i"), Var("vi"), Var("vk")
    c16 = IntImm("int32", 16)
    body = BufferStore(A, FloatImm(F32, 0.0), [vi])
    ivs = [IterVar(Range(2, 16), vi, S), IterVar(Range(0, 4), vk, RD)]
    block = Block(ivs, [], [point(A, vi)], "b", body)
    text = script(For(i, 0, c16, ForKind.SERIAL, BlockRealize([i, i // 4], True, block)))
    assert "vi = T.axis.spatial((2, 16), i)" in text
    assert "vk = T.axis.reduce(4, i // 4)" in text
    # A block printed without its realize has no bound values.
    assert 'with T.block("b"):\n    vi = T.axis.spatial((2, 16))' in script(block)


def test_regions_print_points_and_ranges():
    A = decl_buffer((16, 16), F32, "A")
    k0, v = Var("k0"), Var("v")
    region = BufferRegion(A, [Range.from_min_extent(v, 1), Range.from_min_extent(k0 * 4, 4)])
    text = script(region)
    assert text.startswith("A[v, k0 * 4:")
    assert script(BufferRegion.full_region(A)) == "A[0:16, 0:16]"


def test_other_tir_nodes_alone():
    v = Var("v")
    iv = IterVar(Range(0, 128), v, RD)
    assert script(iv) == 'T.iter_var(v, T.Range(0, 128), "CommReduce", "")'
    assert script(Range(2, 10)) == "T.Range(2, 10)"
    A = decl_buffer((8,), F32, "A")
    sub = decl_buffer((4,), F32, "A_sub")
    match = MatchBufferRegion(sub, BufferRegion(A, [Range(0, 4)]))
    assert script(match) == 'A_sub = T.match_buffer(A[0:4], (4,), "float32")'


# ------------------------------------------------------------------------------ expressions
def test_expression_forms():
    x, y, n = Var("x"), Var("y"), Var("n", I64)
    f = Var("f", F32)
    A = decl_buffer((4, 4), F32, "A")
    cases = [
        (x + 1, "x + 1"),
        (x - (y - 1), "x - (y - 1)"),
        (x - y - 1, "x - y - 1"),
        ((x + y) * 2, "(x + y) * 2"),
        (x + y * 2, "x + y * 2"),
        (x * (y * 2), "x * (y * 2)"),
        (x // 2 % 3, "x // 2 % 3"),
        (x // (y % 3), "x // (y % 3)"),
        (Div(x, y), "T.truncdiv(x, y)"),
        (Mod(x, y), "T.truncmod(x, y)"),
        (f / 2.0, "f / T.float32(2.0)"),
        (Min(x, y + 1), "T.min(x, y + 1)"),
        (Max(x, y), "T.max(x, y)"),
        (0 - x, "0 - x"),
        (x * -3, "x * -3"),
        (IntImm("int32", -3) * x, "-3 * x"),
        (x - IntImm("int32", -3), "x - -3"),
        (n + 1, "n + T.int64(1)"),
        (IntImm("int8", 3), "T.int8(3)"),
        (IntImm("uint16", 3), "T.uint16(3)"),
        (FloatImm("float16", 1.5), "T.float16(1.5)"),
        (FloatImm(F32, float("inf")), 'T.float32(float("inf"))'),
        (FloatImm(F32, 1e-05), "T.float32(1e-05)"),
        (IntImm("bool", 1), "True"),
        (Cast(I64, x) + n, 'T.Cast("int64", x) + n'),
        ((x < y) & (y < 3), "x < y and y < 3"),
        (And(x < y, And(y < 3, x > 0)), "x < y and (y < 3 and x > 0)"),
        (Or(And(x < y, y < 3), x > 0), "x < y and y < 3 or x > 0"),
        (And(Or(x < y, y < 3), x > 0), "(x < y or y < 3) and x > 0"),
        (Not(x < y), "not x < y"),
        (Not(And(x < y, y < 3)), "not (x < y and y < 3)"),
        (tir.EQ(x < y, y < 3), "(x < y) == (y < 3)"),
        (Select(x < y, x, y), "T.Select(x < y, x, y)"),
        (tir.if_then_else(x < y, x, y), "T.if_then_else(x < y, x, y)"),
        (tir.exp(f), "T.exp(f)"),
        (BufferLoad(A, [x, y + 1]), "A[x, y + 1]"),
        (StringImm('say "hi"\n'), '"say \\"hi\\"\\n"'),
        (Let(y, x + 1, y * 2), "T.Let(y * 2, where={y: x + 1})"),
    ]
    for expr, text in cases:
        assert script(expr) == text


def test_zero_dim_buffer_load():
    A = decl_buffer((), F32, "A")
    assert script(BufferLoad(A, [])) == "A[()]"


class _T:
    """What the printed ``T.`` names mean, for evaluating printed integer expressions."""

    min = staticmethod(min)
    max = staticmethod(max)

    @staticmethod
    def Select(c, t, f):
        return t if c else f

    @staticmethod
    def truncdiv(a, b):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q

    @staticmethod
    def truncmod(a, b):
        return a - _T.truncdiv(a, b) * b


_VARS = [Var("i"), Var("j"), Var("k")]
_INT_OPS = [Add, Sub, Mul, FloorDiv, FloorMod, Div, Mod, Min, Max]
_CMP_OPS = [tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE]


def _as_int(e):
    return e if e.dtype == "int32" else Select(e, 1, 0)


def _as_bool(e):
    return e if e.dtype == "bool" else tir.LT(e, IntImm("int32", 3))


def _combine(kind, a, b, c):
    op = kind[1]
    if kind[0] == "int":
        return op(_as_int(a), _as_int(b))
    if kind[0] == "cmp":
        return op(a, b) if a.dtype == b.dtype else op(_as_int(a), _as_int(b))
    if kind[0] == "logic":
        return op(_as_bool(a), _as_bool(b))
    if kind[0] == "not":
        return Not(_as_bool(a))
    return Select(_as_bool(a), _as_int(b), _as_int(c))


_KINDS = (
    [("int", op) for op in _INT_OPS]
    + [("cmp", op) for op in _CMP_OPS]
    + [("logic", And), ("logic", Or), ("not", None), ("select", None)]
)
_LEAVES = st.one_of(
    st.sampled_from(_VARS),
    st.integers(-20, 20).map(lambda v: IntImm("int32", v)),
    st.booleans().map(lambda b: IntImm("bool", b)),
)
_EXPRS = st.recursive(
    _LEAVES,
    lambda kids: st.builds(_combine, st.sampled_from(_KINDS), kids, kids, kids),
    max_leaves=14,
)


def _evaluate(e, env):
    """Evaluate an expression tree directly, with Python's semantics for // and %."""
    if isinstance(e, Var):
        return env[e.name_hint]
    if isinstance(e, IntImm):
        return bool(e.value) if e.dtype == "bool" else e.value
    if isinstance(e, Not):
        return not _evaluate(e.a, env)
    if isinstance(e, Select):
        c, t, f = (_evaluate(x, env) for x in (e.condition, e.true_value, e.false_value))
        return t if c else f
    a, b = _evaluate(e.a, env), _evaluate(e.b, env)
    if isinstance(e, (FloorDiv, FloorMod, Div, Mod)) and b == 0:
        raise ZeroDivisionError
    table = {
        Add: lambda: a + b,
        Sub: lambda: a - b,
        Mul: lambda: a * b,
        FloorDiv: lambda: a // b,
        FloorMod: lambda: a % b,
        Div: lambda: _T.truncdiv(a, b),
        Mod: lambda: _T.truncmod(a, b),
        Min: lambda: min(a, b),
        Max: lambda: max(a, b),
        tir.EQ: lambda: a == b,
        tir.NE: lambda: a != b,
        tir.LT: lambda: a < b,
        tir.LE: lambda: a <= b,
        tir.GT: lambda: a > b,
        tir.GE: lambda: a >= b,
        And: lambda: a and b,
        Or: lambda: a or b,
    }
    return table[type(e)]()


@settings(max_examples=300, deadline=None)
@given(_EXPRS, st.tuples(*[st.integers(-9, 9)] * 3))
def test_printed_expressions_evaluate_like_the_tree(expr, values):
    env = {v.name_hint: value for v, value in zip(_VARS, values)}
    try:
        expected = _evaluate(expr, env)
    except ZeroDivisionError:
        assume(False)
    text = script(expr)
    assert eval(text, {"T": _T, **env}) == expected, text


# ------------------------------------------------------------------------------ names
def test_names_are_unique_per_function_and_sanitized():
    a, b, c = Var("x"), Var("x"), Var("x_1")
    d, e, f = Var("T"), Var("for"), Var("conv2d.0")
    g = Var("2d")
    expr = a + b + c + d + e + f + g
    assert script(expr) == "x + x_1 + x_1_1 + T_1 + for_1 + conv2d_0 + v2d"
    # The same object prints the same name everywhere.
    assert script(a * a + b) == "x * x + x_1"


def test_relax_names_share_one_space():
    t = tensor((2,))
    x = relax.Var("x", t)
    lv = relax.DataflowVar("x", t)
    gv = relax.Var("cls", t)
    block = relax.DataflowBlock([bind(lv, rop.add(x, x)), bind(gv, lv)])
    func = relax.Function([x], relax.SeqExpr([block], gv), t)
    text = func.script()
    assert 'x_1: R.Tensor((2,), dtype="float32") = R.add(x, x)' in text
    assert 'cls_1: R.Tensor((2,), dtype="float32") = x_1' in text
    assert "R.output(cls_1)" in text and "return cls_1" in text


def test_buffer_and_var_names_clash():
    a = Var("A", "handle")
    A = decl_buffer((IntImm("int32", 4),), F32, "A")
    i = Var("A")
    body = For(i, 0, IntImm("int32", 4), ForKind.SERIAL, BufferStore(A, A[i], [i]))
    text = tir.PrimFunc([a], body, buffer_map={a: A}).script()
    # Param and buffer share one name in the T.Buffer form; the loop var is renamed.
    assert 'def main(A: T.Buffer((4,), "float32")):' in text
    assert "for A_1 in range(4):\n        A[A_1] = A[A_1]" in text


def test_printing_is_deterministic():
    assert mlp_module().script() == mlp_module().script()


# ------------------------------------------------------------------------------ relax
def test_struct_info_forms():
    n = Var("n", I64)
    cases = [
        (tensor((n, 256)), 'R.Tensor((n, 256), dtype="float32")'),
        (tensor((n + 1,)), 'R.Tensor((n + 1,), dtype="float32")'),
        (tensor(()), 'R.Tensor((), dtype="float32")'),
        (relax.TensorStructInfo(None, F32, ndim=2), 'R.Tensor(dtype="float32", ndim=2)'),
        (relax.TensorStructInfo(None, None), "R.Tensor"),
        (relax.TensorStructInfo((4,), None), "R.Tensor((4,))"),
        (
            relax.TupleStructInfo([tensor((2,)), relax.ObjectStructInfo()]),
            'R.Tuple(R.Tensor((2,), dtype="float32"), R.Object)',
        ),
        (relax.TupleStructInfo([]), "R.Tuple()"),
        (relax.ShapeStructInfo([n, 4]), "R.Shape([n, 4])"),
        (relax.ShapeStructInfo(ndim=2), "R.Shape(ndim=2)"),
        (relax.ShapeStructInfo(), "R.Shape"),
        (relax.PrimStructInfo("int64"), 'R.Prim("int64")'),
        (relax.PrimStructInfo(value=n), "R.Prim(value=n)"),
        (relax.PrimStructInfo(value=IntImm(I64, 3)), "R.Prim(value=T.int64(3))"),
        (relax.ObjectStructInfo(), "R.Object"),
        (
            relax.FuncStructInfo([tensor((2,))], tensor((2,))),
            'R.Callable((R.Tensor((2,), dtype="float32"),), R.Tensor((2,), dtype="float32"))',
        ),
        (relax.FuncStructInfo.opaque_func(), "R.Callable(None, R.Object, purity=False)"),
    ]
    for sinfo, text in cases:
        assert script(sinfo) == text


def test_relax_expression_forms():
    n = Var("n", I64)
    t = relax.Var("t", relax.TupleStructInfo([tensor((2,)), tensor((2,))]))
    x = relax.Var("x", tensor((2, 3)))
    cases = [
        (relax.Tuple([x, t]), "(x, t)"),
        (relax.Tuple([x]), "(x,)"),
        (relax.Tuple([]), "()"),
        (relax.TupleGetItem(t, 1), "t[1]"),
        (relax.ShapeExpr([n, 4]), "R.shape([n, 4])"),
        (relax.PrimValue(IntImm(I64, 3)), "R.prim_value(T.int64(3))"),
        (relax.PrimValue(IntImm("int32", 3)), "R.prim_value(T.int32(3))"),
        (relax.PrimValue(n * 2), "R.prim_value(n * T.int64(2))"),
        (relax.StringImm("text"), 'R.str("text")'),
        (relax.DataTypeImm("float16"), 'R.dtype("float16")'),
        (relax.ExternFunc("env.f"), 'R.ExternFunc("env.f")'),
        (rop.permute_dims(x, [1, 0]), "R.permute_dims(x, axes=[1, 0])"),
        (rop.nn.relu(x), "R.nn.relu(x)"),
        (
            rop.call_dps_packed("env.linear", (x, x), tensor((2, 3))),
            'R.call_dps_packed("env.linear", (x, x), out_sinfo=R.Tensor((2, 3), dtype="float32"))',
        ),
        (
            rop.call_pure_packed("env.f", x, sinfo_args=tensor((2, 3))),
            'R.call_pure_packed("env.f", x, sinfo_args=R.Tensor((2, 3), dtype="float32"))',
        ),
        (
            rop.call_packed("env.g", x, sinfo_args=relax.ObjectStructInfo()),
            'R.call_packed("env.g", x, sinfo_args=R.Object)',
        ),
        (relax.Call(relax.ExternFunc("env.h"), [x]), 'R.ExternFunc("env.h")(x)'),
        (relax.Call(GlobalVar("f"), [x, t]), "f(x, t)"),
        (
            rop.call_tir(GlobalVar("f"), (x,), [tensor((2,)), tensor((3,))], tir_vars=[n]),
            'R.call_tir(f, (x,), out_sinfo=[R.Tensor((2,), dtype="float32"), '
            'R.Tensor((3,), dtype="float32")], tir_vars=R.shape([n]))',
        ),
    ]
    for expr, text in cases:
        assert script(expr) == text


def test_module_calls_use_cls():
    linear = GlobalVar("linear")
    x = relax.Var("x", tensor((2,)))
    y = relax.Var("y", tensor((2,)))
    f = relax.Function(
        [x],
        relax.SeqExpr([relax.BindingBlock([bind(y, relax.Call(linear, [x]))])], y),
        tensor((2,)),
        attrs={"global_symbol": "main"},
    )
    g = relax.Function([x], x, tensor((2,)))
    mod = IRModule({"main": f, linear: g})
    text = mod.script()
    assert "cls = Module\n        y: R.Tensor" in text and "= cls.linear(x)" in text
    # The standalone function names the global bare.
    assert "= linear(x)" in f.script() and "cls" not in f.script()
    assert script(linear) == 'I.GlobalVar("linear")'


def relax_misc_func() -> relax.Function:
    """match_cast (defining m), tuples, an if/else binding, an impure function with attrs."""
    m = Var("m", I64)
    x = relax.Var("x", relax.TensorStructInfo(None, F32, ndim=1))
    cond = relax.Var("cond", relax.TensorStructInfo((), "bool"))
    lv = relax.Var("lv", tensor((m,)))
    tup = relax.Var("tup", relax.TupleStructInfo([tensor((m,)), tensor((m,))]))
    first = relax.Var("first", tensor((m,)))
    then_v = relax.Var("then_v", tensor((m,)))
    res = relax.Var("res", tensor((m,)))
    if_expr = relax.If(
        cond,
        relax.SeqExpr([relax.BindingBlock([bind(then_v, rop.exp(first))])], then_v),
        relax.SeqExpr([], first),
    )
    blocks = [
        relax.BindingBlock(
            [
                relax.MatchCast(lv, x, tensor((m,))),
                bind(tup, relax.Tuple([lv, lv])),
                bind(first, relax.TupleGetItem(tup, 0)),
                bind(res, if_expr),
            ]
        ),
    ]
    return relax.Function(
        [x, cond],
        relax.SeqExpr(blocks, res),
        tensor((m,)),
        is_pure=False,
        attrs={"global_symbol": "misc", "num_input": 1},
    )


def test_relax_misc(golden):
    golden("printer/relax_misc", relax_misc_func().script())


def test_nested_function_prints_as_a_local_def():
    t = tensor((2,))
    p, x = relax.Var("p", t), relax.Var("x", t)
    inner = relax.Function([p], p, t)
    fn, y = relax.Var("fn", inner.struct_info_), relax.Var("y", t)
    body = relax.SeqExpr([relax.BindingBlock([bind(fn, inner), bind(y, relax.Call(fn, [x]))])], y)
    text = script(relax.Function([x], body, t, attrs={"global_symbol": "main"}))
    assert (
        "    @R.function(private=True)\n"
        '    def fn(p: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):\n'
        "        return p\n"
        '    y: R.Tensor((2,), dtype="float32") = fn(x)\n'
    ) in text


def test_binding_without_struct_info():
    x = relax.Var("x", tensor((2,)))
    lv = relax.Var("lv")
    # A call that was never normalized has no struct info: the binding prints unannotated.
    assert script(bind(lv, rop.add(x, x))) == "lv = R.add(x, x)"
    assert script(relax.MatchCast(lv, x, tensor((2,)))) == (
        'lv = R.match_cast(x, R.Tensor((2,), dtype="float32"))'
    )
    assert repr(rop.add(x, x)) == "R.add(x, x)"


def test_binding_blocks_alone():
    t = tensor((2,))
    x, lv, gv = relax.Var("x", t), relax.DataflowVar("lv", t), relax.Var("gv", t)
    dataflow = relax.DataflowBlock([bind(lv, rop.add(x, x)), bind(gv, lv)])
    assert script(dataflow) == (
        "with R.dataflow():\n"
        '    lv: R.Tensor((2,), dtype="float32") = R.add(x, x)\n'
        '    gv: R.Tensor((2,), dtype="float32") = lv\n'
        "    R.output(gv)"
    )
    assert script(relax.BindingBlock([bind(gv, x)])) == 'gv: R.Tensor((2,), dtype="float32") = x'
    assert script(relax.SeqExpr([], x)) == "return x"


def test_op_attrs_and_unknown_nodes():
    assert script(Op.get("relax.add")) == 'Op("relax.add")'
    assert script(relax.Attrs({"axes": [1, 0], "keepdims": False})) == (
        '{"axes": [1, 0], "keepdims": False}'
    )


# ------------------------------------------------------------------------------ constants
def _const_func(*constants) -> relax.Function:
    x = relax.Var("x", tensor((2, 2)))
    bindings, prev = [], x
    for i, c in enumerate(constants):
        v = relax.Var(f"lv{i}", tensor((2, 2)))
        bindings.append(bind(v, rop.add(prev, c)))
        prev = v
    return relax.Function(
        [x],
        relax.SeqExpr([relax.BindingBlock(bindings)], prev),
        tensor((2, 2)),
        attrs={"global_symbol": "main"},
    )


def test_constants_inline_and_metadata(golden):
    big = relax.const(np.arange(4, dtype="float32").reshape(2, 2))
    other = relax.const(np.array([[True, False], [False, True]]))
    scalar = relax.const(1.5, F32)
    func = _const_func(big, scalar, other, big)
    text = func.script()
    assert 'R.add(x, metadata["relax.expr.Constant"][0])' in text
    assert 'R.add(lv0, R.const(1.5, "float32"))' in text
    assert 'R.add(lv1, metadata["relax.expr.Constant"][1])' in text
    assert 'R.add(lv2, metadata["relax.expr.Constant"][0])' in text
    assert text.endswith(
        "\n\n# Metadata omitted. Use show_meta=True in script() method to show it."
    )
    assert 'R.const([[0.0, 1.0], [2.0, 3.0]], "float32")' in func.script(inline_constants=4)
    assert "Metadata omitted" not in func.script(inline_constants=4)
    golden("printer/constants_show_meta", IRModule({"main": func}).script(show_meta=True))


def test_metadata_tensor_encoding():
    import base64

    data = np.array([1, 256], dtype="int32")
    text = script(_const_func(relax.const(data)), show_meta=True)
    encoded = base64.b64encode(data.astype("<i4").tobytes()).decode()
    assert f'        I.tensor("int32", (2,), "{encoded}"),' in text
    assert text.endswith(
        'metadata = {\n    "relax.expr.Constant": [\n'
        f'        I.tensor("int32", (2,), "{encoded}"),\n    ],\n}}'
    )


def test_no_metadata_note_without_metadata():
    assert "Metadata" not in _const_func(relax.const(2.0, F32)).script()


def test_constant_value_literals():
    assert script(relax.const(0.1, F32)) == 'R.const(0.1, "float32")'
    assert script(relax.const(3, "int64")) == 'R.const(3, "int64")'
    assert script(relax.const(True)) == 'R.const(True, "bool")'
    assert script(relax.const([2.5], "float16")) == 'R.const([2.5], "float16")'


# ------------------------------------------------------------------------------ large programs
def test_long_function_prints_every_binding():
    n = Var("n", I64)
    x = relax.Var("x", tensor((n, 16)))
    bindings, prev = [], x
    for _ in range(2000):
        v = relax.DataflowVar("lv", tensor((n, 16)))
        bindings.append(bind(v, rop.add(prev, x)))
        prev = v
    out = relax.Var("gv", tensor((n, 16)))
    bindings.append(bind(out, prev))
    func = relax.Function([x], relax.SeqExpr([relax.DataflowBlock(bindings)], out), tensor((n, 16)))
    lines = func.script().splitlines()
    assert lines[-4] == '        lv_1999: R.Tensor((n, 16), dtype="float32") = R.add(lv_1998, x)'
    assert len(lines) == 4 + 2 + 1 + 1 + 2001 + 2


# ------------------------------------------------------------------------------ show
def test_show_prints_plain_text_when_not_a_terminal(capsys):
    x = Var("x")
    show(x + 1)
    assert capsys.readouterr().out == "x + 1\n"


def test_show_highlights_in_a_terminal(monkeypatch, capsys):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    monkeypatch.setattr(highlight_module.sys, "stdout", out)
    Var("x").show()
    assert "\x1b[" in out.getvalue() and "x" in out.getvalue()


def test_show_displays_html_in_a_notebook(monkeypatch):
    shown = []

    class ZMQInteractiveShell:
        pass

    display_mod = types.SimpleNamespace(HTML=lambda html: ("html", html), display=shown.append)
    ipython = types.SimpleNamespace(get_ipython=ZMQInteractiveShell, display=display_mod)
    monkeypatch.setitem(highlight_module.sys.modules, "IPython", ipython)
    monkeypatch.setitem(highlight_module.sys.modules, "IPython.display", display_mod)
    show(Var("x") + 1)
    assert shown and shown[0][0] == "html" and "<div" in shown[0][1]


def test_highlight_html():
    html = highlight_html("for i in range(4):\n    pass")
    assert html.startswith('<div class="highlight"') and "range" in html and "style=" in html


# ------------------------------------------------------------------------------ round trip
@pytest.mark.parametrize("build", [mlp_module, my_module, legacy_module, relax_misc_func])
def test_round_trip_through_the_parser(build):
    parser = pytest.importorskip("mlckit.script")
    if not hasattr(parser, "from_source"):
        pytest.skip("the TVMScript parser is not available")
    node = build()
    mod = node if isinstance(node, IRModule) else IRModule({"misc": node})
    text = mod.script()
    reparsed = parser.from_source(text)
    assert_structural_equal(reparsed, mod)
    assert reparsed.script() == text
