"""``relax.where`` becomes ``topi.where`` and ``relax.argmax`` ``topi.argmax``."""

from __future__ import annotations

from mlckit import topi

from .common import call_topi, reduce_topi, register_legalize

register_legalize("relax.where", call_topi(topi.where))
register_legalize("relax.argmax", reduce_topi(topi.argmax))
