"""Targets: where compiled code runs (``Target("llvm")``, ``"python"``, ``"cuda"``)."""

from __future__ import annotations

from typing import Any

from mlckit.errors import BuildError

# Spellings accepted for each target kind.
_KINDS = {
    "llvm": "llvm",
    "cpu": "llvm",
    "c": "llvm",
    "python": "python",
    "cuda": "cuda",
    "nvidia/geforce-rtx-3090": "cuda",
}


class Target:
    """A compilation target: its kind and options (``"llvm -num-cores=2"``).

    ``"llvm"``/``"cpu"`` compile the generated Python with numba for this CPU; ``"python"``
    runs the same source in plain CPython (slow on purpose: the reference interpreter).
    """

    def __init__(self, target: "str | Target | dict[str, Any]", host: Any = None):
        if isinstance(target, Target):
            self.kind, self.options, self.text = target.kind, dict(target.options), target.text
            return
        if isinstance(target, dict):
            text = str(target.get("kind", ""))
            options = {k: v for k, v in target.items() if k != "kind"}
        elif isinstance(target, str):
            text = target.strip()
            options = {}
        else:
            raise BuildError(f"a target is a string such as 'llvm', not {type(target).__name__}")
        words = text.split()
        if not words or words[0] not in _KINDS:
            known = ", ".join(sorted({"llvm", "cpu", "python", "cuda"}))
            raise BuildError(f"unknown target {text!r}; choose one of {known}")
        self.kind = _KINDS[words[0]]
        for word in words[1:]:
            key, _, value = word.lstrip("-").partition("=")
            options[key] = value if value else True
        self.options = options
        self.text = text

    @staticmethod
    def current_or(target: "str | Target | None", default: str = "llvm") -> "Target":
        return Target(target if target is not None else default)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f'Target("{self.text}")'

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return False
        return (self.kind, self.options) == (other.kind, other.options)

    def __hash__(self) -> int:
        return hash((self.kind, tuple(sorted(self.options.items()))))
