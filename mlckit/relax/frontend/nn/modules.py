"""Ready-made layers: Linear, Conv2D, LayerNorm, activations, pooling, Flatten, Sequential.

Weights use PyTorch's layouts (``Linear.weight`` is (out, in), ``Conv2D.weight`` is (O, I, KH,
KW)), so a torch ``state_dict`` converted with ``.numpy()`` loads as it is. A new layer's
Parameters have no data; set them before binding (``p.data = ...`` or ``load_state_dict``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from . import op
from .core import Module, ModuleError, Parameter, Tensor

IntPair = int | Sequence[int]


def _pair(value: IntPair, what: str, layer: str) -> tuple[int, int]:
    items = (value, value) if isinstance(value, int) else tuple(value)
    if len(items) != 2 or not all(isinstance(v, int) and v > 0 for v in items):
        raise ModuleError(f"{layer}: {what} must be a positive int or a pair, got {value!r}")
    return items  # type: ignore[return-value]


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features)."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, dtype: str = "float32"
    ) -> None:
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter((out_features, in_features), dtype)
        self.bias = Parameter((out_features,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        # Exactly what TVM's Linear emits: a transpose, a matmul, then the bias.
        y = op.matmul(x, op.permute_dims(self.weight))
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        has_bias = self.bias is not None
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={has_bias}"


class Conv2D(Module):
    """2-D convolution of NCHW images, ``weight`` (out_channels, in_channels / groups, KH, KW)
    and ``bias`` (out_channels,); ``stride``/``padding``/``dilation`` are an int or a pair."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = True,
        dtype: str = "float32",
    ) -> None:
        where = f"Conv2D({in_channels}, {out_channels}, groups={groups})"
        if not isinstance(groups, int) or groups < 1:
            raise ModuleError(f"{where}: groups must be a positive int")
        if in_channels % groups or out_channels % groups:
            raise ModuleError(
                f"{where}: groups must divide both in_channels and out_channels (each group "
                "convolves in_channels / groups inputs into out_channels / groups outputs)"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _pair(kernel_size, "kernel_size", where)
        self.stride = _pair(stride, "stride", where)
        self.padding = padding
        self.dilation = _pair(dilation, "dilation", where)
        self.groups = groups
        self.weight = Parameter((out_channels, in_channels // groups, *self.kernel_size), dtype)
        self.bias = Parameter((out_channels,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return op.conv2d(
            x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups
        )

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, groups={self.groups}, "
            f"bias={self.bias is not None}"
        )


class LayerNorm(Module):
    """Normalizes the last dims (sizes ``normalized_shape``) to mean 0 and variance 1, then
    scales by ``weight`` and shifts by ``bias`` (both of shape ``normalized_shape``)."""

    def __init__(
        self, normalized_shape: int | Sequence[int], eps: float = 1e-5, dtype: str = "float32"
    ) -> None:
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(shape)
        self.eps = eps
        self.weight = Parameter(self.normalized_shape, dtype)
        self.bias = Parameter(self.normalized_shape, dtype)

    def forward(self, x: Tensor) -> Tensor:
        return op.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"


class ReLU(Module):
    """``max(x, 0)`` as a layer."""

    def forward(self, x: Tensor) -> Tensor:
        return op.relu(x)


class SiLU(Module):
    """``x * sigmoid(x)`` as a layer."""

    def forward(self, x: Tensor) -> Tensor:
        return op.silu(x)


class GELU(Module):
    """``x * Phi(x)`` as a layer."""

    def forward(self, x: Tensor) -> Tensor:
        return op.gelu(x)


class MaxPool2D(Module):
    """The maximum of each window; ``stride`` defaults to ``kernel_size`` (as in PyTorch)."""

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        ceil_mode: bool = False,
    ) -> None:
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding
        self.dilation = dilation
        self.ceil_mode = ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return op.max_pool2d(
            x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


# PyTorch's spelling, for code ported from torch.nn.
MaxPool2d = MaxPool2D


class Flatten(Module):
    """Merges dims ``start_dim..end_dim``; the defaults turn (N, C, H, W) into (N, C*H*W)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Tensor) -> Tensor:
        return op.flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Sequential(Module):
    """Layers applied one after the other: ``Sequential(Linear(784, 128), ReLU(), ...)``.

    Not in TVM's ``relax.frontend.nn``, but what PyTorch users reach for. The layers are the
    attributes ``"0"``, ``"1"``, ..., so parameter names read ``"0.weight"`` as in PyTorch.
    """

    def __init__(self, *layers: Module) -> None:
        for i, layer in enumerate(layers):
            if not isinstance(layer, Module):
                raise ModuleError(
                    f"Sequential: argument {i} is a {type(layer).__name__}, not an nn.Module "
                    "(pass layer objects such as nn.ReLU(), not functions or classes)"
                )
            setattr(self, str(i), layer)

    def __len__(self) -> int:
        return len(vars(self))

    def __getitem__(self, index: int) -> Module:
        return list(self)[index]

    def __iter__(self) -> Iterator[Module]:
        return iter(vars(self).values())

    def forward(self, x: Tensor) -> Tensor:
        for layer in self:
            x = layer(x)
        return x
