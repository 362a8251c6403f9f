"""What the parser recognizes among the namespaces' values, by identity or by type.

* Statement builders, names like ``T.block`` or ``R.output`` that only a parsed script uses.
  They are not functions that build something when called. The parser recognizes them by
  identity (after evaluating ``T.block`` like any attribute) and handles the statement itself;
  called from ordinary Python they raise an error saying how to use them.
* Groups of statement builders under one name (``T.axis``), namespaces like the modules.
* Scalar types (``T.int64``): called with a value they build a constant, but a script also
  writes them as a parameter's type (``n: T.int32``) and declares a symbolic variable with
  ``n = T.int64()``, which the parser handles.

They live here, below the parser and the namespaces alike, because both need them: the
namespaces are made of them and the parser tells them apart.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from mlckit.errors import MLCError
from mlckit.ir.dtype import check_dtype, is_float
from mlckit.tir.expr import Cast, PrimExpr, make_const

from .evaluator import plain_signature


class ScriptStatement:
    """A TVMScript statement builder. ``signature`` documents and checks its arguments."""

    def __init__(self, name: str, usage: str, fn: Callable[..., Any], in_class_body: bool = False):
        self.name = name
        self.usage = usage
        # A statement of a module's class body runs when Python defines the class, before
        # the decorator parses it: there it does nothing.
        self.in_class_body = in_class_body
        self.signature = plain_signature(inspect.signature(fn))
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_locals
        if self.in_class_body and "__module__" in caller and "__qualname__" in caller:
            return None
        raise MLCError(f"{self.name} can only be used in TVMScript, as `{self.usage}`")

    def __repr__(self) -> str:
        return f"<TVMScript statement {self.name}{self.signature}>"

    def bind(self, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments by parameter name (defaults filled in)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise MLCError(f"{self.name}{self.signature}: {err}") from None
        bound.apply_defaults()
        return dict(bound.arguments)


def statement(
    prefix: str, usage: str, in_class_body: bool = False
) -> Callable[[Callable[..., Any]], ScriptStatement]:
    """Declare a statement builder ``prefix.<function name>`` with the given usage hint
    (``in_class_body``: written in an ``@I.ir_module`` class's body)."""

    def wrap(fn: Callable[..., Any]) -> ScriptStatement:
        return ScriptStatement(f"{prefix}.{fn.__name__}", usage, fn, in_class_body)

    return wrap


class StatementGroup:
    """A namespace of statement builders (``T.axis``): a script reads its ``__all__``, as it
    reads a module's."""

    __all__: tuple[str, ...] = ()


class SymbolicVar:
    """``T.var("int32")``: TVM's older way to declare a symbolic variable, ``n = T.int32()``
    (the parser handles that assignment)."""

    def __call__(self, dtype: str = "int32") -> PrimExpr:
        raise MLCError(
            f"T.var({dtype!r}) declares a symbolic variable; write it as an assignment such as "
            f"`n = T.var({dtype!r})`"
        )

    def __repr__(self) -> str:
        return "T.var"


class DType:
    """A scalar type: ``T.int64(5)`` is a constant, ``n: T.int32`` a typed parameter and
    ``n = T.int64()`` declares a symbolic variable (the parser handles that assignment)."""

    def __init__(self, dtype: str):
        self.dtype = check_dtype(dtype)
        self.__name__ = dtype

    def __call__(self, value: Any = None) -> PrimExpr:
        if value is None:
            raise MLCError(
                f"T.{self.dtype}() declares a symbolic variable; write it as an "
                f"assignment such as `n = T.{self.dtype}()`"
            )
        if self.dtype == "handle":
            raise MLCError("T.handle is a parameter type, not a value")
        if isinstance(value, PrimExpr):
            return value if value.dtype == self.dtype else Cast(self.dtype, value)
        if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
            raise MLCError(
                f"T.{self.dtype}(value) takes a number or a TensorIR expression, got {value!r}"
            )
        if not is_float(self.dtype) and not float(value).is_integer():
            raise MLCError(f"T.{self.dtype}({value!r}): an {self.dtype} constant is a whole number")
        return make_const(value, self.dtype)

    def __repr__(self) -> str:
        return f"T.{self.dtype}"
