"""DeadCodeElimination: drop what no entry function can reach.

Two kinds of dead code go: functions of the module that no entry function calls, directly
or indirectly (entry functions are the public relax functions plus those named in
``entry_functions``; a PrimFunc is kept only while something calls it), and bindings inside
dataflow blocks whose variables nothing reads (``relax.analysis.remove_all_unused``).
Removing bindings can make more functions unreachable, so reachability is computed again
afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.module import IRModule

from ..analysis import all_global_vars, remove_all_unused
from ..expr import Function


def _entry_names(mod: IRModule, entry_functions: Sequence[str] | None) -> set[str]:
    # Public relax functions are the module's interface; a PrimFunc, public or not, is a
    # kernel that lives only as long as some relax function calls it.
    names = {
        gv.name_hint
        for gv, f in mod.functions.items()
        if isinstance(f, Function) and not f.is_private
    }
    for name in entry_functions or ():
        if name not in mod:
            known = ", ".join(sorted(gv.name_hint for gv in mod.functions)) or "none"
            raise MLCError(
                f"DeadCodeElimination: entry function {name!r} is not in the module "
                f"(functions: {known})"
            )
        names.add(name)
    return names


def _remove_unreachable(mod: IRModule, entries: set[str]) -> IRModule:
    reachable: set[str] = set()
    pending = list(entries)
    while pending:
        name = pending.pop()
        if name in reachable or name not in mod:
            continue
        reachable.add(name)
        func = mod[name]
        if isinstance(func, Function):
            pending.extend({gv.name_hint for gv in all_global_vars(func)} - reachable)
    for gv in list(mod.functions):
        if gv.name_hint not in reachable:
            mod.remove(gv)
    return mod


def DeadCodeElimination(entry_functions: Sequence[str] | None = None) -> transform.Pass:
    """Remove unreachable functions and unused dataflow bindings."""
    if isinstance(entry_functions, str):
        entry_functions = [entry_functions]

    @transform.module_pass(opt_level=0, name="DeadCodeElimination")
    def dce(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        entries = _entry_names(mod, entry_functions)
        mod = _remove_unreachable(mod, entries)
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                cleaned = remove_all_unused(func)
                if cleaned is not func:
                    mod.update_func(gv, cleaned)
        return _remove_unreachable(mod, entries)

    return dce


__all__ = ["DeadCodeElimination"]
