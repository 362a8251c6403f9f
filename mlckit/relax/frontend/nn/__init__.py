"""``relax.frontend.nn``: build models as Python objects, PyTorch-style, and export them to relax.

A small version of Apache TVM's ``tvm.relax.frontend.nn`` (same names), for models written
without torch::

    from mlckit import relax
    from mlckit.relax.frontend import nn

    class MLP(nn.Module):
        def __init__(self):
            self.fc1 = nn.Linear(784, 128)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            return self.fc2(self.relu(self.fc1(x)))

    model = MLP()
    model.fc1.weight.data = w0                       # numpy arrays, (out, in) as in torch
    ...
    mod, params = model.export_tvm({"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}})
    mod = nn.bind_params(mod, params)                # the weights become constants
    ex = relax.build(relax.transform.LegalizeOps()(mod), "llvm")
    logits = relax.VirtualMachine(ex, mlckit.cpu())["forward"](mlckit.nd.array(x))

``export_tvm`` runs ``forward`` once on symbolic :class:`Tensor` values and records every
operator as a relax binding: the result is the same IRModule you would write in TVMScript.
"""

from . import op, spec
from .core import Module, ModuleError, Parameter, ParameterError, Tensor
from .exporter import bind_params
from .modules import (
    GELU,
    Conv2D,
    Flatten,
    LayerNorm,
    Linear,
    MaxPool2D,
    MaxPool2d,
    ReLU,
    Sequential,
    SiLU,
)
from .spec import SpecError

__all__ = [
    "GELU",
    "Conv2D",
    "Flatten",
    "LayerNorm",
    "Linear",
    "MaxPool2D",
    "MaxPool2d",
    "Module",
    "ModuleError",
    "Parameter",
    "ParameterError",
    "ReLU",
    "Sequential",
    "SiLU",
    "SpecError",
    "Tensor",
    "bind_params",
    "op",
    "spec",
]
