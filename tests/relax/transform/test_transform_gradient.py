"""relax.transform.Gradient: the adjoint function's gradients equal central differences of the
original function (both run through the VM), closed forms and torch autograd; its TVMScript
round-trips; bad requests are TransformErrors naming the function, variable and op."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.errors import MLCError, TransformError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.testing import check_numerical_grads
from mlckit.testing.examples import mlp_with_nll_loss

torch = pytest.importorskip("torch")

F32 = "float32"


def _vm(mod):
    return relax.VirtualMachine(
        relax.build(relax.transform.LegalizeOps()(mod), "llvm"), mlckit.cpu()
    )


def _gradients(mod, inputs, func_name="main", **gradient_args):
    """(module with the adjoint, its VM, the target's value, the gradients) at ``inputs``."""
    after = relax.transform.Gradient(func_name, **gradient_args)(mod)
    vm = _vm(after)
    value, grads = vm[f"{func_name}_adjoint"](*inputs)
    return after, vm, value, [g.numpy() for g in grads]


def _check_against_numerical(mod, inputs, **gradient_args):
    """Gradients of the adjoint equal central differences of main, both run by the VM."""
    after, vm, value, grads = _gradients(mod, inputs, **gradient_args)

    def main(*args):
        return vm["main"](*args).numpy()

    np.testing.assert_allclose(value.numpy(), main(*inputs), rtol=1e-6)
    check_numerical_grads(main, inputs, grads)
    return after, grads


def _random(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(F32) for shape in shapes]


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


def test_tvm_expression_numerically_and_in_closed_form():
    x, y, z = inputs = _random((3, 3), (3, 3), (3, 3))
    after, grads = _check_against_numerical(TVMExpression, inputs)
    # d/dx = 2(y + z), d/dy = -2(y + z) + (2x - 2y), d/dz = 2x - 2y.
    closed = [2 * (y + z), -2 * (y + z) + (2 * x - 2 * y), 2 * x - 2 * y]
    for grad, expected in zip(grads, closed):
        np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-5)
    assert list(after["main_adjoint"].params) != list(after["main"].params)  # fresh variables


def test_adjoint_names_and_round_trip():
    after = relax.transform.Gradient("main")(TVMExpression)
    text = after["main_adjoint"].script()
    for line in (
        'gv_adjoint: R.Tensor((), dtype="float32") = R.ones(R.shape([]), dtype="float32")',
        'lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(gv_adjoint, '
        "R.shape([3, 3]))",
        'x_adjoint_out: R.Tensor((3, 3), dtype="float32") = x_adjoint',
        "return (gv, (x_adjoint_out, y_adjoint_out, z_adjoint_out))",
    ):
        assert line in text
    # y is used twice: its second contribution is added as y_adjoint1.
    assert "y_adjoint1" in text and "R.add(y_adjoint" in text
    assert_structural_equal(from_source(after.script()), after)
    # The original function is kept as it was.
    assert_structural_equal(after["main"], TVMExpression["main"])


# ---------------------------------------------------------------------------- MLP
def _mlp(batch=4, sizes=(6, 5, 3), loss="mean"):
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((batch, sizes[0]), F32))
    params = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        params += [
            relax.Var(f"w{i}", R.Tensor((n_in, n_out), F32)),
            relax.Var(f"b{i}", R.Tensor((n_out,), F32)),
        ]
    with bb.function("main", [x, *params]):
        with bb.dataflow():
            h = x
            for i in range(0, len(params), 2):
                h = bb.emit(relax.op.add(relax.op.matmul(h, params[i]), params[i + 1]))
                if i + 2 < len(params):
                    h = bb.emit(relax.op.nn.relu(h))
            logp = bb.emit(relax.op.nn.log_softmax(h, axis=-1))
            reduce = relax.op.mean if loss == "mean" else relax.op.sum
            gv = bb.emit_output(reduce(logp))
        bb.emit_func_output(gv)
    return bb.get()


def _torch_mlp_grads(inputs, loss="mean"):
    tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
    h = tensors[0]
    weights = tensors[1:]
    for i in range(0, len(weights), 2):
        h = h @ weights[i] + weights[i + 1]
        if i + 2 < len(weights):
            h = torch.relu(h)
    logp = torch.log_softmax(h, dim=-1)
    (logp.mean() if loss == "mean" else logp.sum()).backward()
    return [t.grad.numpy() for t in tensors]


