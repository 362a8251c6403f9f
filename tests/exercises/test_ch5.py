"""Chapter 5's exercise: the reference solution passes, typical wrong importers fail with the
intended message and hint, and answers of the wrong kind never raise."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from replies import assert_verdict

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from mlckit import relax, tir, topi  # noqa: E402
from mlckit.datasets import cnn_reference, fashion_mnist  # noqa: E402
from mlckit.exercises import check, exercises, hint, solution  # noqa: E402
from mlckit.exercises.ch5 import IMAGES, cnn_model, torch_stages  # noqa: E402
from mlckit.exercises.solutions import ch5 as solutions  # noqa: E402
from mlckit.relax.frontend.torch import from_fx as library_from_fx  # noqa: E402


# ------------------------------------------------------------------ a student's importer
def map_param(param):
    return relax.const(param.data.cpu().numpy(), "float32")


def from_fx(fx_mod, input_shapes, call_function_map, call_module_map):
    """The chapter's importer, as a student copies it."""
    node_map, fn_inputs = {}, []
    named_modules = dict(fx_mod.named_modules())
    bb = relax.BlockBuilder()
    with bb.function("main"):
        with bb.dataflow():
            for node in fx_mod.graph.nodes:
                if node.op == "placeholder":
                    var = relax.Var(
                        node.target,
                        relax.TensorStructInfo(input_shapes[len(fn_inputs)], "float32"),
                    )
                    fn_inputs.append(var)
                    node_map[node] = var
                elif node.op == "call_function":
                    node_map[node] = call_function_map[node.target](bb, node_map, node)
                elif node.op == "call_module":
                    module = named_modules[node.target]
                    node_map[node] = call_module_map[type(module)](bb, node_map, node, module)
                elif node.op == "output":
                    output = bb.emit_output(node_map[node.args[0]])
        bb.emit_func_output(output, fn_inputs)
    return bb.get()


def map_nn_linear(bb, node_map, node, module):
    x = node_map[node.args[0]]
    return bb.emit_te(topi.nn.dense, x, map_param(module.weight), map_param(module.bias))


def map_nn_relu(bb, node_map, node, module):
    return bb.emit_te(topi.nn.relu, node_map[node.args[0]])


def conv(bias=True):
    def map_nn_conv2d(bb, node_map, node, module):
        x = node_map[node.args[0]]
        w = map_param(module.weight)
        out = bb.emit_te(topi.nn.conv2d_nchw, x, w, module.stride, module.padding, 1)
        if not bias:
            return out
        b = relax.const(module.bias.data.numpy().reshape(1, -1, 1, 1))
        return bb.emit_te(topi.add, out, b)

    return map_nn_conv2d


def pool(stride=None):
    def map_nn_max_pool2d(bb, node_map, node, module):
        x = node_map[node.args[0]]
        return bb.emit_te(topi.nn.max_pool2d, x, kernel=2, stride=stride or module.stride)

    return map_nn_max_pool2d


def flatten_nchw(bb, node_map, node, module):
    return bb.emit_te(topi.nn.flatten, node_map[node.args[0]])


def flatten_1d(bb, node_map, node, module):
    return bb.emit_te(topi.reshape, node_map[node.args[0]], (-1,))


def flatten_nhwc(bb, node_map, node, module):
    x = bb.emit_te(topi.transpose, node_map[node.args[0]], (0, 2, 3, 1))
    return bb.emit_te(topi.nn.flatten, x)


def importer(shape=(1, 1, 28, 28), **converters):
    """import_cnn with the chapter's converters and the given (or the right) new ones."""
    table = {
        nn.Linear: map_nn_linear,
        nn.ReLU: map_nn_relu,
        nn.Conv2d: conv(),
        nn.MaxPool2d: pool(),
        nn.Flatten: flatten_nchw,
    }
    table.update({getattr(nn, name): convert for name, convert in converters.items()})
    table = {cls: convert for cls, convert in table.items() if convert is not None}

    def import_cnn(fx_module):
        return from_fx(fx_module, [shape], {}, table)

    return import_cnn


# ------------------------------------------------------------------ passing answers
def test_reference_passes():
    result = check("ch5.fx_cnn", solutions.fx_cnn())
    assert result, str(result)


@pytest.mark.parametrize("batch", [4, tir.Var("n", "int64")], ids=["four", "symbolic"])
def test_other_batch_sizes_pass(batch):
    result = check("ch5.fx_cnn", importer(shape=(batch, 1, 28, 28)))
    assert result, str(result)


def test_the_torch_model_is_the_course_cnn():
    images = fashion_mnist("sprite900", dtype="float32").images[list(IMAGES)]
    stages = torch_stages(cnn_model(), images[:, None])
    np.testing.assert_allclose(stages["linear1"], cnn_reference(images), rtol=1e-4, atol=1e-4)
    assert stages["flatten"].shape == (len(IMAGES), 5408)


