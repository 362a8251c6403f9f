"""The legalization table: for each high-level op, the topi kernel it lowers to.

Each row maps an op name to a :class:`~.common.Lowering` (the topi function, then where each of
its arguments comes from: ``ARGS`` the call's arguments, ``attr("axis")`` an attribute,
``OUT_SHAPE``/``OUT_DTYPE`` the inferred result, or a literal), or to a named function for
the few ops whose lowering needs a decision of its own (``relax.nn.batch_norm``,
``relax.nn.conv2d``, ``relax.split``). Importing the module registers every row as its op's
``FLegalize``.
"""

from __future__ import annotations

from typing import Any

from mlckit import te, topi
from mlckit.errors import BuildError
from mlckit.topi.utils import as_float

from ...block_builder import BlockBuilder
from ...expr import Call, Expr, Tuple, TupleGetItem
from .common import (
    ARGS,
    DATA,
    FILL_VALUE,
    OPERANDS,
    OUT_DTYPE,
    OUT_SHAPE,
    Arg,
    LegalizeFunc,
    Lowering,
    attr,
    register_legalize,
)


def _layer_norm(
    data: te.Tensor,
    gamma: te.Tensor,
    beta: te.Tensor,
    axes: list[int],
    epsilon: float,
    center: bool,
    scale: bool,
) -> te.Tensor:
    """``topi.nn.layer_norm`` under relax's attributes: without ``scale`` (``center``) the
    kernel neither reads gamma (beta) nor multiplies (adds)."""
    return topi.nn.layer_norm(
        data, gamma if scale else None, beta if center else None, axes, epsilon
    )


def _cross_entropy_with_logits(predictions: te.Tensor, labels: te.Tensor) -> te.Tensor:
    """``-sum(labels * predictions)``, divided by the batch size N for ``(N, C)`` tensors."""
    total = topi.negative(topi.sum(topi.multiply(predictions, labels)))
    if predictions.ndim < 2:
        return total
    return topi.divide(total, as_float(predictions.shape[0], predictions.dtype))


# nll_loss's tensors: weights are None (every class weighs 1) when the call has no third one.
NLL_TENSORS = Arg("NLL_TENSORS", lambda call: [*call.args[:2], (call.args[2:] or [None])[0]])

_NORMALIZE = Lowering(
    topi.nn.batch_norm, (ARGS, attr("axis"), attr("epsilon"), attr("center"), attr("scale"))
)


def _batch_norm(bb: BlockBuilder, call: Call) -> Expr:
    """Inference batch norm: the normalized tensor, and the moving statistics unchanged."""
    if call.attrs["training"]:  # type: ignore[index]
        raise BuildError(
            "LegalizeOps: relax.nn.batch_norm with training=True (normalize with the batch's "
            "own statistics) cannot be compiled; only inference (training=False, with the "
            "moving statistics) is supported"
        )
    return Tuple([_NORMALIZE(bb, call), call.args[3], call.args[4]])


_SPLIT = Lowering(topi.split, (ARGS, attr("indices_or_sections"), attr("axis")))


def _split(bb: BlockBuilder, call: Call) -> Expr:
    """The parts' tuple; a call_tir with one output is that tensor, so one part is wrapped."""
    parts = _SPLIT(bb, call)
    return parts if len(call.struct_info.fields) > 1 else Tuple([parts])  # type: ignore[attr-defined]


def _concat(bb: BlockBuilder, call: Call) -> Expr:
    """The tensors to join are the fields of a tuple: written out (``concat((a, b))``) or a
    tuple-valued variable, whose fields are read one by one, as TVM does."""
    tensors = call.args[0]
    if not isinstance(tensors, Tuple):
        count = len(tensors.struct_info.fields)  # type: ignore[attr-defined]
        tensors = Tuple([bb.emit(TupleGetItem(tensors, i)) for i in range(count)])
    return bb.call_te(topi.concatenate, tensors, call.attrs["axis"])  # type: ignore[index]


_WINDOW = (attr("strides"), attr("padding"), attr("dilation"))
_CONV2D = Lowering(topi.nn.conv2d_nchw, (ARGS, *_WINDOW, OUT_DTYPE), "conv2d")
_GROUP_CONV2D = Lowering(
    topi.nn.group_conv2d_nchw, (ARGS, *_WINDOW, attr("groups"), OUT_DTYPE), "conv2d"
)


