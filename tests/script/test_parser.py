"""The TVMScript parser: the course's modules parse into the IR the course walks.

``from __future__ import annotations`` keeps Python from evaluating the annotations (the
pre-0.1 ``Tensor(...)`` spelling is not a Python name); the parser reads them from the source.
"""

from __future__ import annotations

import linecache

import numpy as np
import pytest

import mlckit
import mlckit as tvm
from mlckit import relax, tir
from mlckit.errors import MLCError
from mlckit.ir import IRModule, Op, assert_structural_equal
from mlckit.relax.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from mlckit.script import from_source, parse, tirx
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.testing.examples import Module, MyModule

# The modules (Module, MyModule) live in mlckit.testing.examples.


# Seed 004: the MLC course's chapter 3 module, in the syntax of its time.
@tvm.script.ir_module
class LegacyModule:
    @T.prim_func
    def relu0(X: T.Buffer[(1, 128), "float32"], Y: T.Buffer[(1, 128), "float32"]):
        # function attr dict
        T.func_attr({"global_symbol": "relu0", "tir.noalias": True})
        for i, j in T.grid(1, 128):
            with T.block("Y"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.max(X[vi, vj], T.float32(0))

    @T.prim_func
    def linear0(
        X: T.Buffer[(1, 784), "float32"],
        W: T.Buffer[(128, 784), "float32"],
        B: T.Buffer[(128,), "float32"],
        Z: T.Buffer[(1, 128), "float32"],
    ):
        T.func_attr({"global_symbol": "linear0", "tir.noalias": True})
        Y = T.alloc_buffer((1, 128), "float32")
        for i, j, k in T.grid(1, 128, 784):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 128):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @T.prim_func
    def linear1(
        X: T.Buffer[(1, 128), "float32"],
        W: T.Buffer[(10, 128), "float32"],
        B: T.Buffer[(10,), "float32"],
        Z: T.Buffer[(1, 10), "float32"],
    ):
        T.func_attr({"global_symbol": "linear1", "tir.noalias": True})
        Y = T.alloc_buffer((1, 10), "float32")
        for i, j, k in T.grid(1, 10, 128):
            with T.block("Y"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]

        for i, j in T.grid(1, 10):
            with T.block("Z"):
                vi, vj = T.axis.remap("SS", [i, j])
                Z[vi, vj] = Y[vi, vj] + B[vj]

    @R.function
    def main(
        x: Tensor((1, 784), "float32"),
        w0: Tensor((128, 784), "float32"),
        b0: Tensor((128,), "float32"),
        w1: Tensor((10, 128), "float32"),
        b1: Tensor((10,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir(relu0, (lv0,), (1, 128), dtype="float32")
            out = R.call_tir(linear1, (lv1, w1, b1), (1, 10), dtype="float32")
            R.output(out)
        return out


@tvm.script.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(
        x: Tensor((1, 784), "float32"),
        w0: Tensor((128, 784), "float32"),
        b0: Tensor((128,), "float32"),
        w1: Tensor((10, 128), "float32"),
        b1: Tensor((10,), "float32"),
    ):
        # block 0
        with R.dataflow():
            lv0 = R.call_tir("env.linear", (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir("env.relu", (lv0,), (1, 128), dtype="float32")
            out = R.call_tir("env.linear", (lv1, w1, b1), (1, 10), dtype="float32")
            R.output(out)
        return out


# Seed 002: pre-0.1 relax, with `relax` the mlckit.relax module.
@tvm.script.ir_module
class Ep9Module:
    @R.function
    def main(x: Tensor((3, 4), "float32"), y: Tensor((3, 4), "float32")):
        with relax.dataflow():
            lv0 = relax.multiply(x, y)
            gv0 = relax.add(lv0, y)
            relax.output(gv0)
        return gv0


# Seed 001: a standalone relax function with operators written as Python arithmetic.
@R.function
def relax_mlp(
    data: R.Tensor(("n", 784), dtype="float32"),
    w0: R.Tensor((784, 128), dtype="float32"),
    b0: R.Tensor((128,), dtype="float32"),
    w1: R.Tensor((128, 10), dtype="float32"),
    b1: R.Tensor((10,), dtype="float32"),
) -> R.Tensor(("n", 10), dtype="float32"):
    with R.dataflow():
        lv0 = R.matmul(data, w0) + b0
        lv1 = R.nn.relu(lv0)
        lv2 = R.matmul(lv1, w1) + b1
        R.output(lv2)
    return lv2


def tensor(shape, dtype="float32"):
    return TensorStructInfo(shape, dtype)


# ------------------------------------------------------------------------ modules
def test_module_functions_in_source_order_with_privacy():
    assert isinstance(Module, IRModule)
    assert [gv.name_hint for gv in Module.functions] == ["linear", "relu", "main"]
    assert isinstance(Module["linear"], tir.PrimFunc)
    assert isinstance(Module["main"], relax.Function)
    assert Module["linear"].is_private and "global_symbol" not in Module["relu"].attrs
    assert Module["main"].attrs["global_symbol"] == "main"


def test_walk_relax_function_as_in_the_course():
    func = MyModule["main"]
    assert [p.name_hint for p in func.params] == ["x", "y"]
    assert isinstance(func.body, relax.SeqExpr)
    block = func.body.blocks[0]
    assert isinstance(block, relax.DataflowBlock)
    lv0, gv0 = block.bindings
    assert isinstance(lv0.var, relax.DataflowVar) and lv0.var.name_hint == "lv0"
    assert type(gv0.var) is relax.Var and gv0.var.name_hint == "gv0"
    assert lv0.value.op is Op.get("relax.multiply")
    assert gv0.value.op is Op.get("relax.add")
    assert gv0.value.args[0] is lv0.var and gv0.value.args[1] is func.params[1]
    assert func.body.body is gv0.var
    assert_structural_equal(lv0.var.struct_info, tensor((3, 4)))
    assert_structural_equal(func.ret_struct_info, tensor((3, 4)))


def test_symbolic_n_flows_through_call_tir():
    main = Module["main"]
    n = main.params[0].struct_info.shape.values[0]
    assert isinstance(n, tir.Var) and n.name_hint == "n" and n.dtype == "int64"
    lv0, _, lv2 = main.body.blocks[0].bindings
    assert lv0.var.struct_info.shape.values[0] is n
    assert_structural_equal(lv0.var.struct_info, tensor((n, 256)))
    assert_structural_equal(lv2.var.struct_info, tensor((n, 10)))
    assert main.ret_struct_info.shape.values[0] is n
    call = lv0.value
    assert call.op is Op.get("relax.call_tir")
    assert call.args[0] is Module.get_global_var("linear")


def test_prim_func_structure():
    linear = Module["linear"]
    assert [p.name_hint for p in linear.params] == ["x", "w", "b", "z"]
    assert all(p.dtype == "handle" for p in linear.params)
    X = linear.buffer_map[linear.params[0]]
    M, K = X.shape
    assert X.name == "X" and M.name_hint == "M" and M.dtype == "int64"
    assert linear.buffer_map[linear.params[3]].shape[0] is M
    root = linear.body
    assert isinstance(root, tir.BlockRealize) and root.block.name_hint == "root"
    assert [b.name for b in root.block.alloc_buffers] == ["Y"]
    loop_i = root.block.body[0]
    assert isinstance(loop_i, tir.For) and loop_i.loop_var.dtype == "int64"
    assert loop_i.extent is M
    realize = loop_i.body.body.body
    block = realize.block
    assert block.name_hint == "Y"
    assert [iv.iter_type for iv in block.iter_vars] == [
        tir.IterVar.DataPar,
        tir.IterVar.DataPar,
        tir.IterVar.CommReduce,
    ]
    assert block.iter_vars[2].dom.extent is K
    assert realize.iter_values[0] is loop_i.loop_var
    assert isinstance(block.init, tir.BufferStore)
    assert [r.buffer.name for r in block.reads] == ["X", "W"]
    assert [r.buffer.name for r in block.writes] == ["Y"]


def test_int32_extents_give_int32_loops():
    loop = LegacyModule["relu0"].body.block.body
    assert loop.loop_var.dtype == "int32" and loop.extent.value == 1


def test_legacy_module_parses():
    assert [gv.name_hint for gv in LegacyModule.functions] == [
        "relu0",
        "linear0",
        "linear1",
        "main",
    ]
    relu0 = LegacyModule["relu0"]
    assert relu0.attrs == {"global_symbol": "relu0", "tir.noalias": True}
    buffers = [relu0.buffer_map[p] for p in relu0.params]
    assert [b.name for b in buffers] == ["X", "Y"] and buffers[0].shape[1].value == 128
    main = LegacyModule["main"]
    calls = [b.value for b in main.body.blocks[0].bindings]
    assert calls[0].args[0] is LegacyModule.get_global_var("linear0")
    assert_structural_equal(main.body.blocks[0].bindings[2].var.struct_info, tensor((1, 10)))


def test_extern_call_module():
    binding = MyModuleWithExternCall["main"].body.blocks[0].bindings[0]
    assert binding.value.op is Op.get("relax.call_dps_packed")
    assert binding.value.args[0].global_symbol == "env.linear"


def test_pre_01_relax_spelling():
    block = Ep9Module["main"].body.blocks[0]
    assert block.bindings[0].value.op is Op.get("relax.multiply")
    assert_structural_equal(Ep9Module, MyModule)


def test_nested_calls_are_bound_first():
    assert isinstance(relax_mlp, relax.Function)
    bindings = relax_mlp.body.blocks[0].bindings
    assert [b.value.op.name for b in bindings] == [
        "relax.matmul",
        "relax.add",
        "relax.nn.relu",
        "relax.matmul",
        "relax.add",
    ]
    assert bindings[1].value.args[0] is bindings[0].var
    n = relax_mlp.params[0].struct_info.shape.values[0]
    assert_structural_equal(bindings[4].var.struct_info, tensor((n, 10)))
    assert relax_mlp.attrs["global_symbol"] == "relax_mlp"


# ------------------------------------------------------------------------ TensorIR details
def test_explicit_regions_equal_inferred_ones():
    @T.prim_func
    def implicit(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    @T.prim_func
    def explicit(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4,), "float32")):
        for i, k in T.grid(4, 8):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                vk = T.axis.reduce(8, k)
                T.reads(A[vi, vk])
                T.writes(B[vi])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    assert_structural_equal(
        implicit.with_attr("global_symbol", "x"), explicit.with_attr("global_symbol", "x")
    )


def test_legacy_buffer_subscript_equals_call():
    @T.prim_func
    def old(A: T.Buffer[(2, 3), "float32"]):
        A[0, 0] = T.float32(1)

    @T.prim_func
    def new(A: T.Buffer((2, 3), "float32")):
        A[0, 0] = T.float32(1)

    assert_structural_equal(
        old.with_attr("global_symbol", "f"), new.with_attr("global_symbol", "f")
    )


def test_statements_and_expressions():
    @T.prim_func(s_tir=True)
    def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "int32"), n: T.int32):
        T.func_attr({"tirx.noalias": True})
        for i in T.parallel(16):
            if i < n and not i > 12:
                A[i] = T.exp(A[i]) + 1
            else:
                A[i] = T.Select(i % 2 == 0, T.float32(0), T.float32(1))
        for i in range(2, 8):
            x: T.int32 = T.truncdiv(i, 2) * 3
            B[i] += T.truncmod(x, n) + T.Cast("int32", A[i])
        for i in T.vectorized(4):
            B[i] = T.if_then_else(0 <= i < 2, i // 2, T.min(i, n))
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            T.evaluate(tx)

    assert f.attrs == {"tir.noalias": True, "global_symbol": "f"}
    assert [p.name_hint for p in f.params] == ["A", "B", "n"] and f.params[2].dtype == "int32"
    par, serial, vec, bound = f.body.seq
    assert par.kind == tir.ForKind.PARALLEL
    branch = par.body
    assert isinstance(branch, tir.IfThenElse) and isinstance(branch.condition, tir.And)
    assert isinstance(branch.condition.b, tir.Not)
    assert isinstance(serial.min, tir.IntImm) and serial.min.value == 2
    let = serial.body
    assert isinstance(let, tir.LetStmt) and let.var.name_hint == "x"
    assert isinstance(let.value.a, tir.Div)
    store = let.body
    assert isinstance(store.value, tir.Add)
    assert isinstance(store.value.a, tir.BufferLoad)  # B[i] += ... reads B[i]
    assert vec.kind == tir.ForKind.VECTORIZED
    assert isinstance(vec.body.value.args[0], tir.And)  # 0 <= i < 2 is chained
    assert bound.kind == tir.ForKind.THREAD_BINDING
    assert bound.thread_binding.thread_tag == "threadIdx.x"
    assert not isinstance(f.body, tir.BlockRealize)  # no block, no allocation: no root
    assert_structural_equal(from_source(f.script()), f)


@pytest.mark.parametrize("with_init", [True, False])
def test_a_python_condition_is_decided_when_parsed(with_init):
    """As in TVM: `if flag:` on a Python bool keeps or drops its body (here a block's init),
    it does not become a TensorIR `if`."""

    @T.prim_func
    def total(A: T.Buffer((4,), "float32"), B: T.Buffer((1,), "float32")):
        for k in range(4):
            with T.block("B"):
                vk = T.axis.reduce(4, k)
                if with_init:
                    with T.init():
                        B[0] = T.float32(0)
                else:
                    T.evaluate(0)
                B[0] = B[0] + A[vk]

    blocks = []
    tir.stmt_functor.post_order_visit(
        total.body, lambda n: blocks.append(n) if isinstance(n, tir.Block) else None
    )
    (block,) = [b for b in blocks if b.name_hint == "B"]
    assert (block.init is not None) == with_init
    printed = total.script()
    assert "if " not in printed
    assert ("T.evaluate(0)" in printed) != with_init  # the branch not taken is gone
    assert_structural_equal(from_source(printed), total)


def test_a_constant_tensorir_condition_prints_typed_and_round_trips():
    branch = tir.IfThenElse(tir.const(True, "bool"), tir.Evaluate(tir.const(1, "int32")), None)
    func = tir.PrimFunc([], branch)
    assert "if T.bool(True):" in func.script()
    assert_structural_equal(from_source(func.script()), func)


def test_block_features():
    @T.prim_func
    def f(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8,), "float32")):
        for i0, j in T.grid(3, 8):
            with T.block("C"):
                vi = T.axis.spatial(8, i0 * 3 + 1)
                vj = T.axis.reduce((0, 8), j)
                T.where(i0 * 3 + 1 < 8)
                T.block_attr({"meta_schedule.tiling": 1})
                local = T.alloc_buffer((8,), "float32", scope="local")
                with T.init():
                    C[vi] = T.float32(0)
                local[vj] = A[vi, vj]
                C[vi] = C[vi] + local[vj]
        with T.block("tile"):
            sub = T.match_buffer(A[0:4, 0:2], (4, 2), "float32")
            sub[0, 0] = T.float32(2)

    root = f.body.block
    realize = root.body[0].body.body
    block = realize.block
    assert isinstance(realize.predicate, tir.LT)
    assert block.iter_vars[0].dom.extent.value == 8
    assert block.iter_vars[1].iter_type == tir.IterVar.CommReduce
    assert block.annotations == {"meta_schedule.tiling": 1}
    assert [b.name for b in block.alloc_buffers] == ["local"]
    assert block.alloc_buffers[0].scope == "local"
    assert "local" not in [r.buffer.name for r in block.reads]
    tile = root.body[1].block
    assert tile.match_buffers[0].buffer.name == "sub"
    assert tile.match_buffers[0].source.buffer.name == "A"
    assert_structural_equal(from_source(f.script()), f)


def test_explicit_root_block_nested_blocks_and_loop_kinds():
    @T.prim_func
    def f(a: T.handle, n: T.int32):
        A = T.match_buffer(a, (n,), "float32")
        B = A
        with T.block("root"):
            C = T.alloc_buffer((4,), "float32")
            for i in T.serial(0, 4, annotations={"pragma": 1}):
                with T.block("outer"):
                    vi = T.axis.spatial((0, 4), i)
                    for j in T.unroll(2):
                        with T.block("inner"):
                            vj = T.axis.spatial(2, j)
                            T.reads(C[vi])
                            T.writes(B[vi * 2 + vj])
                            if vj > 0:
                                B[vi * 2 + vj] = C[vi]
                    C[vi] = T.float32(0)

    root = f.body.block
    assert root.name_hint == "root" and root.reads == () and root.writes == ()
    assert [b.name for b in root.alloc_buffers] == ["C"]
    loop = root.body
    assert loop.annotations == {"pragma": 1} and loop.body.block.name_hint == "outer"
    inner = loop.body.block.body[0]
    assert inner.kind == tir.ForKind.UNROLLED
    assert inner.body.block.writes[0].buffer is f.buffer_map[f.params[0]]  # B is A
    assert_structural_equal(from_source(f.script()), f)


def test_tirx_alias_and_sblock():
    @tirx.prim_func(private=True)
    def f(A: tirx.Buffer((4,), "float32")):
        B = tirx.sblock_alloc_buffer((4,), "float32")
        for i in range(4):
            with tirx.sblock("B"):
                vi = tirx.axis.remap("S", [i])
                B[vi] = A[vi]

    assert tirx is T
    assert f.body.block.alloc_buffers[0].name == "B"


def test_closure_and_frame_names_are_visible():
    size = 6
    scale = 0.5

    @T.prim_func
    def f(A: T.Buffer((size,), "float32")):
        for i in range(size):
            A[i] = A[i] * scale

    assert f.buffer_map[f.params[0]].shape[0].value == 6
    assert f.body.body.value.b.value == 0.5


# ------------------------------------------------------------------------ relax details
@I.ir_module
class Features:
    @T.prim_func(private=True)
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] + T.float32(1)

    @R.function(private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.call_tir(Features.add_one, (x,), out_ty=R.Tensor((4,), "float32"))
        return y

    @R.function(pure=False)
    def main(
        x: R.Tensor(("m",), "float32"),
        c: R.Prim("bool"),
        s: R.Shape(ndim=2),
        o: R.Object,
        t: R.Tuple(R.Tensor, R.Tensor((4,), "float32")),
        f: R.Callable((R.Tensor((4,), "float32"),), R.Tensor((4,), "float32")),
    ):
        R.func_attr({"num_input": 1})
        m = T.int64()
        y = R.match_cast(x, R.Tensor((4,), "float32"))
        z = Features.helper(y)
        if c:
            w = R.add(z, R.const(1.0, "float32"))
        else:
            w = R.call_pure_packed("env.f", z, sinfo_args=R.Tensor((4,), "float32"))
        pair = (w, R.shape([m, 4]))
        first = pair[0]
        p = R.prim_value(T.int64(3))
        s2 = R.str("hi")
        ext = R.ExternFunc("env.g")(first)
        a: R.Tensor(ndim=1) = first
        return (a, pair)


def test_relax_features():
    main = Features["main"]
    assert not main.is_pure and main.attrs == {"num_input": 1, "global_symbol": "main"}
    assert Features["helper"].is_private
    sinfos = [p.struct_info for p in main.params]
    assert isinstance(sinfos[1], PrimStructInfo) and sinfos[1].dtype == "bool"
    assert isinstance(sinfos[2], ShapeStructInfo) and sinfos[2].ndim == 2
    assert isinstance(sinfos[3], ObjectStructInfo)
    assert isinstance(sinfos[4], TupleStructInfo) and sinfos[4].fields[0].ndim == -1
    assert isinstance(sinfos[5], FuncStructInfo)
    bindings = main.body.blocks[0].bindings
    names = [b.var.name_hint for b in bindings]
    assert names == ["y", "z", "w", "pair", "first", "p", "s2", "ext", "a"]
    assert isinstance(bindings[0], relax.MatchCast)
    assert_structural_equal(bindings[1].var.struct_info, tensor((4,)))
    assert bindings[1].value.op is Features.get_global_var("helper")
    branch = bindings[2].value
    assert isinstance(branch, relax.If)
    assert isinstance(branch.true_branch, relax.SeqExpr)
    assert branch.true_branch.body.op is Op.get("relax.add")
    assert isinstance(bindings[4].value, relax.TupleGetItem)
    m = main.params[0].struct_info.shape.values[0]
    assert bindings[3].value.fields[1].values[0] is m
    assert isinstance(bindings[7].value.op, relax.ExternFunc)
    assert bindings[8].var.struct_info.ndim == 1  # the annotation, less specific, is kept
    assert isinstance(main.body.body, relax.Tuple)


def test_metadata_constants_from_source():
    text = """
# from mlckit.script import ir as I
# from mlckit.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2), dtype="float32")) -> R.Tensor((2, 2), dtype="float32"):
        y = R.add(x, metadata["relax.expr.Constant"][0])
        z = R.multiply(y, metadata["relax.expr.Constant"][0])
        return z

metadata = {
    "relax.expr.Constant": [
        I.tensor("float32", (2, 2), "AACAPwAAAEAAAEBAAACAQA=="),
    ],
}
"""
    mod = from_source(text)
    first, second = mod["main"].body.blocks[0].bindings
    const = first.value.args[1]
    assert isinstance(const, relax.Constant) and second.value.args[1] is const
    np.testing.assert_array_equal(const.data.numpy(), [[1, 2], [3, 4]])


def test_metadata_from_defining_frame():
    metadata = {"relax.expr.Constant": [mlckit.runtime.ndarray.array(np.ones(3, "float32"))]}

    @R.function
    def f(x: R.Tensor((3,), "float32")):
        y = R.add(x, metadata["relax.expr.Constant"][0])
        return y

    assert isinstance(f.body.blocks[0].bindings[0].value.args[1], relax.Constant)


def test_from_source_and_parse_on_text():
    text = """
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = T.float32(0)
"""
    func = from_source(text)
    assert isinstance(func, tir.PrimFunc) and func.attrs["global_symbol"] == "f"
    assert_structural_equal(parse(text), func)
    fn = from_source('@R.function\ndef g(x: R.Tensor((2,), "float32")):\n    return x\n')
    assert isinstance(fn, relax.Function) and fn.body.body is fn.params[0]


def test_many_bindings():
    lines = [
        "@R.function",
        'def big(x: R.Tensor((4, 4), "float32")):',
        "    with R.dataflow():",
        "        v0 = R.add(x, x)",
    ]
    lines += [f"        v{i} = R.add(v{i - 1}, x)" for i in range(1, 2000)]
    lines += ["        R.output(v1999)", "    return v1999"]
    func = from_source("\n".join(lines))
    assert len(func.body.blocks[0].bindings) == 2000


def test_statement_builders_outside_a_script():
    with pytest.raises(MLCError, match=r"with T\.block"):
        T.block("b")
    with pytest.raises(MLCError, match=r"R\.output"):
        R.output(1)
    with pytest.raises(MLCError, match=r"n = T\.int64\(\)"):
        T.int64()


def test_expression_builders_outside_a_script():
    assert T.int64(5).dtype == "int64" and T.float32(0).value == 0.0
    assert T.bool(True).dtype == "bool"
    assert_structural_equal(R.Tensor((3, 4), "float32"), tensor((3, 4)))
    assert R.Tensor(("n", 4), "float32").shape.values[0].name_hint == "n"
    assert isinstance(R.add, type(relax.op.add)) and R.nn.relu is relax.op.nn.relu
    arr = I.tensor("int32", (2,), "AQAAAAIAAAA=")
    np.testing.assert_array_equal(arr.numpy(), [1, 2])


def test_notebook_cell_without_future_annotations():
    # IPython keeps each cell's text in linecache under a made-up file name.
    cell = (
        "from mlckit.script import ir as I, relax as R, tir as T\n"
        "\n"
        "class Holder:\n"
        "    @I.ir_module\n"
        "    class Mod:\n"
        "        @T.prim_func\n"
        '        def f(A: T.Buffer((4,), "float32")):\n'
        "            for i in range(4):\n"
        "                A[i] = T.float32(1)\n"
        "\n"
        "        @R.function\n"
        '        def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):\n'
        "            return x\n"
    )
    filename = "/tmp/ipykernel_0/cell_for_test_parser.py"
    linecache.cache[filename] = (len(cell), None, cell.splitlines(True), filename)
    try:
        namespace: dict = {"__name__": "__main__"}
        exec(compile(cell, filename, "exec"), namespace)
    finally:
        del linecache.cache[filename]
    mod = namespace["Holder"].Mod
    assert isinstance(mod, IRModule) and [gv.name_hint for gv in mod.functions] == ["f", "main"]


# ------------------------------------------------------------------------ round trips
ROUND_TRIP = {
    "Module": Module,
    "MyModule": MyModule,
    "LegacyModule": LegacyModule,
    "MyModuleWithExternCall": MyModuleWithExternCall,
    "Ep9Module": Ep9Module,
    "Features": Features,
    "relax_mlp": relax_mlp,
}


@pytest.mark.parametrize("name", list(ROUND_TRIP))
def test_print_then_parse_is_structurally_equal(name):
    node = ROUND_TRIP[name]
    assert_structural_equal(from_source(node.script(show_meta=True)), node)
