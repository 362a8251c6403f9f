"""FoldBatchnormToConv2D: an inference batch norm after a convolution becomes new constant
weights and a bias; what it declines stays as it was; in the default pipeline the convolution
fuses with its bias, activation and residual add, and no kernel runs on constants alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import mlckit
from mlckit import relax
from mlckit.ir import assert_structural_equal
from mlckit.ir.transform import Sequential
from mlckit.relax.transform import (
    CanonicalizeBindings,
    DeadCodeElimination,
    FoldBatchnormToConv2D,
    FoldConstant,
)

op = relax.op
rng = np.random.default_rng(0)
C, HW = 4, 6


def _statistics(length: int = C) -> dict[str, np.ndarray]:
    """Parameters far from the identity, so that folding them shows."""
    return {
        "gamma": rng.uniform(0.5, 2.0, length).astype("float32"),
        "beta": rng.standard_normal(length).astype("float32"),
        "mean": rng.standard_normal(length).astype("float32"),
        "var": rng.uniform(0.5, 2.0, length).astype("float32"),
    }


def _conv_bn_relu(
    weight: np.ndarray,
    stats: dict[str, np.ndarray],
    *,
    groups: int = 1,
    axis: int = 1,
    training: bool = False,
    center: bool = True,
    scale: bool = True,
    weight_as_param: bool = False,
    conv_also_returned: bool = False,
    conv_bias: np.ndarray | None = None,
    bias_first: bool = False,
) -> mlckit.IRModule:
    """``main(x) = relu(batch_norm(conv2d(x, weight) [+ conv_bias])[0])``, its parameters
    constants."""
    x = relax.Var("x", relax.TensorStructInfo((1, C, HW, HW), "float32"))
    w = relax.Var("w", relax.TensorStructInfo(weight.shape, "float32"))
    params = [x, w] if weight_as_param else [x]
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            conv = bb.emit(
                op.nn.conv2d(
                    x, w if weight_as_param else relax.const(weight), padding=1, groups=groups
                )
            )
            data = conv
            if conv_bias is not None:
                operands = (relax.const(conv_bias), conv)
                data = bb.emit(op.add(*(operands if bias_first else reversed(operands))))
            norm = bb.emit(
                op.nn.batch_norm(
                    data,
                    *(relax.const(stats[k]) for k in ("gamma", "beta", "mean", "var")),
                    axis=axis,
                    epsilon=1e-3,
                    center=center,
                    scale=scale,
                    training=training,
                )
            )
            out = bb.emit(op.nn.relu(relax.TupleGetItem(norm, 0)))
            results = (out, conv) if conv_also_returned else out
            gv = bb.emit_output(relax.Tuple(results) if conv_also_returned else results)
        bb.emit_func_output(gv)
    return bb.get()


def _high_level_ops(mod: mlckit.IRModule) -> list[str]:
    return [
        b.value.op.name
        for block in mod["main"].body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Call) and isinstance(b.value.op, mlckit.ir.Op)
    ]


def _call_tirs(mod: mlckit.IRModule) -> list[relax.Call]:
    return [
        b.value
        for block in mod["main"].body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Call) and b.value.op is mlckit.ir.Op.get("relax.call_tir")
    ]


def _run(mod: mlckit.IRModule, x: np.ndarray) -> np.ndarray:
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())
    return vm["main"](mlckit.nd.array(x)).numpy()


def test_the_folded_weight_and_bias_are_constants_of_the_formula():
    weight = rng.standard_normal((C, C, 3, 3)).astype("float32")
    stats = _statistics()
    folded = Sequential(
        [FoldBatchnormToConv2D(), FoldConstant(), CanonicalizeBindings(), DeadCodeElimination()]
    )(_conv_bn_relu(weight, stats))
    assert _high_level_ops(folded) == ["relax.nn.conv2d", "relax.add", "relax.nn.relu"]
    conv, add = (b.value for b in folded["main"].body.blocks[0].bindings[:2])
    scale = stats["gamma"] / np.sqrt(stats["var"] + 1e-3)
    shift = stats["beta"] - stats["mean"] * scale
    np.testing.assert_allclose(conv.args[1].data.numpy(), weight * scale[:, None, None, None], 1e-6)
    np.testing.assert_allclose(add.args[1].data.numpy(), shift[None, :, None, None], 1e-6, 1e-6)


FOLDED: dict[str, dict[str, Any]] = {
    "plain": {},
    "grouped": {"groups": 2},
    "no center": {"center": False},
    "no scale": {"scale": False},
    "conv bias": {"conv_bias": rng.standard_normal((1, C, 1, 1)).astype("float32")},
    "bias first": {
        "conv_bias": rng.standard_normal((C, 1, 1)).astype("float32"),
        "bias_first": True,
    },
}


@pytest.mark.parametrize("options", FOLDED.values(), ids=FOLDED.keys())
def test_folding_computes_what_the_batch_norm_did(options: dict[str, Any]):
    weight = rng.standard_normal((C, C // options.get("groups", 1), 3, 3)).astype("float32")
    mod = _conv_bn_relu(weight, _statistics(), **options)
    x = rng.standard_normal((1, C, HW, HW)).astype("float32")
    # The zero pipeline does not fold: it runs the legalized batch norm.
    expected = _run(relax.get_pipeline("zero")(mod), x)
    folded = relax.get_pipeline("default")(mod)
    assert [c.args[0].name_hint for c in _call_tirs(folded)] == ["fused_conv2d_add_relu"]
    np.testing.assert_allclose(_run(folded, x), expected, rtol=1e-5, atol=1e-5)


DECLINED: dict[str, dict[str, Any]] = {
    "training": {"training": True},
    "weight not constant": {"weight_as_param": True},
    "convolution read elsewhere": {"conv_also_returned": True},
    "not the channel axis": {"axis": 2},  # the height: statistics of HW values
    "bias along the width": {"conv_bias": rng.standard_normal(HW).astype("float32")},
}


@pytest.mark.parametrize("options", DECLINED.values(), ids=DECLINED.keys())
def test_a_batch_norm_it_cannot_fold_stays(options: dict[str, Any]):
    weight = rng.standard_normal((C, C, 3, 3)).astype("float32")
    stats = _statistics(HW if options.get("axis") == 2 else C)
    mod = _conv_bn_relu(weight, stats, **options)
    after = FoldBatchnormToConv2D()(mod)
    assert_structural_equal(after, mod)
    assert "relax.nn.batch_norm" in _high_level_ops(after)


# ------------------------------------------------------------------------------ torch models
def _torch_models() -> dict[str, tuple[Callable[[], Any], tuple[int, ...]]]:
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Residual(nn.Module):
        def __init__(self, c: int = 8):
            super().__init__()
            self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.b2 = nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))) + x)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.p = nn.Conv2d(1, 8, 3), nn.MaxPool2d(2)
            self.l0, self.l1 = nn.Linear(8 * 4 * 4, 16), nn.Linear(16, 10)

        def forward(self, x):
            y = torch.flatten(self.p(torch.relu(self.c(x))), 1)
            return self.l1(torch.relu(self.l0(y)))

    class Attention(nn.Module):
        def __init__(self, d: int = 16, h: int = 2):
            super().__init__()
            self.h, self.ln = h, nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

        def forward(self, x):
            b, t, d = x.shape
            y = self.ln(x)
            q, k, v = (
                f(y).reshape(b, t, self.h, d // self.h).transpose(1, 2)
                for f in (self.q, self.k, self.v)
            )
            a = torch.softmax(q @ k.transpose(-2, -1) / (d // self.h) ** 0.5, dim=-1)
            return x + self.o((a @ v).transpose(1, 2).reshape(b, t, d))

    class ConvBiasBatchNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.c, self.b = nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)

        def forward(self, x):
            return torch.relu(self.b(self.c(x)))

    return {
        "residual": (Residual, (1, 8, 10, 10)),
        "conv bias batch norm": (ConvBiasBatchNorm, (2, 3, 10, 10)),
        "cnn": (CNN, (2, 1, 10, 10)),
        "attention": (Attention, (1, 5, 16)),
    }


def _import(name: str) -> tuple[Any, mlckit.IRModule, np.ndarray]:
    import torch

    from mlckit.relax.frontend.torch import from_fx

    make, shape = _torch_models()[name]
    torch.manual_seed(0)
    model = make().eval()
    with torch.no_grad():  # statistics far from the identity, so that folding them shows
        for bn in (m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-1, 1)
    mod = from_fx(torch.fx.symbolic_trace(model), [(shape, "float32")])
    return model, mod, rng.standard_normal(shape).astype("float32")


KERNELS = {
    # Each convolution with its bias and relu, the second also with the residual add.
    "residual": ["fused_conv2d_add_relu", "fused_conv2d_add_add1_relu"],
    "conv bias batch norm": ["fused_conv2d_add_relu"],
}


@pytest.mark.parametrize("name", KERNELS)
def test_convolutions_with_batch_norms_fuse_into_one_kernel_each_and_match_torch(name: str):
    torch = pytest.importorskip("torch")
    model, mod, x = _import(name)
    built = relax.get_pipeline("default")(mod)
    assert [c.args[0].name_hint for c in _call_tirs(built)] == KERNELS[name]
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(_run(built, x), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["residual", "conv bias batch norm", "cnn", "attention"])
def test_no_kernel_of_the_default_pipeline_reads_only_constants(name: str):
    _, mod, _ = _import(name)
    for call in _call_tirs(relax.get_pipeline("default")(mod)):
        args = call.args[1].fields
        assert not all(isinstance(a, relax.Constant) for a in args), call.args[0].name_hint
