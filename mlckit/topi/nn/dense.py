"""``dense``: ``data @ weight.T`` (+ ``bias``), the fully connected layer."""

from __future__ import annotations

from mlckit import te
from mlckit.errors import StructInfoError
from mlckit.tir.expr import PrimExpr

from ..broadcast import add
from ..utils import same_dim, shape_text


def dense(
    data: te.Tensor,
    weight: te.Tensor,
    bias: te.Tensor | None = None,
    out_dtype: str | None = None,
) -> te.Tensor:
    """``Y[i, j] = sum_k data[i, k] * weight[j, k]`` (block ``T_matmul_NT``), then ``+ bias[j]``
    (block ``T_add``) when a bias is given. Leading dims of ``data`` are kept as batch dims.
    The weight is marked layout-free (``layout_free_buffers``) as in TVM."""
    if data.ndim < 1 or weight.ndim != 2:
        raise StructInfoError(
            f"topi.nn.dense: needs data with at least 1 dim and a 2-d weight, got "
            f"{shape_text(data.shape)} and {shape_text(weight.shape)}"
        )
    if not same_dim(data.shape[-1], weight.shape[1]):
        raise StructInfoError(
            f"topi.nn.dense: data {shape_text(data.shape)} has {data.shape[-1].script()} input "
            f"features but weight {shape_text(weight.shape)} expects {weight.shape[1].script()}"
        )
    out_dtype = out_dtype or data.dtype
    k = te.reduce_axis((0, data.shape[-1]), name="k")
    batch_names = ["i"] if data.ndim == 2 else [f"i{d}" for d in range(data.ndim - 1)]

    def body(*indices: PrimExpr) -> te.Reduce:
        *rows, j = indices
        return te.sum(
            data[(*rows, k.var)].astype(out_dtype) * weight[j, k].astype(out_dtype), axis=k
        )

    matmul = te.compute(
        (*data.shape[:-1], weight.shape[0]),
        body,
        name="T_matmul_NT",
        tag="dense",
        attrs={"layout_free_placeholders": [weight]},
        varargs_names=[*batch_names, "j"],
    )
    return matmul if bias is None else add(matmul, bias)
