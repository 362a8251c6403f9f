"""``tir.Schedule``: loop and block transformations of TensorIR, with a replayable trace."""

from mlckit.errors import ScheduleError

from .schedule import Schedule
from .state import BlockRV, ExprRV, LoopRV, ScheduleState
from .trace import Instruction, Trace

__all__ = [
    "BlockRV",
    "ExprRV",
    "Instruction",
    "LoopRV",
    "Schedule",
    "ScheduleError",
    "ScheduleState",
    "Trace",
]
