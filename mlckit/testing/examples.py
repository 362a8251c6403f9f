"""The course's example modules, shared by tests, benchmarks and notebooks.

``Module``: the MLP with a symbolic batch ``n`` (weights (in, out)); ``MyModule``: the
multiply/add graph of the pattern-rewriting chapter; ``MyModuleLegacy``: the older syntax
with fixed shapes and weights in (out, in) layout; ``MyModuleWithExternCall`` and
``MyModuleMixture``: the same model calling registered functions ``env.linear``/``env.relu``;
``tmm16_desc``/``tmm16_impl``: the tensor intrinsic of the course's specialized-hardware
chapter (``C += A @ B.T`` on 16x16 tiles in the accelerator's memories), its implementation
calling the extern ``"tmm16"``, which ``tmm16_micro_kernel`` implements for numba.
``MLPBackbone``: the course MLP (784-128-10, relu) as a training backbone for
``relax.training.SetupTrainer``, batches of 50, its four weights as parameters.
``mlp_with_nll_loss(batch, sizes)``: an MLP ending in log_softmax + nll_loss, built with
BlockBuilder, the function differentiation is tested on.
"""

from __future__ import annotations

import itertools

from mlckit import relax
from mlckit.ir.module import IRModule
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

# ruff: noqa: F821 - TVMScript: names are defined by the parser; lines follow the course.


