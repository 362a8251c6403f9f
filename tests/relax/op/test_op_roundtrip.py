"""Every operator prints as TVMScript (attributes as keyword arguments) and parses back to a
structurally equal module."""

from op_helpers import n, var

import mlckit
from mlckit import relax
from mlckit.script import from_source

op = relax.op


def _every_op_module() -> mlckit.IRModule:
    x, w = var("x", (n, 3, 8, 8)), var("w", (4, 3, 3, 3))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            c = bb.emit(op.nn.conv2d(x, w, padding=1, strides=(1, 1)))
            p = bb.emit(op.nn.max_pool2d(c, pool_size=2, strides=2))
            bb.emit(op.nn.avg_pool2d(c, 3, 2, padding=1, ceil_mode=True, count_include_pad=True))
            f = bb.emit(op.nn.batch_flatten(p))
            v = bb.emit(op.flatten(p))
            a = bb.emit(op.argmax(f, axis=1))
            bb.emit(op.argmax(f, keepdims=True))
            bb.emit(op.nn.log_softmax(f, axis=1))
            bb.emit(op.nn.softmax(f))
            bb.emit(op.concat((f, f), axis=1))
            bb.emit(op.concat((v, v), axis=None))
            bb.emit(op.broadcast_to(a, (3, n)))
            z = bb.emit(op.zeros((n, 64), "float32"))
            o = bb.emit(op.ones((64,), "float32"))
            bb.emit(op.full((n, 2), 1.5))
            cond = bb.emit(op.greater(f, z))
            bb.emit(op.where(cond, f, op.full((1, 64), 2.0, "float32")))
            ln = bb.emit(op.nn.layer_norm(f, o, op.zeros((64,), "float32"), axes=-1, epsilon=1e-6))
            lin = bb.emit(
                op.nn.linear(ln, op.ones((10, 64), "float32"), op.zeros((10,), "float32"))
            )
            d = bb.emit(op.nn.dense(ln, op.ones((10, 64), "float32")))
            s = bb.emit(op.ewise_fma(d, lin, d))
            for unary in (
                op.exp,
                op.log,
                op.sqrt,
                op.tanh,
                op.sigmoid,
                op.negative,
                op.abs,
                op.erf,
            ):
                bb.emit(unary(s))
            for act in (op.nn.relu, op.nn.gelu, op.nn.silu):
                bb.emit(act(s))
            for binary in (
                op.add, op.subtract, op.multiply, op.divide, op.power, op.maximum,
                op.minimum, op.equal, op.not_equal, op.less, op.less_equal, op.greater,
                op.greater_equal,
            ):  # fmt: skip
                bb.emit(binary(s, lin))
            r = bb.emit(op.reshape(s, (-1, 5)))
            t = bb.emit(op.permute_dims(r, [1, 0]))
            bb.emit(op.matmul(t, r))
            for reduce in (op.sum, op.mean, op.max, op.min):
                bb.emit(reduce(t, axis=1, keepdims=True))
            gv = bb.emit_output(op.astype(t, "float16"))
        bb.emit_func_output(gv)
    return bb.get()


def test_every_op_round_trips_through_tvmscript():
    mod = _every_op_module()
    text = mod.script()
    for fragment in (
        "R.nn.conv2d(x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, "
        'data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")',
        "R.argmax(lv3, axis=1, keepdims=False)",
        'R.zeros(R.shape([n, 64]), dtype="float32")',
        "R.concat((lv3, lv3), axis=1)",
        "axes=[-1], epsilon=1e-06, center=True, scale=True",
    ):
        assert fragment in text, text
    mlckit.ir.assert_structural_equal(from_source(text), mod)
