"""FuseOps: kernels of a dataflow block grouped by op pattern into ``Primitive`` functions."""

from __future__ import annotations

import numpy as np

import mlckit
from mlckit import relax
from mlckit.ir import assert_structural_equal
from mlckit.ir.transform import PassContext
from mlckit.relax.analysis.op_pattern import OpPatternKind as K
from mlckit.relax.transform.annotate_tir_op_pattern import AnnotateTIROpPattern
from mlckit.relax.transform.fuse_ops import FuseOps, find_fuse_rule
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

# The kernels carry their op_pattern so that each test checks FuseOps alone; every module
# repeats the ones it calls, as TVMScript modules are self-contained.


@I.ir_module
class MatmulAddRelu:
    @T.prim_func(private=True)
    def matmul(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 4})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(private=True)
    def bias_add(
        A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4, 4), "float32")
    ):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]

    @T.prim_func(private=True)
    def relu(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @R.function
    def main(
        x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32"), b: R.Tensor((4,), "float32")
    ) -> R.Tensor((4, 4), "float32"):
        cls = MatmulAddRelu
        with R.dataflow():
            lv0 = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((4, 4), "float32"))
            lv1 = R.call_tir(cls.bias_add, (lv0, b), out_sinfo=R.Tensor((4, 4), "float32"))
            gv = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv)
        return gv


@I.ir_module
class MatmulAddReluFused:
    @T.prim_func(private=True)
    def matmul(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 4})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(private=True)
    def bias_add(
        A: T.Buffer((4, 4), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4, 4), "float32")
    ):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vj]

    @T.prim_func(private=True)
    def relu(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @R.function
    def main(
        x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32"), b: R.Tensor((4,), "float32")
    ) -> R.Tensor((4, 4), "float32"):
        cls = MatmulAddReluFused
        with R.dataflow():
            gv = cls.fused_matmul_bias_add_relu(x, w, b)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_matmul_bias_add_relu(
        x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32"), b: R.Tensor((4,), "float32")
    ) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"Primitive": 1})
        cls = MatmulAddReluFused
        with R.dataflow():
            lv0 = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((4, 4), "float32"))
            lv1 = R.call_tir(cls.bias_add, (lv0, b), out_sinfo=R.Tensor((4, 4), "float32"))
            gv = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv)
        return gv


def _run(mod, *args):
    return relax.VirtualMachine(relax.build(mod, "python"))["main"](*args)


def _inputs(*shapes):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype("float32") for s in shapes]


def test_matmul_add_relu_is_one_group() -> None:
    after = FuseOps()(MatmulAddRelu)
    assert_structural_equal(after, MatmulAddReluFused)
    assert after["fused_matmul_bias_add_relu"].attrs["Primitive"] == 1
    x, w, b = _inputs((4, 4), (4, 4), (4,))
    want = np.maximum(x @ w + b, 0)
    np.testing.assert_allclose(_run(MatmulAddRelu, x, w, b).numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(_run(after, x, w, b).numpy(), want, rtol=1e-5)


def test_patterns_from_annotate_give_the_same_groups() -> None:
    stripped = MatmulAddRelu.copy()
    for name in ("matmul", "bias_add", "relu"):
        stripped[name] = stripped[name].without_attr("op_pattern")
    assert_structural_equal(FuseOps()(AnnotateTIROpPattern()(stripped)), MatmulAddReluFused)


def test_opt_level_zero_and_unannotated_kernels_fuse_nothing() -> None:
    assert_structural_equal(FuseOps(fuse_opt_level=0)(MatmulAddRelu), MatmulAddRelu)
    with PassContext(opt_level=0):
        assert_structural_equal(FuseOps()(MatmulAddRelu), MatmulAddRelu)
    stripped = MatmulAddRelu.copy()
    for name in ("matmul", "bias_add", "relu"):
        stripped[name] = stripped[name].without_attr("op_pattern")
    # Without op_pattern every kernel is opaque.
    assert_structural_equal(FuseOps()(stripped), stripped)


@I.ir_module
class Diamond:
    @T.prim_func(private=True)
    def matmul(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 4})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(private=True)
    def exp(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])

    @T.prim_func(private=True)
    def relu(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @T.prim_func(private=True)
    def add(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi, vj] + B[vi, vj]

    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        cls = Diamond
        with R.dataflow():
            lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((4, 4), "float32"))
            a = R.call_tir(cls.exp, (lv,), out_sinfo=R.Tensor((4, 4), "float32"))
            b = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((4, 4), "float32"))
            gv = R.call_tir(cls.add, (a, b), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv)
        return gv


