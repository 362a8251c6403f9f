"""Interactive views of the compiler at work (ipywidgets 8), and their static HTML versions.

``PassStepper(mod, passes)`` steps through a pipeline; ``ScheduleExplorer(prim_func)`` applies
schedule primitives by hand and times each step; ``IRExplorer(mod)`` browses a module. Steppers
also export to self-contained HTML (:class:`StaticSteps`: ``to_html()``, ``_repr_html_``) that
works in the built book and in any browser, where no kernel runs behind ipywidgets. Widgets
read the IR and never change it. The compiler never imports this package.
"""

from .ir_explorer import IRExplorer
from .pass_stepper import PassStep, PassStepper, PassStepperWidget
from .schedule_explorer import PRIMITIVES, ScheduleExplorer, ScheduleStep, ScheduleSteps
from .static_html import StaticStep, StaticSteps

__all__ = [
    "PRIMITIVES",
    "IRExplorer",
    "PassStep",
    "PassStepper",
    "PassStepperWidget",
    "ScheduleExplorer",
    "ScheduleStep",
    "ScheduleSteps",
    "StaticStep",
    "StaticSteps",
]
