"""Reductions (``relax.sum``, ``mean``, ``max``, ``min``) become the topi reductions."""

from __future__ import annotations

from mlckit import topi

from .common import reduce_topi, register_legalize

for _name in ("sum", "mean", "max", "min"):
    register_legalize(f"relax.{_name}", reduce_topi(getattr(topi, _name)))
