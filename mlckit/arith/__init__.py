"""Symbolic integer arithmetic on TensorIR index and shape expressions."""

from .simplify import Analyzer, simplify

__all__ = ["Analyzer", "simplify"]
