"""What the two PyTorch importers share: a walk over a ``torch.fx`` graph that emits one relax
binding per node with a :class:`relax.BlockBuilder`, and the converters from PyTorch operators
to relax operators.

A converter has the Python signature of the PyTorch function it stands for (``F.conv2d(input,
weight, bias=None, stride=1, ...)``), so that the node's ``args`` and ``kwargs``, once each
argument is converted (an fx node becomes the relax value emitted for it), are passed on as
they are and PyTorch's own defaults apply. ``torch.fx`` (``symbolic_trace``) gives calls of
``nn.Module`` s, of Python/torch functions and of tensor methods; ``torch.export`` gives calls
of ATen operators (``aten.conv2d.default``), which mostly share the functional signatures. The
tables in :mod:`.ops` map each of them to a converter.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlckit import tir
from mlckit.errors import MLCError
from mlckit.ir import IRModule

from ... import op as R
from ...block_builder import BlockBuilder
from ...expr import Expr, ShapeExpr, Tuple, TupleGetItem, Var, const
from ...struct_info import TensorStructInfo


class FrontendError(MLCError):
    """A model cannot be imported: an operator without a converter, or arguments the converter
    does not support."""


Converter = Callable[..., Any]


class Importer:
    """Walks a ``torch.fx.Graph`` in order and emits its relax function ``main``.

    Weights are bound as constants; with ``keep_params_as_input`` they become parameters of
    ``main`` after the inputs (named by their state-dict name, ``"fc1.weight"`` as
    ``fc1_weight``) and their values are kept in :attr:`param_values`.
    """

    def __init__(self, keep_params_as_input: bool, where: str):
        self.bb = BlockBuilder()
        self.keep_params_as_input = keep_params_as_input
        self.where = where  # "from_fx" or "from_exported_program", for messages
        self.env: dict[Any, Any] = {}  # fx node -> relax value (or a Python value: a size)
        self.inputs: list[Var] = []
        self.weight_vars: list[Var] = []
        self.param_values: dict[str, np.ndarray] = {}
        self._weights: dict[int, Expr] = {}  # id(tensor) -> its constant or parameter

    # ------------------------------------------------------------------ values
    def emit(self, expr: Expr) -> Var:
        return self.bb.emit(expr)

    def weight(self, tensor: Any, name: str) -> Expr:
        """The relax value of a weight tensor: a constant, or a parameter of ``main``."""
        key = id(tensor)
        if key not in self._weights:
            array = tensor.detach().cpu().numpy()
            if self.keep_params_as_input:
                var = Var(name.replace(".", "_"), TensorStructInfo(array.shape, str(array.dtype)))
                self.weight_vars.append(var)
                self.param_values[var.name_hint] = array
                self._weights[key] = var
            else:
                self._weights[key] = const(array)
        return self._weights[key]

    def input(self, name: str, shape: Sequence[Any], dtype: str) -> Var:
        dims = [tir.Var(d, "int64") if isinstance(d, str) else int(d) for d in shape]
        var = Var(name, TensorStructInfo(dims, dtype))
        self.inputs.append(var)
        return var

    def convert_arg(self, arg: Any) -> Any:
        """An fx node argument with every node replaced by its relax value."""
        import torch.fx

        if isinstance(arg, torch.fx.Node):
            return self.env[arg]
        if isinstance(arg, (list, tuple)):
            return type(arg)(self.convert_arg(a) for a in arg)
        if isinstance(arg, dict):
            return {k: self.convert_arg(v) for k, v in arg.items()}
        return arg

    # ------------------------------------------------------------------ the walk
    def call(self, node: Any, converter: Converter, *args: Any, **kwargs: Any) -> Any:
        """Run ``converter`` for ``node``; arguments it does not take, or an error in it,
        name the node."""
        try:
            inspect.signature(converter).bind(self, *args, **kwargs)
        except TypeError as err:
            raise FrontendError(
                f"{self.where}: {describe_node(node)}: unsupported arguments ({err})"
            ) from None
        try:
            return converter(self, *args, **kwargs)
        except FrontendError as err:
            raise FrontendError(f"{self.where}: {describe_node(node)}: {err}") from None

    def finish(self, output: Any, unwrap_unit_return_tuple: bool) -> Expr:
        """The model's output (a tensor or a tuple of them) as a relax expression."""

        def as_expr(value: Any) -> Expr:
            if isinstance(value, (list, tuple)):
                return Tuple([as_expr(v) for v in value])
            if not isinstance(value, Expr):
                raise FrontendError(f"{self.where}: the model returns {value!r}, not a tensor")
            return value

        if unwrap_unit_return_tuple and isinstance(output, (list, tuple)) and len(output) == 1:
            output = output[0]
        return as_expr(output)

    def build(self, body: Callable[[], Any], unwrap_unit_return_tuple: bool) -> IRModule:
        """``main`` whose dataflow block is what ``body`` emits; ``body`` returns the output."""
        with self.bb.function("main"):
            with self.bb.dataflow():
                output = self.bb.emit_output(self.finish(body(), unwrap_unit_return_tuple))
            self.bb.emit_func_output(output, [*self.inputs, *self.weight_vars])
        mod = self.bb.get()
        if self.keep_params_as_input:
            # As in TVM: the weights' values ride along in an attribute until detach_params.
            attrs = {"num_input": len(self.inputs), "params": dict(self.param_values)}
            mod["main"] = mod["main"].with_attr(attrs)
        return mod