@pytest.mark.parametrize("loss", ["mean", "sum"])
def test_mlp_gradients_equal_numerical_and_torch(loss):
    mod = _mlp(loss=loss)
    inputs = _random((4, 6), (6, 5), (5,), (5, 3), (3,), seed=1)
    after, grads = _check_against_numerical(mod, inputs)
    for grad, expected in zip(grads, _torch_mlp_grads(inputs, loss)):
        np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-5)
    # The bias (n,) was broadcast over the batch: its gradient is summed back.
    assert 'b0_adjoint: R.Tensor((5,), dtype="float32") = R.collapse_sum_to(' in after.script()


# -------------------------------------------------------------- tuples and friends
@I.ir_module
class TupleGraph:
    @R.function
    def main(
        p: R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((5, 4), "float32")),
        w: R.Tensor((2, 4, 3), "float32"),
    ) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = p[0]
            b = p[1]
            sa = R.sigmoid(a)
            tb = R.tanh(b)
            pair = (sa, tb)
            first = pair[0]
            second = pair[1]
            m = R.matmul(first, R.permute_dims(second))
            batched = R.matmul(w, m)
            gv = R.sum(R.multiply(batched, batched))
            R.output(gv)
        return gv


def test_tuples_sigmoid_tanh_matmul_permute_dims():
    a, b, w = _random((3, 4), (5, 4), (2, 4, 3), seed=2)
    after = relax.transform.Gradient("main")(TupleGraph)
    vm = _vm(after)
    _, (grad_p, grad_w) = vm["main_adjoint"]((a, b), w)
    grads = [grad_p[0].numpy(), grad_p[1].numpy(), grad_w.numpy()]

    def main(a, b, w):
        return vm["main"]((a, b), w).numpy()

    check_numerical_grads(main, [a, b, w], grads)
    assert_structural_equal(from_source(after.script()), after)


def test_batched_matmul_broadcast_is_collapsed():
    # w (4, 3) is broadcast over the batch of x (2, 5, 4): its gradient sums the batch.
    @I.ir_module
    class Batched:
        @R.function
        def main(x: R.Tensor((2, 5, 4), "float32"), w: R.Tensor((4, 3), "float32")):
            with R.dataflow():
                gv = R.sum(R.tanh(R.matmul(x, w)))
                R.output(gv)
            return gv

    _check_against_numerical(Batched, _random((2, 5, 4), (4, 3), seed=3))


# ----------------------------------------------------------- one op at a time
# name -> (build the loss's body from the parameters, parameter shapes, input transform)
ELEMENTWISE_CASES = {
    "exp": (lambda x: relax.op.exp(x), [(2, 3)], None),
    "log": (lambda x: relax.op.log(x), [(2, 3)], np.abs),
    "sqrt": (lambda x: relax.op.sqrt(x), [(2, 3)], lambda a: np.abs(a) + 0.5),
    "negative": (lambda x: relax.op.negative(x), [(2, 3)], None),
    "abs": (lambda x: relax.op.abs(x), [(2, 3)], None),
    "relu": (lambda x: relax.op.nn.relu(x), [(2, 3)], None),
    "gelu": (lambda x: relax.op.nn.gelu(x), [(2, 3)], None),
    "erf": (lambda x: relax.op.erf(x), [(2, 3)], None),
    "take rows": (
        lambda x: relax.op.take(x, relax.const(np.array([[4, 0], [4, 2]], "int64")), axis=0),
        [(5, 3)],
        None,
    ),
    "take middle axis": (
        lambda x: relax.op.take(x, relax.const(np.array([1, 1, 0], "int32")), axis=1),
        [(2, 3, 2)],
        None,
    ),
    "expand_dims squeeze": (
        lambda x: relax.op.exp(relax.op.squeeze(relax.op.expand_dims(x, [0, 2]), [0])),
        [(2, 3)],
        None,
    ),
    "silu": (lambda x: relax.op.nn.silu(x), [(2, 3)], None),
    "softmax": (lambda x: relax.op.nn.softmax(x, axis=0), [(2, 3)], None),
    "divide": (lambda x, y: relax.op.divide(x, y), [(2, 3), (3,)], lambda a: a + 3),
    "power": (lambda x, y: relax.op.power(x, y), [(2, 3), (2, 3)], lambda a: np.abs(a) + 0.5),
    "maximum": (lambda x, y: relax.op.maximum(x, y), [(2, 3), (2, 3)], None),
    "minimum": (lambda x, y: relax.op.minimum(x, y), [(2, 3), (1, 3)], None),
    "where": (
        lambda x, y: relax.op.where(relax.op.greater(x, y), relax.op.multiply(x, x), y),
        [(2, 3), (2, 3)],
        None,
    ),
    "astype": (lambda x: relax.op.astype(relax.op.multiply(x, x), "float64"), [(2, 3)], None),
    "reshape": (lambda x: relax.op.exp(relax.op.reshape(x, (3, 2))), [(2, 3)], None),
    "flatten": (lambda x: relax.op.exp(relax.op.flatten(x)), [(2, 3)], None),
    "permute_dims": (lambda x: relax.op.matmul(x, relax.op.permute_dims(x)), [(2, 3)], None),
    "broadcast_to": (lambda x: relax.op.exp(relax.op.broadcast_to(x, (4, 2, 3))), [(2, 3)], None),
    "sum axis": (lambda x: relax.op.exp(relax.op.sum(x, axis=[1])), [(2, 3)], None),
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
    "mean keepdims": (
        lambda x: relax.op.exp(relax.op.mean(x, axis=[0], keepdims=True)),
        [(2, 3)],
        None,
    ),
}