def test_diamond_fuses_at_its_post_dominator_without_duplication() -> None:
    after = FuseOps()(Diamond)
    fused = after["fused_matmul_exp_relu_add"]
    calls = [b.value.args[0].name_hint for b in fused.body.blocks[0].bindings]
    assert calls == ["matmul", "exp", "relu", "add"]  # the matmul once, for both branches
    assert [p.name_hint for p in fused.params] == ["x", "w"]
    (binding,) = after["main"].body.blocks[0].bindings
    assert binding.value.op.name_hint == "fused_matmul_exp_relu_add"
    x, w = _inputs((4, 4), (4, 4))
    want = np.exp(x @ w) + np.maximum(x @ w, 0)
    np.testing.assert_allclose(_run(after, x, w).numpy(), want, rtol=1e-5)


@I.ir_module
class UsedTwice:
    @T.prim_func(private=True)
    def matmul(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 4})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(private=True)
    def exp(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])

    @T.prim_func(private=True)
    def relu(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tuple(
        R.Tensor((4, 4), "float32"), R.Tensor((4, 4), "float32")
    ):
        cls = UsedTwice
        with R.dataflow():
            lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((4, 4), "float32"))
            gv0 = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((4, 4), "float32"))
            gv1 = R.call_tir(cls.exp, (lv,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv0, gv1)
        return (gv0, gv1)


def test_value_used_by_two_results_is_not_duplicated() -> None:
    # The matmul feeds two results that never meet again: it has no post-dominator, so
    # fusing it into either consumer would compute it twice. Nothing is fused.
    assert_structural_equal(FuseOps()(UsedTwice), UsedTwice)


@I.ir_module
class TwoBlocks:
    @T.prim_func(private=True)
    def matmul(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 4})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(private=True)
    def exp(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])

    @T.prim_func(private=True)
    def relu(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        cls = TwoBlocks
        with R.dataflow():
            lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((4, 4), "float32"))
            gv0 = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv0)
        with R.dataflow():
            lv1 = R.call_tir(cls.exp, (gv0,), out_sinfo=R.Tensor((4, 4), "float32"))
            gv = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv)
        return gv