def describe_node(node: Any) -> str:
    """Where a node is in the model: its name, what it calls and, when known, the line of the
    model's source that made it."""
    target = node.target if isinstance(node.target, str) else name_of(node.target)
    text = f"node {node.name!r} ({node.op} {target})"
    trace = node.meta.get("stack_trace") or getattr(node, "stack_trace", None)
    if trace:
        lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
        if lines:
            text += f", from `{lines[-1]}`"
    return text


def name_of(target: Any) -> str:
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if "aten" in str(target):
        return str(target)
    return f"{module}.{name}" if module else name


# ---------------------------------------------------------------------- helpers
def shape_of(x: Expr) -> list[Any]:
    """The static (int) or symbolic dims of a tensor value."""
    sinfo = x.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise FrontendError(f"a tensor of known rank is needed, got {sinfo}")
    dims = sinfo.shape.values if isinstance(sinfo.shape, ShapeExpr) else sinfo.shape
    return [d.value if isinstance(d, tir.IntImm) else d for d in dims]


def dtype_of(x: Expr) -> str:
    return x.struct_info.dtype


def axis(dim: int, ndim: int) -> int:
    if not -ndim <= dim < max(ndim, 1):
        raise FrontendError(f"dimension {dim} is out of range for a tensor of rank {ndim}")
    return dim % ndim if ndim else 0


def as_tensor(value: Any, like: Expr) -> Expr:
    """A Python number next to a tensor becomes a constant of the tensor's dtype."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, (bool, int, float)):
        return const(value, dtype_of(like))
    raise FrontendError(f"cannot use {value!r} ({type(value).__name__}) as a tensor")


def int_tuple(value: Any, n: int = 2) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    items = [int(v) for v in value]
    return items * n if len(items) == 1 else items


def int_tuple_or_none(value: Any) -> list[Any]:
    """An adaptive pool's output size: None (keep the input's) or ints, as a pair."""
    if value is None or isinstance(value, int):
        return [value, value]
    return list(value) * 2 if len(value) == 1 else list(value)


def sizes(args: Sequence[Any]) -> list[Any]:
    """``view(2, 3)`` and ``view((2, 3))`` alike."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return list(args[0])
    return list(args)


# ---------------------------------------------------------------------- converters
def binary(relax_op: Callable[[Expr, Expr], Expr], python_op: Callable[[Any, Any], Any]):
    """``x + y`` and friends, where either side may be a Python number (or both: a size)."""

    def convert(imp: Importer, x: Any, y: Any, *, alpha: Any = 1) -> Any:
        if not isinstance(x, Expr) and not isinstance(y, Expr):
            return python_op(x, y)
        if alpha != 1:  # torch.add(x, y, alpha=a) is x + a * y
            y = imp.emit(R.multiply(y, as_tensor(alpha, y))) if isinstance(y, Expr) else y * alpha
        like = x if isinstance(x, Expr) else y
        return imp.emit(relax_op(as_tensor(x, like), as_tensor(y, like)))

    return convert


def unary(relax_op: Callable[[Expr], Expr]) -> Converter:
    def convert(imp: Importer, x: Expr, *, inplace: bool = False) -> Expr:
        return imp.emit(relax_op(x))

    return convert