@pytest.mark.parametrize("name", ELEMENTWISE_CASES)
def test_one_op_gradient_equals_numerical(name):
    body, shapes, transform = ELEMENTWISE_CASES[name]
    params = [relax.Var(f"x{i}", R.Tensor(shape, F32)) for i, shape in enumerate(shapes)]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit(body(*params))
            # A weighted sum, so that every element's gradient differs.
            shape = [int(d) for d in out.struct_info.shape_values]
            dtype = out.struct_info.dtype
            weights = np.arange(1, 1 + int(np.prod(shape))).reshape(shape).astype(dtype)
            weights = relax.const(weights)
            loss = bb.emit(relax.op.sum(relax.op.multiply(out, weights)))
            if dtype != F32:
                loss = bb.emit(relax.op.astype(loss, F32))
            gv = bb.emit_output(loss)
        bb.emit_func_output(gv)
    inputs = _random(*shapes, seed=4)
    if transform is not None:
        inputs = [transform(a).astype(F32) for a in inputs]
    _check_against_numerical(bb.get(), inputs)


# ------------------------------------------------------- require_grads and zeros
@I.ir_module
class ThreeInputs:
    @R.function
    def main(
        x: R.Tensor((3, 3), "float32"),
        y: R.Tensor((3, 3), "float32"),
        z: R.Tensor((3, 3), "float32"),
    ) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv1 = R.multiply(x, y)
            gv = R.sum(lv1)
            R.output(gv)
        return gv


def test_require_grads_subset_and_order():
    x, y, _ = ThreeInputs["main"].params
    inputs = _random((3, 3), (3, 3), (3, 3), seed=5)
    _, _, _, grads = _gradients(ThreeInputs, inputs, require_grads=[y, x])
    np.testing.assert_allclose(grads[0], inputs[0], rtol=1e-6)  # d/dy = x
    np.testing.assert_allclose(grads[1], inputs[1], rtol=1e-6)  # d/dx = y
    _, _, _, grads = _gradients(ThreeInputs, inputs, require_grads=x)
    assert len(grads) == 1


def test_parameter_the_target_does_not_use_gets_zeros():
    after, _, _, grads = _gradients(ThreeInputs, _random((3, 3), (3, 3), (3, 3), seed=6))
    np.testing.assert_array_equal(grads[2], np.zeros((3, 3), F32))
    text = after["main_adjoint"].script()
    assert 'z_adjoint: R.Tensor((3, 3), dtype="float32") = R.zeros(R.shape([3, 3])' in text


