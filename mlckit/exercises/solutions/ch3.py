"""Reference solutions of chapter 3 (end-to-end model execution)."""


def call_tir_numpy():
    import numpy as np

    def lnumpy_call_tir(prim_func, inputs, shape, dtype):
        # call_tir allocates the output, then lets the function fill it in place
        res = np.empty(shape, dtype=dtype)
        prim_func(*inputs, res)
        return res

    return lnumpy_call_tir


def any_batch():
    from mlckit.script import ir as I
    from mlckit.script import relax as R
    from mlckit.script import tir as T

    @I.ir_module
    class MyModuleAnyBatch:
        @T.prim_func
        def linear0(x: T.handle, w: T.handle, b: T.handle, z: T.handle):
            n = T.int64()
            X = T.match_buffer(x, (n, 784), "float32")
            W = T.match_buffer(w, (128, 784), "float32")
            B = T.match_buffer(b, (128,), "float32")
            Z = T.match_buffer(z, (n, 128), "float32")
            Y = T.alloc_buffer((n, 128), "float32")
            for i, j, k in T.grid(n, 128, 784):
                with T.block("Y"):
                    vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                    with T.init():
                        Y[vi, vj] = T.float32(0)
                    Y[vi, vj] = Y[vi, vj] + X[vi, vk] * W[vj, vk]
            for i, j in T.grid(n, 128):
                with T.block("Z"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    Z[vi, vj] = Y[vi, vj] + B[vj]

        @R.function
        def main(
            x: R.Tensor(("n", 784), "float32"),
            w0: R.Tensor((128, 784), "float32"),
            b0: R.Tensor((128,), "float32"),
            w1: R.Tensor((10, 128), "float32"),
            b1: R.Tensor((10,), "float32"),
        ):
            n = T.int64()
            cls = MyModuleAnyBatch
            with R.dataflow():
                lv0 = R.call_tir(cls.linear0, (x, w0, b0), out_sinfo=R.Tensor((n, 128), "float32"))
                lv1 = R.call_dps_packed("env.relu", (lv0,), out_sinfo=R.Tensor((n, 128), "float32"))
                out = R.call_dps_packed(
                    "env.linear", (lv1, w1, b1), out_sinfo=R.Tensor((n, 10), "float32")
                )
                R.output(out)
            return out

    return MyModuleAnyBatch


def cnn():
    from mlckit import relax, topi
    from mlckit.datasets import cnn_params

    params = cnn_params()
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 1, 28, 28), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            # conv3x3, stride 1, no padding: (1, 1, 28, 28) -> (1, 32, 26, 26)
            conv = bb.emit_te(topi.nn.conv2d_nchw, x, relax.const(params["conv2d_weight"]), 1, 0, 1)
            # the bias has one value per channel: shape it (1, 32, 1, 1) to broadcast over NCHW
            bias = relax.const(params["conv2d_bias"].reshape(1, 32, 1, 1))
            conv = bb.emit_te(topi.add, conv, bias)
            relu0 = bb.emit_te(topi.nn.relu, conv)
            pool = bb.emit_te(topi.nn.max_pool2d, relu0, kernel=2, stride=2)
            flat = bb.emit_te(topi.nn.flatten, pool)
            linear0 = bb.emit_te(
                topi.nn.dense,
                flat,
                relax.const(params["linear0_weight"]),
                relax.const(params["linear0_bias"]),
            )
            relu1 = bb.emit_te(topi.nn.relu, linear0)
            linear1 = bb.emit_te(
                topi.nn.dense,
                relu1,
                relax.const(params["linear1_weight"]),
                relax.const(params["linear1_bias"]),
            )
            probs = bb.emit_output(bb.call_te(topi.nn.softmax, linear1))
        bb.emit_func_output(probs)
    return bb.get()