def _conv2d(bb: BlockBuilder, call: Call) -> Expr:
    """One group is the plain convolution; more take the grouped kernel."""
    return (_CONV2D if call.attrs["groups"] == 1 else _GROUP_CONV2D)(bb, call)  # type: ignore[index]


_CONV2D_TRANSPOSE = Lowering(
    topi.nn.group_conv2d_transpose_nchw,
    (
        ARGS,
        attr("strides"),
        attr("padding"),
        OUT_DTYPE,
        attr("output_padding"),
        attr("groups"),
        attr("dilation"),
    ),
    "conv2d_transpose",
)


def _pool2d(pool_type: str) -> Lowering:
    window = (attr("pool_size"), attr("strides"), attr("dilation"), attr("padding"))
    options = (attr("ceil_mode"), attr("layout"), attr("count_include_pad"))
    return Lowering(topi.nn.pool2d, (DATA, *window, pool_type, *options), f"{pool_type}_pool2d")


def _pool2d_backward(pool_type: str) -> Lowering:
    window = (attr("pool_size"), attr("strides"), attr("padding"))
    options = (attr("ceil_mode"), attr("count_include_pad"), attr("layout"), attr("dilation"))
    return Lowering(
        topi.nn.pool_grad, (ARGS, *window, pool_type, *options), f"{pool_type}_pool2d_backward"
    )


def _output_size(call: Call) -> list[Any]:
    size = call.attrs["output_size"]  # type: ignore[index]
    # None keeps the input's height and width, which inference gave the result.
    return [list(call.struct_info.shape_values[2:]) if size is None else size]  # type: ignore[attr-defined]


OUTPUT_SIZE = Arg("OUTPUT_SIZE", _output_size)


