"""relax.transform.ForwardGradient: the JVP function's tangents equal central differences of the
original function along the tangent direction (both run through the VM), agree with the
reverse mode (jvp(x; v) = sum(grad(x) * v) for a scalar result) and with torch's forward mode;
its TVMScript round-trips; bad requests are TransformErrors naming the function and variable."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mlckit
from mlckit import relax
from mlckit.errors import MLCError, TransformError
from mlckit.ir import IRModule, assert_structural_equal
from mlckit.relax.training.loss import (
    CategoricalCrossEntropyLoss,
    CrossEntropyLoss,
    L1Loss,
    MSELoss,
)
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.testing.examples import mlp_with_nll_loss

torch = pytest.importorskip("torch")

F32 = "float32"
F64 = "float64"


def _vm(mod):
    return relax.VirtualMachine(
        relax.build(relax.transform.LegalizeOps()(mod), "llvm"), mlckit.cpu()
    )


def _random(*shapes, seed=0, dtype=F32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def _numpy(value):
    """An NDArray, or a (nested) tuple of them, as numpy arrays."""
    if isinstance(value, tuple):
        return [_numpy(v) for v in value]
    return value.numpy()


def _flat(value):
    """The leaves of a nested list of arrays, in order."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _flat(v)]
    return [value]


def _moved(inputs, directions, step):
    """``inputs + step * directions``, leaf by leaf (inputs may hold tuples)."""
    if isinstance(inputs, (tuple, list)):
        return type(inputs)(_moved(i, d, step) for i, d in zip(inputs, directions))
    return (inputs + step * directions).astype(inputs.dtype)


def _zero_like(value):
    if isinstance(value, tuple):
        return tuple(_zero_like(v) for v in value)
    return np.zeros_like(value)


def _central_difference(main, inputs, directions, delta):
    """(main(x + delta v) - main(x - delta v)) / (2 delta), for each output leaf."""
    ahead = _flat(_numpy(main(*_moved(inputs, directions, delta))))
    behind = _flat(_numpy(main(*_moved(inputs, directions, -delta))))
    return [(a - b) / (2 * delta) for a, b in zip(ahead, behind)]


