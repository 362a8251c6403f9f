"""mlckit: a teaching-first machine-learning compiler (Relax + TensorIR, TVM's names).

``import mlckit as tvm`` gives the course's API. Subpackages load on first use, so importing a
stage never imports the stages after it (``import mlckit.tir`` leaves relax unloaded).
"""

import importlib
from typing import Any

from . import errors, ir, runtime
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
from .runtime import cpu, cuda, get_global_func, register_func, register_global_func

__version__ = "0.1.0"

# Subpackages imported lazily by attribute access (``mlckit.relax``), and TVM-name aliases.
_LAZY_SUBMODULES = {
    "arith": "mlckit.arith",
    "tir": "mlckit.tir",
    "tirx": "mlckit.tir",
    "s_tir": "mlckit.s_tir",
    "te": "mlckit.te",
    "topi": "mlckit.topi",
    "relax": "mlckit.relax",
    "script": "mlckit.script",
    "datasets": "mlckit.datasets",
    "nd": "mlckit.runtime",
    "target": "mlckit.target",
    "backend": "mlckit.backend",
    "instrument": "mlckit.ir.instrument",
    "transform": "mlckit.ir.transform",
    "viz": "mlckit.viz",
    "widgets": "mlckit.widgets",
    "exercises": "mlckit.exercises",
}


# Functions whose modules load on first use.
_LAZY_FUNCTIONS = {"build": "mlckit.driver", "compile": "mlckit.driver", "Target": "mlckit.target"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_FUNCTIONS:
        value = getattr(importlib.import_module(_LAZY_FUNCTIONS[name]), name)
        globals()[name] = value
        return value
    target = _LAZY_SUBMODULES.get(name)
    if target is None:
        raise AttributeError(f"module 'mlckit' has no attribute {name!r}")
    module = importlib.import_module(target)
    globals()[name] = module
    return module


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
    "errors",
    "get_global_func",
    "ir",
    "register_func",
    "register_global_func",
    "runtime",
]
