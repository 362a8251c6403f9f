"""Neural-network operators (TVM's ``topi.nn``)."""

from .batch_norm import batch_norm
from .conv2d import conv2d, conv2d_nchw, group_conv2d_nchw
from .conv2d_transpose import conv2d_transpose_nchw, group_conv2d_transpose_nchw
from .dense import dense
from .elemwise import gelu, relu, silu
from .flatten import flatten
from .layer_norm import layer_norm
from .loss import nll_loss
from .pad import pad
from .pooling import adaptive_pool, avg_pool2d, max_pool2d, pool2d, pool_grad
from .softmax import log_softmax, softmax

__all__ = [
    "adaptive_pool",
    "avg_pool2d",
    "batch_norm",
    "conv2d",
    "conv2d_nchw",
    "conv2d_transpose_nchw",
    "dense",
    "flatten",
    "gelu",
    "group_conv2d_nchw",
    "group_conv2d_transpose_nchw",
    "layer_norm",
    "log_softmax",
    "max_pool2d",
    "nll_loss",
    "pad",
    "pool2d",
    "pool_grad",
    "relu",
    "silu",
    "softmax",
]
