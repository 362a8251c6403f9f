"""One build path for every target: a target-independent pipeline, then relax.build for a device.

``relax.get_pipeline("default")`` knows no target; ``relax.build`` applies the target's default
schedule to the PrimFuncs nobody scheduled and compiles every kernel through the same function as
``mlckit.build``. The CUDA cases run under numba's simulator where there is no GPU.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.errors import BuildError
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.target import Target
from mlckit.tir.schedule.default_schedule import DefaultSchedule


@pytest.fixture(autouse=True)
def _fast_simulator():
    # The simulator runs each GPU thread as a Python thread: switch between them often.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(interval)


@I.ir_module
class MLP:
    @R.function
    def main(
        x: R.Tensor((4, 16), "float32"),
        w0: R.Tensor((64, 16), "float32"),
        b0: R.Tensor((64,), "float32"),
        w1: R.Tensor((8, 64), "float32"),
    ):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, R.permute_dims(w0)), b0))
            y = R.matmul(h, R.permute_dims(w1))
            R.output(y)
        return y


@I.ir_module
class Softmax:
    @R.function
    def main(x: R.Tensor((3, 10), "float32")):
        with R.dataflow():
            y = R.nn.softmax(x, axis=-1)
            R.output(y)
        return y


@I.ir_module
class LayerNorm:
    @R.function
    def main(
        x: R.Tensor((2, 3, 8), "float32"),
        gamma: R.Tensor((8,), "float32"),
        beta: R.Tensor((8,), "float32"),
    ):
        with R.dataflow():
            y = R.nn.layer_norm(x, gamma, beta, axes=[-1], epsilon=1e-5)
            R.output(y)
        return y


@I.ir_module
class Conv2d:
    @R.function
    def main(x: R.Tensor((1, 2, 6, 6), "float32"), w: R.Tensor((3, 2, 3, 3), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.nn.conv2d(x, w, padding=[1, 1, 1, 1]))
            R.output(y)
        return y


def _mlp(x, w0, b0, w1):
    return np.maximum(x @ w0.T + b0, 0) @ w1.T


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(x, gamma, beta):
    mean, var = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def _conv2d(x, w):
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, 3, 6, 6), "float32")
    for i in range(6):
        for j in range(6):
            window = padded[0, :, i : i + 3, j : j + 3]
            out[0, :, i, j] = np.tensordot(w, window, axes=([1, 2, 3], [0, 1, 2]))
    return np.maximum(out, 0)


MODELS = {
    "mlp": (MLP, [(4, 16), (64, 16), (64,), (8, 64)], _mlp),
    "softmax": (Softmax, [(3, 10)], _softmax),
    "layer_norm": (LayerNorm, [(2, 3, 8), (8,), (8,)], _layer_norm),
    "conv2d": (Conv2d, [(1, 2, 6, 6), (3, 2, 3, 3)], _conv2d),
}


def _run(ex: relax.Executable, shapes: list[tuple[int, ...]]) -> tuple[np.ndarray, list]:
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape).astype("float32") for shape in shapes]
    device = ex.target.device()
    vm = relax.VirtualMachine(ex, device)
    out = vm["main"](*[mlckit.nd.array(a, device) for a in inputs])
    return out.numpy(), inputs


@pytest.mark.parametrize("name", list(MODELS))
def test_the_default_pipeline_then_a_cuda_build(name: str) -> None:
    module, shapes, reference = MODELS[name]
    ex = relax.build(relax.get_pipeline("default")(module), "cuda")
    out, inputs = _run(ex, shapes)
    np.testing.assert_allclose(out, reference(*inputs), rtol=1e-4, atol=1e-5)


def _threads_per_block(source: str) -> list[int]:
    """The threads of each kernel launch, read from the generated host code."""
    launches = re.findall(r"_kernel\d+\[\(([^)]*)\), \(([^)]*)\)\]", source)
    assert launches, source
    return [int(np.prod([int(t) for t in block.split(",") if t.strip()])) for _, block in launches]


def test_max_num_threads_caps_every_thread_block() -> None:
    mod = relax.get_pipeline("default")(MLP)
    # 4 x 64 outputs: the default GPU schedule would take 256 threads a block.
    assert max(_threads_per_block(relax.build(mod, "cuda").source())) == 256
    capped = relax.build(mod, "cuda -max_num_threads=128")
    assert max(_threads_per_block(capped.source())) == 128
    out, inputs = _run(capped, MODELS["mlp"][1])
    np.testing.assert_allclose(out, _mlp(*inputs), rtol=1e-4, atol=1e-5)


def test_a_tag_carries_its_limits_into_the_build() -> None:
    ex = relax.build(relax.get_pipeline("default")(Softmax), "nvidia/geforce-rtx-2080-ti")
    assert ex.target.kind.name == "cuda" and ex.target.attrs["arch"] == "sm_75"


@I.ir_module
class AddOne:
    @T.prim_func
    def add_one(a: T.Buffer((64, 32), "float32"), b: T.Buffer((64, 32), "float32")):
        T.func_attr({"tir.noalias": True})
        for i, j in T.grid(64, 32):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                b[vi, vj] = a[vi, vj] + T.float32(1)

    @R.function
    def main(a: R.Tensor((64, 32), "float32")):
        cls = AddOne
        b = R.call_tir(cls.add_one, (a,), out_sinfo=R.Tensor((64, 32), "float32"))
        return b


add_one = AddOne["add_one"]


def _holding(func: tir.PrimFunc) -> mlckit.IRModule:
    """A module whose relax function calls ``func``."""
    mod = AddOne.copy()
    mod["add_one"] = func
    return mod


@pytest.mark.parametrize("target", ["llvm", "python"])
def test_both_builds_generate_the_same_kernel(target: str) -> None:
    # A function somebody scheduled compiles to the same kernel on either path.
    scheduled = DefaultSchedule()(mlckit.IRModule({"add_one": add_one}))["add_one"]
    assert scheduled.attrs["tir.is_scheduled"]
    for func in (scheduled, add_one if target == "python" else scheduled):
        direct = mlckit.build(mlckit.IRModule({"add_one": func}), target)
        via_relax = relax.build(_holding(func), target)
        assert direct.source("add_one") == via_relax.source("add_one")


def test_the_default_schedule_is_the_only_difference_for_an_unscheduled_function() -> None:
    # relax.build schedules add_one (nobody did) as the target says; mlckit.build compiles it
    # as written unless its TIR pipeline is that same schedule.
    via_relax = relax.build(_holding(add_one), "llvm").source("add_one")
    as_written = mlckit.build(mlckit.IRModule({"add_one": add_one}), "llvm").source("add_one")
    assert via_relax != as_written and "j_0 * 16 + j_1" in via_relax  # vectorized by 16
    scheduled = mlckit.build(
        mlckit.IRModule({"add_one": add_one}),
        "llvm",
        tir_pipeline=Target("llvm").default_schedule(),
    )
    assert scheduled.source("add_one") == via_relax


def test_a_cpu_schedule_is_never_run_on_the_gpu() -> None:
    cpu_scheduled = DefaultSchedule()(relax.get_pipeline("default")(Softmax))
    ex = relax.build(cpu_scheduled, "cuda")  # rebound to GPU threads
    out, inputs = _run(ex, MODELS["softmax"][1])
    np.testing.assert_allclose(out, _softmax(*inputs), rtol=1e-5, atol=1e-6)
    # A schedule that the GPU recipe cannot rebind (the matmul's accumulator tile) is refused.
    with pytest.raises(BuildError, match="was scheduled for a CPU .* binds no loop to a GPU"):
        relax.build(DefaultSchedule()(relax.get_pipeline("default")(MLP)), "cuda")


def test_compile_runs_the_default_relax_pipeline() -> None:
    ex = mlckit.compile(Softmax, "llvm")
    assert ex.source() == relax.build(relax.get_pipeline("default")(Softmax), "llvm").source()
    named = relax.build(Softmax, "llvm", relax_pipeline="default")
    assert named.source() == ex.source()
    out, inputs = _run(ex, MODELS["softmax"][1])
    np.testing.assert_allclose(out, _softmax(*inputs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tir_pipeline": "fast"}, "tir_pipeline must be 'default' or a Pass"),
        ({"relax_pipeline": 3}, "relax_pipeline must be a pipeline name"),
        ({"relax_pipeline": "fastest"}, "no relax pipeline named 'fastest'"),
    ],
)
def test_bad_pipelines_are_named(kwargs: dict, message: str) -> None:
    with pytest.raises(mlckit.MLCError, match=message):
        relax.build(Softmax, "llvm", **kwargs)
