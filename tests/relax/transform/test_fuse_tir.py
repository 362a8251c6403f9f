"""FuseTIR: each ``Primitive`` relax function becomes one PrimFunc; its calls become call_tir."""

from __future__ import annotations

import numpy as np
import pytest

from mlckit import relax
from mlckit.errors import MLCError
from mlckit.ir import assert_structural_equal
from mlckit.relax.analysis import well_formed
from mlckit.relax.transform.annotate_tir_op_pattern import AnnotateTIROpPattern
from mlckit.relax.transform.fuse_ops import FuseOps
from mlckit.relax.transform.fuse_tir import FuseTIR
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


def _run(mod, *args):
    return relax.VirtualMachine(relax.build(mod, "python"))["main"](*args).numpy()


def _inputs(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


# The MLC course's example (seed 002): dense + add grouped by hand into relax functions that
# main calls directly, the kernels as LegalizeOps/topi write them.
@I.ir_module
class CourseMLP:
    @T.prim_func
    def dense(
        rxplaceholder: T.Buffer((1, 784), "float32"),
        rxplaceholder_1: T.Buffer((T.int64(128), T.int64(784)), "float32"),
        T_matmul_NT: T.Buffer((1, T.int64(128)), "float32"),
    ):
        T.func_attr({"tir.noalias": True, "layout_free_buffers": [1]})
        for i0, i1, i2 in T.grid(1, T.int64(128), 784):
            with T.block("T_matmul_NT"):
                i = T.axis.spatial(1, i0)
                j = T.axis.spatial(T.int64(128), i1)
                k = T.axis.reduce(784, i2)
                with T.init():
                    T_matmul_NT[i, j] = T.float32(0)
                T_matmul_NT[i, j] = T_matmul_NT[i, j] + rxplaceholder[i, k] * rxplaceholder_1[j, k]

    @T.prim_func
    def add(
        rxplaceholder: T.Buffer((1, T.int64(128)), "float32"),
        rxplaceholder_1: T.Buffer((T.int64(128),), "float32"),
        T_add: T.Buffer((1, T.int64(128)), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for i0, i1 in T.grid(1, T.int64(128)):
            with T.block("T_add"):
                ax0 = T.axis.spatial(1, i0)
                ax1 = T.axis.spatial(T.int64(128), i1)
                T_add[ax0, ax1] = rxplaceholder[ax0, ax1] + rxplaceholder_1[ax1]

    @T.prim_func
    def relu(
        rxplaceholder: T.Buffer((1, T.int64(128)), "float32"),
        compute: T.Buffer((1, T.int64(128)), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for i0, i1 in T.grid(1, T.int64(128)):
            with T.block("compute"):
                i0_1 = T.axis.spatial(1, i0)
                i1_1 = T.axis.spatial(T.int64(128), i1)
                compute[i0_1, i1_1] = T.max(rxplaceholder[i0_1, i1_1], T.float32(0))

    @T.prim_func
    def dense1(
        rxplaceholder: T.Buffer((1, T.int64(128)), "float32"),
        rxplaceholder_1: T.Buffer((T.int64(10), T.int64(128)), "float32"),
        T_matmul_NT: T.Buffer((1, T.int64(10)), "float32"),
    ):
        T.func_attr({"tir.noalias": True, "layout_free_buffers": [1]})
        for i0, i1, i2 in T.grid(1, T.int64(10), T.int64(128)):
            with T.block("T_matmul_NT"):
                i = T.axis.spatial(1, i0)
                j = T.axis.spatial(T.int64(10), i1)
                k = T.axis.reduce(T.int64(128), i2)
                with T.init():
                    T_matmul_NT[i, j] = T.float32(0)
                T_matmul_NT[i, j] = T_matmul_NT[i, j] + rxplaceholder[i, k] * rxplaceholder_1[j, k]

    @T.prim_func
    def add1(
        rxplaceholder: T.Buffer((1, T.int64(10)), "float32"),
        rxplaceholder_1: T.Buffer((T.int64(10),), "float32"),
        T_add: T.Buffer((1, T.int64(10)), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for i0, i1 in T.grid(1, T.int64(10)):
            with T.block("T_add"):
                ax0 = T.axis.spatial(1, i0)
                ax1 = T.axis.spatial(T.int64(10), i1)
                T_add[ax0, ax1] = rxplaceholder[ax0, ax1] + rxplaceholder_1[ax1]

    @R.function
    def fused_dense_add0(
        x: R.Tensor((1, 784), "float32"),
        w: R.Tensor((128, 784), "float32"),
        b: R.Tensor((128,), "float32"),
    ) -> R.Tensor((1, 128), "float32"):
        R.func_attr({"Primitive": 1})
        cls = CourseMLP
        with R.dataflow():
            lv = R.call_tir(cls.dense, (x, w), out_sinfo=R.Tensor((1, 128), "float32"))
            gv = R.call_tir(cls.add, (lv, b), out_sinfo=R.Tensor((1, 128), "float32"))
            R.output(gv)
        return gv

    @R.function
    def fused_dense_add1(
        x: R.Tensor((1, 128), "float32"),
        w: R.Tensor((10, 128), "float32"),
        b: R.Tensor((10,), "float32"),
    ) -> R.Tensor((1, 10), "float32"):
        R.func_attr({"Primitive": 1})
        cls = CourseMLP
        with R.dataflow():
            lv = R.call_tir(cls.dense1, (x, w), out_sinfo=R.Tensor((1, 10), "float32"))
            gv = R.call_tir(cls.add1, (lv, b), out_sinfo=R.Tensor((1, 10), "float32"))
            R.output(gv)
        return gv

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ) -> R.Tensor((1, 10), "float32"):
        cls = CourseMLP
        with R.dataflow():
            lv1 = cls.fused_dense_add0(x, w0, b0)
            lv2 = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((1, 128), "float32"))
            lv4 = cls.fused_dense_add1(lv2, w1, b1)
            gv = lv4
            R.output(gv)
        return gv


@I.ir_module
class CourseMLPFinal:
    @T.prim_func
    def relu(
        rxplaceholder: T.Buffer((1, T.int64(128)), "float32"),
        compute: T.Buffer((1, T.int64(128)), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        for i0, i1 in T.grid(1, T.int64(128)):
            with T.block("compute"):
                i0_1 = T.axis.spatial(1, i0)
                i1_1 = T.axis.spatial(T.int64(128), i1)
                compute[i0_1, i1_1] = T.max(rxplaceholder[i0_1, i1_1], T.float32(0))

    @T.prim_func
    def fused_dense_add0(
        x: T.Buffer((1, 784), "float32"),
        w: T.Buffer((T.int64(128), T.int64(784)), "float32"),
        b: T.Buffer((T.int64(128),), "float32"),
        T_add: T.Buffer((1, T.int64(128)), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        T_matmul_NT = T.alloc_buffer((1, T.int64(128)), "float32")
        for i0, i1, i2 in T.grid(1, T.int64(128), 784):
            with T.block("T_matmul_NT"):
                i = T.axis.spatial(1, i0)
                j = T.axis.spatial(T.int64(128), i1)
                k = T.axis.reduce(784, i2)
                T.reads(x[i, k], w[j, k])
                T.writes(T_matmul_NT[i, j])
                with T.init():
                    T_matmul_NT[i, j] = T.float32(0)
                T_matmul_NT[i, j] = T_matmul_NT[i, j] + x[i, k] * w[j, k]
        for i0, i1 in T.grid(1, T.int64(128)):
            with T.block("T_add"):
                ax0 = T.axis.spatial(1, i0)
                ax1 = T.axis.spatial(T.int64(128), i1)
                T.reads(T_matmul_NT[ax0, ax1], b[ax1])
                T.writes(T_add[ax0, ax1])
                T_add[ax0, ax1] = T_matmul_NT[ax0, ax1] + b[ax1]

    @T.prim_func
    def fused_dense_add1(
        x: T.Buffer((1, T.int64(128)), "float32"),
        w: T.Buffer((T.int64(10), T.int64(128)), "float32"),
        b: T.Buffer((T.int64(10),), "float32"),
        T_add: T.Buffer((1, T.int64(10)), "float32"),
    ):
        T.func_attr({"tir.noalias": True})
        T_matmul_NT = T.alloc_buffer((1, T.int64(10)), "float32")
        for i0, i1, i2 in T.grid(1, T.int64(10), T.int64(128)):
            with T.block("T_matmul_NT"):
                i = T.axis.spatial(1, i0)
                j = T.axis.spatial(T.int64(10), i1)
                k = T.axis.reduce(T.int64(128), i2)
                with T.init():
                    T_matmul_NT[i, j] = T.float32(0)
                T_matmul_NT[i, j] = T_matmul_NT[i, j] + x[i, k] * w[j, k]
        for i0, i1 in T.grid(1, T.int64(10)):
            with T.block("T_add"):
                ax0 = T.axis.spatial(1, i0)
                ax1 = T.axis.spatial(T.int64(10), i1)
                T_add[ax0, ax1] = T_matmul_NT[ax0, ax1] + b[ax1]

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ) -> R.Tensor((1, 10), "float32"):
        cls = CourseMLPFinal
        with R.dataflow():
            lv1 = R.call_tir(
                cls.fused_dense_add0, (x, w0, b0), out_sinfo=R.Tensor((1, 128), "float32")
            )
            lv2 = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((1, 128), "float32"))
            lv4 = R.call_tir(
                cls.fused_dense_add1, (lv2, w1, b1), out_sinfo=R.Tensor((1, 10), "float32")
            )
            gv = lv4
            R.output(gv)
        return gv


def _sorted(mod):
    """The module with its functions in name order (FuseTIR puts each fused PrimFunc where its
    relax function was; the expected module lists them as the course prints them)."""
    return type(mod)({gv.name_hint: mod[gv] for gv in mod.get_global_vars()})


def test_course_example_fuses_dense_add_into_one_prim_func() -> None:
    after = FuseTIR()(CourseMLP)
    assert_structural_equal(_sorted(after), _sorted(CourseMLPFinal))
    assert [b.name_hint for b in _blocks(after["fused_dense_add0"])] == ["T_matmul_NT", "T_add"]
    assert well_formed(after)
    args = _inputs((1, 784), (128, 784), (128,), (10, 128), (10,))
    x, w0, b0, w1, b1 = args
    want = np.maximum(x @ w0.T + b0, 0) @ w1.T + b1
    np.testing.assert_allclose(_run(CourseMLP, *args), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_run(after, *args), want, rtol=1e-4, atol=1e-4)


def _blocks(func):
    from mlckit.tir import Block
    from mlckit.tir.stmt_functor import post_order_visit

    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) else None)
    return [b for b in found if b.name_hint != "root"]


@I.ir_module
class SplitAdd:
    @T.prim_func(private=True)
    def split(a: T.handle, b: T.handle, c: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, T.int64(4)), "float32")
        B = T.match_buffer(b, (n, T.int64(2)), "float32")
        C = T.match_buffer(c, (n, T.int64(2)), "float32")
        for i, j in T.grid(n, T.int64(2)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for i, j in T.grid(n, T.int64(2)):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj + T.int64(2)]

    @T.prim_func(private=True)
    def add(a: T.handle, b: T.handle, d: T.handle):
        m = T.int64()
        A = T.match_buffer(a, (m, T.int64(2)), "float32")
        B = T.match_buffer(b, (m, T.int64(2)), "float32")
        D = T.match_buffer(d, (m, T.int64(2)), "float32")
        for i, j in T.grid(m, T.int64(2)):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = A[vi, vj] + B[vi, vj]

    @R.function(private=True)
    def fused_split_add(x: R.Tensor(("n", 4), "float32")) -> R.Tuple(
        R.Tensor(("n", 2), "float32"), R.Tensor(("n", 2), "float32")
    ):
        n = T.int64()
        R.func_attr({"Primitive": 1})
        cls = SplitAdd
        with R.dataflow():
            t = R.call_tir(
                cls.split,
                (x,),
                out_sinfo=[R.Tensor((n, 2), "float32"), R.Tensor((n, 2), "float32")],
            )
            lv0 = t[0]
            gv1 = t[1]
            gv0 = R.call_tir(cls.add, (lv0, gv1), out_sinfo=R.Tensor((n, 2), "float32"))
            R.output(gv0, gv1)
        return (gv0, gv1)

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 2), "float32"):
        n = T.int64()
        cls = SplitAdd
        with R.dataflow():
            lv = cls.fused_split_add(x)
            a = lv[0]
            b = lv[1]
            gv = R.call_tir(cls.add, (a, b), out_sinfo=R.Tensor((n, 2), "float32"))
            R.output(gv)
        return gv


@I.ir_module
class SplitAddFused:
    @T.prim_func(private=True)
    def add(a: T.handle, b: T.handle, d: T.handle):
        m = T.int64()
        A = T.match_buffer(a, (m, T.int64(2)), "float32")
        B = T.match_buffer(b, (m, T.int64(2)), "float32")
        D = T.match_buffer(d, (m, T.int64(2)), "float32")
        for i, j in T.grid(m, T.int64(2)):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = A[vi, vj] + B[vi, vj]

    @T.prim_func(private=True)
    def fused_split_add(p_x: T.handle, p_D: T.handle, p_C: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        x = T.match_buffer(p_x, (n, T.int64(4)), "float32")
        D = T.match_buffer(p_D, (n, T.int64(2)), "float32")
        C = T.match_buffer(p_C, (n, T.int64(2)), "float32")
        B = T.alloc_buffer((n, T.int64(2)), "float32")
        for i, j in T.grid(n, T.int64(2)):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = x[vi, vj]
        for i, j in T.grid(n, T.int64(2)):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = x[vi, vj + T.int64(2)]
        for i, j in T.grid(n, T.int64(2)):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                D[vi, vj] = B[vi, vj] + C[vi, vj]

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 2), "float32"):
        n = T.int64()
        cls = SplitAddFused
        with R.dataflow():
            lv = R.call_tir(
                cls.fused_split_add,
                (x,),
                out_sinfo=[R.Tensor((n, 2), "float32"), R.Tensor((n, 2), "float32")],
            )
            a = lv[0]
            b = lv[1]
            gv = R.call_tir(cls.add, (a, b), out_sinfo=R.Tensor((n, 2), "float32"))
            R.output(gv)
        return gv


def test_tuple_results_and_symbolic_shapes() -> None:
    # split's n and add's m describe the same dimension: both become the fused n.
    after = FuseTIR()(SplitAdd)
    assert_structural_equal(_sorted(after), _sorted(SplitAddFused))
    (x,) = _inputs((3, 4))
    want = x[:, :2] + 2 * x[:, 2:]  # (B + C) + C
    np.testing.assert_allclose(_run(SplitAdd, x), want, rtol=1e-6)
    np.testing.assert_allclose(_run(after, x), want, rtol=1e-6)


@I.ir_module
class ReluTwice:
    @T.prim_func(private=True)
    def relu(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = T.max(A[vi], T.float32(0.0))

    @R.function(private=True)
    def fused_relu_relu(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"Primitive": 1})
        cls = ReluTwice
        with R.dataflow():
            lv = R.call_tir(cls.relu, (x,), out_sinfo=R.Tensor((4,), "float32"))
            gv = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((4,), "float32"))
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = ReluTwice
        with R.dataflow():
            gv = cls.fused_relu_relu(x)
            R.output(gv)
        return gv


