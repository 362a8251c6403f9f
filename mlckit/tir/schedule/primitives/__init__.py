"""The implementations of the schedule primitives, one module per family.

Each primitive is a function of a :class:`~mlckit.tir.schedule.state.ScheduleState` and the
primitive's arguments (``split(sch, loop, factors, ...)``): it reads the current function
through the handles (``sch.loop(rv)``, ``sch.block_realize(rv)``), builds new statements,
swaps them in (``sch.replace(old, new)``) and raises ScheduleError with the violated condition
when it cannot apply. The method of :class:`~mlckit.tir.schedule.Schedule` of the same name
documents it, checks its arguments, records it and rolls the schedule back after an error.
"""

from . import (
    blockize,
    cache,
    compute_inline,
    compute_location,
    layout,
    loop_transformation,
    queries,
    reduction,
    rfactor,
    sampling,
    tensorize,
)
