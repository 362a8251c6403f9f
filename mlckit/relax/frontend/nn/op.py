"""``nn.op``: the operators ``forward`` is written with.

Each function emits relax operators (``relax.op.*``, high-level, not yet legalized) into the
function being traced and returns the result as a :class:`Tensor`; ``name`` is the name of the
new variable in the printed IR. Shapes are checked as each op is emitted, so a shape error
points at the line of ``forward`` that caused it.

The convolution and pooling functions take PyTorch's arguments (``stride``, ``padding``, an
int or a pair; pooling's ``stride`` defaults to ``kernel_size``) and translate them to the
relax attributes (``strides``, ``padding``, ``pool_size``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mlckit.errors import StructInfoError
from mlckit.relax import op as _op
from mlckit.relax.expr import Expr
from mlckit.relax.op.manipulate import shape_product
from mlckit.tir.expr import PrimExpr

from .core import Tensor, as_expr, emit, register_tensor_operators

IntPair = int | Sequence[int]


def _tensor(x: Tensor, name: str) -> Expr:
    return as_expr(x, None, name)


def _binary(
    relax_op: Callable[[Expr, Expr], Expr], a: Tensor | float, b: Tensor | float, name: str
) -> Tensor:
    # A number takes the dtype of the tensor on the other side (``x * 2`` stays float32).
    dtype = next((v.dtype for v in (a, b) if isinstance(v, Tensor)), None)
    return emit(relax_op(as_expr(a, dtype, name), as_expr(b, dtype, name)), name)


# ------------------------------------------------------------------------------ arithmetic
def add(a: Tensor | float, b: Tensor | float, name: str = "add") -> Tensor:
    """``a + b``, broadcasting like numpy; either side may be a Python number."""
    return _binary(_op.add, a, b, name)


def subtract(a: Tensor | float, b: Tensor | float, name: str = "subtract") -> Tensor:
    """``a - b``, broadcasting like numpy."""
    return _binary(_op.subtract, a, b, name)


def multiply(a: Tensor | float, b: Tensor | float, name: str = "multiply") -> Tensor:
    """``a * b`` (elementwise), broadcasting like numpy."""
    return _binary(_op.multiply, a, b, name)


def divide(a: Tensor | float, b: Tensor | float, name: str = "divide") -> Tensor:
    """``a / b`` (elementwise), broadcasting like numpy."""
    return _binary(_op.divide, a, b, name)


def negative(x: Tensor, name: str = "negative") -> Tensor:
    """``-x``."""
    return emit(_op.negative(_tensor(x, name)), name)


def matmul(a: Tensor, b: Tensor, out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    """``a @ b`` with numpy's rules (leading batch dims broadcast)."""
    return emit(_op.matmul(_tensor(a, name), _tensor(b, name), out_dtype=out_dtype), name)


# ------------------------------------------------------------------------------ activations
def relu(x: Tensor, name: str = "relu") -> Tensor:
    """``max(x, 0)``."""
    return emit(_op.nn.relu(_tensor(x, name)), name)


def silu(x: Tensor, name: str = "silu") -> Tensor:
    """``x * sigmoid(x)``."""
    return emit(_op.nn.silu(_tensor(x, name)), name)


def gelu(x: Tensor, name: str = "gelu") -> Tensor:
    """``x * Phi(x)``, Phi the standard normal CDF."""
    return emit(_op.nn.gelu(_tensor(x, name)), name)


def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return emit(_op.nn.softmax(_tensor(x, name), axis=axis), name)


# ------------------------------------------------------------------------------ shapes
def reshape(x: Tensor, shape: Sequence[int | PrimExpr], name: str = "reshape") -> Tensor:
    """The same elements in ``shape``; one dim may be -1 (the rest of the elements)."""
    return emit(_op.reshape(_tensor(x, name), list(shape)), name)


def permute_dims(
    x: Tensor, axes: Sequence[int] | None = None, name: str = "permute_dims"
) -> Tensor:
    """The transpose: dim ``i`` of the result is dim ``axes[i]`` of ``x``; ``None`` reverses."""
    return emit(_op.permute_dims(_tensor(x, name), axes), name)


