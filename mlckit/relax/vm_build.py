"""``relax.vm_build``, the module where TVM defines ``relax.build``: the MLC course calls it
as ``relax.vm_build.build(mod, target)``. Both names are one function."""

from .vm import Executable, build

__all__ = ["Executable", "build"]