# ------------------------------------------------------------------ typical mistakes
@pytest.mark.parametrize(
    ("answer", "message", "hint_text"),
    [
        (importer(Conv2d=conv(bias=False)), "leaves out the bias", "reshape(1, -1, 1, 1)"),
        (importer(Flatten=None), "no converter for nn.Flatten", "nn.Flatten: map_nn_flatten"),
        (
            importer(MaxPool2d=pool(stride=1)),
            "importing the model failed with StructInfoError",
            "5408 = 32 * 13 * 13",
        ),
        (
            importer(Flatten=flatten_1d),
            "main returns shape (10,), not (1, 10): no value of your module has the shape of "
            "nn.Flatten()'s output, (1, 5408)",
            "keeps the batch dimension",
        ),
        (
            importer(Flatten=flatten_nhwc),
            "your module's values first differ from PyTorch's at nn.Flatten()",
            "row-major (NCHW) order",
        ),
    ],
)
def test_typical_mistakes(answer, message, hint_text):
    result = check("ch5.fx_cnn", answer)
    assert not result
    assert_verdict(result, message)
    assert hint_text in result.hint, result.hint


def test_the_library_importer_is_refused():
    result = check(
        "ch5.fx_cnn", lambda fx_module: library_from_fx(fx_module, [((1, 1, 28, 28), "float32")])
    )
    assert not result
    assert_verdict(result, "high-level relax operators (R.nn.conv2d")
    assert "mlckit.relax.frontend.torch.from_fx" in result.message
    assert "bb.emit_te" in result.hint


def test_one_relax_operator_among_kernels_is_named():
    def relax_relu(bb, node_map, node, module):
        return bb.emit(relax.op.nn.relu(node_map[node.args[0]]))

    result = check("ch5.fx_cnn", importer(ReLU=relax_relu))
    assert not result
    assert "besides call_tir kernels, main calls high-level relax operators (R.nn.relu)" in (
        result.message
    )


# ------------------------------------------------------------------ wrong kinds of answer
def test_wrong_kind_never_raises():
    result = check("ch5.fx_cnn", 42)
    assert_verdict(result, "expected a function import_cnn(fx_module), got int")
    crashing = check("ch5.fx_cnn", lambda fx_module: 1 / 0)
    assert not crashing and "ZeroDivisionError" in crashing.message
    module = importer()(torch.fx.symbolic_trace(cnn_model()))
    assert "the answer is the function import_cnn" in check("ch5.fx_cnn", module).message
    none = check("ch5.fx_cnn", lambda fx_module: None)
    assert not none and "returns None" in none.message
    string = check("ch5.fx_cnn", lambda fx_module: "Module")
    assert not string and "expected an IRModule, got str" in string.message


def test_from_fx_itself_is_told_to_wrap_it():
    result = check("ch5.fx_cnn", from_fx)
    assert not result
    assert_verdict(result, "a function of the traced model alone")
    assert "def import_cnn(fx_module)" in result.hint


def test_wrong_input_shape_is_named():
    result = check("ch5.fx_cnn", importer(shape=(1, 784)))
    assert not result
    assert_verdict(result, "topi.nn.conv2d_nchw: needs a 4-d NCHW input")
    assert "input_shapes gives its shape, [(1, 1, 28, 28)]" in result.hint


def test_weights_as_parameters_are_refused():
    def weights_as_parameters(fx_module):
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorStructInfo((1, 1, 28, 28), "float32"))
        w = relax.Var("w", relax.TensorStructInfo((32, 1, 3, 3), "float32"))
        with bb.function("main", [x, w]):
            with bb.dataflow():
                out = bb.emit_output(bb.call_te(topi.nn.conv2d_nchw, x, w, 1, 0, 1))
            bb.emit_func_output(out)
        return bb.get()

    result = check("ch5.fx_cnn", weights_as_parameters)
    assert not result
    assert_verdict(result, "main takes 2 parameters (x, w); the model has one input")
    assert "map_param(nn_mod.weight)" in result.hint


def test_without_torch_the_checker_says_how_to_install_it(monkeypatch):
    answer = solutions.fx_cnn()
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setitem(sys.modules, "torch.fx", None)
    result = check("ch5.fx_cnn", answer)
    assert not result
    assert_verdict(result, "PyTorch is not installed")
    assert "pip install mlckit[torch]" in result.hint


def test_graded_hints_and_the_solution():
    assert [e.name for e in exercises(5)] == ["ch5.fx_cnn"]
    assert "topi.nn.conv2d_nchw" in str(hint("ch5.fx_cnn", 1))
    assert "(1, 32, 1, 1)" in str(hint("ch5.fx_cnn", 2))
    assert "last hint" in str(hint("ch5.fx_cnn", 3))
    shown = str(solution("ch5.fx_cnn"))
    assert "def from_fx(fx_mod, input_shapes, call_function_map, call_module_map)" in shown
    assert "bb.emit_te(topi.nn.conv2d_nchw" in shown