def _check_jvp(mod, inputs, directions, rtol, atol, delta=1e-3, func="main", **forward_args):
    """The JVP's value equals the function's and its tangent central differences of the
    function along ``directions`` (one per differentiated parameter, as ``<func>_jvp`` takes
    them)."""
    after = relax.transform.ForwardGradient(func, **forward_args)(mod)
    vm = _vm(after)
    value, tangent = vm[f"{func}_jvp"](*inputs, *directions)
    # The JVP's parameters are the function's, then "<p>_tangent" for each differentiated p;
    # the others stay where they are.
    names = [p.name_hint for p in mod[func].params]
    seeds = [
        p.name_hint.removesuffix("_tangent") for p in after[f"{func}_jvp"].params[len(names) :]
    ]
    moving = dict(zip(seeds, directions, strict=True))
    full = [moving.get(name, _zero_like(a)) for name, a in zip(names, inputs)]
    expected = _central_difference(vm[func], inputs, full, delta)
    for got, want in zip(_flat(_numpy(value)), _flat(_numpy(vm[func](*inputs))), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    for got, want in zip(_flat(_numpy(tangent)), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return after, vm, _numpy(tangent)


def _reverse_gradients(mod, inputs, **gradient_args):
    vm = _vm(relax.transform.Gradient("main", **gradient_args)(mod))
    _, grads = vm["main_adjoint"](*inputs)
    return _numpy(grads)


def _dot(grads, directions):
    """sum(grad * v) over every leaf: the directional derivative the gradient gives."""
    return sum(float(np.sum(g * v)) for g, v in zip(_flat(grads), _flat(directions)))


# ---------------------------------------------------------------- TVM's expression
@I.ir_module
class TVMExpression:
    @R.function
    def main(
        x: R.Tensor((3, 3), "float32"),
        y: R.Tensor((3, 3), "float32"),
        z: R.Tensor((3, 3), "float32"),
    ) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv0 = R.multiply(x, R.const(2.0, "float32"))
            lv1 = R.multiply(y, R.const(2.0, "float32"))
            lv2 = R.subtract(lv0, lv1)
            lv3 = R.add(y, z)
            lv4 = R.multiply(lv2, lv3)
            gv = R.sum(lv4)
            R.output(gv)
        return gv


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tvm_expression_equals_differences_closed_form_and_reverse(seed):
    x, y, z, dx, dy, dz = _random(*[(3, 3)] * 6, seed=seed)
    _, _, tangent = _check_jvp(TVMExpression, [x, y, z], [dx, dy, dz], rtol=1e-2, atol=1e-2)
    # d sum((2x - 2y)(y + z)) = sum((2dx - 2dy)(y + z) + (2x - 2y)(dy + dz)).
    closed = np.sum((2 * dx - 2 * dy) * (y + z) + (2 * x - 2 * y) * (dy + dz))
    np.testing.assert_allclose(tangent, closed, rtol=1e-5, atol=1e-5)
    grads = _reverse_gradients(TVMExpression, [x, y, z])
    np.testing.assert_allclose(tangent, _dot(grads, [dx, dy, dz]), rtol=1e-5, atol=1e-5)


def test_program_carries_dual_values_and_round_trips():
    after = relax.transform.ForwardGradient("main")(TVMExpression)
    text = after["main_jvp"].script()
    for line in (
        'x_tangent: R.Tensor((3, 3), dtype="float32"),',
        'lv0_tangent: R.Tensor((3, 3), dtype="float32") = R.multiply(x_tangent, '
        'R.const(2.0, "float32"))',
        'lv3_tangent: R.Tensor((3, 3), dtype="float32") = R.add(y_tangent, z_tangent)',
        'gv_tangent: R.Tensor((), dtype="float32") = R.sum(lv4_tangent, axis=None, keepdims=False)',
        "return (gv, gv_tangent)",
    ):
        assert line in text
    # Each value is followed by its tangent.
    assert text.index("lv2: ") < text.index("lv2_tangent") < text.index("lv3: ")
    assert_structural_equal(from_source(after.script()), after)
    assert_structural_equal(after["main"], TVMExpression["main"])  # main is kept as it was
    assert list(after["main_jvp"].params[:3]) != list(after["main"].params)  # fresh variables


def test_forward_bindings_keep_their_names():
    @I.ir_module
    class Tiny:
        @R.function
        def main(x: R.Tensor((4, 3), "float32"), w: R.Tensor((3, 2), "float32")):
            with R.dataflow():
                lv0 = R.matmul(x, w)
                lv1 = R.tanh(lv0)
                gv = R.sum(lv1)
                R.output(gv)
            return gv

    text = relax.transform.ForwardGradient("main")(Tiny)["main_jvp"].script()
    # The product rule's two matmuls are parts of lv0's tangent; lv1 is still lv1.
    for line in (
        'lv0_tangent_part: R.Tensor((4, 2), dtype="float32") = R.matmul(x_tangent, w',
        'lv0_tangent_part1: R.Tensor((4, 2), dtype="float32") = R.matmul(x, w_tangent',
        'lv0_tangent: R.Tensor((4, 2), dtype="float32") = R.add(lv0_tangent_part, '
        "lv0_tangent_part1)",
        'lv1: R.Tensor((4, 2), dtype="float32") = R.tanh(lv0)',
    ):
        assert line in text


def test_zero_tangents_are_skipped_not_computed():
    x = TVMExpression["main"].params[0]
    after = relax.transform.ForwardGradient("main", require_grads=x)(TVMExpression)
    text = after["main_jvp"].script()
    assert [p.name_hint for p in after["main_jvp"].params] == ["x", "y", "z", "x_tangent"]
    # y and z do not move: lv1 and lv3 get no tangent, and lv2 - lv1 moves as lv0 does.
    assert "lv1_tangent" not in text and "lv3_tangent" not in text and "zeros" not in text
    assert 'lv2_tangent: R.Tensor((3, 3), dtype="float32") = lv0_tangent' in text
    assert 'lv4_tangent: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2_tangent, lv3)' in text
    x_np, y, z, dx = _random((3, 3), (3, 3), (3, 3), (3, 3), seed=3)
    _check_jvp(TVMExpression, [x_np, y, z], [dx], rtol=1e-2, atol=1e-2, require_grads=[x])


# --------------------------------------------------------------------- the MLP
def _mlp_with_nll_loss(batch=5, sizes=(8, 6, 5, 4)):
    """The MLP, its float parameters (x and the weights) and their shapes."""
    mod = mlp_with_nll_loss(batch, sizes)
    floats = list(mod["main"].params[:-1])
    return mod, floats, [tuple(int(d) for d in p.struct_info_.shape_values) for p in floats]


def test_three_layer_mlp_with_nll_loss_equals_differences_and_reverse():
    mod, floats, shapes = _mlp_with_nll_loss()
    inputs = _random(*shapes, seed=4)
    directions = _random(*shapes, seed=5)
    labels = np.array([0, 3, 1, 3, 2], dtype="int64")
    # The int64 labels have no tangent: by default every float parameter is differentiated.
    after, _, tangent = _check_jvp(mod, [*inputs, labels], directions, rtol=1e-2, atol=1e-3)
    jvp_params = [p.name_hint for p in after["main_jvp"].params]
    assert jvp_params[-len(floats) :] == [f"{p.name_hint}_tangent" for p in floats]
    grads = _reverse_gradients(mod, [*inputs, labels], require_grads=floats)
    np.testing.assert_allclose(tangent, _dot(grads, directions), rtol=1e-5, atol=1e-6)


def test_forward_and_reverse_agree_at_relus_kink():
    # With the first layer's weights and bias 0, the first relu sees exactly 0, where both
    # modes let the derivative pass.
    mod, floats, shapes = _mlp_with_nll_loss()
    inputs = _random(*shapes, seed=21)
    inputs[1:3] = [np.zeros(s, F32) for s in shapes[1:3]]
    directions = _random(*shapes, seed=22)
    labels = np.array([0, 3, 1, 3, 2], dtype="int64")
    vm = _vm(relax.transform.ForwardGradient("main")(mod))
    _, tangent = vm["main_jvp"](*inputs, labels, *directions)
    grads = _reverse_gradients(mod, [*inputs, labels], require_grads=floats)
    assert tangent.numpy() != 0
    np.testing.assert_allclose(tangent.numpy(), _dot(grads, directions), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------ the training losses
# name -> the loss, built for predictions (3, 5) and targets of the shape and dtype given
LOSSES = {
    "L1Loss": (L1Loss, (3, 5), "float32"),
    "MSELoss": (MSELoss, (3, 5), "float32"),
    "CrossEntropyLoss": (CrossEntropyLoss, (3,), "int64"),
    "CategoricalCrossEntropyLoss": (CategoricalCrossEntropyLoss, (3, 5), "int64"),
}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", LOSSES)
def test_training_losses_differentiate_forwards(loss, reduction):
    make, target_shape, target_dtype = LOSSES[loss]
    func = make(reduction)(
        relax.TensorStructInfo((3, 5), F32), relax.TensorStructInfo(target_shape, target_dtype)
    )
    name = func.attrs["global_symbol"]
    rng = np.random.default_rng(23)
    if target_dtype == "int64":
        labels = rng.integers(0, 5, size=3)
        targets = labels if target_shape == (3,) else np.eye(5, dtype="int64")[labels]
    else:
        targets = rng.standard_normal(target_shape).astype(F32)
    predictions, direction = _random((3, 5), (3, 5), seed=24)
    predictions_var = func.params[0]
    _check_jvp(
        IRModule({name: func}),
        [predictions, targets.astype(target_dtype)],
        [direction],
        rtol=1e-2,
        atol=1e-3,
        func=name,
        require_grads=[predictions_var],
    )


# -------------------------------------------------------------- tuples and friends
@I.ir_module
class TupleGraph:
    @R.function
    def main(
        p: R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((5, 4), "float32")),
        x: R.Tensor((4, 6), "float32"),
        y: R.Tensor((4, 2), "float32"),
    ) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = p[0]
            b = p[1]
            pair = (R.sigmoid(a), R.tanh(b))
            m = R.matmul(pair[0], R.permute_dims(pair[1]))
            parts = R.split(x, indices_or_sections=[2, 5], axis=1)
            joined = R.concat((R.sigmoid(parts[0]), y, R.tanh(parts[2])), axis=1)
            n = R.matmul(R.permute_dims(joined), joined)
            gv = R.add(R.sum(R.multiply(m, m)), R.sum(R.multiply(n, n)))
            R.output(gv)
        return gv


def test_split_concat_tuples_sigmoid_tanh_matmul_permute_dims():
    a, b, x, y = _random((3, 4), (5, 4), (4, 6), (4, 2), seed=6)
    da, db, dx, dy = _random((3, 4), (5, 4), (4, 6), (4, 2), seed=7)
    inputs, directions = [(a, b), x, y], [(da, db), dx, dy]
    after, _, tangent = _check_jvp(TupleGraph, inputs, directions, rtol=1e-2, atol=1e-2)
    text = after["main_jvp"].script()
    assert "p_tangent: R.Tuple(" in text and "parts_tangent" in text
    assert_structural_equal(from_source(after.script()), after)
    grads = _reverse_gradients(TupleGraph, inputs)
    np.testing.assert_allclose(tangent, _dot(grads, directions), rtol=1e-4)


def test_concat_of_a_still_and_a_moving_tensor_gets_zeros_for_the_still_one():
    @I.ir_module
    class Joined:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 2), "float32")):
            with R.dataflow():
                gv = R.exp(R.concat((x, y), axis=1))
                R.output(gv)
            return gv

    x, y, dx = _random((2, 3), (2, 2), (2, 3), seed=8)
    require = Joined["main"].params[0]
    after, _, tangent = _check_jvp(
        Joined, [x, y], [dx], rtol=1e-2, atol=1e-3, require_grads=[require]
    )
    text = after["main_jvp"].script()
    assert (
        'lv_tangent_part: R.Tensor((2, 2), dtype="float32") = R.zeros_like(y, dtype="void")'
    ) in text
    assert "R.concat((x_tangent, lv_tangent_part), axis=1)" in text
    np.testing.assert_array_equal(tangent[:, 3:], 0)


