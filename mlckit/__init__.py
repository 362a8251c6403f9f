"""mlckit: a teaching-first machine-learning compiler (Relax + TensorIR, TVM's names)."""

from . import ir, runtime, tir
from .errors import (
    BuildError,
    MLCError,
    ParseError,
    ScheduleError,
    StructInfoError,
    StructuralMismatchError,
    VMError,
    WellFormedError,
)
from .ir import IRModule
from .runtime import cpu, cuda

__version__ = "0.1.0"

__all__ = [
    "BuildError",
    "IRModule",
    "MLCError",
    "ParseError",
    "ScheduleError",
    "StructInfoError",
    "StructuralMismatchError",
    "VMError",
    "WellFormedError",
    "cpu",
    "cuda",
    "ir",
    "runtime",
    "tir",
]