@I.ir_module
class TwoBlocksFused:
    @T.prim_func(private=True)
    def matmul(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((4, 4), "float32"),
        C: T.Buffer((4, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 4})
        for i, j, k in T.grid(4, 4, 4):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0.0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func(private=True)
    def exp(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])

    @T.prim_func(private=True)
    def relu(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(4, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @R.function
    def main(x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor(
        (4, 4), "float32"
    ):
        cls = TwoBlocksFused
        with R.dataflow():
            gv0 = cls.fused_matmul_relu(x, w)
            R.output(gv0)
        with R.dataflow():
            gv = cls.fused_exp_relu(gv0)
            R.output(gv)
        return gv

    @R.function(private=True)
    def fused_matmul_relu(
        x: R.Tensor((4, 4), "float32"), w: R.Tensor((4, 4), "float32")
    ) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"Primitive": 1})
        cls = TwoBlocksFused
        with R.dataflow():
            lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((4, 4), "float32"))
            gv0 = R.call_tir(cls.relu, (lv,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv0)
        return gv0

    @R.function(private=True)
    def fused_exp_relu(gv0: R.Tensor((4, 4), "float32")) -> R.Tensor((4, 4), "float32"):
        R.func_attr({"Primitive": 1})
        cls = TwoBlocksFused
        with R.dataflow():
            lv1 = R.call_tir(cls.exp, (gv0,), out_sinfo=R.Tensor((4, 4), "float32"))
            gv = R.call_tir(cls.relu, (lv1,), out_sinfo=R.Tensor((4, 4), "float32"))
            R.output(gv)
        return gv


def test_groups_stop_at_dataflow_block_boundaries() -> None:
    after = FuseOps()(TwoBlocks)
    assert_structural_equal(after, TwoBlocksFused)
    x, w = _inputs((4, 4), (4, 4))
    want = np.maximum(np.exp(np.maximum(x @ w, 0)), 0)
    np.testing.assert_allclose(_run(after, x, w).numpy(), want, rtol=1e-5)


@I.ir_module
class SplitThenRelu:
    @T.prim_func(private=True)
    def split(
        A: T.Buffer((4, 4), "float32"),
        B: T.Buffer((2, 4), "float32"),
        C: T.Buffer((2, 4), "float32"),
    ):
        T.func_attr({"op_pattern": 2})
        for i, j in T.grid(2, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj]
        for i, j in T.grid(2, 4):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = A[vi + 2, vj]

    @T.prim_func(private=True)
    def relu(A: T.Buffer((2, 4), "float32"), B: T.Buffer((2, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(2, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.max(A[vi, vj], T.float32(0.0))

    @T.prim_func(private=True)
    def exp(A: T.Buffer((2, 4), "float32"), B: T.Buffer((2, 4), "float32")):
        T.func_attr({"op_pattern": 0})
        for i, j in T.grid(2, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])

    @R.function
    def main(x: R.Tensor((4, 4), "float32")) -> R.Tuple(
        R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")
    ):
        cls = SplitThenRelu
        with R.dataflow():
            t = R.call_tir(
                cls.split,
                (x,),
                out_sinfo=[R.Tensor((2, 4), "float32"), R.Tensor((2, 4), "float32")],
            )
            a = t[0]
            b = t[1]
            gv0 = R.call_tir(cls.relu, (a,), out_sinfo=R.Tensor((2, 4), "float32"))
            gv1 = R.call_tir(cls.exp, (b,), out_sinfo=R.Tensor((2, 4), "float32"))
            R.output(gv0, gv1)
        return (gv0, gv1)


def test_tuple_fields_made_outside_a_group_are_not_fused() -> None:
    # The split feeds two results, so it stays alone; the tuple items fuse (injective) into
    # relu and exp, but a group would then receive a tuple: they are taken out again.
    assert_structural_equal(FuseOps()(SplitThenRelu), SplitThenRelu)


def test_the_rules_let_no_reduction_or_opaque_node_join_a_group() -> None:
    # They start groups (elementwise work fuses into a reduction) but never join one.
    for pattern in (K.kCommReduce, K.kTuple, K.kOpaque):
        assert all(find_fuse_rule(pattern, phase, path) is None for phase in (0, 1) for path in K)
    # A matmul takes elementwise ops in the first phase only; injective ops wait for the second.
    assert find_fuse_rule(K.kOutEWiseFusable, 0, K.kElemWise) is not None
    assert find_fuse_rule(K.kOutEWiseFusable, 1, K.kElemWise) is None
    assert find_fuse_rule(K.kInjective, 0, K.kElemWise) is None
    assert find_fuse_rule(K.kInjective, 1, K.kOpaque) is not None


def test_a_call_passing_tir_vars_stays_unfused() -> None:
    """broadcast_to a symbolic shape the kernel cannot read off its buffers (n * 3) passes n
    as a tir_var; FuseTIR merges kernels taking buffers only, so FuseOps leaves it alone and
    still fuses the elementwise calls around it."""

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor(("n", 3), "float32"), s: R.Tensor((), "float32")):
            n = T.int64()
            with R.dataflow():
                lv = R.exp(s)
                lv1 = R.broadcast_to(lv, R.shape([n * 3]))
                lv2 = R.reshape(lv1, R.shape([n, 3]))
                gv = R.add(R.exp(lv2), x)
                R.output(gv)
            return gv

    lowered = relax.transform.LegalizeOps()(Module)
    calls = lowered["main"].body.blocks[0].bindings
    assert any(len(b.value.args) == 3 for b in calls)  # the broadcast_to passes (n,)
    fused = relax.get_pipeline("default")(Module)
    names = [gv.name_hint for gv in fused.get_global_vars()]
    assert any(name.startswith("fused_") for name in names)
    assert "broadcast_to" in names  # its own kernel
    x, s = _inputs((2, 3), ())
    vm = relax.VirtualMachine(relax.build(fused, "llvm"), mlckit.cpu())
    np.testing.assert_allclose(vm["main"](x, s).numpy(), np.exp(np.exp(s)) + x, rtol=1e-5)
