"""``tir.Schedule``: loop and block transformations of TensorIR, with a replayable trace."""

from mlckit.errors import ScheduleError
from mlckit.ir.serialization import register_object

from .primitives.sampling import LocationMark
from .schedule import Schedule
from .state import BlockRV, ExprRV, LoopRV, ScheduleState
from .trace import Instruction, Trace

# A trace saves with the IR (mlckit.ir.save_json): its steps, and the handles and sampled
# values they pass, each stored once so that a later step still names an earlier one's output.
register_object("tir.schedule.Trace", Trace)
register_object("tir.schedule.Instruction", Instruction, label=lambda inst: f"sch.{inst.kind}")
register_object("tir.schedule.BlockRV", BlockRV, ("name",))
register_object("tir.schedule.LoopRV", LoopRV, ("loop_var",))
# A sampled tile size is an int, a sampled location a str, each draw an object of its own.
for _sampled, _plain in ((ExprRV, int), (LocationMark, str)):
    register_object(
        f"tir.schedule.{_sampled.__name__}",
        _sampled,
        ("value",),
        read=lambda value, plain=_plain: {"value": plain(value)},
        build=lambda fields, sampled=_sampled: sampled(fields["value"]),
    )

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
