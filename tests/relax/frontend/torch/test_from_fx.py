"""The PyTorch importers: models traced with torch.fx or exported with torch.export, compiled
through the default pipeline, against torch's own outputs (skipped without torch)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import mlckit  # noqa: E402
from mlckit import relax  # noqa: E402
from mlckit.datasets import cnn_params, fashion_mnist, mlp_params  # noqa: E402
from mlckit.ir import assert_structural_equal  # noqa: E402
from mlckit.relax.frontend.torch import (  # noqa: E402
    FrontendError,
    coverage,
    coverage_markdown,
    detach_params,
    from_exported_program,
    from_fx,
)
from mlckit.script import from_source  # noqa: E402


def run(mod, *inputs):
    """Build ``mod`` the way a student does (legalize, fuse, default schedule) and run main."""
    exe = relax.build(relax.get_pipeline("default")(mod), "llvm")
    out = relax.VirtualMachine(exe, mlckit.cpu())["main"](*[mlckit.nd.array(x) for x in inputs])
    return out


def numpy_of(value):
    return [numpy_of(v) for v in value] if isinstance(value, (list, tuple)) else value.numpy()


def torch_out(model, *inputs):
    with torch.no_grad():
        return model(*[torch.from_numpy(x) for x in inputs]).numpy()


def images(count: int) -> np.ndarray:
    data = fashion_mnist("sprite900")
    return (data.images[:count].astype(np.float32) / 255).reshape(count, 1, 28, 28)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear0 = nn.Linear(784, 128)
        self.relu = nn.ReLU()
        self.linear1 = nn.Linear(128, 10)

    def forward(self, x):
        return self.linear1(self.relu(self.linear0(x)))


class CNN(nn.Module):
    """The course's assignment model."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)
        self.pool = nn.MaxPool2d(2)
        self.linear0 = nn.Linear(32 * 13 * 13, 100)
        self.linear1 = nn.Linear(100, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.linear0(x))
        return F.softmax(self.linear1(x), dim=1)


def course_mlp() -> MLP:
    model, p = MLP().eval(), mlp_params()
    with torch.no_grad():
        for name, layer in (("0", model.linear0), ("1", model.linear1)):
            layer.weight.copy_(torch.from_numpy(p[f"w{name}"]))
            layer.bias.copy_(torch.from_numpy(p[f"b{name}"]))
    return model


def course_cnn() -> CNN:
    model, p = CNN().eval(), cnn_params()
    with torch.no_grad():
        for layer, name in (
            (model.conv, "conv2d"),
            (model.linear0, "linear0"),
            (model.linear1, "linear1"),
        ):
            layer.weight.copy_(torch.from_numpy(p[f"{name}_weight"]))
            layer.bias.copy_(torch.from_numpy(p[f"{name}_bias"]))
    return model


