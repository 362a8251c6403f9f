"""Schedule primitives, one module per family; importing a module registers its primitives
as methods of :class:`mlckit.tir.schedule.Schedule`."""

from . import (
    blockize,
    cache,
    compute_inline,
    compute_location,
    layout,
    loop_transformation,
    reduction,
    rfactor,
    sampling,
)
