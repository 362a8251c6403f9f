"""PyTorch importers (TVM's ``relax.frontend.torch``): ``from_fx`` for ``torch.fx`` traced
models, ``from_exported_program`` for ``torch.export`` programs. torch is an optional
dependency (``pip install mlckit[torch]``); it is imported when a model is.

    graph = torch.fx.symbolic_trace(model.eval())
    mod = from_fx(graph, [((1, 784), "float32")])
    mod = relax.get_pipeline("zero")(mod)          # legalize, fuse
    vm = relax.VirtualMachine(relax.build(mod, "llvm"), mlckit.cpu())

:func:`coverage` lists the operators converted; an operator without a converter stops the
import with a :class:`FrontendError` that names it, the node and the line of the model.
"""

from .importers import detach_params, from_exported_program, from_fx
from .ops import coverage, coverage_markdown
from .translator import FrontendError

__all__ = [
    "FrontendError",
    "coverage",
    "coverage_markdown",
    "detach_params",
    "from_exported_program",
    "from_fx",
]
