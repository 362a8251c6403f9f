"""The PyTorch operators the importers convert, in four tables: ``nn.Module`` classes,
functions (``torch.*``, ``torch.nn.functional.*``, Python operators), tensor methods, and ATen
operators (what ``torch.export`` records). :func:`coverage` lists them all; the documentation's
coverage table is generated from it (``python -m mlckit.relax.frontend.torch``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from functools import cache
from typing import Any

from ... import op as R
from . import translator as T

ModuleConverter = Callable[..., Any]


def _weight(imp: T.Importer, module: Any, path: str, name: str) -> Any:
    tensor = getattr(module, name, None)
    return None if tensor is None else imp.weight(tensor, f"{path}.{name}" if path else name)


def _module(convert: Callable[..., Any], *weights: str, **attributes: str) -> ModuleConverter:
    """A module converter that calls the functional ``convert`` with the module's weights after
    the inputs and its ``attributes`` (keyword name -> module attribute) as keywords."""

    def module_converter(imp: T.Importer, module: Any, path: str, *args: Any) -> Any:
        tensors = [_weight(imp, module, path, name) for name in weights]
        options = {key: getattr(module, attr) for key, attr in attributes.items()}
        return convert(imp, *args, *tensors, **options)

    return module_converter


def _batch_norm_module(imp: T.Importer, module: Any, path: str, x: Any) -> Any:
    if module.training or not module.track_running_stats:
        raise T.FrontendError(
            "batch norm in training mode is not supported; call model.eval() before importing"
        )
    names = ("running_mean", "running_var", "weight", "bias")
    mean, var, weight, bias = (_weight(imp, module, path, name) for name in names)
    return T.batch_norm(imp, x, mean, var, weight, bias, eps=module.eps)


def _layer_norm_module(imp: T.Importer, module: Any, path: str, x: Any) -> Any:
    weight, bias = _weight(imp, module, path, "weight"), _weight(imp, module, path, "bias")
    return T.layer_norm(imp, x, module.normalized_shape, weight, bias, module.eps)


def _embedding_module(imp: T.Importer, module: Any, path: str, ids: Any) -> Any:
    return T.embedding(imp, ids, _weight(imp, module, path, "weight"))


def _aten_batch_norm(
    imp: T.Importer,
    x: Any,
    weight: Any,
    bias: Any,
    mean: Any,
    var: Any,
    training: bool,
    momentum: float,
    eps: float,
    *rest: Any,
) -> Any:
    return T.batch_norm(imp, x, mean, var, weight, bias, training, momentum, eps)


def _aten_batch_norm_no_training(
    imp: T.Importer,
    x: Any,
    weight: Any,
    bias: Any,
    mean: Any,
    var: Any,
    momentum: float,
    eps: float,
) -> Any:
    # ATen returns (output, saved mean, saved invstd); the model reads field 0 only.
    return (T.batch_norm(imp, x, mean, var, weight, bias, False, momentum, eps), mean, var)


def _aten_embedding(imp: T.Importer, weight: Any, ids: Any, *rest: Any) -> Any:
    return T.embedding(imp, ids, weight)


def _aten_softmax(imp: T.Importer, x: Any, dim: int, half_to_float: bool = False) -> Any:
    return T.softmax(imp, x, dim)


def _aten_log_softmax(imp: T.Importer, x: Any, dim: int, half_to_float: bool = False) -> Any:
    return T.log_softmax(imp, x, dim)


def _getattr(imp: T.Importer, value: Any, name: str) -> Any:
    if name == "shape":
        return T.size(imp, value)
    if name == "dtype":
        return T.dtype_of(value)
    raise T.FrontendError(f"reading the attribute {name!r} of a tensor is not supported")


_ADD = T.binary(R.add, operator.add)
_SUB = T.binary(R.subtract, operator.sub)
_MUL = T.binary(R.multiply, operator.mul)
_DIV = T.binary(R.divide, operator.truediv)
_FLOORDIV = T.binary(R.floor_divide, operator.floordiv)
_POW = T.binary(R.power, operator.pow)
_RELU = T.unary(R.nn.relu)
_SILU = T.unary(R.nn.silu)
_SIGMOID = T.unary(R.sigmoid)
_TANH = T.unary(R.tanh)
_MEAN = T.reduction(R.mean)
_SUM = T.reduction(R.sum)


@cache
def module_table() -> dict[type, ModuleConverter]:
    from torch import nn

    return {
        nn.Linear: _module(T.linear, "weight", "bias"),
        nn.Conv2d: _module(
            T.conv2d,
            "weight",
            "bias",
            stride="stride",
            padding="padding",
            dilation="dilation",
            groups="groups",
        ),
        nn.MaxPool2d: _module(
            T.max_pool2d,
            kernel_size="kernel_size",
            stride="stride",
            padding="padding",
            dilation="dilation",
            ceil_mode="ceil_mode",
        ),
        nn.AvgPool2d: _module(
            T.avg_pool2d,
            kernel_size="kernel_size",
            stride="stride",
            padding="padding",
            ceil_mode="ceil_mode",
            count_include_pad="count_include_pad",
        ),
        nn.AdaptiveAvgPool2d: _module(T.adaptive_avg_pool2d, output_size="output_size"),
        nn.BatchNorm2d: _batch_norm_module,
        nn.LayerNorm: _layer_norm_module,
        nn.Embedding: _embedding_module,
        nn.ReLU: _module(_RELU),
        nn.GELU: _module(T.gelu, approximate="approximate"),
        nn.SiLU: _module(_SILU),
        nn.Sigmoid: _module(_SIGMOID),
        nn.Tanh: _module(_TANH),
        nn.Softmax: _module(T.softmax, dim="dim"),
        nn.LogSoftmax: _module(T.log_softmax, dim="dim"),
        nn.Flatten: _module(T.flatten, start_dim="start_dim", end_dim="end_dim"),
        nn.Dropout: _module(T.identity),
        nn.Identity: _module(T.identity),
    }


# Functions by the name a model calls them with (``F`` is ``torch.nn.functional``).
FUNCTIONS: dict[str, T.Converter] = {
    "operator.add": _ADD, "torch.add": _ADD,
    "operator.sub": _SUB, "torch.sub": _SUB,
    "operator.mul": _MUL, "torch.mul": _MUL,
    "operator.truediv": _DIV, "torch.div": _DIV,
    "operator.matmul": T.matmul, "torch.matmul": T.matmul,
    "operator.floordiv": _FLOORDIV, "operator.pow": _POW, "torch.select": T.select,
    "operator.getitem": T.getitem, "builtins.getattr": _getattr,
    "torch.relu": _RELU, "F.relu": _RELU,
    "F.gelu": T.gelu, "F.silu": _SILU,
    "torch.sigmoid": _SIGMOID, "F.sigmoid": _SIGMOID,
    "torch.tanh": _TANH, "F.tanh": _TANH,
    "F.softmax": T.softmax, "torch.softmax": T.softmax,
    "F.log_softmax": T.log_softmax, "torch.log_softmax": T.log_softmax,
    "torch.flatten": T.flatten, "torch.reshape": T.reshape,
    "torch.permute": T.permute, "torch.transpose": T.transpose,
    "torch.cat": T.cat, "torch.concat": T.cat,
    "torch.mean": _MEAN, "torch.sum": _SUM,
    "F.linear": T.linear, "F.conv2d": T.conv2d,
    "F.max_pool2d": T.max_pool2d, "F.avg_pool2d": T.avg_pool2d,
    "F.adaptive_avg_pool2d": T.adaptive_avg_pool2d,
    "F.batch_norm": T.batch_norm, "F.layer_norm": T.layer_norm,
    "F.dropout": T.identity, "F.embedding": T.embedding,
}  # fmt: skip


@cache
def function_table() -> dict[Any, T.Converter]:
    """:data:`FUNCTIONS` by the function objects an fx graph calls."""
    import builtins

    import torch
    import torch.nn.functional as F

    roots = {"operator": operator, "builtins": builtins, "torch": torch, "F": F}
    table = {}
    for name, convert in FUNCTIONS.items():
        root, attribute = name.split(".")
        table[getattr(roots[root], attribute)] = convert
    return table


METHODS: dict[str, T.Converter] = {
    "add": _ADD, "sub": _SUB, "mul": _MUL, "div": _DIV, "matmul": T.matmul,
    "relu": _RELU, "sigmoid": _SIGMOID, "tanh": _TANH,
    "softmax": T.softmax, "log_softmax": T.log_softmax,
    "view": T.reshape, "reshape": T.reshape, "flatten": T.flatten,
    "permute": T.permute, "transpose": T.transpose, "t": T.t,
    "mean": _MEAN, "sum": _SUM, "size": T.size,
    "select": T.select, "contiguous": T.identity, "to": T.to_dtype, "type": T.to_dtype,
}  # fmt: skip


ATEN: dict[str, T.Converter] = {
    "aten.add.Tensor": _ADD, "aten.sub.Tensor": _SUB, "aten.mul.Tensor": _MUL,
    "aten.div.Tensor": _DIV,
    "aten.matmul.default": T.matmul, "aten.mm.default": T.matmul, "aten.bmm.default": T.matmul,
    "aten.linear.default": T.linear, "aten.addmm.default": T.addmm,
    "aten.conv2d.default": T.conv2d,
    "aten.relu.default": _RELU, "aten.gelu.default": T.gelu, "aten.silu.default": _SILU,
    "aten.sigmoid.default": _SIGMOID, "aten.tanh.default": _TANH,
    "aten.softmax.int": T.softmax, "aten._softmax.default": _aten_softmax,
    "aten.log_softmax.int": T.log_softmax, "aten._log_softmax.default": _aten_log_softmax,
    "aten.max_pool2d.default": T.max_pool2d, "aten.avg_pool2d.default": T.avg_pool2d,
    "aten.adaptive_avg_pool2d.default": T.adaptive_avg_pool2d,
    "aten.batch_norm.default": _aten_batch_norm,
    "aten._native_batch_norm_legit_no_training.default": _aten_batch_norm_no_training,
    "aten.layer_norm.default": T.layer_norm,
    "aten.dropout.default": T.identity, "aten.clone.default": T.identity,
    "aten.contiguous.default": T.identity,
    "aten.embedding.default": _aten_embedding,
    "aten.flatten.using_ints": T.flatten, "aten.view.default": T.reshape,
    "aten.reshape.default": T.reshape, "aten.permute.default": T.permute,
    "aten.transpose.int": T.transpose, "aten.t.default": T.t, "aten.select.int": T.select,
    "aten.cat.default": T.cat, "aten.concat.default": T.cat,
    "aten.mean.dim": _MEAN, "aten.mean.default": _MEAN,
    "aten.sum.dim_IntList": _SUM, "aten.sum.default": _SUM,
}  # fmt: skip


def coverage() -> dict[str, list[str]]:
    """The supported operators by form: ``nn.Module`` s, functions, tensor methods, ATen."""
    return {
        "torch.nn modules (from_fx)": sorted(f"nn.{cls.__name__}" for cls in module_table()),
        "functions (from_fx; F is torch.nn.functional)": sorted(FUNCTIONS),
        "tensor methods (from_fx)": sorted(f"Tensor.{name}" for name in METHODS),
        "ATen operators (from_exported_program)": sorted(ATEN),
    }


def coverage_markdown() -> str:
    """The coverage table of the documentation."""
    lines = [
        "# PyTorch operators the importer converts",
        "",
        "Generated from `mlckit.relax.frontend.torch.ops` by "
        "`python -m mlckit.relax.frontend.torch`; do not edit by hand.",
        "",
        "| form | operators |",
        "|---|---|",
    ]
    for form, names in coverage().items():
        lines.append(f"| {form} | {', '.join(f'`{n}`' for n in names)} |")
    return "\n".join(lines) + "\n"
