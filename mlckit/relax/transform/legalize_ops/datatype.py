"""``relax.astype`` becomes ``topi.cast``."""

from __future__ import annotations

from mlckit import topi

from ...block_builder import BlockBuilder
from ...expr import Call, Expr
from .common import register_legalize


@register_legalize("relax.astype")
def _astype(bb: BlockBuilder, call: Call) -> Expr:
    return bb.call_te(topi.cast, call.args[0], call.attrs["dtype"], primfunc_name_hint="cast")
