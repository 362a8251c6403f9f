"""What a script can reach: the TVMScript namespaces, and the closed world of TVMScript text.

A *namespace* is ``T``, ``R`` or ``I``, one of their sub-namespaces (``T.axis``, ``R.nn``,
``R.memory``, ``R.builtin``) or the functions of the module being parsed (``cls``). A script
reads from a namespace only its public names (``__all__``), so ``T.prim_func`` is there but
``T._tir`` or a module that ``R`` happens to import is not.

Decorated Python (``@T.prim_func`` on a live function) is code the student runs anyway: as in
TVM it sees its caller's names, builtins and modules included. TVMScript *text*
(``from_source``: a printed module, a tuning database's record) is data, and its evaluation is
closed (a :class:`~.core.Environment` with ``trusted=False``):

* names: ``T``/``R``/``I``, what the script binds, its ``metadata``, the caller's
  ``extra_vars``, and of Python's builtins only :data:`TEXT_BUILTINS`;
* attributes: only of namespaces;
* calls: only of a namespace's public values (constructors such as ``T.max``, ``R.Tensor``),
  of ``extra_vars`` values, of :data:`TEXT_BUILTINS`, and of the module's functions;
* imports: only of the namespaces themselves (:func:`importable`).

So no text can import a module, reach ``__globals__``/``__subclasses__``, or call ``open``.
"""

from __future__ import annotations

import functools
import types
from typing import Any

from mlckit.errors import MLCError
from mlckit.ir.module import GlobalVar

from .dialects import Dialect, dialect_of, dialects
from .markers import StatementGroup


def _float(value: Any = 0.0) -> float:
    """``float`` as TVMScript text uses it: ``float("inf")``, ``float("nan")``."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise MLCError(f'float() takes a number or "inf", "-inf" or "nan", got {value!r}') from None


# The builtins TVMScript text may use: what the printer writes (`range(a, b)`, `float("inf")`).
TEXT_BUILTINS: dict[str, Any] = {"range": range, "float": _float}
# The names printed text relies on besides its own variables.
SCRIPT_GLOBALS = frozenset({"T", "R", "I", "metadata", *TEXT_BUILTINS})


class ModuleFunctions:
    """What the class name (``cls = Module``) means inside the module: its GlobalVars."""

    def __init__(self, name: str, gvars: dict[str, GlobalVar]):
        self.name = name
        self._gvars = gvars

    def __getattr__(self, attr: str) -> GlobalVar:
        gvars = self.__dict__.get("_gvars", {})
        if attr in gvars:
            return gvars[attr]
        raise AttributeError(attr)

    def __dir__(self) -> list[str]:
        return sorted(self._gvars)

    def __repr__(self) -> str:
        return f"<functions of module {self.name}>"


def _is_namespace(value: Any) -> bool:
    return isinstance(value, (types.ModuleType, types.SimpleNamespace, StatementGroup))


def _public_names(namespace: Any) -> frozenset[str]:
    declared = getattr(namespace, "__all__", None)
    if declared is None:  # a SimpleNamespace such as R.builtin
        declared = vars(namespace)
    return frozenset(name for name in declared if not name.startswith("_"))


@functools.cache
def _script_namespaces(
    registered: tuple[Dialect, ...],
) -> tuple[dict[int, frozenset[str]], frozenset[int]]:
    """The namespaces reachable from the dialects' own (T, R, I), by id with their public
    names, and the ids of their public values; cached for each set of registered dialects."""
    namespaces: dict[int, frozenset[str]] = {}
    members: set[int] = set()
    pending: list[Any] = [dialect.namespace for dialect in registered]
    while pending:
        namespace = pending.pop()
        if id(namespace) in namespaces:
            continue
        names = namespaces[id(namespace)] = _public_names(namespace)
        for name in names:
            value = getattr(namespace, name)
            if _is_namespace(value):
                pending.append(value)
            else:
                members.add(id(value))
    return namespaces, frozenset(members)


def namespace_names(owner: Any) -> frozenset[str] | None:
    """The names a script may read from ``owner``; None when ``owner`` is no namespace."""
    if isinstance(owner, ModuleFunctions):
        return frozenset(dir(owner))
    return _script_namespaces(dialects())[0].get(id(owner))


def is_script_value(value: Any) -> bool:
    """Whether ``value`` is a public value of T, R or I (a constructor, a type, a statement)."""
    return id(value) in _script_namespaces(dialects())[1]


def is_decorator(value: Any) -> bool:
    """``T.prim_func``, ``R.function`` and ``I.ir_module`` decorate definitions; a script never
    calls them."""
    return dialect_of(value) is not None


def importable() -> dict[str, Any]:
    """The modules TVMScript text may import, by dotted name."""
    return {name: dialect.namespace for dialect in dialects() for name in dialect.imports}