def test_intermediate_variable_and_target_index():
    @I.ir_module
    class Outputs:
        @R.function
        def main(x: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv = R.exp(x)
                s = R.sum(lv)
                m = R.sum(R.multiply(lv, lv))
                R.output(lv, s, m)
            return (lv, s, m)

    after = relax.transform.Gradient("main", target_index=2)(Outputs)
    (x,) = after["main"].params
    lv = after["main"].body.blocks[0].bindings[0].var
    after = relax.transform.Gradient("main", [x, lv], target_index=2)(Outputs)
    (a,) = _random((3,), seed=7)
    (_, _, m), (dx, dlv) = _vm(after)["main_adjoint"](a)
    np.testing.assert_allclose(m.numpy(), np.sum(np.exp(2 * a)), rtol=1e-5)
    np.testing.assert_allclose(dlv.numpy(), 2 * np.exp(a), rtol=1e-5)
    np.testing.assert_allclose(dx.numpy(), 2 * np.exp(2 * a), rtol=1e-5)


# ---------------------------------------------------------------------- errors
def test_target_must_be_a_float_scalar():
    @I.ir_module
    class NotScalar:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                gv = R.exp(x)
                R.output(gv)
            return gv

    with pytest.raises(TransformError, match=r"Gradient\('main'\): the target gv of main is "):
        relax.transform.Gradient("main")(NotScalar)

    @I.ir_module
    class IntegerTarget:
        @R.function
        def main(x: R.Tensor((3,), "int32")):
            with R.dataflow():
                gv = R.sum(x)
                R.output(gv)
            return gv

    with pytest.raises(TransformError, match="0-d float tensor"):
        relax.transform.Gradient("main")(IntegerTarget)
    with pytest.raises(TransformError, match="target_index 1 needs main to return a tuple"):
        relax.transform.Gradient("main", target_index=1)(TVMExpression)


def test_unknown_function():
    with pytest.raises(TransformError, match="no relax function named 'mian'.*main"):
        relax.transform.Gradient("mian")(TVMExpression)


def test_require_grads_twice_or_foreign():
    x = TVMExpression["main"].params[0]
    with pytest.raises(TransformError, match="lists x twice"):
        relax.transform.Gradient("main", [x, x])(TVMExpression)
    stranger = relax.Var("w", R.Tensor((3, 3), F32))
    with pytest.raises(TransformError, match="w, which is neither a parameter of main"):
        relax.transform.Gradient("main", [x, stranger])(TVMExpression)


def test_function_must_be_one_dataflow_block():
    @I.ir_module
    class NoDataflow:
        @R.function
        def main(x: R.Tensor((3,), "float32")):
            gv = R.sum(x)
            return gv

    with pytest.raises(TransformError, match="exactly one dataflow block.*BindingBlock"):
        relax.transform.Gradient("main")(NoDataflow)

    @I.ir_module
    class TwoBlocks:
        @R.function
        def main(x: R.Tensor((3,), "float32")):
            with R.dataflow():
                lv = R.exp(x)
                R.output(lv)
            with R.dataflow():
                gv = R.sum(lv)
                R.output(gv)
            return gv

    with pytest.raises(TransformError, match="DataflowBlock, DataflowBlock"):
        relax.transform.Gradient("main")(TwoBlocks)


def test_every_op_without_a_rule_is_listed():
    @I.ir_module
    class NoRules:
        @R.function
        def main(x: R.Tensor((3, 4), "float32")):
            with R.dataflow():
                lv1 = R.ewise_fma(x, x, x)
                lv2 = R.max(lv1, axis=[1])
                lv3 = R.floor_divide(x, x)  # unused by the target: not listed
                gv = R.sum(lv2)
                R.output(gv)
            return gv

    with pytest.raises(TransformError) as info:
        relax.transform.Gradient("main")(NoRules)
    message = str(info.value)
    assert "relax.ewise_fma (at lv1)" in message and "relax.max (at lv2)" in message
    assert "floor_divide" not in message and "main" in message
    assert isinstance(info.value, MLCError)


# ----------------------------------------------------------------------- losses
def _loss_function(build_loss, shapes, targets_sinfo):
    """main(float params..., targets) -> build_loss(float params..., targets)."""
    params = [relax.Var(f"p{i}", R.Tensor(shape, F32)) for i, shape in enumerate(shapes)]
    targets = relax.Var("targets", targets_sinfo)
    bb = relax.BlockBuilder()
    with bb.function("main", [*params, targets]):
        with bb.dataflow():
            gv = bb.emit_output(build_loss(*params, targets))
        bb.emit_func_output(gv)
    return bb.get(), params


def _check_loss(build_loss, shapes, targets, **torch_check):
    mod, params = _loss_function(build_loss, shapes, R.Tensor(targets.shape, str(targets.dtype)))
    inputs = _random(*shapes, seed=8)
    _, vm, _, grads = _gradients(mod, [*inputs, targets], require_grads=params)

    def main(*floats):
        return vm["main"](*floats, targets).numpy()

    check_numerical_grads(main, inputs, grads)
    return inputs, grads


def test_three_layer_mlp_with_nll_loss_equals_numerical_and_torch():
    mod = mlp_with_nll_loss(5, (8, 6, 5, 4))
    *floats, _ = mod["main"].params
    shapes = [tuple(int(d) for d in p.struct_info_.shape_values) for p in floats]
    inputs = _random(*shapes, seed=9)
    targets = np.array([0, 3, 1, 3, 2], dtype="int64")
    _, vm, value, grads = _gradients(mod, [*inputs, targets], require_grads=floats)
    check_numerical_grads(lambda *a: vm["main"](*a, targets).numpy(), inputs, grads)

    tensors = [torch.tensor(a, requires_grad=True) for a in inputs]
    h = tensors[0]
    for i in range(1, len(tensors), 2):
        h = h @ tensors[i] + tensors[i + 1]
        if i + 2 < len(tensors):
            h = torch.relu(h)
    loss = torch.nn.functional.nll_loss(torch.log_softmax(h, -1), torch.tensor(targets))
    loss.backward()
    np.testing.assert_allclose(value.numpy(), loss.item(), rtol=1e-5)
    for grad, t in zip(grads, tensors):
        np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-4, atol=1e-6)


