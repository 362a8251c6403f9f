"""Building relax modules and the virtual machine that runs them (``relax.vm.build`` is the
older spelling of ``relax.build``)."""

from . import library  # registers the kinds of library file export_library writes
from .build import Executable, ProfileReport, VirtualMachine, build

__all__ = ["Executable", "ProfileReport", "VirtualMachine", "build"]