def test_tuple_result_gets_a_tuple_tangent_and_zeros_where_nothing_moves():
    @I.ir_module
    class Outputs:
        @R.function
        def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv = R.exp(x)
                s = R.sum(lv)
                still = R.multiply(y, y)
                parts = R.split(R.reshape(y, (3, 1)), 3)
                R.output(lv, s, still, parts)
            return (lv, (s, still), parts)

    x, y, dx = _random((3,), (3,), (3,), seed=9)
    after, _, (lv_t, (s_t, still_t), parts_t) = _check_jvp(
        Outputs, [x, y], [dx], rtol=1e-2, atol=1e-3, require_grads=[Outputs["main"].params[0]]
    )
    np.testing.assert_allclose(lv_t, np.exp(x) * dx, rtol=1e-6)
    np.testing.assert_allclose(s_t, np.sum(np.exp(x) * dx), rtol=1e-5)
    np.testing.assert_array_equal(still_t, np.zeros(3, F32))
    np.testing.assert_array_equal(parts_t, np.zeros((3, 1, 1), F32))
    text = after["main_jvp"].script()
    assert 'still_tangent: R.Tensor((3,), dtype="float32") = R.zeros_like(still' in text
    assert "parts_tangent: R.Tuple(" in text  # zeros field by field
    assert (
        "return ((lv, (s, still), parts), (lv_tangent, (s_tangent, still_tangent), parts_tangent))"
    ) in text
    assert_structural_equal(from_source(after.script()), after)