NLL_CASES = {
    "mean": ((5, 4), np.array([0, 3, 1, 3, 2]), {}),
    "sum ignore_index": (
        (5, 4),
        np.array([0, 3, 1, 3, 2]),
        {"reduction": "sum", "ignore_index": 3},
    ),
    "none": ((5, 4), np.array([0, 3, 1, 3, 2]), {"reduction": "none"}),
    "spatial": ((2, 3, 4), np.array([[0, 2, 1, 1], [2, 2, 0, 1]]), {}),
    "one example": ((4,), np.array(2), {}),
}


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("case", NLL_CASES)
def test_nll_loss_gradients_equal_torch(case, weighted):
    shape, targets, attrs = NLL_CASES[case]
    classes = shape[1] if len(shape) > 1 else shape[0]
    shapes = [shape, (classes,)] if weighted else [shape]

    def build(*args):
        *floats, labels = args
        pred = relax.op.nn.log_softmax(floats[0], axis=1 if len(shape) > 1 else 0)
        weights = relax.op.exp(floats[1]) if weighted else None  # positive weights
        loss = relax.op.nn.nll_loss(pred, labels, weights, **attrs)
        if attrs.get("reduction") == "none":
            loss = relax.op.sum(relax.op.multiply(loss, loss))
        return loss

    inputs, grads = _check_loss(build, shapes, targets.astype("int64"))
    # torch does not differentiate nll_loss in its weights (checked numerically above).
    logits = torch.tensor(inputs[0], requires_grad=True)
    pred = torch.log_softmax(logits, dim=1 if len(shape) > 1 else 0)
    weight = torch.exp(torch.tensor(inputs[1])) if weighted else None
    loss = torch.nn.functional.nll_loss(pred, torch.tensor(targets), weight, **attrs)
    (loss.pow(2).sum() if attrs.get("reduction") == "none" else loss).backward()
    np.testing.assert_allclose(grads[0], logits.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_cross_entropy_with_logits():
    labels = np.eye(4, dtype=F32)[[1, 0, 3]]
    _check_loss(
        lambda p, q, _: relax.op.nn.cross_entropy_with_logits(
            relax.op.nn.log_softmax(p), relax.op.nn.softmax(q)
        ),
        [(3, 4), (3, 4)],
        labels,
    )


# ------------------------------------------------------- the program, as TVM prints it
def test_multiple_uses_accumulate_as_in_tvm():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                lv1 = R.add(x, x)
                lv2 = R.add(lv1, x)
                gv = R.sum(lv2)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_adjoint(
            x: R.Tensor((3, 3), "float32"),
        ) -> R.Tuple(R.Tensor((), "float32"), R.Tuple(R.Tensor((3, 3), "float32"))):
            with R.dataflow():
                lv1: R.Tensor((3, 3), "float32") = R.add(x, x)
                lv2: R.Tensor((3, 3), "float32") = R.add(lv1, x)
                gv: R.Tensor((), "float32") = R.sum(lv2, axis=None, keepdims=False)
                gv_adjoint: R.Tensor((), "float32") = R.ones(R.shape([]), "float32")
                lv2_adjoint: R.Tensor((3, 3), "float32") = R.broadcast_to(
                    gv_adjoint, R.shape([3, 3])
                )
                lv1_adjoint: R.Tensor((3, 3), "float32") = lv2_adjoint
                x_adjoint: R.Tensor((3, 3), "float32") = lv2_adjoint
                x_adjoint1: R.Tensor((3, 3), "float32") = R.add(x_adjoint, lv1_adjoint)
                x_adjoint2: R.Tensor((3, 3), "float32") = R.add(x_adjoint1, lv1_adjoint)
                x_adjoint_out: R.Tensor((3, 3), "float32") = x_adjoint2
                R.output(gv, x_adjoint_out)
            return (gv, (x_adjoint_out,))

        @R.function
        def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
            with R.dataflow():
                lv1: R.Tensor((3, 3), "float32") = R.add(x, x)
                lv2: R.Tensor((3, 3), "float32") = R.add(lv1, x)
                gv: R.Tensor((), "float32") = R.sum(lv2, axis=None, keepdims=False)
                R.output(gv)
            return gv

    assert_structural_equal(relax.transform.Gradient("main")(Before), Expected)


@I.ir_module
class SplitConcat:
    @R.function
    def main(x: R.Tensor((4, 6), "float32"), y: R.Tensor((4, 2), "float32")) -> R.Tensor(
        (), "float32"
    ):
        with R.dataflow():
            parts = R.split(x, indices_or_sections=[2, 5], axis=1)
            a = parts[0]
            c = parts[2]
            joined = R.concat((R.sigmoid(a), y, R.tanh(c)), axis=1)
            m = R.matmul(joined, R.permute_dims(joined))
            gv = R.sum(R.multiply(m, m))
            R.output(gv)
        return gv


def test_split_concat_tuples():
    # parts[1] is unused: its share of x's adjoint is zeros.
    after, grads = _check_against_numerical(SplitConcat, _random((4, 6), (4, 2), seed=11))
    assert not grads[0][:, 2:5].any()
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
            gv = R.sum(R.nn.log_softmax(R.nn.relu(h)))
            R.output(gv)
        return gv


def test_symbolic_batch():
    after, _ = _check_against_numerical(SymbolicBatch, _random((5, 4), (4, 3), (3,), seed=12))
    text = after["main_adjoint"].script()
    assert 'b_adjoint: R.Tensor((3,), dtype="float32") = R.collapse_sum_to(h_adjoint' in text
    assert 'x_adjoint: R.Tensor((n, 4), dtype="float32")' in text


def test_unused_bindings_leave_and_unused_parameters_get_zeros_as_in_tvm():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")):
            with R.dataflow():
                lv1 = R.add(x, x)
                lv2 = R.add(lv1, x)
                gv = R.sum(x)
                R.output(gv)
            return gv

    @I.ir_module
    class Expected:
        @R.function
        def main_adjoint(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")) -> R.Tuple(
            R.Tensor((), "float32"),
            R.Tuple(R.Tensor((3, 3), "float32"), R.Tensor((3, 3), "float32")),
        ):
            with R.dataflow():
                gv: R.Tensor((), "float32") = R.sum(x, axis=None, keepdims=False)
                gv_adjoint: R.Tensor((), "float32") = R.ones(R.shape([]), "float32")
                x_adjoint: R.Tensor((3, 3), "float32") = R.broadcast_to(gv_adjoint, R.shape([3, 3]))
                x_adjoint_out: R.Tensor((3, 3), "float32") = x_adjoint
                y_adjoint: R.Tensor((3, 3), "float32") = R.zeros(R.shape([3, 3]), "float32")
                y_adjoint_out: R.Tensor((3, 3), "float32") = y_adjoint
                R.output(gv, x_adjoint_out, y_adjoint_out)
            return (gv, (x_adjoint_out, y_adjoint_out))

    after = relax.transform.Gradient("main")(Before)
    assert_structural_equal(after["main_adjoint"], Expected["main_adjoint"])


def test_adjoint_fuses_and_builds_through_the_default_pipeline():
    after = relax.transform.Gradient("main")(_mlp())
    built = relax.get_pipeline("default")(after)
    fused = [gv.name_hint for gv in built.get_global_vars() if gv.name_hint.startswith("fused_")]
    assert fused  # forward and backward kernels are fused like any others
    vm = relax.VirtualMachine(relax.build(built, "llvm"), mlckit.cpu())
    inputs = _random((4, 6), (6, 5), (5,), (5, 3), (3,), seed=1)
    _, grads = vm["main_adjoint"](*inputs)
    check_numerical_grads(lambda *a: vm["main"](*a).numpy(), inputs, [g.numpy() for g in grads])