@I.ir_module
class ReluTwiceFused:
    @T.prim_func(private=True)
    def fused_relu_relu(x: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        T.func_attr({"tir.noalias": True})
        B_1 = T.alloc_buffer((4,), "float32")
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B_1[vi] = T.max(x[vi], T.float32(0.0))
        for i in range(4):
            with T.block("B_1"):
                vi = T.axis.spatial(4, i)
                B[vi] = T.max(B_1[vi], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = ReluTwiceFused
        with R.dataflow():
            gv = R.call_tir(cls.fused_relu_relu, (x,), out_sinfo=R.Tensor((4,), "float32"))
            R.output(gv)
        return gv


def test_same_kernel_twice_gets_fresh_loops_and_block_names() -> None:
    after = FuseTIR()(ReluTwice)
    assert_structural_equal(after, ReluTwiceFused)
    loops = []
    from mlckit.tir import For
    from mlckit.tir.stmt_functor import post_order_visit

    post_order_visit(
        after["fused_relu_relu"].body, lambda n: isinstance(n, For) and loops.append(n)
    )
    assert loops[0].loop_var is not loops[1].loop_var
    (x,) = _inputs((4,))
    np.testing.assert_allclose(_run(after, x), np.maximum(x, 0))


def test_unlowered_primitive_function_is_an_error() -> None:
    mod = from_source(
        """
@I.ir_module
class Module:
    @R.function(private=True)
    def fused_add_relu(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"Primitive": 1})
        with R.dataflow():
            lv = R.add(x, x)
            gv = R.nn.relu(lv)
            R.output(gv)
        return gv
"""
    )
    with pytest.raises(MLCError, match="fused_add_relu.*LegalizeOps"):
        FuseTIR()(mod)
    # A function outlined for an external library is left alone.
    external = mod.copy()
    external["fused_add_relu"] = mod["fused_add_relu"].with_attr("Composite", "lib.add_relu")
    assert_structural_equal(FuseTIR()(external), external)


@I.ir_module
class MLP:
    @T.prim_func(private=True)
    def matmul(x: T.handle, w: T.handle, y: T.handle):
        n, k, m = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (n, k), "float32")
        W = T.match_buffer(w, (k, m), "float32")
        T_matmul = T.match_buffer(y, (n, m), "float32")
        for i, j, r in T.grid(n, m, k):
            with T.block("T_matmul"):
                vi, vj, vr = T.axis.remap("SSR", [i, j, r])
                with T.init():
                    T_matmul[vi, vj] = T.float32(0.0)
                T_matmul[vi, vj] = T_matmul[vi, vj] + X[vi, vr] * W[vr, vj]

    @T.prim_func(private=True)
    def bias_add(x: T.handle, b: T.handle, y: T.handle):
        n, m = T.int64(), T.int64()
        X = T.match_buffer(x, (n, m), "float32")
        B = T.match_buffer(b, (m,), "float32")
        T_add = T.match_buffer(y, (n, m), "float32")
        for i, j in T.grid(n, m):
            with T.block("T_add"):
                vi, vj = T.axis.remap("SS", [i, j])
                T_add[vi, vj] = X[vi, vj] + B[vj]

    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        n, m = T.int64(), T.int64()
        X = T.match_buffer(x, (n, m), "float32")
        compute = T.match_buffer(y, (n, m), "float32")
        for i, j in T.grid(n, m):
            with T.block("compute"):
                vi, vj = T.axis.remap("SS", [i, j])
                compute[vi, vj] = T.max(X[vi, vj], T.float32(0.0))

    @R.function
    def main(
        x: R.Tensor(("n", 8), "float32"),
        w0: R.Tensor((8, 16), "float32"),
        b0: R.Tensor((16,), "float32"),
        w1: R.Tensor((16, 4), "float32"),
        b1: R.Tensor((4,), "float32"),
    ) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        cls = MLP
        with R.dataflow():
            lv0 = R.call_tir(cls.matmul, (x, w0), out_sinfo=R.Tensor((n, 16), "float32"))
            lv1 = R.call_tir(cls.bias_add, (lv0, b0), out_sinfo=R.Tensor((n, 16), "float32"))
            lv2 = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((n, 16), "float32"))
            lv3 = R.call_tir(cls.matmul, (lv2, w1), out_sinfo=R.Tensor((n, 4), "float32"))
            gv = R.call_tir(cls.bias_add, (lv3, b1), out_sinfo=R.Tensor((n, 4), "float32"))
            R.output(gv)
        return gv


