"""Shape manipulation: reshape-like ops become ``topi.reshape`` to the inferred shape;
``permute_dims`` becomes ``topi.transpose``, ``concat`` ``topi.concatenate``,
``broadcast_to`` ``topi.broadcast_to``, ``take`` ``topi.take`` and ``nn.batch_flatten``
``topi.nn.flatten``."""

from __future__ import annotations

from typing import Any

from mlckit import te, topi
from mlckit.topi.utils import prod

from ...block_builder import BlockBuilder
from ...expr import Call, Expr
from .common import call_topi, register_legalize


def _output_shape(call: Call) -> list[Any]:
    """The dims inference gave the result: ``-1`` resolved, sizes multiplied out."""
    return list(call.struct_info.shape_values)  # type: ignore[attr-defined]


@register_legalize("relax.reshape")
@register_legalize("relax.flatten")
def _reshape(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.reshape, call.args[0], _output_shape(call), primfunc_name_hint="reshape")


@register_legalize("relax.permute_dims")
def _permute_dims(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.transpose, call.args[0], call.attrs["axes"])


@register_legalize("relax.broadcast_to")
def _broadcast_to(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.broadcast_to, call.args[0], _output_shape(call))


def _concat_flattened(tensors: list[te.Tensor]) -> te.Tensor:
    """concat with ``axis=None``: the tensors flattened, then joined."""
    return topi.concatenate([topi.reshape(t, [prod(t.shape)]) for t in tensors], 0)


@register_legalize("relax.concat")
def _concat(bb: BlockBuilder, call: Call) -> Expr:
    axis = call.attrs["axis"]
    if axis is None:
        return bb.call_te(_concat_flattened, call.args[0], primfunc_name_hint="concatenate")
    return bb.call_te(topi.concatenate, call.args[0], axis)


@register_legalize("relax.take")
def _take(bb: BlockBuilder, call: Call) -> Expr:
    # axis=None only passes inference for a 1-D x, which topi's flattening leaves as it is.
    return bb.call_te(topi.take, *call.args, call.attrs["axis"], call.attrs["mode"])


register_legalize("relax.nn.batch_flatten", call_topi(topi.nn.flatten))