@I.ir_module
class SymbolicBatch:
    @R.function
    def main(
        x: R.Tensor(("n", 4), "float32"),
        w: R.Tensor((4, 3), "float32"),
        b: R.Tensor((3,), "float32"),
    ):
        with R.dataflow():
            h = R.add(R.matmul(x, w), b)
            gv = R.nn.log_softmax(R.nn.relu(h))
            R.output(gv)
        return gv


def test_symbolic_batch_and_a_broadcast_tangent():
    # Only b moves: its tangent (3,) is broadcast to h's (n, 3).
    inputs = _random((5, 4), (4, 3), (3,), seed=10)
    (db,) = _random((3,), seed=11)
    b = SymbolicBatch["main"].params[2]
    after, _, _ = _check_jvp(SymbolicBatch, inputs, [db], rtol=1e-2, atol=1e-3, require_grads=[b])
    text = after["main_jvp"].script()
    assert 'h_tangent: R.Tensor((n, 3), dtype="float32") = R.broadcast_to(b_tangent' in text
    _check_jvp(SymbolicBatch, inputs, _random((5, 4), (4, 3), (3,), seed=12), 1e-2, 1e-3)


# ----------------------------------------------------------- one op at a time
# name -> (build main's result from the parameters, parameter shapes, input transform); run
# in float64 so that central differences are exact to ~1e-8.
OP_CASES = {
    "exp log sqrt": (
        lambda x: relax.op.sqrt(relax.op.log(relax.op.exp(x))),
        [(2, 3)],
        lambda a: np.abs(a) + 0.5,
    ),
    "negative abs": (lambda x: relax.op.abs(relax.op.negative(x)), [(2, 3)], None),
    "sigmoid tanh erf": (
        lambda x: relax.op.erf(relax.op.tanh(relax.op.sigmoid(x))),
        [(2, 3)],
        None,
    ),
    "relu": (lambda x: relax.op.nn.relu(x), [(2, 3)], None),
    "gelu": (lambda x: relax.op.nn.gelu(x), [(2, 3)], None),
    "silu": (lambda x: relax.op.nn.silu(x), [(2, 3)], None),
    "softmax": (lambda x: relax.op.nn.softmax(x, axis=0), [(2, 3)], None),
    "log_softmax": (lambda x: relax.op.nn.log_softmax(x), [(2, 3)], None),
    "add subtract broadcast": (
        lambda x, y: relax.op.subtract(relax.op.add(x, y), y),
        [(2, 3), (3,)],
        None,
    ),
    "multiply divide": (
        lambda x, y: relax.op.divide(relax.op.multiply(x, y), y),
        [(2, 3), (3,)],
        lambda a: a + 3,
    ),
    "power": (lambda x, y: relax.op.power(x, y), [(2, 3), (2, 3)], lambda a: np.abs(a) + 0.5),
    "maximum minimum": (
        lambda x, y: relax.op.add(relax.op.maximum(x, y), relax.op.minimum(x, y)),
        [(2, 3), (1, 3)],
        None,
    ),
    "where of a comparison": (
        lambda x, y: relax.op.where(relax.op.greater(x, y), relax.op.multiply(x, x), y),
        [(2, 3), (2, 3)],
        None,
    ),
    "astype": (lambda x: relax.op.astype(relax.op.exp(x), F32), [(2, 3)], None),
    "sum mean": (
        lambda x: relax.op.add(
            relax.op.sum(x, axis=[1]), relax.op.mean(x, axis=[1], keepdims=False)
        ),
        [(2, 3)],
        None,
    ),
    "max over axes": (lambda x: relax.op.max(x, axis=[0, 2]), [(2, 3, 4)], None),
    "min keepdims": (lambda x: relax.op.min(x, axis=[1], keepdims=True), [(2, 3, 4)], None),
    "max of all": (lambda x: relax.op.max(x), [(2, 3)], None),
    "matmul batched": (lambda x, w: relax.op.matmul(x, w), [(2, 5, 4), (4, 3)], None),
    "dense": (lambda x, w: relax.op.dense(x, w), [(2, 4), (3, 4)], None),
    "layout": (
        lambda x: relax.op.squeeze(
            relax.op.expand_dims(
                relax.op.permute_dims(relax.op.reshape(relax.op.flatten(x), (3, 2)), [1, 0]),
                [0],
            ),
            [0],
        ),
        [(2, 3)],
        None,
    ),
    "broadcast_to collapse_sum_to": (
        lambda x: relax.op.collapse_sum_to(relax.op.broadcast_to(x, (4, 2, 3)), (2, 1)),
        [(2, 1)],
        None,
    ),
    "take": (
        lambda x: relax.op.take(x, relax.const(np.array([[4, 0], [4, 2]], "int64")), axis=0),
        [(5, 3)],
        None,
    ),
    "split concat": (
        lambda x: relax.op.concat(
            [relax.TupleGetItem(relax.op.split(x, 3, axis=1), i) for i in (2, 0)], axis=1
        ),
        [(2, 6)],
        None,
    ),
    "layer_norm": (
        lambda x, g, b: relax.op.nn.layer_norm(x, g, b, axes=[-1]),
        [(2, 3), (3,), (3,)],
        None,
    ),
    "layer_norm axes 0 unscaled": (
        lambda x, g, b: relax.op.nn.layer_norm(x, g, b, axes=[0], scale=False),
        [(4, 3), (4,), (4,)],
        None,
    ),
    "nll_loss weighted mean": (
        lambda p, w: relax.op.nn.nll_loss(
            p, relax.const(np.array([0, 3, 1, 3, 2], "int64")), relax.op.exp(w)
        ),
        [(5, 4), (4,)],
        None,
    ),
    "nll_loss weighted none ignore_index": (
        lambda p, w: relax.op.nn.nll_loss(
            p,
            relax.const(np.array([0, 3, 1, 3, 2], "int64")),
            relax.op.exp(w),
            reduction="none",
            ignore_index=3,
        ),
        [(5, 4), (4,)],
        None,
    ),
    "cross_entropy_with_logits": (
        lambda p, q: relax.op.nn.cross_entropy_with_logits(p, q),
        [(3, 4), (3, 4)],
        None,
    ),
    "conv2d_transpose dilated grouped": (
        lambda x, w: relax.op.nn.conv2d_transpose(
            x, w, strides=2, padding=1, output_padding=1, dilation=2, groups=2
        ),
        [(1, 4, 4, 4), (4, 3, 3, 3)],
        None,
    ),
    "max_pool2d_backward avg_pool2d_backward": (
        lambda g, x: relax.op.add(
            relax.op.grad.max_pool2d_backward(g, x, pool_size=3, strides=2, padding=1),
            relax.op.grad.avg_pool2d_backward(g, x, pool_size=3, strides=2, padding=1),
        ),
        [(1, 2, 3, 3), (1, 2, 5, 5)],
        None,
    ),
    "max_pool2d overlapping padded": (
        lambda x: relax.op.nn.max_pool2d(x, pool_size=3, strides=2, padding=1),
        [(2, 3, 7, 7)],
        None,
    ),
    "max_pool2d dilated ceil_mode": (
        lambda x: relax.op.nn.max_pool2d(
            x, pool_size=2, strides=2, dilation=2, ceil_mode=True, padding=(0, 1, 1, 0)
        ),
        [(1, 2, 7, 6)],
        None,
    ),
    "conv2d strided avg_pool2d": (
        lambda x, w: relax.op.nn.avg_pool2d(
            relax.op.nn.conv2d(x, w, strides=2, padding=1), pool_size=2, strides=1
        ),
        [(2, 3, 7, 7), (4, 3, 3, 3)],
        None,
    ),
}


