"""relax.frontend.nn models exported, bound, legalized, built for "llvm" and run in the VM,
against numpy forwards written out by hand (and the course's pretrained weights)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.datasets import cnn_params, cnn_reference, fashion_mnist, mlp_params, mlp_reference
from mlckit.relax.frontend import nn

RNG = np.random.default_rng(0)


def run(model: nn.Module, spec: dict, *inputs: np.ndarray) -> object:
    """Export ``model``, bind its weights, legalize, build for llvm and run ``forward``."""
    mod, params = model.export_tvm(spec)
    mod = relax.transform.LegalizeOps()(nn.bind_params(mod, params))
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    return vm["forward"](*(mlckit.nd.array(x) for x in inputs))


def randomize(model: nn.Module) -> None:
    """Weights drawn so that activations stay of order 1 (fan-in scaled)."""
    for _, p in model.named_parameters():
        fan_in = math.prod(p.shape[1:]) if len(p.shape) > 1 else 1
        p.data = (RNG.standard_normal(p.shape) / math.sqrt(fan_in)).astype("float32")


def weights(model: nn.Module) -> dict[str, np.ndarray]:
    return {name: p.data.astype("float64") for name, p in model.named_parameters()}


# ------------------------------------------------------------------------------ numpy forwards
def conv2d_ref(x, w, b, stride=1, padding=0, groups=1):
    """Cross-correlation as a sum over kernel positions of strided windows times weights."""
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, _, h, wd = x.shape
    out_c, group_c, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, out_c, oh, ow))
    per_group = out_c // groups
    for g in range(groups):
        xs = x[:, g * group_c : (g + 1) * group_c]
        outs = slice(g * per_group, (g + 1) * per_group)
        for i in range(kh):
            for j in range(kw):
                window = xs[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
                out[:, outs] += np.einsum("nchw,oc->nohw", window, w[outs, :, i, j])
    return out + b[None, :, None, None]


def max_pool2x2_ref(x):
    n, c, h, w = x.shape
    return x[:, :, : h // 2 * 2, : w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def layer_norm_ref(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gamma + beta


# ------------------------------------------------------------------------------ models
class MLP(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(784, 128)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


def test_mlp_matches_numpy():
    model = MLP()
    randomize(model)
    x = RNG.standard_normal((2, 784)).astype("float32")
    out = run(model, {"forward": {"x": nn.spec.Tensor((2, 784), "float32")}}, x).numpy()
    p = weights(model)
    hidden = np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0)
    np.testing.assert_allclose(
        out, hidden @ p["fc2.weight"].T + p["fc2.bias"], rtol=1e-5, atol=1e-5
    )


def test_mlp_binding_with_relax_bind_params_by_hand():
    model = MLP()
    randomize(model)
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    mod = relax.transform.BindParams("forward", {name: p.data for name, p in params})(mod)
    mod = relax.get_pipeline("zero")(mod)
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    x = RNG.standard_normal((1, 784)).astype("float32")
    p = weights(model)
    expected = (
        np.maximum(x @ p["fc1.weight"].T + p["fc1.bias"], 0) @ p["fc2.weight"].T + p["fc2.bias"]
    )
    np.testing.assert_allclose(
        vm["forward"](mlckit.nd.array(x)).numpy(), expected, rtol=1e-5, atol=1e-5
    )


def test_symbolic_batch_runs_for_any_batch_size():
    model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 3))
    randomize(model)
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor(("n", 6), "float32")}})
    mod = relax.transform.LegalizeOps()(nn.bind_params(mod, params))
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    p = weights(model)
    for batch in (1, 5):
        x = RNG.standard_normal((batch, 6)).astype("float32")
        expected = np.maximum(x @ p["0.weight"].T + p["0.bias"], 0) @ p["2.weight"].T + p["2.bias"]
        out = vm["forward"](mlckit.nd.array(x)).numpy()
        assert out.shape == (batch, 3)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2D(2, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc(self.flatten(self.pool(self.relu(self.conv(x)))))


def test_small_cnn_matches_numpy():
    model = SmallCNN()
    randomize(model)
    x = RNG.standard_normal((2, 2, 6, 6)).astype("float32")
    out = run(model, {"forward": {"x": nn.spec.Tensor((2, 2, 6, 6), "float32")}}, x).numpy()
    p = weights(model)
    hidden = max_pool2x2_ref(
        np.maximum(conv2d_ref(x, p["conv.weight"], p["conv.bias"], padding=1), 0)
    )
    expected = hidden.reshape(2, -1) @ p["fc.weight"].T + p["fc.bias"]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_strided_grouped_conv_matches_numpy():
    conv = nn.Conv2D(4, 6, kernel_size=3, stride=2, groups=2)
    assert conv.weight.shape == [6, 2, 3, 3]
    randomize(conv)
    x = RNG.standard_normal((1, 4, 7, 7)).astype("float32")
    out = run(conv, {"forward": {"x": nn.spec.Tensor((1, 4, 7, 7), "float32")}}, x).numpy()
    p = weights(conv)
    expected = conv2d_ref(x, p["weight"], p["bias"], stride=2, groups=2)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


class Block(nn.Module):
    """LayerNorm, the Tensor operators and the activations, with two outputs."""

    def __init__(self) -> None:
        self.w = nn.Parameter((4, 3))
        self.norm = nn.LayerNorm(3)

    def forward(self, x: nn.Tensor, y: nn.Tensor) -> tuple[nn.Tensor, nn.Tensor]:
        z = -(1.0 - ((x @ self.w + y) * 2.0 - y / 4.0))
        return nn.op.softmax(self.norm(z)), nn.op.gelu(z) + nn.op.silu(z)


def test_layer_norm_operators_and_activations_match_numpy():
    model = Block()
    randomize(model)
    x = RNG.standard_normal((2, 4)).astype("float32")
    y = RNG.standard_normal((2, 3)).astype("float32")
    spec = {"forward": {"x": nn.spec.Tensor((2, 4)), "y": nn.spec.Tensor((2, 3))}}
    first, second = run(model, spec, x, y)
    p = weights(model)
    z = -(1.0 - ((x @ p["w"] + y) * 2.0 - y / 4.0))
    normed = np.exp(layer_norm_ref(z, p["norm.weight"], p["norm.bias"]))
    erf = np.vectorize(math.erf)
    gelu = z * 0.5 * (1 + erf(z / math.sqrt(2)))
    np.testing.assert_allclose(
        first.numpy(), normed / normed.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(second.numpy(), gelu + z / (1 + np.exp(-z)), rtol=1e-5, atol=1e-6)


def test_avg_pool_counts_padding_like_torch():
    class Pool(nn.Module):
        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return nn.op.avg_pool2d(x, 2, padding=1)

    x = np.arange(9, dtype="float32").reshape(1, 1, 3, 3)
    out = run(Pool(), {"forward": {"x": nn.spec.Tensor((1, 1, 3, 3))}}, x).numpy()
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))[:, :, :4, :4]
    expected = padded.reshape(1, 1, 2, 2, 2, 2).mean(axis=(3, 5))  # zeros count in the mean
    np.testing.assert_allclose(out, expected, rtol=1e-6)


# ------------------------------------------------------------------------------ course weights
@pytest.fixture(scope="module")
def images() -> np.ndarray:
    # Two images of each class (the sprite holds 90 per class, in label order).
    return fashion_mnist("sprite900").images[::45]


def test_course_mlp_weights_reproduce_the_reference(images):
    model = MLP()
    w = mlp_params()
    model.load_state_dict(
        {"fc1.weight": w["w0"], "fc1.bias": w["b0"], "fc2.weight": w["w1"], "fc2.bias": w["b1"]}
    )
    x = images.reshape(len(images), 784).astype("float32") / np.float32(255)
    logits = run(model, {"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}}, x).numpy()
    expected = mlp_reference(images)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(logits.argmax(1), expected.argmax(1))


def test_course_cnn_weights_reproduce_the_reference(images):
    model = nn.Sequential(
        nn.Conv2D(1, 32, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(5408, 100),
        nn.ReLU(),
        nn.Linear(100, 10),
    )
    w = cnn_params()
    model.load_state_dict(
        {
            "0.weight": w["conv2d_weight"],
            "0.bias": w["conv2d_bias"],
            "4.weight": w["linear0_weight"],
            "4.bias": w["linear0_bias"],
            "6.weight": w["linear1_weight"],
            "6.bias": w["linear1_bias"],
        }
    )
    x = images.reshape(len(images), 1, 28, 28).astype("float32") / np.float32(255)
    logits = run(
        model, {"forward": {"x": nn.spec.Tensor((len(images), 1, 28, 28), "float32")}}, x
    ).numpy()
    expected = cnn_reference(images)
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(logits.argmax(1), expected.argmax(1))