def astype(x: Tensor, dtype: str, name: str = "astype") -> Tensor:
    """``x`` with its elements converted to ``dtype``."""
    return emit(_op.astype(_tensor(x, name), dtype), name)


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1, name: str = "flatten") -> Tensor:
    """``torch.flatten``: dims ``start_dim..end_dim`` (inclusive) merged into one.

    ``flatten(x, 1)`` turns images (N, C, H, W) into rows (N, C*H*W). It is a reshape: relax's
    own ``R.flatten`` always merges every dim.
    """
    expr = _tensor(x, name)
    dims = list(x._struct_info.shape_values or ())
    first = _axis(start_dim, len(dims), f"start_dim={start_dim}")
    last = _axis(end_dim, len(dims), f"end_dim={end_dim}")
    if first > last:
        raise StructInfoError(
            f"nn.op.flatten: start_dim={start_dim} comes after end_dim={end_dim} "
            f"for a {len(dims)}-D tensor"
        )
    shape = [*dims[:first], shape_product(dims[first : last + 1]), *dims[last + 1 :]]
    return emit(_op.reshape(expr, shape), name)


def _axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise StructInfoError(f"nn.op.flatten: {what} is out of range for a {ndim}-D tensor")
    return axis % ndim


# ------------------------------------------------------------------------------ layers' math
def conv2d(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: IntPair = 1,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    groups: int = 1,
    name: str = "conv2d",
) -> Tensor:
    """2-D convolution of ``x`` (N, C, H, W) with ``weight`` (O, C/groups, KH, KW), plus
    ``bias`` (O,) per output channel; ``padding`` is zeros on both sides of each axis."""
    call = _op.nn.conv2d(
        _tensor(x, name),
        _tensor(weight, name),
        strides=stride,
        padding=padding,
        dilation=dilation,
        groups=groups,
    )
    out = emit(call, name)
    if bias is None:
        return out
    # (O,) does not broadcast against (N, O, H, W) from the right; (1, O, 1, 1) does.
    return add(out, reshape(bias, [1, -1, 1, 1]))


def max_pool2d(
    x: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    dilation: IntPair = 1,
    ceil_mode: bool = False,
    name: str = "max_pool2d",
) -> Tensor:
    """The maximum of each ``kernel_size`` window of ``x`` (N, C, H, W); windows step by
    ``stride`` (default: ``kernel_size``, so they do not overlap)."""
    call = _op.nn.max_pool2d(
        _tensor(x, name),
        pool_size=kernel_size,
        strides=kernel_size if stride is None else stride,
        padding=padding,
        dilation=dilation,
        ceil_mode=ceil_mode,
    )
    return emit(call, name)


def avg_pool2d(
    x: Tensor,
    kernel_size: IntPair,
    stride: IntPair | None = None,
    padding: IntPair = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    name: str = "avg_pool2d",
) -> Tensor:
    """The mean of each ``kernel_size`` window of ``x`` (N, C, H, W). As in PyTorch, padded
    zeros count in the mean unless ``count_include_pad=False``."""
    call = _op.nn.avg_pool2d(
        _tensor(x, name),
        pool_size=kernel_size,
        strides=kernel_size if stride is None else stride,
        padding=padding,
        ceil_mode=ceil_mode,
        count_include_pad=count_include_pad,
    )
    return emit(call, name)


def layer_norm(
    x: Tensor,
    normalized_shape: int | Sequence[int],
    weight: Tensor,
    bias: Tensor,
    eps: float = 1e-5,
    name: str = "layer_norm",
) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias``, mean and variance over the last
    ``len(normalized_shape)`` dims of ``x``, whose sizes must be ``normalized_shape``."""
    count = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    axes = list(range(-count, 0))
    call = _op.nn.layer_norm(
        _tensor(x, name), _tensor(weight, name), _tensor(bias, name), axes=axes, epsilon=eps
    )
    return emit(call, name)


__all__ = [
    "add",
    "astype",
    "avg_pool2d",
    "conv2d",
    "divide",
    "flatten",
    "gelu",
    "layer_norm",
    "matmul",
    "max_pool2d",
    "multiply",
    "negative",
    "permute_dims",
    "relu",
    "reshape",
    "silu",
    "softmax",
    "subtract",
]


register_tensor_operators(
    add=add,
    subtract=subtract,
    multiply=multiply,
    divide=divide,
    matmul=matmul,
    negative=negative,
    reshape=reshape,
    permute_dims=permute_dims,
    astype=astype,
)