def test_mlp_pipeline_prints_and_runs(golden) -> None:
    annotated = AnnotateTIROpPattern()(MLP)
    fused = FuseOps()(annotated)
    final = FuseTIR()(fused)
    golden("relax/fuse_mlp_annotated", annotated.script())
    golden("relax/fuse_mlp_fuse_ops", fused.script())
    golden("relax/fuse_mlp_fuse_tir", final.script())
    assert sorted(gv.name_hint for gv in final.functions) == [
        "fused_matmul_bias_add",
        "fused_matmul_bias_add_relu",
        "main",
    ]
    for mod in (fused, final):
        assert well_formed(mod)
        assert_structural_equal(from_source(mod.script()), mod)
    args = _inputs((3, 8), (8, 16), (16,), (16, 4), (4,))
    x, w0, b0, w1, b1 = args
    want = np.maximum(x @ w0 + b0, 0) @ w1 + b1
    for mod in (MLP, fused, final):
        np.testing.assert_allclose(_run(mod, *args), want, rtol=1e-5, atol=1e-5)


def test_legalized_graph_end_to_end_on_numba() -> None:
    legalize_ops = pytest.importorskip("mlckit.relax.transform.legalize_ops")
    mod = from_source(
        """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), w: R.Tensor((8, 16), "float32"), b: R.Tensor((16,), "float32")) -> R.Tensor(("n", 16), "float32"):
        with R.dataflow():
            lv0 = R.matmul(x, w)
            lv1 = R.add(lv0, b)
            gv = R.nn.relu(lv1)
            R.output(gv)
        return gv
"""
    )
    lowered = AnnotateTIROpPattern()(legalize_ops.LegalizeOps()(mod))
    final = FuseTIR()(FuseOps()(lowered))
    assert sorted(gv.name_hint for gv in final.functions) == ["fused_matmul_add_relu", "main"]
    x, w, b = _inputs((3, 8), (8, 16), (16,))
    ex = relax.build(final, "llvm")
    got = relax.VirtualMachine(ex)["main"](x, w, b).numpy()
    np.testing.assert_allclose(got, np.maximum(x @ w + b, 0), rtol=1e-5, atol=1e-5)