LEGALIZATIONS: dict[str, LegalizeFunc] = {
    # elementwise binary: topi.<name>(a, b), broadcasting
    "relax.add": Lowering(topi.add, (OPERANDS,)),
    "relax.subtract": Lowering(topi.subtract, (OPERANDS,)),
    "relax.multiply": Lowering(topi.multiply, (OPERANDS,)),
    "relax.divide": Lowering(topi.divide, (OPERANDS,)),
    "relax.floor_divide": Lowering(topi.floor_divide, (OPERANDS,)),
    "relax.power": Lowering(topi.power, (OPERANDS,)),
    "relax.maximum": Lowering(topi.maximum, (OPERANDS,)),
    "relax.minimum": Lowering(topi.minimum, (OPERANDS,)),
    "relax.equal": Lowering(topi.equal, (OPERANDS,)),
    "relax.not_equal": Lowering(topi.not_equal, (OPERANDS,)),
    "relax.less": Lowering(topi.less, (OPERANDS,)),
    "relax.less_equal": Lowering(topi.less_equal, (OPERANDS,)),
    "relax.greater": Lowering(topi.greater, (OPERANDS,)),
    "relax.greater_equal": Lowering(topi.greater_equal, (OPERANDS,)),
    # elementwise unary and activations
    "relax.negative": Lowering(topi.negative),
    "relax.abs": Lowering(topi.abs),
    "relax.exp": Lowering(topi.exp),
    "relax.log": Lowering(topi.log),
    "relax.sqrt": Lowering(topi.sqrt),
    "relax.sigmoid": Lowering(topi.sigmoid),
    "relax.tanh": Lowering(topi.tanh),
    "relax.erf": Lowering(topi.erf),
    "relax.nn.relu": Lowering(topi.nn.relu),
    "relax.nn.gelu": Lowering(topi.nn.gelu),
    "relax.nn.silu": Lowering(topi.nn.silu),
    "relax.astype": Lowering(topi.cast, (ARGS, attr("dtype"))),
    "relax.ewise_fma": Lowering(topi.ewise_fma),
    "relax.where": Lowering(topi.where),
    # reductions
    "relax.sum": Lowering(topi.sum, (ARGS, attr("axis"), attr("keepdims"))),
    "relax.mean": Lowering(topi.mean, (ARGS, attr("axis"), attr("keepdims"))),
    "relax.max": Lowering(topi.max, (ARGS, attr("axis"), attr("keepdims"))),
    "relax.min": Lowering(topi.min, (ARGS, attr("axis"), attr("keepdims"))),
    # the target shape, from inference (collapse_sum_like's is the other tensor's)
    "relax.collapse_sum_to": Lowering(topi.collapse_sum, (DATA, OUT_SHAPE)),
    "relax.collapse_sum_like": Lowering(topi.collapse_sum, (DATA, OUT_SHAPE)),
    "relax.argmax": Lowering(topi.argmax, (ARGS, attr("axis"), attr("keepdims"))),
    # creation: the shape comes from inference (a _like op's from its tensor)
    "relax.zeros": Lowering(topi.full, (OUT_SHAPE, OUT_DTYPE, 0.0), "zeros"),
    "relax.ones": Lowering(topi.full, (OUT_SHAPE, OUT_DTYPE, 1.0), "ones"),
    "relax.full": Lowering(topi.full, (OUT_SHAPE, OUT_DTYPE, FILL_VALUE)),
    "relax.zeros_like": Lowering(topi.full, (OUT_SHAPE, OUT_DTYPE, 0.0), "zeros"),
    "relax.ones_like": Lowering(topi.full, (OUT_SHAPE, OUT_DTYPE, 1.0), "ones"),
    "relax.full_like": Lowering(topi.full, (OUT_SHAPE, OUT_DTYPE, FILL_VALUE), "full"),
    # linear algebra
    # topi.matmul(a, b, transpose_a, transpose_b, out_dtype)
    "relax.matmul": Lowering(topi.matmul, (ARGS, False, False, OUT_DTYPE)),
    "relax.nn.dense": Lowering(topi.nn.dense),
    # shape manipulation
    "relax.reshape": Lowering(topi.reshape, (DATA, OUT_SHAPE)),
    "relax.flatten": Lowering(topi.reshape, (DATA, OUT_SHAPE)),
    "relax.expand_dims": Lowering(topi.expand_dims, (ARGS, attr("axis"))),
    "relax.squeeze": Lowering(topi.squeeze, (ARGS, attr("axis"))),
    "relax.permute_dims": Lowering(topi.transpose, (ARGS, attr("axes"))),
    "relax.broadcast_to": Lowering(topi.broadcast_to, (DATA, OUT_SHAPE)),
    "relax.concat": _concat,
    "relax.split": _split,
    # axis=None only passes inference for a 1-D x, which topi's flattening leaves as it is.
    "relax.take": Lowering(topi.take, (ARGS, attr("axis"), attr("mode"))),
    "relax.nn.batch_flatten": Lowering(topi.nn.flatten),
    # neural networks
    "relax.nn.softmax": Lowering(topi.nn.softmax, (ARGS, attr("axis"))),
    "relax.nn.log_softmax": Lowering(topi.nn.log_softmax, (ARGS, attr("axis"))),
    "relax.nn.nll_loss": Lowering(
        topi.nn.nll_loss, (NLL_TENSORS, attr("reduction"), attr("ignore_index"))
    ),
    "relax.nn.cross_entropy_with_logits": Lowering(
        _cross_entropy_with_logits, (ARGS,), "cross_entropy_with_logits"
    ),
    "relax.nn.layer_norm": Lowering(
        _layer_norm,
        (ARGS, attr("axes"), attr("epsilon"), attr("center"), attr("scale")),
        "layer_norm",
    ),
    "relax.nn.batch_norm": _batch_norm,
    "relax.nn.conv2d": _conv2d,
    "relax.nn.conv2d_transpose": _CONV2D_TRANSPOSE,
    "relax.nn.max_pool2d": _pool2d("max"),
    "relax.nn.avg_pool2d": _pool2d("avg"),
    "relax.grad.max_pool2d_backward": _pool2d_backward("max"),
    "relax.grad.avg_pool2d_backward": _pool2d_backward("avg"),
    "relax.nn.adaptive_avg_pool2d": Lowering(
        topi.nn.adaptive_pool, (DATA, OUTPUT_SIZE, "avg", attr("layout")), "adaptive_avg_pool2d"
    ),
}

for _op_name, _legalize in LEGALIZATIONS.items():
    register_legalize(_op_name, _legalize)
