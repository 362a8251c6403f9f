"""Schedule primitives, one module per family; importing a module registers its primitives
as methods of :class:`mlckit.tir.schedule.Schedule`."""

from . import loop_transformation
