"""``relax.ewise_fma`` becomes ``topi.ewise_fma`` (``x1 * x2 + x3`` in one loop nest)."""

from __future__ import annotations

from mlckit import topi

from .common import call_topi, register_legalize

register_legalize("relax.ewise_fma", call_topi(topi.ewise_fma))