def identity(imp: Importer, x: Expr, *args: Any, **kwargs: Any) -> Expr:
    """Dropout in inference, ``contiguous()``, ``nn.Identity``: the value itself."""
    return x


def linear(imp: Importer, x: Expr, weight: Expr, bias: Expr | None = None) -> Expr:
    return imp.emit(R.linear(x, weight, bias))


def matmul(imp: Importer, x: Expr, y: Expr) -> Expr:
    return imp.emit(R.matmul(x, y))


def addmm(imp: Importer, bias: Expr, x: Expr, y: Expr, *, beta: Any = 1, alpha: Any = 1) -> Expr:
    if beta != 1 or alpha != 1:
        raise FrontendError("addmm with beta or alpha other than 1 is not supported")
    return imp.emit(R.add(imp.emit(R.matmul(x, y)), bias))


def conv2d(
    imp: Importer,
    x: Expr,
    weight: Expr,
    bias: Expr | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Expr:
    if isinstance(padding, str):
        raise FrontendError(f"padding={padding!r} is not supported; give the padding in pixels")
    out = imp.emit(
        R.nn.conv2d(x, weight, int_tuple(stride), int_tuple(padding), int_tuple(dilation), groups)
    )
    if bias is None:
        return out
    return imp.emit(R.add(out, imp.emit(R.reshape(bias, [1, -1, 1, 1]))))


def max_pool2d(
    imp: Importer,
    x: Expr,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Expr:
    if return_indices:
        raise FrontendError("max_pool2d with return_indices=True is not supported")
    stride = kernel_size if stride in (None, []) else stride
    return imp.emit(
        R.nn.max_pool2d(
            x,
            int_tuple(kernel_size),
            int_tuple(stride),
            int_tuple(padding),
            int_tuple(dilation),
            ceil_mode,
        )
    )


def avg_pool2d(
    imp: Importer,
    x: Expr,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Expr:
    if divisor_override is not None:
        raise FrontendError("avg_pool2d with divisor_override is not supported")
    stride = kernel_size if stride in (None, []) else stride
    return imp.emit(
        R.nn.avg_pool2d(
            x,
            int_tuple(kernel_size),
            int_tuple(stride),
            int_tuple(padding),
            ceil_mode=ceil_mode,
            count_include_pad=count_include_pad,
        )
    )


def adaptive_avg_pool2d(imp: Importer, x: Expr, output_size: Any) -> Expr:
    shape = shape_of(x)
    size = [shape[-2 + i] if s is None else s for i, s in enumerate(int_tuple_or_none(output_size))]
    return imp.emit(R.nn.adaptive_avg_pool2d(x, size))


def batch_norm(
    imp: Importer,
    x: Expr,
    running_mean: Expr,
    running_var: Expr,
    weight: Expr | None = None,
    bias: Expr | None = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Expr:
    """``F.batch_norm`` in inference (the running statistics): relax's batch_norm, field 0."""
    if training:
        raise FrontendError(
            "batch norm in training mode is not supported; call model.eval() before importing"
        )
    channels = shape_of(x)[1]
    dtype = dtype_of(x)
    gamma = weight if weight is not None else const(np.ones(channels, dtype))
    beta = bias if bias is not None else const(np.zeros(channels, dtype))
    normed = imp.emit(
        R.nn.batch_norm(x, gamma, beta, running_mean, running_var, axis=1, epsilon=eps)
    )
    return imp.emit(TupleGetItem(normed, 0))


def layer_norm(
    imp: Importer,
    x: Expr,
    normalized_shape: Any,
    weight: Expr | None = None,
    bias: Expr | None = None,
    eps: float = 1e-5,
    *rest: Any,
) -> Expr:
    count = len(int_tuple(normalized_shape, 1))
    ndim = len(shape_of(x))
    dims = shape_of(x)[ndim - count :]
    dtype = dtype_of(x)
    gamma = weight if weight is not None else const(np.ones(dims, dtype))
    beta = bias if bias is not None else const(np.zeros(dims, dtype))
    return imp.emit(R.nn.layer_norm(x, gamma, beta, list(range(ndim - count, ndim)), eps))


def gelu(imp: Importer, x: Expr, approximate: str = "none") -> Expr:
    if approximate != "none":
        raise FrontendError(f"gelu(approximate={approximate!r}) is not supported; use 'none'")
    return imp.emit(R.nn.gelu(x))


def softmax(imp: Importer, x: Expr, dim: int | None = None, *rest: Any, **kwargs: Any) -> Expr:
    return imp.emit(R.nn.softmax(x, -1 if dim is None else dim))


def log_softmax(imp: Importer, x: Expr, dim: int | None = None, *rest: Any, **kwargs: Any) -> Expr:
    return imp.emit(R.nn.log_softmax(x, -1 if dim is None else dim))


def embedding(imp: Importer, ids: Expr, weight: Expr, *rest: Any, **kwargs: Any) -> Expr:
    return imp.emit(R.take(weight, ids, axis=0))


def flatten(imp: Importer, x: Expr, start_dim: int = 0, end_dim: int = -1) -> Expr:
    shape = shape_of(x)
    if not shape:
        return imp.emit(R.reshape(x, [1]))
    start, end = axis(start_dim, len(shape)), axis(end_dim, len(shape))
    middle = math.prod(shape[start : end + 1])
    return imp.emit(R.reshape(x, [*shape[:start], middle, *shape[end + 1 :]]))


def reshape(imp: Importer, x: Expr, *shape: Any) -> Expr:
    return imp.emit(R.reshape(x, sizes(shape)))


def permute(imp: Importer, x: Expr, *dims: Any) -> Expr:
    ndim = len(shape_of(x))
    return imp.emit(R.permute_dims(x, [axis(d, ndim) for d in sizes(dims)]))


def transpose(imp: Importer, x: Expr, dim0: int, dim1: int) -> Expr:
    ndim = len(shape_of(x))
    order = list(range(ndim))
    a, b = axis(dim0, ndim), axis(dim1, ndim)
    order[a], order[b] = order[b], order[a]
    return imp.emit(R.permute_dims(x, order))


def t(imp: Importer, x: Expr) -> Expr:
    return transpose(imp, x, 0, -1) if len(shape_of(x)) == 2 else x


def cat(imp: Importer, tensors: Sequence[Expr], dim: int = 0) -> Expr:
    return imp.emit(R.concat(list(tensors), dim))


def reduction(relax_op: Callable[..., Expr]) -> Converter:
    def convert(
        imp: Importer, x: Expr, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
    ) -> Expr:
        if dtype is not None:
            raise FrontendError("a reduction with dtype= is not supported")
        axes = None if dim is None else int_tuple(dim, 1)
        return imp.emit(relax_op(x, axes, keepdim))

    return convert


def size(imp: Importer, x: Expr, dim: int | None = None) -> Any:
    """``x.size()`` / ``x.shape``: Python ints (the model then computes with them)."""
    shape = shape_of(x)
    return tuple(shape) if dim is None else shape[axis(dim, len(shape))]


def getitem(imp: Importer, value: Any, index: Any) -> Any:
    """``x.shape[1]``, a field of a tuple, or ``x[i]`` on a tensor (one integer index: the
    sub-tensor along the first axis). Slices are not supported."""
    if isinstance(value, (list, tuple)):
        return value[index]
    if isinstance(value, Expr) and isinstance(value.struct_info, TensorStructInfo):
        if not isinstance(index, int):
            raise FrontendError(
                f"indexing a tensor with {index!r} is not supported; only x[i] with an integer i"
            )
        return select(imp, value, 0, index)
    return imp.emit(TupleGetItem(value, int(index)))


def select(imp: Importer, x: Expr, dim: int, index: int) -> Expr:
    """``x.select(dim, index)``: ``take`` with one index drops the axis."""
    shape = shape_of(x)
    dim = axis(dim, len(shape))
    extent = shape[dim]
    if isinstance(extent, int) and not -extent <= index < extent:
        raise FrontendError(f"index {index} is out of range for a dimension of {extent}")
    if index < 0:
        index += extent
    return imp.emit(R.take(x, const(np.array(index, "int64")), axis=dim))


def to_dtype(imp: Importer, x: Expr, dtype: Any = None, *rest: Any, **kwargs: Any) -> Expr:
    dtype = kwargs.get("dtype", dtype)
    if dtype is None:
        return x
    name = str(dtype).replace("torch.", "")
    return x if name == dtype_of(x) else imp.emit(R.astype(x, name))


__all__ = ["FrontendError", "Importer"]
