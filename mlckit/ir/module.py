"""IRModule, GlobalVar and the base of all functions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import MLCError

from .node import Node, check_str


@dataclass(frozen=True, eq=False, repr=False)
class GlobalVar(Node):
    """The name of a function in an IRModule. Structurally, global vars compare by name."""

    name_hint: str
    struct_info_: Any = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        check_str(self.name_hint, "GlobalVar")

    def __repr__(self) -> str:
        return f'I.GlobalVar("{self.name_hint}")'


@dataclass(frozen=True, eq=False, repr=False)
class BaseFunc(Node):
    """Common base of tir.PrimFunc and relax.Function: both carry an attribute dict."""

    def with_attr(self, key: str | Mapping[str, Any], value: Any = None) -> "BaseFunc":
        new_attrs = dict(self.attrs)  # type: ignore[attr-defined]
        if isinstance(key, Mapping):
            new_attrs.update(key)
        else:
            new_attrs[key] = value
        return self.with_fields(attrs=new_attrs)

    def without_attr(self, key: str) -> "BaseFunc":
        new_attrs = {k: v for k, v in self.attrs.items() if k != key}  # type: ignore[attr-defined]
        return self.with_fields(attrs=new_attrs)

    @property
    def is_private(self) -> bool:
        return "global_symbol" not in self.attrs  # type: ignore[attr-defined]


class IRModule(Node):
    """A collection of functions (relax.Function, tir.PrimFunc) keyed by GlobalVar.

    Like TVM's, a module can be updated in place (``mod["f"] = func``, ``update_func``);
    functions themselves are immutable.
    """

    # Not a dataclass: the mapping is mutable and keyed by GlobalVar.
    def __init__(
        self,
        functions: Mapping[GlobalVar | str, BaseFunc] | None = None,
        attrs: Mapping[str, Any] | None = None,
        global_infos: Mapping[str, Any] | None = None,
    ):
        object.__setattr__(self, "span", None)
        object.__setattr__(self, "functions", {})
        object.__setattr__(self, "attrs", dict(attrs or {}))
        object.__setattr__(self, "global_infos", dict(global_infos or {}))
        for key, func in (functions or {}).items():
            self[key] = func

    functions: dict[GlobalVar, BaseFunc]
    attrs: dict[str, Any]

    def structural_fields(self) -> Iterator[tuple[str, Any]]:
        yield "functions", {gv.name_hint: f for gv, f in self.functions.items()}
        yield "attrs", self.attrs

    def __setattr__(self, name: str, value: Any) -> None:
        raise MLCError(f"IRModule field {name!r} cannot be assigned; use mod[name] = func")

    # ------------------------------------------------------------------ mapping
    def get_global_var(self, name: str) -> GlobalVar:
        for gv in self.functions:
            if gv.name_hint == name:
                return gv
        known = ", ".join(sorted(gv.name_hint for gv in self.functions)) or "none"
        raise MLCError(f"IRModule has no function named {name!r} (functions: {known})")

    def get_global_vars(self) -> list[GlobalVar]:
        return sorted(self.functions, key=lambda gv: gv.name_hint)

    def _lookup(self, key: GlobalVar | str) -> GlobalVar:
        if isinstance(key, GlobalVar):
            if key in self.functions:
                return key
            return self.get_global_var(key.name_hint)
        if isinstance(key, str):
            return self.get_global_var(key)
        raise MLCError(f"IRModule keys are function names or GlobalVars, not {type(key).__name__}")

    def __getitem__(self, key: GlobalVar | str) -> BaseFunc:
        return self.functions[self._lookup(key)]

    def __setitem__(self, key: GlobalVar | str, func: BaseFunc) -> None:
        self.update_func(key, func)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, GlobalVar):
            key = key.name_hint
        return any(gv.name_hint == key for gv in self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def __iter__(self) -> Iterator[GlobalVar]:
        return iter(list(self.functions))

    def items(self):
        return self.functions.items()

    def keys(self):
        return self.functions.keys()

    def values(self):
        return self.functions.values()

    def update_func(self, key: GlobalVar | str, func: BaseFunc) -> None:
        """Add or replace a function. A string or a GlobalVar of a known name replaces that one."""
        if not isinstance(func, BaseFunc):
            raise MLCError(f"an IRModule holds functions, not {type(func).__name__}")
        name = key.name_hint if isinstance(key, GlobalVar) else key
        existing = next((gv for gv in self.functions if gv.name_hint == name), None)
        if existing is not None:
            gv = existing
        else:
            gv = key if isinstance(key, GlobalVar) else GlobalVar(name)
        if getattr(func, "struct_info_", None) is not None and gv.struct_info_ is None:
            object.__setattr__(gv, "struct_info_", func.struct_info_)
        self.functions[gv] = func

    def add(self, key: GlobalVar | str, func: BaseFunc) -> None:
        if key in self:
            name = key.name_hint if isinstance(key, GlobalVar) else key
            raise MLCError(f"IRModule already has a function named {name!r}")
        self.update_func(key, func)

    def remove(self, key: GlobalVar | str) -> None:
        del self.functions[self._lookup(key)]

    def update(self, other: "IRModule") -> None:
        for gv, func in other.functions.items():
            self.update_func(gv, func)

    def copy(self) -> "IRModule":
        mod = IRModule(attrs=self.attrs, global_infos=self.global_infos)
        mod.functions.update(self.functions)
        return mod

    def with_attr(self, key: str, value: Any) -> "IRModule":
        mod = self.copy()
        mod.attrs[key] = value
        return mod

    def with_attrs(self, attrs: Mapping[str, Any]) -> "IRModule":
        mod = self.copy()
        mod.attrs.update(attrs)
        return mod

    def without_attr(self, key: str) -> "IRModule":
        mod = self.copy()
        mod.attrs.pop(key, None)
        return mod

    def get_attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    @staticmethod
    def from_expr(func: BaseFunc, name: str = "main") -> "IRModule":
        return IRModule({name: func})
