"""relax.frontend.nn: the Module/Parameter API, the exported IR, and the errors for bad input.

The numerics of exported models (built and run against numpy) are in test_nn_numerics.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import mlckit
from mlckit import relax, tir
from mlckit.errors import MLCError, StructInfoError
from mlckit.relax.frontend import nn
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T


class MLP(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(784, 128)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(self.relu(self.fc1(x)))


MLP_SPEC = {"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}}


# ------------------------------------------------------------------------------ Module, Parameter
def test_named_parameters_follow_assignment_order_with_dotted_names():
    model = MLP()
    names = [name for name, _ in model.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert list(model.parameters()) == [p for _, p in model.named_parameters()]
    assert model.fc1.weight.shape == [128, 784]  # (out, in) as in torch and TVM
    assert model.fc1.weight.dtype == "float32"
    assert next(model.named_parameters("mlp"))[0] == "mlp.fc1.weight"


def test_sequential_lists_and_shared_parameters():
    seq = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2, bias=False))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU)
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight"]

    class Tied(nn.Module):
        def __init__(self) -> None:
            self.blocks = [nn.Linear(2, 2), nn.Linear(2, 2)]
            self.blocks[1].weight = self.blocks[0].weight  # one weight used twice
            self.scale = nn.Parameter((2,))

    # A list attribute names its items by index; a shared Parameter is listed once.
    assert list(Tied().state_dict()) == [
        "blocks.0.weight",
        "blocks.0.bias",
        "blocks.1.bias",
        "scale",
    ]


def test_module_repr_shows_the_layer_tree():
    text = repr(nn.Sequential(nn.Conv2D(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten()))
    assert text == (
        "Sequential(\n"
        "  (0): Conv2D(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=1, groups=1, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Flatten(start_dim=1, end_dim=-1)\n"
        ")"
    )
    assert repr(nn.Parameter((3,))) == 'Parameter((3,), "float32")'


def test_parameter_data_is_a_checked_copy():
    p = nn.Parameter((2, 3))
    assert p.data is None
    value = np.arange(6, dtype="float32").reshape(2, 3)
    p.data = value
    value[0, 0] = 100
    assert p.data[0, 0] == 0
    p.data = mlckit.nd.array(np.ones((2, 3), "float32"))  # an NDArray works too
    np.testing.assert_array_equal(p.data, np.ones((2, 3)))


def test_load_state_dict_sets_every_parameter():
    model = MLP()
    values = {
        name: np.full(p.shape, i, "float32") for i, (name, p) in enumerate(model.named_parameters())
    }
    model.load_state_dict(values)
    assert model.fc2.bias.data[0] == 3


# ------------------------------------------------------------------------------ export_tvm
@I.ir_module
class ExpectedMLP:
    @R.function
    def forward(
        x: R.Tensor((n, 784), dtype="float32"),
        fc1_weight: R.Tensor((128, 784), dtype="float32"),
        fc1_bias: R.Tensor((128,), dtype="float32"),
        fc2_weight: R.Tensor((10, 128), dtype="float32"),
        fc2_bias: R.Tensor((10,), dtype="float32"),
    ) -> R.Tensor((n, 10), dtype="float32"):
        n = T.int64()
        R.func_attr({"num_input": 1})
        with R.dataflow():
            permute_dims: R.Tensor((784, 128), dtype="float32") = R.permute_dims(
                fc1_weight, axes=None
            )
            matmul: R.Tensor((n, 128), dtype="float32") = R.matmul(
                x, permute_dims, out_dtype="void"
            )
            add: R.Tensor((n, 128), dtype="float32") = R.add(matmul, fc1_bias)
            relu: R.Tensor((n, 128), dtype="float32") = R.nn.relu(add)
            permute_dims1: R.Tensor((128, 10), dtype="float32") = R.permute_dims(
                fc2_weight, axes=None
            )
            matmul1: R.Tensor((n, 10), dtype="float32") = R.matmul(
                relu, permute_dims1, out_dtype="void"
            )
            add1: R.Tensor((n, 10), dtype="float32") = R.add(matmul1, fc2_bias)
            gv: R.Tensor((n, 10), dtype="float32") = add1
            R.output(gv)
        return gv


def test_export_mlp_gives_inputs_then_parameters_in_a_dataflow_block():
    model = MLP()
    mod, params = model.export_tvm(MLP_SPEC)
    mlckit.ir.assert_structural_equal(mod, ExpectedMLP)
    func = mod["forward"]
    assert [p.name_hint for p in func.params] == [
        "x",
        "fc1.weight",
        "fc1.bias",
        "fc2.weight",
        "fc2.bias",
    ]
    assert params == list(model.named_parameters())
    assert isinstance(func.body.blocks[0], relax.DataflowBlock)
    # After the export the Parameters no longer stand for a Var of the traced function.
    assert model.fc1.weight._expr is None


def test_printed_export_parses_back_to_an_equal_module():
    mod, _ = MLP().export_tvm(MLP_SPEC)
    mlckit.ir.assert_structural_equal(from_source(mod.script()), mod)


def test_symbolic_dim_is_one_tir_var_shared_by_the_inputs():
    class AddRows(nn.Module):
        def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
            assert isinstance(a.shape[0], tir.Var) and a.shape[1] == 3
            return a + b

    spec = {"forward": {"a": nn.spec.Tensor(("n", 3)), "b": nn.spec.Tensor(("n", 3))}}
    mod, params = AddRows().export_tvm(spec)
    a, b = mod["forward"].params
    assert params == []
    assert a.struct_info_.shape_values[0] is b.struct_info_.shape_values[0]
    assert a.struct_info_.shape_values[0].name_hint == "n"


def test_spec_order_follows_the_method_signature():
    class Sub(nn.Module):
        def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
            return a - b

    spec = {"forward": {"b": nn.spec.Tensor((2,)), "a": nn.spec.Tensor((2,))}}
    mod, _ = Sub().export_tvm(spec)
    assert [p.name_hint for p in mod["forward"].params] == ["a", "b"]


def test_several_methods_and_tuple_outputs():
    class Heads(nn.Module):
        def __init__(self) -> None:
            self.proj = nn.Linear(4, 2)

        def forward(self, x: nn.Tensor) -> tuple[nn.Tensor, nn.Tensor]:
            y = self.proj(x)
            return y, nn.op.softmax(y)

        def embed(self, x: nn.Tensor) -> nn.Tensor:
            return self.proj(x).reshape(-1).reshape((1, 2))

    spec = {"forward": {"x": nn.spec.Tensor((1, 4))}, "embed": {"x": nn.spec.Tensor((1, 4))}}
    mod, _ = Heads().export_tvm(spec)
    assert isinstance(mod["forward"].ret_struct_info, relax.TupleStructInfo)
    assert [p.name_hint for p in mod["embed"].params] == ["x", "proj.weight", "proj.bias"]
    mlckit.ir.assert_structural_equal(from_source(mod.script()), mod)


def test_tensor_shape_and_operators_emit_named_bindings():
    class Ops(nn.Module):
        def forward(self, x: nn.Tensor, w: nn.Tensor) -> nn.Tensor:
            assert x.shape == [2, 3] and x.ndim == 2 and x.dtype == "float32"
            assert repr(x) == 'Tensor(x, (2, 3), "float32")'
            return -(2.0 * (x @ w) / 4.0 + 1.0).astype("float16")

    spec = {"forward": {"x": nn.spec.Tensor((2, 3)), "w": nn.spec.Tensor((3, 5))}}
    mod, _ = Ops().export_tvm(spec)
    bindings = mod["forward"].body.blocks[0].bindings
    assert [b.var.name_hint for b in bindings] == [
        "matmul",
        "multiply",
        "divide",
        "add",
        "astype",
        "negative",
        "gv",
    ]
    assert mod["forward"].ret_struct_info.dtype == "float16"


def test_bind_params_makes_the_weights_constants():
    model = MLP()
    mod, params = model.export_tvm(MLP_SPEC)
    rng = np.random.default_rng(0)
    for _, p in params:
        p.data = rng.standard_normal(p.shape).astype("float32")
    bound = nn.bind_params(mod, params)
    # The same as binding by hand with relax.transform.BindParams.
    by_hand = relax.transform.BindParams("forward", {name: p.data for name, p in params})(mod)
    mlckit.ir.assert_structural_equal(bound, by_hand)
    assert [p.name_hint for p in bound["forward"].params] == ["x"]
    assert bound["forward"].attrs["num_input"] == 1


# ------------------------------------------------------------------------------ bad input
def test_spec_with_wrong_argument_names_names_the_method():
    with pytest.raises(
        nn.SpecError, match=r"MLP\.forward gives the inputs \['data'\], but forward takes \['x'\]"
    ):
        MLP().export_tvm({"forward": {"data": nn.spec.Tensor((1, 784))}})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"predict": {"x": nn.spec.Tensor((1, 784))}}, "MLP has no such method"),
        ({"forward": {"x": ((1, 784), "float32")}}, "must be an nn.spec.Tensor"),
        ({}, "spec must map method names"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(nn.SpecError, match=message):
        MLP().export_tvm(spec)


def test_bad_spec_dims_and_dtypes():
    with pytest.raises(nn.SpecError, match="non-negative int or a name"):
        nn.spec.Tensor((1, -3))
    with pytest.raises(MLCError, match="did you mean 'float32'"):
        nn.spec.Tensor((1, 3), "flaot32")


def test_shape_error_in_forward_is_a_struct_info_error():
    with pytest.raises(StructInfoError, match="relax.matmul"):
        MLP().export_tvm({"forward": {"x": nn.spec.Tensor((1, 100))}})


def test_parameter_without_data_is_named_when_binding():
    model = MLP()
    mod, params = model.export_tvm(MLP_SPEC)
    for name, p in params:
        if name != "fc2.bias":
            p.data = np.zeros(p.shape, "float32")
    with pytest.raises(
        nn.ParameterError, match=r"'fc2\.bias' Parameter\(\(10,\), \"float32\"\) has no data"
    ):
        nn.bind_params(mod, params)


def test_setting_data_of_the_wrong_shape_or_dtype():
    p = nn.Parameter((128, 784))
    with pytest.raises(
        nn.ParameterError, match=r"has shape \(128, 784\), the value has shape \(784, 128\)"
    ):
        p.data = np.zeros((784, 128), "float32")
    with pytest.raises(nn.ParameterError, match=r'is "float32", the value is "float64"'):
        p.data = np.zeros((128, 784))
    with pytest.raises(nn.ParameterError, match="positive integers"):
        nn.Parameter((3, 0))


def test_load_state_dict_names_the_parameter_and_the_key_mismatch():
    model = MLP()
    values = {name: np.zeros(p.shape, "float32") for name, p in model.named_parameters()}
    bad_shape = {**values, "fc2.bias": np.zeros(11, "float32")}
    with pytest.raises(nn.ParameterError, match=r"parameter 'fc2\.bias' has shape \(10,\)"):
        model.load_state_dict(bad_shape)
    renamed = {("fc3.bias" if name == "fc2.bias" else name): v for name, v in values.items()}
    with pytest.raises(
        nn.ParameterError, match=r"missing \['fc2\.bias'\], unexpected \['fc3\.bias'\]"
    ):
        model.load_state_dict(renamed)


def test_conv2d_groups_must_divide_the_channels():
    with pytest.raises(nn.ModuleError, match=r"Conv2D\(4, 6, groups=4\): groups must divide"):
        nn.Conv2D(4, 6, 3, groups=4)
    with pytest.raises(nn.ModuleError, match="groups must be a positive int"):
        nn.Conv2D(4, 4, 3, groups=0)
    with pytest.raises(nn.ModuleError, match="kernel_size must be a positive int or a pair"):
        nn.Conv2D(4, 4, (3, 3, 3))


def test_modules_are_traced_not_run_on_arrays():
    with pytest.raises(nn.ModuleError, match=r"MLP\(...\) was called outside Module.export_tvm"):
        MLP()(np.zeros((1, 784), "float32"))
    with pytest.raises(nn.ModuleError, match="Parameters can be used only while"):
        nn.op.relu(nn.Parameter((3,)))

    class AddsArray(nn.Module):
        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return np.ones(3, "float32") + x

    with pytest.raises(nn.ModuleError, match="nn.op.add takes nn.Tensor operands, got ndarray"):
        AddsArray().export_tvm({"forward": {"x": nn.spec.Tensor((3,))}})


def test_forward_must_exist_and_return_tensors():
    class NoForward(nn.Module):
        pass

    with pytest.raises(nn.ModuleError, match="NoForward has no forward method"):
        NoForward().export_tvm({"forward": {"args": nn.spec.Tensor((1,))}})

    class ReturnsNumber(nn.Module):
        def forward(self, x: nn.Tensor) -> int:
            return 3

    with pytest.raises(nn.ModuleError, match=r"ReturnsNumber\.forward returned int"):
        ReturnsNumber().export_tvm({"forward": {"x": nn.spec.Tensor((1,))}})


def test_sequential_takes_layer_objects():
    with pytest.raises(nn.ModuleError, match="argument 1 is a type, not an nn.Module"):
        nn.Sequential(nn.ReLU(), nn.ReLU)


def test_flatten_dims_are_checked():
    class Bad(nn.Module):
        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return nn.op.flatten(x, 2, 1)

    with pytest.raises(StructInfoError, match="start_dim=2 comes after end_dim=1"):
        Bad().export_tvm({"forward": {"x": nn.spec.Tensor((1, 2, 3))}})
    with pytest.raises(StructInfoError, match="end_dim=5 is out of range for a 3-D tensor"):
        nn.Flatten(0, 5).export_tvm({"forward": {"x": nn.spec.Tensor((1, 2, 3))}})
