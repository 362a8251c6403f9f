"""mlckit: a teaching-first machine-learning compiler (Relax + TensorIR, TVM's names).

``import mlckit as tvm`` gives the course's API: every stage of the compiler is imported here,
each after the stages it builds on (docs/architecture.md draws the layers). Only the
subpackages that need an optional or heavy third-party package load on first use, so that
importing the compiler never imports graphviz, ipywidgets or scikit-learn.
"""

import importlib
from typing import Any

# tir before arith (the split keeps the import sorter from swapping them): arith is built on
# tir's node classes, and importing any of them runs mlckit/tir/__init__.py, which also loads
# tir's analyses and schedule, built on arith; arith is loaded completely from inside it.
from . import errors, ir, runtime, tir

# isort: split
from . import arith, backend, datasets, exercises, relax, s_tir, script, target, te, topi
from .driver import build, compile
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
from .ir import IRModule, instrument, transform
from .runtime import cpu, cuda, device, get_global_func, register_func, register_global_func
from .target import Target

__version__ = "0.1.0"

# TVM's other spellings of the same modules.
nd = runtime
tirx = tir

# Subpackages loaded on first use, each for the third-party package its import pulls in.
_DEFERRED = {
    "viz": "mlckit.viz",  # graphviz pictures (and the hook every node's _repr_ uses)
    "widgets": "mlckit.widgets",  # ipywidgets
    "meta_schedule": "mlckit.meta_schedule",  # scikit-learn (the cost model)
}


def __getattr__(name: str) -> Any:
    if name not in _DEFERRED:
        raise AttributeError(f"module 'mlckit' has no attribute {name!r}")
    module = importlib.import_module(_DEFERRED[name])
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
    "Target",
    "VMError",
    "WellFormedError",
    "arith",
    "backend",
    "build",
    "compile",
    "cpu",
    "cuda",
    "datasets",
    "device",
    "errors",
    "exercises",
    "get_global_func",
    "instrument",
    "ir",
    "nd",
    "register_func",
    "register_global_func",
    "relax",
    "runtime",
    "s_tir",
    "script",
    "target",
    "te",
    "tir",
    "tirx",
    "topi",
    "transform",
]
