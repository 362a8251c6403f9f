"""TVM's names for the search spaces (``ms.space_generator.ScheduleFn(fn)``, as the MLC course
writes it): the spaces themselves are in :mod:`.space`."""

from .space import ScheduleFnSpace, SearchSpace

# TVM's space generator that calls a stochastic schedule function.
ScheduleFn = ScheduleFnSpace
# TVM's base class of the spaces.
SpaceGenerator = SearchSpace

__all__ = ["ScheduleFn", "SpaceGenerator"]
