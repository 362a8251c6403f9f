"""``relax.op.grad``: operators that only gradients use (``R.grad.max_pool2d_backward``,
``R.grad.avg_pool2d_backward``), as in TVM.

A pooling's gradient with respect to its input is not an elementwise function of the output
gradient: with overlapping windows (a 3x3 window moving by 2) an input element lies in several
windows and gathers from each, and a max pooling passes a window's gradient to its largest
element only. These ops take the output gradient, the forward input and the forward call's
attributes, and return a tensor shaped like the input. Worked example, max pooling
``[[1, 3], [2, 0]]`` with a 2x2 window and output gradient ``[[5]]``: the gradient is
``[[0, 5], [0, 0]]``. They are legalized through ``topi.nn.pool_grad``.
"""

from __future__ import annotations

from typing import Any

from ..expr import Call, Expr
from ..struct_info import StructInfo
from ..utils import dims_equal, format_tensor_shape
from ._registry import describe_arg, fail, make_call, register, tensor_arg
from .spatial import POOL_ATTRS, IntPair, pool_attrs, pooled_struct_info


def _infer_pool2d_backward(call: Call, ctx: Any) -> StructInfo:
    """The input's struct info, once the output gradient is known to have the pooled shape."""
    grad = tensor_arg(call, 0)
    pooled = pooled_struct_info(call, data_index=1)
    data = tensor_arg(call, 1)
    if grad.dtype not in ("void", data.dtype):
        raise fail(
            call, f"the output gradient's dtype {grad.dtype} differs from the data's {data.dtype}"
        )
    shapes = grad.shape_values, pooled.shape_values
    if None not in shapes and (
        len(shapes[0]) != 4 or any(dims_equal(a, b) is False for a, b in zip(*shapes))
    ):
        raise fail(
            call,
            f"{describe_arg(call, 0)}, but pooling {describe_arg(call, 1)} gives "
            f"{format_tensor_shape(pooled)}",
        )
    return data


def _pool2d_backward(kind: str) -> Any:
    op_name = f"relax.grad.{kind}_pool2d_backward"
    register(op_name, _infer_pool2d_backward, ("output_grad", "data"), POOL_ATTRS)

    def constructor(
        output_grad: Expr | Any,
        data: Expr | Any,
        pool_size: IntPair = (1, 1),
        strides: IntPair = (1, 1),
        padding: IntPair = (0, 0, 0, 0),
        dilation: IntPair = (1, 1),
        ceil_mode: bool = False,
        count_include_pad: bool = False,
        layout: str = "NCHW",
        out_layout: str | None = None,
    ) -> Call:
        attrs = pool_attrs(
            op_name,
            pool_size,
            strides,
            padding,
            dilation,
            ceil_mode,
            count_include_pad,
            layout,
            out_layout,
        )
        return make_call(op_name, [output_grad, data], attrs)

    constructor.__name__ = constructor.__qualname__ = f"{kind}_pool2d_backward"
    constructor.__doc__ = (
        f"``{op_name}(output_grad, data, pool_size, strides, ...)``: the gradient of "
        f"``relax.nn.{kind}_pool2d(data, pool_size, strides, ...)`` with respect to ``data``, "
        "given ``output_grad``, the gradient of its output; the attributes are the forward "
        "call's."
    )
    return constructor


max_pool2d_backward = _pool2d_backward("max")
avg_pool2d_backward = _pool2d_backward("avg")

__all__ = ["avg_pool2d_backward", "max_pool2d_backward"]