class ResidualBlock(nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.pool = nn.AdaptiveAvgPool2d(1)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.pool(F.relu(y + x)).flatten(1)


class TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        qkv = self.qkv(self.norm1(x)).reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / (d // h) ** 0.5
        attention = torch.matmul(scores.softmax(dim=-1), v)
        x = x + self.dropout(self.proj(attention.transpose(1, 2).reshape(b, t, d)))
        return x + self.mlp(self.norm2(x))


def randomize_batch_norm(model: nn.Module) -> nn.Module:
    """Running statistics other than 0 and 1, so that inference batch norm does something."""
    generator = torch.Generator().manual_seed(0)
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.copy_(torch.randn(module.num_features, generator=generator))
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
            module.weight.data.copy_(torch.randn(module.num_features, generator=generator))
    return model.eval()


def test_the_course_mlp_matches_torch_on_fashion_mnist():
    model, x = course_mlp(), images(8).reshape(8, 784)
    mod = from_fx(torch.fx.symbolic_trace(model), [((8, 784), "float32")])
    out = run(mod, x).numpy()
    np.testing.assert_allclose(out, torch_out(model, x), atol=1e-4, rtol=1e-4)
    assert (out.argmax(1) == torch_out(model, x).argmax(1)).all()


def test_the_course_cnn_matches_torch_on_fashion_mnist():
    model, x = course_cnn(), images(4)
    mod = from_fx(torch.fx.symbolic_trace(model), [((4, 1, 28, 28), "float32")])
    np.testing.assert_allclose(run(mod, x).numpy(), torch_out(model, x), atol=1e-4, rtol=1e-4)


def test_a_residual_block_with_batch_norm_matches_torch():
    torch.manual_seed(0)
    model = randomize_batch_norm(ResidualBlock())
    x = np.random.default_rng(0).standard_normal((2, 8, 10, 10)).astype(np.float32)
    mod = from_fx(torch.fx.symbolic_trace(model), [((2, 8, 10, 10), "float32")])
    np.testing.assert_allclose(run(mod, x).numpy(), torch_out(model, x), atol=1e-4, rtol=1e-4)


def test_a_transformer_block_matches_torch():
    torch.manual_seed(0)
    model = TransformerBlock().eval()
    x = np.random.default_rng(0).standard_normal((2, 5, 16)).astype(np.float32)
    mod = from_fx(torch.fx.symbolic_trace(model), [((2, 5, 16), "float32")])
    np.testing.assert_allclose(run(mod, x).numpy(), torch_out(model, x), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(
    "make, shape",
    [
        (course_cnn, (2, 1, 28, 28)),
        (lambda: randomize_batch_norm(ResidualBlock()), (2, 8, 10, 10)),
        (lambda: TransformerBlock().eval(), (2, 5, 16)),
    ],
    ids=["cnn", "residual", "transformer"],
)
def test_exported_programs_match_torch(make, shape):
    torch.manual_seed(0)
    model = make()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    program = torch.export.export(model, (torch.from_numpy(x),))
    mod = from_exported_program(program)
    (out,) = numpy_of(run(mod, x))
    np.testing.assert_allclose(out, torch_out(model, x), atol=1e-4, rtol=1e-4)
    unwrapped = from_exported_program(program, unwrap_unit_return_tuple=True)
    np.testing.assert_allclose(run(unwrapped, x).numpy(), out, rtol=1e-6)


def test_weights_as_parameters_detach_and_bind():
    model, x = course_mlp(), images(2).reshape(2, 784)
    mod = from_fx(
        torch.fx.symbolic_trace(model), [((2, 784), "float32")], keep_params_as_input=True
    )
    mod, params = detach_params(mod)
    names = [p.name_hint for p in mod["main"].params]
    assert names == ["x", "linear0_weight", "linear0_bias", "linear1_weight", "linear1_bias"]
    assert sorted(params) == sorted(names[1:])
    np.testing.assert_array_equal(params["linear0_weight"], mlp_params()["w0"])
    bound = relax.transform.BindParams("main", params)(mod)
    np.testing.assert_allclose(run(bound, x).numpy(), torch_out(model, x), atol=1e-4, rtol=1e-4)
    with pytest.raises(FrontendError, match="keep_params_as_input=True"):
        detach_params(mod)


def test_symbolic_batch_and_round_trip():
    traced = torch.fx.symbolic_trace(course_mlp())
    mod = from_fx(traced, [(("n", 784), "float32")])
    x = images(3).reshape(3, 784)
    np.testing.assert_allclose(run(mod, x).numpy(), torch_out(course_mlp(), x), atol=1e-4)
    # Weights as parameters: the module prints without metadata and reads back.
    mod, _ = detach_params(from_fx(traced, [(("n", 784), "float32")], keep_params_as_input=True))
    assert 'R.Tensor((n, 784), dtype="float32")' in mod.script()
    assert_structural_equal(from_source(mod.script()), mod)


def test_the_imported_module_uses_high_level_operators():
    text = from_fx(torch.fx.symbolic_trace(course_cnn()), [((1, 1, 28, 28), "float32")]).script()
    for op in ("R.nn.conv2d", "R.nn.max_pool2d", "R.nn.relu", "R.reshape", "R.nn.softmax"):
        assert op in text


class Unsupported(nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=0)


class UnsupportedModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 4)

    def forward(self, x):
        return self.rnn(x)


def test_an_unsupported_op_is_named_with_its_place_and_the_supported_ones():
    with pytest.raises(FrontendError, match=r"node 'cumsum'.*torch.cumsum has no converter") as err:
        from_fx(torch.fx.symbolic_trace(Unsupported()), [((3, 4), "float32")])
    assert "torch.matmul" in str(err.value)  # the list of what is supported
    with pytest.raises(FrontendError, match=r"node 'rnn'.*nn.GRU has no converter"):
        from_fx(torch.fx.symbolic_trace(UnsupportedModule()), [((2, 3, 4), "float32")])
    program = torch.export.export(Unsupported(), (torch.ones(3, 4),))
    with pytest.raises(FrontendError, match=r"aten.cumsum.default has no converter"):
        from_exported_program(program)


def test_bad_requests_are_named():
    traced = torch.fx.symbolic_trace(course_mlp())
    with pytest.raises(FrontendError, match="takes 1 inputs"):
        from_fx(traced, [])
    with pytest.raises(FrontendError, match="symbolic_trace"):
        from_fx(course_mlp(), [((1, 784), "float32")])
    with pytest.raises(FrontendError, match="torch.export.export"):
        from_exported_program(traced)
    train = torch.fx.symbolic_trace(ResidualBlock().train())
    with pytest.raises(FrontendError, match=r"node 'bn1'.*model.eval\(\)"):
        from_fx(train, [((1, 8, 4, 4), "float32")])


def test_the_coverage_table_lists_every_converter():
    table = coverage()
    assert "nn.Conv2d" in table["torch.nn modules (from_fx)"]
    assert "aten.conv2d.default" in table["ATen operators (from_exported_program)"]
    markdown = coverage_markdown()
    assert all(name in markdown for names in table.values() for name in names)


def test_without_torch_the_importer_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(FrontendError, match=r"pip install 'mlckit\[torch\]'"):
        from_fx(object(), [])


def test_the_docs_table_is_the_one_the_code_generates():
    from pathlib import Path

    docs = Path(__file__).parents[4] / "docs" / "torch_importer_ops.md"
    assert docs.read_text() == coverage_markdown(), (
        "docs/torch_importer_ops.md is stale: python -m mlckit.relax.frontend.torch "
        "docs/torch_importer_ops.md"
    )


class EveryOp(nn.Module):
    """One model through the remaining operators of the coverage table."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.avg = nn.AvgPool2d(2, stride=1, padding=1)
        self.acts = nn.Sequential(nn.Sigmoid(), nn.Tanh(), nn.SiLU())
        self.log_softmax = nn.LogSoftmax(dim=-1)
        self.softmax = nn.Softmax(dim=0)

    def forward(self, ids, image):
        words = self.embed(ids)  # (2, 5, 6)
        pooled = self.avg(image).view(2, -1)  # (2, 3*5*5)
        summary = torch.cat([words.mean(dim=1), words.sum(1) * 0.1], dim=1)  # (2, 12)
        mixed = torch.transpose(summary, 0, 1).permute(1, 0) - 1.5 / summary.shape[1]
        joined = torch.cat((self.acts(mixed), pooled.mean(-1, keepdim=True)), 1)
        scaled = F.relu(joined) / 2 + torch.sigmoid(joined) * joined.sum()
        return self.log_softmax(scaled), self.softmax(scaled.reshape(2, 13).contiguous())


@pytest.mark.parametrize("capture", ["fx", "export"])
def test_the_remaining_operators_match_torch(capture):
    torch.manual_seed(0)
    model = EveryOp().eval()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 10, (2, 5)).astype(np.int64)
    image = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    if capture == "fx":
        info = [((2, 5), "int64"), ((2, 3, 4, 4), "float32")]
        mod = from_fx(torch.fx.symbolic_trace(model), info)
    else:
        program = torch.export.export(model, (torch.from_numpy(ids), torch.from_numpy(image)))
        mod = from_exported_program(program)
    ours = numpy_of(run(mod, ids, image))
    with torch.no_grad():
        theirs = [t.numpy() for t in model(torch.from_numpy(ids), torch.from_numpy(image))]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


class TanhGelu(nn.Module):
    def forward(self, x):
        return F.gelu(x, approximate="tanh")


def test_arguments_a_converter_does_not_support_are_named():
    with pytest.raises(FrontendError, match=r"node 'gelu'.*approximate='tanh'"):
        from_fx(torch.fx.symbolic_trace(TanhGelu()), [((1, 4), "float32")])
    traced = torch.fx.symbolic_trace(course_mlp())
    linear = next(n for n in traced.graph.nodes if n.op == "call_module")
    linear.kwargs = {"scale": 2}  # an argument no converter takes
    with pytest.raises(FrontendError, match=r"node 'linear0'.*unsupported arguments"):
        from_fx(traced, [((1, 784), "float32")])


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_ceil_mode_pooling_matches_torchs_shape_and_values(kind):
    """ceil_mode pooling whose rounded-up last window would start in the padding: torch (and
    TVM) drop that window, so the imported model's output has torch's shape."""
    pool = (
        nn.MaxPool2d(2, 2, 1, ceil_mode=True)
        if kind == "max"
        else nn.AvgPool2d(3, 3, 1, ceil_mode=True)
    )
    image = np.random.default_rng(0).standard_normal((1, 2, 5, 5)).astype(np.float32)
    mod = from_fx(torch.fx.symbolic_trace(pool), [((1, 2, 5, 5), "float32")])
    ours = numpy_of(run(mod, image))
    with torch.no_grad():
        theirs = pool(torch.from_numpy(image)).numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
