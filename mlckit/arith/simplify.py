"""Placeholder: constant folding only (replaced by the canonical simplifier)."""

from __future__ import annotations

from typing import Any


def simplify(expr: Any) -> Any:
    return expr


class Analyzer:
    def simplify(self, expr: Any) -> Any:
        return simplify(expr)

    def can_prove_equal(self, a: Any, b: Any) -> bool:
        return False
