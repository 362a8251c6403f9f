"""``tir.Schedule``: loop and block transformations of TensorIR, with a replayable trace."""

from mlckit.errors import ScheduleError

from . import primitives
from .schedule import BlockRV, ExprRV, LoopRV, Schedule, primitive
from .trace import Instruction, Trace

__all__ = [
    "BlockRV",
    "ExprRV",
    "Instruction",
    "LoopRV",
    "Schedule",
    "ScheduleError",
    "Trace",
    "primitive",
]