@I.ir_module
class Module:
    @T.prim_func(private=True)
    def linear(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
        M, N, K = T.int64(), T.int64(), T.int64()
        X = T.match_buffer(x, (M, K), "float32")
        W = T.match_buffer(w, (K, N), "float32")
        B = T.match_buffer(b, (N,), "float32")
        Z = T.match_buffer(z, (M, N), "float32")
        Y = T.alloc_buffer((M, N), "float32")
        for i, j, k in T.grid(M, N, K):
            with T.block("Y"):
                v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    Y[v_i, v_j] = T.float32(0.0)
                Y[v_i, v_j] = Y[v_i, v_j] + X[v_i, v_k] * W[v_k, v_j]
        for i, j in T.grid(M, N):
            with T.block("Z"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Z[v_i, v_j] = Y[v_i, v_j] + B[v_j]

    @T.prim_func(private=True)
    def relu(x: T.handle, y: T.handle):
        M, N = T.int64(), T.int64()
        X = T.match_buffer(x, (M, N), "float32")
        Y = T.match_buffer(y, (M, N), "float32")
        for i, j in T.grid(M, N):
            with T.block("Y"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                Y[v_i, v_j] = T.max(X[v_i, v_j], T.float32(0.0))

    @R.function
    def main(
        x: R.Tensor(("n", 784), dtype="float32"),
        w0: R.Tensor((784, 256), dtype="float32"),
        b0: R.Tensor((256,), dtype="float32"),
        w1: R.Tensor((256, 10), dtype="float32"),
        b1: R.Tensor((10,), dtype="float32"),
    ) -> R.Tensor(("n", 10), dtype="float32"):
        cls = Module
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(cls.linear, (x, w0, b0), out_sinfo=R.Tensor((n, 256), dtype="float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), out_sinfo=R.Tensor((n, 256), dtype="float32"))
            lv2 = R.call_tir(
                cls.linear, (lv1, w1, b1), out_sinfo=R.Tensor((n, 10), dtype="float32")
            )
            R.output(lv2)
        return lv2


@I.ir_module
class MyModule:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        with R.dataflow():
            lv0 = R.multiply(x, y)
            gv0 = R.add(lv0, y)
            R.output(gv0)
        return gv0


@I.ir_module
class MyModuleLegacy:
    @T.prim_func
    def relu0(X: T.Buffer[(1, 128), "float32"], Y: T.Buffer[(1, 128), "float32"]):
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

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            out = R.call_tir(relu0, (lv0,), (1, 128), dtype="float32")
            R.output(out)
        return out


@I.ir_module
class MyModuleWithExternCall:
    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.call_tir("env.linear", (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir("env.relu", (lv0,), (1, 128), dtype="float32")
            out = R.call_tir("env.linear", (lv1, w1, b1), (1, 10), dtype="float32")
            R.output(out)
        return out


@I.ir_module
class MyModuleMixture:
    @T.prim_func
    def linear0(
        X: T.Buffer((1, 784), "float32"),
        W: T.Buffer((128, 784), "float32"),
        B: T.Buffer((128,), "float32"),
        Z: T.Buffer((1, 128), "float32"),
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

    @R.function
    def main(
        x: R.Tensor((1, 784), "float32"),
        w0: R.Tensor((128, 784), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((10, 128), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.call_tir(linear0, (x, w0, b0), (1, 128), dtype="float32")
            lv1 = R.call_tir("env.relu", (lv0,), (1, 128), dtype="float32")
            out = R.call_dps_packed("env.linear", (lv1, w1, b1), R.Tensor((1, 10), "float32"))
            R.output(out)
        return out


@I.ir_module
class MLPBackbone:
    I.module_attrs({"param_num": 4, "state_num": 0})

    @R.function
    def backbone(
        x: R.Tensor((50, 784), "float32"),
        w0: R.Tensor((784, 128), "float32"),
        b0: R.Tensor((128,), "float32"),
        w1: R.Tensor((128, 10), "float32"),
        b1: R.Tensor((10,), "float32"),
    ):
        with R.dataflow():
            lv0 = R.matmul(x, w0)
            lv1 = R.add(lv0, b0)
            lv2 = R.nn.relu(lv1)
            lv3 = R.matmul(lv2, w1)
            out = R.add(lv3, b1)
            R.output(out)
        return out


@T.prim_func
def tmm16_desc(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16), "float32", offset_factor=16, scope="global.A_reg")
    B = T.match_buffer(b, (16, 16), "float32", offset_factor=16, scope="global.B_reg")
    C = T.match_buffer(c, (16, 16), "float32", offset_factor=16, scope="global.accumulator")
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        for i, j, k in T.grid(16, 16, 16):
            with T.block(""):
                vii, vjj, vkk = T.axis.remap("SSR", [i, j, k])
                C[vii, vjj] = C[vii, vjj] + A[vii, vkk] * B[vjj, vkk]


@T.prim_func
def tmm16_impl(a: T.handle, b: T.handle, c: T.handle) -> None:
    sa = T.var("int32")
    sb = T.var("int32")
    sc = T.var("int32")
    A = T.match_buffer(
        a, (16, 16), "float32", offset_factor=16, strides=[sa, 1], scope="global.A_reg"
    )
    B = T.match_buffer(
        b, (16, 16), "float32", offset_factor=16, strides=[sb, 1], scope="global.B_reg"
    )
    C = T.match_buffer(
        c, (16, 16), "float32", offset_factor=16, strides=[sc, 1], scope="global.accumulator"
    )
    with T.block("root"):
        T.reads(C[0:16, 0:16], A[0:16, 0:16], B[0:16, 0:16])
        T.writes(C[0:16, 0:16])
        T.evaluate(
            T.call_extern(
                "tmm16",
                C.access_ptr("w"),
                A.access_ptr("r"),
                B.access_ptr("r"),
                sa,
                sb,
                sc,
                dtype="int32",
            )
        )


def tmm16_micro_kernel(C, A, B, stride_a, stride_b, stride_c):  # type: ignore[no-untyped-def]
    """``tmm16`` for ``tir.op.register_extern``: each argument of an ``access_ptr`` arrives as
    the 16x16 tile it points to (a strided view), so the strides are not needed here."""
    for i in range(16):
        for j in range(16):
            total = C[i, j]
            for k in range(16):
                total += A[i, k] * B[j, k]
            C[i, j] = total
    return 0


def mlp_with_nll_loss(batch: int = 5, sizes: tuple[int, ...] = (8, 6, 5, 4)) -> IRModule:
    """``main(x, w0, b0, w1, b1, ..., labels)``: dense layers ``x @ w + b`` of ``sizes``, relu
    between them, then log_softmax and nll_loss (a 0-d float32 loss)."""
    x = relax.Var("x", relax.TensorStructInfo((batch, sizes[0]), "float32"))
    labels = relax.Var("labels", relax.TensorStructInfo((batch,), "int64"))
    params = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        params += [
            relax.Var(f"w{i}", relax.TensorStructInfo((n_in, n_out), "float32")),
            relax.Var(f"b{i}", relax.TensorStructInfo((n_out,), "float32")),
        ]
    bb = relax.BlockBuilder()
    with bb.function("main", [x, *params, labels]):
        with bb.dataflow():
            h = x
            for i in range(0, len(params), 2):
                h = bb.emit(relax.op.add(relax.op.matmul(h, params[i]), params[i + 1]))
                if i + 2 < len(params):
                    h = bb.emit(relax.op.nn.relu(h))
            logp = bb.emit(relax.op.nn.log_softmax(h))
            gv = bb.emit_output(relax.op.nn.nll_loss(logp, labels))
        bb.emit_func_output(gv)
    return bb.get()
