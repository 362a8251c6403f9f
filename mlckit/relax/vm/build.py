"""``relax.build``: compile a module's kernels and its relax functions into an Executable,
and ``relax.VirtualMachine``, which runs it."""

from __future__ import annotations

import linecache
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from mlckit.backend.codegen import HELPER_SOURCE
from mlckit.backend.kernel import Kernel, build_kernels
from mlckit.errors import BuildError, MLCError, ScheduleError, VMError
from mlckit.ir.module import IRModule
from mlckit.ir.name_supply import NameSupply
from mlckit.ir.transform import Pass
from mlckit.runtime.export import export_library
from mlckit.runtime.gpu import is_device_array, numba_cuda
from mlckit.runtime.module import (
    BenchmarkResult,
    check_arguments,
    describe,
    division_by_zero,
    time_function,
)
from mlckit.runtime.ndarray import Device, NDArray, aligned_copy
from mlckit.target import Target
from mlckit.tir.function import PrimFunc

from ..expr import Constant, Function
from ..pipeline import get_pipeline
from ..transform import BindParams
from . import runtime
from .codegen import VM_RESERVED, VM_RUNTIME_NAMES, RelaxToPython


class Executable:
    """A built module: compiled kernels plus the Python of every relax function.

    ``ex.source("linear")`` shows the generated code of one function, ``ex.source()`` all.
    """

    def __init__(
        self,
        kernels: dict[str, Kernel],
        relax_sources: dict[str, str],
        python_names: dict[str, str],
        params: dict[str, list[str]],
        constants: list[Constant],
        target: Target,
        written: dict[str, frozenset[int]] | None = None,
        pool_slots: list[str] | None = None,
    ):
        self.kernels = kernels
        self.relax_sources = relax_sources
        self.python_names = python_names
        self.params = params
        self.constants = constants
        self.target = target
        # For each relax function, the indices of the parameters its kernels write into.
        self.written = written or {}
        # The call_tir output each array the VM keeps between calls is for ("main: lv0").
        self.pool_slots = pool_slots or []

    def function_names(self) -> list[str]:
        return list(self.params)

    def source(self, name: str | None = None) -> str:
        if name is None:
            parts = [k.source for k in self.kernels.values()]
            parts.append(self.vm_source())
            return "\n\n".join(parts)
        if name in self.kernels:
            return self.kernels[name].source
        if name in self.relax_sources:
            return self.relax_sources[name]
        known = ", ".join([*self.kernels, *self.relax_sources]) or "none"
        raise MLCError(f"the executable has no function {name!r} (functions: {known})")

    def vm_source(self) -> str:
        """The Python the VM runs for the relax functions."""
        return "\n\n".join(self.relax_sources.values())

    def make_namespace(
        self, wrap_kernel: Callable[[str, Any], Any] | None = None
    ) -> dict[str, Any]:
        """Execute the relax functions' code in a fresh namespace bound to the kernels."""
        # One aligned copy each: the kernels must not write into the module's constants.
        constants = [aligned_copy(np.asarray(c.data)) for c in self.constants]
        namespace: dict[str, Any] = {"np": np, "constants": constants, "cuda": None}
        on_gpu = self.target.is_gpu
        if on_gpu:
            cuda = numba_cuda()
            namespace["cuda"] = cuda
            namespace["constants"] = [cuda.to_device(c) for c in constants]
        signatures = {name: kernel.signature for name, kernel in self.kernels.items()}

        def checked_args(kernel: str, label: str, args: tuple[Any, ...]) -> list[Any]:
            return check_arguments(label, signatures[kernel], args, on_gpu)

        namespace["checked_args"] = checked_args
        namespace["pooled_empty"] = runtime.array_pool(len(self.pool_slots))
        for helper in HELPER_SOURCE.values():  # what shape arithmetic calls (truncdiv, ...)
            exec(helper, namespace)
        for name in VM_RUNTIME_NAMES - {"np", "constants", "cuda", "checked_args", "pooled_empty"}:
            namespace[name] = getattr(runtime, name)
        for name, kernel in self.kernels.items():
            func = kernel.func
            namespace[self.python_names[name]] = wrap_kernel(name, func) if wrap_kernel else func
        filename = f"<mlckit vm {id(self):x}>"
        source = self.vm_source()
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)
        return namespace

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the executable to one file that ``mlckit.runtime.load_module(path)`` loads in
        another process without compiling the module again (see mlckit.runtime.export)."""
        export_library(self, path)

    def __repr__(self) -> str:
        return (
            f"<mlckit.relax.Executable target={self.target} kernels={list(self.kernels)} "
            f"functions={list(self.relax_sources)}>"
        )


def build(
    mod: IRModule,
    target: Any = "llvm",
    params: dict[str, Any] | None = None,
    relax_pipeline: str | Pass | None = None,
    tir_pipeline: str | Pass | None = "default",
) -> Executable:
    """Compile ``mod`` for ``target``: every PrimFunc to a kernel, every relax function to the
    Python the VM runs.

    In order: ``params`` are bound to ``main``'s parameters of the same names (BindParams);
    ``relax_pipeline`` runs (a pipeline name such as ``"default"``, or a Pass; None runs none,
    so high-level operators must have been lowered already, e.g. by
    ``relax.get_pipeline("default")``); the target's default schedule binds the PrimFuncs
    nobody scheduled (``Target.default_schedule``: the CPU rules for ``llvm``, GPU blocks and
    threads for ``cuda``, none for ``python``, whose reference interpreter runs the loops as
    written); then every PrimFunc goes through the same kernel build as ``mlckit.build``
    (``tir_pipeline``, lowering, code generation).
    """
    if not isinstance(mod, IRModule):
        raise BuildError(f"relax.build takes an IRModule, not {type(mod).__name__}")
    target = Target(target)
    if params:
        mod = BindParams("main", params)(mod)
    if relax_pipeline is not None:
        mod = _as_pass(relax_pipeline)(mod)
    mod = apply_default_schedule(mod, target)
    globals_table = NameSupply(VM_RESERVED)
    python_names = {gv.name_hint: globals_table.get(gv, gv.name_hint) for gv in mod.functions}
    kernels = build_kernels(mod, target, tir_pipeline, python_names)
    relax_sources: dict[str, str] = {}
    param_names: dict[str, list[str]] = {}
    written: dict[str, frozenset[int]] = {}
    constants: list[Constant] = []
    pool_slots: list[str] = []
    signatures = {name: kernel.signature for name, kernel in kernels.items()}
    for gv, func in mod.functions.items():
        if isinstance(func, Function):
            generator = RelaxToPython(
                func,
                python_names[gv.name_hint],
                python_names,
                constants,
                signatures,
                on_gpu=target.is_gpu,
                pool_slots=pool_slots,
            )
            relax_sources[gv.name_hint] = generator.generate()
            param_names[gv.name_hint] = [p.name_hint for p in func.params]
            written[gv.name_hint] = frozenset(
                i for i, p in enumerate(func.params) if p in generator.written_params
            )
        elif not isinstance(func, PrimFunc):
            raise BuildError(
                f"cannot build the function {gv.name_hint} of type {type(func).__name__}"
            )
    return Executable(
        kernels,
        relax_sources,
        python_names,
        param_names,
        constants,
        target,
        written,
        pool_slots,
    )


def apply_default_schedule(mod: IRModule, target: Target) -> IRModule:
    """``mod`` with the target's default schedule applied to each PrimFunc that needs it
    (``Target.needs_default_schedule``). A function a CPU schedule marked scheduled gets the
    GPU schedule at a cuda build; when that cannot bind it, a BuildError says why."""
    schedule = target.default_schedule()
    if schedule is None:
        return mod
    updated = mod
    for gv, func in mod.functions.items():
        if not (isinstance(func, PrimFunc) and target.needs_default_schedule(func)):
            continue
        try:
            scheduled = schedule(IRModule({gv: func.without_attr("tir.is_scheduled")}))
        except ScheduleError as err:
            if not func.attrs.get("tir.is_scheduled"):
                raise
            raise BuildError(
                f"{gv.name_hint} was scheduled for a CPU (it is marked tir.is_scheduled but "
                f"binds no loop to a GPU thread), and the default schedule of {target} cannot "
                f"rebind it. {err}. Build the module for cuda before scheduling it for a CPU "
                "(relax.get_pipeline is target independent)."
            ) from None
        if updated is mod:
            updated = mod.copy()
        updated[gv] = scheduled[gv.name_hint]
    return updated


def _as_pass(pipeline: str | Pass) -> Pass:
    if isinstance(pipeline, Pass):
        return pipeline
    if isinstance(pipeline, str):
        return get_pipeline(pipeline)
    raise BuildError(
        f"relax_pipeline must be a pipeline name (such as 'default') or a Pass, not {pipeline!r}"
    )


class VirtualMachine:
    """Runs an Executable: ``vm["main"](*args)`` with NDArrays or numpy arrays.

    A result is the caller's for as long as something refers to it: a later call reuses the
    array one of its outputs had at the previous call only when nothing else holds it (a
    reference, a view, ``np.asarray``, a DLPack export). An address taken from a result
    (``ctypes``) and kept without the array is no such reference: copy the result first."""

    def __init__(
        self,
        exe: Executable,
        device: Device | list[Device] | None = None,
        memory_cfg: Any = None,
        profile: bool = False,
    ):
        if not isinstance(exe, Executable):
            raise VMError(
                f"VirtualMachine needs the Executable relax.build returns, not {type(exe).__name__}"
            )
        self.executable = exe
        self.device = (
            device[0] if isinstance(device, list) and device else device
        ) or exe.target.device()
        if not isinstance(self.device, Device):
            raise VMError(
                f"VirtualMachine runs on a device such as mlckit.cpu() or mlckit.cuda(), not "
                f"{describe(self.device)}"
            )
        if self.device.device_type != exe.target.device_type:
            raise VMError(
                f"the executable was built for {exe.target.kind.name} and cannot run on "
                f"{self.device}; build it for the device's target"
            )
        self._namespace = exe.make_namespace()
        # Each function's entry, made on first use: `vm["main"](x)` in a loop looks it up.
        self._entries: dict[str, Callable[..., Any]] = {}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        entry = self._entries.get(name)
        if entry is None:
            if name not in self.executable.params:
                known = ", ".join(self.executable.params) or "none"
                raise VMError(f"the executable has no relax function {name!r} (functions: {known})")
            entry = self._entries[name] = self._entry(name, self._namespace)
        return entry

    def _entry(self, name: str, namespace: dict[str, Any]) -> Callable[..., Any]:
        func = namespace[self.executable.python_names[name]]
        params = self.executable.params[name]
        device = self.device
        # The label a parameter that a kernel writes into is refused with, or None.
        written = [
            f"{name}: parameter {p}" if i in self.executable.written.get(name, ()) else None
            for i, p in enumerate(params)
        ]

        # The types that pass through unconverted, checked with `is` (numpy's own arrays on
        # the cpu; on cuda none: every argument goes through from_ndarray).
        host_array = None if device.is_gpu else np.ndarray

        def call(*args: Any, **kwargs: Any) -> Any:
            if kwargs or len(args) != len(params):
                raise _arguments_error(name, params, args, kwargs)
            inputs = [
                a
                if type(a) is host_array and a.flags.c_contiguous
                else runtime.from_ndarray(a, device, w)
                for a, w in zip(args, written)
            ]
            try:
                result = func(*inputs)
            except ZeroDivisionError:
                raise division_by_zero(name) from None
            if type(result) is host_array:
                return NDArray(result, device)
            return _wrap_result(result, device)

        call.__name__ = name
        return call

    def invoke(self, name: str, *args: Any) -> Any:
        return self[name](*args)

    @property
    def module(self) -> VirtualMachine:
        """TVM's runtime Module of the VM, which the MLC course times a model with
        (``vm.module.time_evaluator("main", tvm.cpu(), number=100)``): the VM itself, whose
        functions and ``time_evaluator`` are those a runtime Module offers."""
        return self

    def time_evaluator(
        self,
        name: str,
        dev: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
    ) -> Callable[..., BenchmarkResult]:
        return time_function(self[name], number, repeat, min_repeat_ms)

    def profile(self, name: str, *args: Any) -> "ProfileReport":
        """Run ``name`` once (after a warm-up run) and report the time spent in each kernel."""
        totals: dict[str, list[float]] = {}

        def timed(kernel_name: str, func: Any) -> Any:
            def wrapper(*kernel_args: Any) -> Any:
                start = time.perf_counter()
                func(*kernel_args)
                totals.setdefault(kernel_name, []).append(time.perf_counter() - start)

            return wrapper

        entry = self._entry(name, self.executable.make_namespace(timed))
        entry(*args)
        totals.clear()
        start = time.perf_counter()
        entry(*args)
        total = time.perf_counter() - start
        return ProfileReport(name, total, {k: (len(v), sum(v)) for k, v in totals.items()})


class ProfileReport:
    """Per-kernel times of one call: ``print(report)`` shows a table."""

    def __init__(self, name: str, total: float, kernels: dict[str, tuple[int, float]]):
        self.name = name
        self.total = total
        self.kernels = kernels

    def __str__(self) -> str:
        rows = [f"{'kernel':<28}{'calls':>6}{'time (us)':>12}{'percent':>9}"]
        for kernel, (calls, seconds) in sorted(self.kernels.items(), key=lambda kv: -kv[1][1]):
            rows.append(
                f"{kernel:<28}{calls:>6}{seconds * 1e6:>12.1f}{100 * seconds / self.total:>8.1f}%"
            )
        other = self.total - sum(s for _, s in self.kernels.values())
        rows.append(
            f"{'(VM: checks, allocation)':<28}{'':>6}{other * 1e6:>12.1f}"
            f"{100 * other / self.total:>8.1f}%"
        )
        rows.append(f"{'total ' + self.name:<28}{'':>6}{self.total * 1e6:>12.1f}{100:>8.1f}%")
        return "\n".join(rows)

    __repr__ = __str__


def _arguments_error(
    name: str, params: list[str], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> VMError:
    if kwargs:
        return VMError(
            f"{name} takes its arguments by position, {name}({', '.join(params)}); "
            f"got keyword arguments {', '.join(kwargs)}"
        )
    return VMError(f"{name} takes {len(params)} arguments ({', '.join(params)}), got {len(args)}")


def _wrap_result(value: Any, device: Device) -> Any:
    if isinstance(value, np.ndarray) or is_device_array(value):
        return NDArray(value, device)
    if isinstance(value, tuple):
        return tuple(_wrap_result(v, device) for v in value)
    return value