@pytest.mark.parametrize("name", OP_CASES)
def test_one_op_tangent_equals_central_differences(name):
    body, shapes, transform = OP_CASES[name]
    params = [relax.Var(f"x{i}", R.Tensor(shape, F64)) for i, shape in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(body(*params))
        bb.emit_func_output(gv)
    inputs = _random(*shapes, seed=13, dtype=F64)
    if transform is not None:
        inputs = [transform(a) for a in inputs]
    directions = _random(*shapes, seed=14, dtype=F64)
    # A float32 result rounds each difference to ~1e-7: it needs a longer step.
    delta, tol = (1e-2, 1e-3) if name == "astype" else (1e-5, 1e-6)
    _check_jvp(bb.get(), inputs, directions, rtol=tol, atol=tol, delta=delta)


def test_conv2d_relu_max_pool2d_equals_torch_forward_mode():
    x = relax.Var("x", R.Tensor((2, 3, 8, 8), F32))
    w = relax.Var("w", R.Tensor((4, 3, 3, 3), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(x, w, strides=2, padding=1)
            pooled = relax.op.nn.max_pool2d(relax.op.nn.relu(conv), pool_size=2, strides=2)
            gv = bb.emit_output(pooled)
        bb.emit_func_output(gv)
    inputs = _random((2, 3, 8, 8), (4, 3, 3, 3), seed=15)
    directions = _random((2, 3, 8, 8), (4, 3, 3, 3), seed=16)
    vm = _vm(relax.transform.ForwardGradient("main")(bb.get()))
    _, tangent = vm["main_jvp"](*inputs, *directions)

    def f(a, b):
        conv = torch.nn.functional.conv2d(a, b, stride=2, padding=1)
        return torch.nn.functional.max_pool2d(torch.relu(conv), 2, 2)

    _, expected = torch.func.jvp(
        f, tuple(map(torch.tensor, inputs)), tuple(map(torch.tensor, directions))
    )
    np.testing.assert_allclose(tangent.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


# ------------------------------------------------- forward over reverse: H v
@pytest.mark.parametrize("graph", ["tvm expression", "mlp"])
def test_jvp_of_the_adjoint_is_a_hessian_vector_product(graph):
    # main_adjoint returns (loss, gradients); its JVP along v is (grad . v, H v), which central
    # differences of the gradients along v check.
    if graph == "tvm expression":
        mod, floats, shapes, extra = TVMExpression, TVMExpression["main"].params, [(3, 3)] * 3, []
    else:
        mod, floats, shapes = _mlp_with_nll_loss()
        extra = [np.array([0, 3, 1, 3, 2], dtype="int64")]
    adjoint = relax.transform.Gradient("main", floats)(mod)
    inputs, directions = _random(*shapes, seed=25), _random(*shapes, seed=26)
    _, _, (loss_t, hv) = _check_jvp(
        adjoint,
        [*inputs, *extra],
        directions,
        rtol=1e-2,
        atol=1e-2,
        func="main_adjoint",
        require_grads=adjoint["main_adjoint"].params[: len(floats)],
    )
    grads = _reverse_gradients(mod, [*inputs, *extra], require_grads=floats)
    np.testing.assert_allclose(loss_t, _dot(grads, directions), rtol=1e-5, atol=1e-5)
    if graph == "tvm expression":
        # The Hessian of sum((2x - 2y)(y + z)) is constant: H v in closed form.
        dx, dy, dz = directions
        closed = [2 * (dy + dz), 2 * dx - 4 * dy - 2 * dz, 2 * dx - 2 * dy]
        for got, want in zip(hv, closed, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- a property test
@settings(max_examples=4, deadline=None)
@given(
    m=st.integers(1, 4),
    k=st.integers(1, 5),
    n=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_jvp_equals_gradient_dot_direction_over_shapes(m, k, n, seed):
    x = relax.Var("x", R.Tensor((m, k), F32))
    w = relax.Var("w", R.Tensor((k, n), F32))
    b = relax.Var("b", R.Tensor((n,), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            h = bb.emit(relax.op.tanh(relax.op.add(relax.op.matmul(x, w), b)))
            # (A softmax's rows sum to 1: weighting it by h keeps the derivative from being 0.)
            weighted = relax.op.multiply(relax.op.nn.softmax(relax.op.multiply(h, h)), h)
            gv = bb.emit_output(relax.op.sum(weighted))
        bb.emit_func_output(gv)
    mod = bb.get()
    shapes = [(m, k), (k, n), (n,)]
    inputs, directions = _random(*shapes, seed=seed), _random(*shapes, seed=seed + 1)
    _, tangent = _vm(relax.transform.ForwardGradient("main")(mod))["main_jvp"](*inputs, *directions)
    grads = _reverse_gradients(mod, inputs)
    expected = _dot(grads, directions)
    np.testing.assert_allclose(tangent.numpy(), expected, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------- errors
def test_unknown_function():
    with pytest.raises(TransformError, match=r"ForwardGradient\('mian'\): .*no relax function"):
        relax.transform.ForwardGradient("mian")(TVMExpression)


def test_require_grads_twice_foreign_or_not_float():
    x = TVMExpression["main"].params[0]
    with pytest.raises(TransformError, match="lists x twice"):
        relax.transform.ForwardGradient("main", [x, x])(TVMExpression)
    stranger = relax.Var("w", R.Tensor((3, 3), F32))
    with pytest.raises(TransformError, match="lists w, which is not a parameter of main"):
        relax.transform.ForwardGradient("main", [x, stranger])(TVMExpression)
    mod, _, _ = _mlp_with_nll_loss()
    labels = mod["main"].params[-1]
    with pytest.raises(TransformError, match=r"lists labels, which is R.Tensor\(\(5,\), "):
        relax.transform.ForwardGradient("main", labels)(mod)


def test_a_parameter_with_a_tangents_name():
    @I.ir_module
    class Clash:
        @R.function
        def main(x: R.Tensor((3,), "float32"), x_tangent: R.Tensor((3,), "float32")):
            with R.dataflow():
                gv = R.multiply(x, x_tangent)
                R.output(gv)
            return gv

    with pytest.raises(TransformError, match="already has a parameter named x_tangent"):
        relax.transform.ForwardGradient("main")(Clash)
    # Differentiating in x_tangent alone names its tangent x_tangent_tangent: no clash.
    after = relax.transform.ForwardGradient("main", Clash["main"].params[1])(Clash)
    assert after["main_jvp"].params[-1].name_hint == "x_tangent_tangent"


def test_function_must_be_one_dataflow_block():
    @I.ir_module
    class NoDataflow:
        @R.function
        def main(x: R.Tensor((3,), "float32")):
            gv = R.sum(x)
            return gv

    with pytest.raises(TransformError, match="exactly one dataflow block.*BindingBlock"):
        relax.transform.ForwardGradient("main")(NoDataflow)


def test_every_op_without_a_rule_is_listed():
    @I.ir_module
    class NoRules:
        @R.function
        def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv1 = R.ewise_fma(x, x, x)
                lv2 = R.floor_divide(lv1, x)
                lv3 = R.ewise_fma(x, y, y)  # the result does not read it: not listed
                lv4 = R.ewise_fma(y, y, y)  # y is not differentiated: not listed
                index = R.argmax(lv1, axis=1, keepdims=True)  # an int64 index: no tangent
                gv = R.add(R.add(lv2, lv4), R.astype(index, "float32"))
                R.output(gv)
            return gv

    with pytest.raises(TransformError) as info:
        relax.transform.ForwardGradient("main", NoRules["main"].params[0])(NoRules)
    message = str(info.value)
    assert "relax.ewise_fma (at lv1), relax.floor_divide (at lv2);" in message
    assert "lv3" not in message and "lv4" not in message and "argmax" not in message
    assert "ForwardGradient('main')" in message and "register_jvp" in message
    assert isinstance(info.value, MLCError)


def test_a_moving_argument_that_does_not_change_the_value():
    # collapse_sum_like reads only the shape of its second argument: y does not move with b,
    # and neither does anything computed from y.
    @I.ir_module
    class ShapeOnly:
        @R.function
        def main(a: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32")):
            with R.dataflow():
                y = R.collapse_sum_like(a, b)
                gv = R.exp(y)
                R.output(gv)
            return gv

    a, b, db = _random((2, 3), (3,), (3,), seed=17)
    after, _, tangent = _check_jvp(
        ShapeOnly, [a, b], [db], rtol=1e-6, atol=0, require_grads=[ShapeOnly["main"].params[1]]
    )
    np.testing.assert_array_equal(tangent, np.zeros(3, F32))
    assert "y_tangent" not in after["main_jvp"].script()


def test_match_cast_casts_the_tangent_too():
    @I.ir_module
    class Cast:
        @R.function
        def main(x: R.Tensor(("n",), "float32")):
            with R.dataflow():
                y = R.match_cast(x, R.Tensor((3,), "float32"))
                gv = R.exp(y)
                R.output(gv)
            return gv

    x, dx = _random((3,), (3,), seed=18)
    after, _, tangent = _check_jvp(Cast, [x], [dx], rtol=1e-2, atol=1e-3)
    np.testing.assert_allclose(tangent, np.exp(x) * dx, rtol=1e-6)
    text = after["main_jvp"].script()
    assert (
        'y_tangent: R.Tensor((3,), dtype="float32") = R.match_cast(x_tangent, '
        'R.Tensor((3,), dtype="float32"))'
    ) in text
    assert 'x_tangent: R.Tensor((n,), dtype="float32")' in text  # the same n as x's
    # main_jvp's n is main's own object (as Gradient's adjoint's is), which a parsed module,
    # whose functions each define their n, does not share: compare the function alone.
    assert_structural_equal(from_source(after.script())["main_jvp"], after["main_jvp"])


def test_max_pool2d_ties_go_to_the_first_tap_as_in_reverse_mode():
    # A window of equal elements: the reverse rule passes the gradient to its first one, so
    # the tangent is that element's.
    x = relax.Var("x", R.Tensor((1, 1, 4, 4), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            pooled = relax.op.nn.max_pool2d(x, pool_size=2, strides=1, padding=1)
            gv = bb.emit_output(relax.op.sum(relax.op.multiply(pooled, pooled)))
        bb.emit_func_output(gv)
    mod = bb.get()
    inputs = [np.array([[[[1, 1, 0, 2], [1, 1, 2, 2], [0, 3, 3, 0], [3, 3, 0, 0]]]], F32)]
    directions = _random((1, 1, 4, 4), seed=27)
    _, tangent = _vm(relax.transform.ForwardGradient("main")(mod))["main_jvp"](*inputs, *directions)
    grads = _reverse_gradients(mod, inputs)
    np.testing.assert_allclose(tangent.numpy(), _dot(grads, directions), rtol=1e-5)


def test_max_pool2d_of_a_symbolic_shape_has_no_jvp_yet():
    x = relax.Var("x", R.Tensor(("n", 1, 4, 4), F32))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            gv = bb.emit_output(relax.op.nn.max_pool2d(x, pool_size=2, strides=2))
        bb.emit_func_output(gv)
    with pytest.raises(
        TransformError,
        match=r"ForwardGradient\('main'\): at gv = relax.nn.max_pool2d\(...\): .*static NCHW",
    ):
        relax.transform.ForwardGradient("main")(bb.get())


@pytest.mark.parametrize(
    "batch, sizes",
    [(5, (8, 6, 5, 4)), (50, (784, 128, 10))],  # the course MLP's size has parallel kernels
)
def test_jvp_fuses_and_builds_through_the_default_pipeline(batch, sizes):
    mod, floats, shapes = _mlp_with_nll_loss(batch, sizes)
    after = relax.transform.ForwardGradient("main")(mod)
    built = relax.get_pipeline("default")(after)
    assert any(gv.name_hint.startswith("fused_") for gv in built.get_global_vars())
    vm = relax.VirtualMachine(relax.build(built, "llvm"), mlckit.cpu())
    inputs, directions = _random(*shapes, seed=19), _random(*shapes, seed=20)
    labels = np.random.default_rng(21).integers(0, sizes[-1], batch)
    _, tangent = vm["main_jvp"](*inputs, labels, *directions)
    grads = _reverse_gradients(mod, [*inputs, labels], require_grads=floats)
    np.testing.assert_allclose(tangent.numpy(), _dot(grads, directions), rtol=1e-5, atol=1e-6)
