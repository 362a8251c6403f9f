"""TVM's module for tuning TensorIR (``ms.tir_integration.compile_tir(database, mod, target)``,
as the MLC course writes it): the functions themselves are in :mod:`.tune`."""

from .tune import compile_tir, tune_tir

__all__ = ["compile_tir", "tune_tir"]
