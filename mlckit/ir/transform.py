"""Pass infrastructure: module/function passes, Sequential, PassContext and instruments.

Mirrors ``tvm.ir.transform``: a pass is a callable ``IRModule -> IRModule`` carrying a
:class:`PassInfo`; a :class:`PassContext` holds the optimization level, required and
disabled passes, configuration and the instruments that observe every pass run.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import MLCError

from .module import BaseFunc, IRModule


@dataclass(frozen=True)
class PassInfo:
    opt_level: int
    name: str
    required: tuple[str, ...] = ()
    traceable: bool = False


class PassContext:
    """The settings every pass runs under (``with PassContext(opt_level=3): ...``)."""

    _stack: list["PassContext"] = []

    def __init__(
        self,
        opt_level: int = 2,
        required_pass: Sequence[str] = (),
        disabled_pass: Sequence[str] = (),
        instruments: Sequence[Any] = (),
        config: dict[str, Any] | None = None,
    ):
        self.opt_level = opt_level
        self.required_pass = list(required_pass)
        self.disabled_pass = list(disabled_pass)
        self.instruments = list(instruments)
        self.config = dict(config or {})

    @staticmethod
    def current() -> "PassContext":
        return PassContext._stack[-1] if PassContext._stack else _DEFAULT_CONTEXT

    def __enter__(self) -> "PassContext":
        PassContext._stack.append(self)
        for instrument in self.instruments:
            _call_hook(instrument, "enter_pass_ctx")
        return self

    def __exit__(self, *exc: Any) -> None:
        for instrument in self.instruments:
            _call_hook(instrument, "exit_pass_ctx")
        PassContext._stack.pop()

    def pass_enabled(self, info: PassInfo) -> bool:
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return info.opt_level <= self.opt_level

    def override_instruments(self, instruments: Sequence[Any]) -> None:
        for instrument in self.instruments:
            _call_hook(instrument, "exit_pass_ctx")
        self.instruments = list(instruments)
        for instrument in self.instruments:
            _call_hook(instrument, "enter_pass_ctx")


_DEFAULT_CONTEXT = PassContext()


def _call_hook(instrument: Any, hook: str, *args: Any) -> Any:
    method = getattr(instrument, hook, None)
    return method(*args) if method is not None else None


class Pass:
    """A transformation of IRModules. ``pass_(mod)`` runs it under the current PassContext."""

    info: PassInfo

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise MLCError(f"pass {self.info.name!r} expects an IRModule, got {type(mod).__name__}")
        ctx = PassContext.current()
        if not all(
            _call_hook(i, "should_run", mod, self.info) is not False for i in ctx.instruments
        ):
            return mod
        for instrument in ctx.instruments:
            _call_hook(instrument, "run_before_pass", mod, self.info)
        result = self.transform(mod, ctx)
        if not isinstance(result, IRModule):
            raise MLCError(
                f"pass {self.info.name!r} returned {type(result).__name__}, not an IRModule"
            )
        for instrument in ctx.instruments:
            _call_hook(instrument, "run_after_pass", result, self.info)
        return result

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    def __init__(self, func: Callable[[IRModule, PassContext], IRModule], info: PassInfo):
        self.func = func
        self.info = info

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # Passes never change their input: hand the function a copy it may update in place.
        return self.func(mod.copy(), ctx)


class FunctionPass(Pass):
    """Applies ``func(function, mod, ctx)`` to every function accepted by ``applies_to``."""

    def __init__(
        self,
        func: Callable[[BaseFunc, IRModule, PassContext], BaseFunc],
        info: PassInfo,
        applies_to: Callable[[BaseFunc], bool],
    ):
        self.func = func
        self.info = info
        self.applies_to = applies_to

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        result = mod.copy()
        for gv, func in list(mod.functions.items()):
            if self.applies_to(func):
                result.update_func(gv, self.func(func, mod, ctx))
        return result


class Sequential(Pass):
    """Runs passes in order, skipping those the PassContext does not enable."""

    def __init__(
        self,
        passes: Sequence[Pass] = (),
        opt_level: int = 0,
        name: str = "sequential",
        required: Sequence[str] = (),
    ):
        for p in passes:
            if not isinstance(p, Pass):
                raise MLCError(f"Sequential takes passes, got {type(p).__name__}")
        self.passes = list(passes)
        self.info = PassInfo(opt_level, name, tuple(required))

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if ctx.pass_enabled(p.info):
                mod = p(mod)
        return mod


def _make_pass_decorator(make: Callable[[Callable, PassInfo], Pass], kind: str, method: str):
    """Build a decorator like ``@module_pass(opt_level=0, name=...)``.

    On a function it returns the pass; on a class it returns a Pass subclass whose
    constructor takes the class's arguments and whose work is done by ``method``.
    """

    def decorator(
        pass_func: Any = None,
        opt_level: int | None = None,
        name: str | None = None,
        required: Sequence[str] = (),
        traceable: bool = False,
    ) -> Any:
        if opt_level is None:
            raise MLCError(f"{kind}: give opt_level=..., as in @{kind}(opt_level=0)")

        def create(func_or_class: Any) -> Any:
            info = PassInfo(opt_level, name or func_or_class.__name__, tuple(required), traceable)
            if inspect.isclass(func_or_class):
                if not hasattr(func_or_class, method):
                    raise MLCError(
                        f"class {func_or_class.__name__} decorated with @{kind} "
                        f"needs a method {method}(self, ..., ctx)"
                    )

                class ClassPass(Pass):
                    def __init__(self, *args: Any, **kwargs: Any):
                        self.instance = func_or_class(*args, **kwargs)
                        self.info = info
                        self._impl = make(getattr(self.instance, method), info)

                    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
                        return self._impl.transform(mod, ctx)

                # The pass keeps the class's constants (``SetupTrainer.BACKBONE_FUNC``).
                for key, value in vars(func_or_class).items():
                    if not key.startswith("_") and not callable(value):
                        setattr(ClassPass, key, value)
                ClassPass.__name__ = func_or_class.__name__
                ClassPass.__qualname__ = func_or_class.__qualname__
                ClassPass.__doc__ = func_or_class.__doc__
                return ClassPass
            if not callable(func_or_class):
                raise MLCError(f"@{kind} decorates a function or a class")
            return make(func_or_class, info)

        return create(pass_func) if pass_func is not None else create

    decorator.__name__ = kind
    return decorator


module_pass = _make_pass_decorator(ModulePass, "module_pass", "transform_module")
module_pass.__doc__ = """Make a module pass from ``f(mod, ctx) -> mod`` or a class with
``transform_module(self, mod, ctx)`` (then instantiating the class gives the pass)."""


def function_pass_for(applies_to: Callable[[BaseFunc], bool]):
    """A ``function_pass`` decorator applying to the functions ``applies_to`` accepts."""
    return _make_pass_decorator(
        lambda f, info: FunctionPass(f, info, applies_to), "function_pass", "transform_function"
    )


function_pass = function_pass_for(lambda func: True)


@dataclass
class PrintIR(Pass):
    """A pass that prints the module (with a header) and returns it unchanged."""

    header: str = ""
    show_meta: bool = False
    info: PassInfo = field(default_factory=lambda: PassInfo(0, "PrintIR"))

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if self.header:
            print(self.header)
        print(mod.script(show_meta=self.show_meta))
        return mod


def pass_instrument(cls: type) -> type:
    """Mark a class as a pass instrument (TVM's ``tvm.instrument.pass_instrument``).

    Instruments are duck-typed: any of ``enter_pass_ctx``, ``exit_pass_ctx``, ``should_run``,
    ``run_before_pass`` and ``run_after_pass`` that the class defines is called, and
    ``record_build_step`` for the build's steps that are not passes (``instrument.build_step``).
    """
    return cls
