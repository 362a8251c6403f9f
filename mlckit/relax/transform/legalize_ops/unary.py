"""Elementwise unary ops and activations become the topi function of the same name."""

from __future__ import annotations

from mlckit import topi

from .common import call_topi, register_legalize

for _name in ("negative", "abs", "exp", "log", "sqrt", "sigmoid", "tanh"):
    register_legalize(f"relax.{_name}", call_topi(getattr(topi, _name)))

for _name in ("relu", "gelu", "silu"):
    register_legalize(f"relax.nn.{_name}", call_topi(getattr(topi.nn, _name)))
