"""Runtime modules: compiled functions looked up by name, with their source and a timer, and
the checks every compiled function's arguments go through, on every target
(:func:`check_arguments`, against one :class:`ParamSpec` per parameter)."""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.errors import MLCError, VMError

from .export import export_library
from .gpu import is_device_array, to_device
from .ndarray import Device, NDArray


@dataclass(frozen=True)
class BenchmarkResult:
    """Seconds per run, one entry per repeat (TVM's ``time_evaluator`` result)."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __str__(self) -> str:
        return (
            f"Execution time summary:\n mean (ms)   median (ms)    max (ms)     min (ms)     "
            f"std (ms)\n {self.mean * 1e3:9.4f}   {self.median * 1e3:9.4f}   "
            f"{self.max * 1e3:9.4f}   {self.min * 1e3:9.4f}   {self.std * 1e3:9.4f}"
        )


def time_function(
    func: Callable[..., Any], number: int = 10, repeat: int = 1, min_repeat_ms: float = 0
) -> Callable[..., BenchmarkResult]:
    """Wrap ``func`` so that calling it times ``number`` runs per repeat, like TVM's evaluator."""
    if number < 1 or repeat < 1:
        raise MLCError("time_evaluator: number and repeat must be at least 1")

    def evaluator(*args: Any) -> BenchmarkResult:
        func(*args)  # warm up: the first call may compile or allocate
        results = []
        for _ in range(repeat):
            runs = number
            while True:
                start = time.perf_counter()
                for _ in range(runs):
                    func(*args)
                elapsed = time.perf_counter() - start
                if elapsed * 1e3 >= min_repeat_ms:
                    break
                runs *= 2
            results.append(elapsed / runs)
        return BenchmarkResult(tuple(results))

    return evaluator


@dataclass(frozen=True)
class ParamSpec:
    """What one parameter of a compiled function takes: a tensor of ``dtype`` with ``ndim``
    dims (``shape``: each an int, or the symbolic dim as written), or, when ``ndim`` is None, a
    scalar of ``dtype``. ``written``: the function stores into it."""

    name: str
    dtype: str
    ndim: int | None = None
    shape: tuple[int | str, ...] = ()
    written: bool = False

    @functools.cached_property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @functools.cached_property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape, when every dim is static."""
        return self.shape if all(isinstance(size, int) for size in self.shape) else None  # type: ignore[return-value]

    def fits(self, shape: tuple[int, ...]) -> bool:
        """Whether ``shape`` has the static dims (the kernel checks the symbolic ones)."""
        if self.static_shape is not None:
            return shape == self.static_shape
        return all(not isinstance(size, int) or size == got for size, got in zip(self.shape, shape))


def check_arguments(
    name: str, params: Sequence[ParamSpec], args: Sequence[Any], on_gpu: bool = False
) -> list[Any]:
    """The arguments of the compiled function ``name`` as its code takes them, checked against
    its parameters, the same way for every target: the kind, rank, dtype and static dims of
    each, an output that is C-contiguous, writable and overlaps no other argument (kernels
    assume ``tir.noalias``). NDArrays are unwrapped and strided inputs copied; symbolic dims
    are checked by the kernel itself, which knows how they relate. ``on_gpu``: host inputs are
    copied to the GPU here (numba would copy every host array back after the launch, into a
    read-only one too)."""
    if len(args) != len(params):
        names = ", ".join(p.name for p in params)
        raise VMError(f"{name} takes {len(params)} arguments ({names}), got {len(args)}")
    out = [
        _check_argument(name, index, spec, arg, on_gpu)
        for index, (spec, arg) in enumerate(zip(params, args))
    ]
    for index, spec in enumerate(params):
        if spec.ndim is None or not spec.written:
            continue
        for other, arg in enumerate(out):
            if other != index and params[other].ndim is not None and _overlap(out[index], arg):
                raise VMError(
                    f"{name}: argument {_label(spec, index)} receives a result but shares memory "
                    f"with argument {_label(params[other], other)}; a compiled function's buffers "
                    "must not overlap (pass a separate output array)"
                )
    return out


def _check_argument(name: str, index: int, spec: ParamSpec, arg: Any, on_gpu: bool) -> Any:
    data = arg._data if isinstance(arg, NDArray) else arg
    # The common case first, in one test (the checks below, which say what is wrong, would
    # all pass): a kernel is often called in a timing loop.
    if (
        type(data) is np.ndarray
        and not on_gpu
        and data.ndim == spec.ndim
        and data.dtype == spec.np_dtype
        and data.flags.c_contiguous
        and (data.flags.writeable or not spec.written)
        and spec.fits(data.shape)
    ):
        return data
    where = f"{name}: argument {_label(spec, index)}"
    if spec.ndim is None:
        problem = scalar_problem(arg, spec.dtype)
        if problem is not None:
            raise VMError(f"{where} {problem}")
        return arg
    if not hasattr(data, "dtype") or not (isinstance(data, np.ndarray) or is_device_array(data)):
        raise VMError(
            f"{where} expects {a(spec.dtype)} tensor, got {describe(arg)}{convert_hint(arg)}"
        )
    if data.ndim != spec.ndim:
        raise VMError(f"{where} expects a tensor of rank {spec.ndim}, got {describe(arg)}")
    if data.dtype != spec.dtype:
        raise VMError(
            f"{where} expects dtype {spec.dtype}, got {describe(arg)}; convert it with "
            f".astype({spec.dtype!r})"
        )
    if not spec.fits(data.shape):
        expected = ", ".join(map(str, spec.shape)) + ("," if len(spec.shape) == 1 else "")
        raise VMError(f"{where} expects shape ({expected}), got {describe(arg)}")
    if not isinstance(data, np.ndarray):
        return data  # a device array: contiguous and writable by construction
    if spec.written:
        if not data.flags.c_contiguous:
            raise VMError(
                f"{where} receives a result but is not C-contiguous (a view with strides); "
                "pass np.ascontiguousarray(...) and read the result from that array"
            )
        if not data.flags.writeable:
            raise VMError(
                f"{where} receives a result but its array is read-only; pass a writable "
                "array (e.g. np.empty_like(...))"
            )
        return data
    data = data if data.flags.c_contiguous else np.ascontiguousarray(data)
    return to_device(data) if on_gpu else data


def _overlap(a: Any, b: Any) -> bool:
    """Whether two arrays (numpy or device) may share memory."""
    if type(a) is np.ndarray and type(b) is np.ndarray:
        return np.may_share_memory(a, b)
    host_a, host_b = _host_array(a), _host_array(b)
    if host_a is not None and host_b is not None:
        return np.may_share_memory(host_a, host_b)
    span_a, span_b = _device_span(a), _device_span(b)
    return a is b or (
        span_a is not None
        and span_b is not None
        and span_a[0] < span_b[1]
        and span_b[0] < span_a[1]
    )


def _host_array(array: Any) -> np.ndarray | None:
    if isinstance(array, np.ndarray):
        return array
    simulated = getattr(array, "_ary", None)  # numba's CUDA simulator keeps a numpy array
    return simulated if isinstance(simulated, np.ndarray) else None


def _device_span(array: Any) -> tuple[int, int] | None:
    """The device addresses a GPU array's elements lie between."""
    interface = getattr(array, "__cuda_array_interface__", None)
    if interface is None:
        return None
    start, shape, strides = interface["data"][0], interface["shape"], interface.get("strides")
    itemsize = np.dtype(interface["typestr"]).itemsize
    if 0 in shape:
        return start, start
    if strides is None:  # C-contiguous
        return start, start + math.prod(shape) * itemsize
    return start, start + sum((n - 1) * s for n, s in zip(shape, strides)) + itemsize


def _label(spec: ParamSpec, index: int) -> str:
    return f"{index} ({spec.name})"


def scalar_problem(value: Any, dtype: str) -> str | None:
    """What keeps ``value`` from being a scalar of ``dtype``, or None: an integer dtype takes
    an integer in its range, a float dtype any real number, "bool" only a bool."""
    expected = f"expects {a(dtype)} scalar, got {describe(value)}"
    if isinstance(value, (bool, np.bool_)):
        return None if dtype == "bool" else expected
    if dtype.startswith(("int", "uint")):
        if not isinstance(value, (int, np.integer)):
            return expected
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            return f"{expected}, outside the range of {dtype} ({info.min} to {info.max})"
        return None
    real = isinstance(value, (int, float, np.integer, np.floating))
    return None if real and dtype != "bool" else expected


def describe(value: Any) -> str:
    """What a value is, for an error message: ``a float64 tensor of shape (3, 4)``, ``a list
    of 3 floats``, ``a torch.Tensor of shape (2, 3) and dtype torch.float32``, ``None``."""
    if value is None:
        return "None"
    if isinstance(value, NDArray):
        value = value._data
    if isinstance(value, np.ndarray) or is_device_array(value):
        return f"{a(str(value.dtype))} tensor of shape {tuple(value.shape)}"
    kind = type_name(value)
    if isinstance(value, (list, tuple)):
        kinds = sorted({type_name(v) for v in value})
        if len(kinds) == 1:
            return f"a {kind} of {len(value)} {kinds[0]}{'' if len(value) == 1 else 's'}"
        return f"a {kind} of {len(value)} values" + (f" ({', '.join(kinds)})" if kinds else "")
    if isinstance(value, (int, float, complex, np.generic)):
        return f"{a(kind)} ({value})"
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # another library's tensor
        return f"{a(kind)} of shape {tuple(value.shape)} and dtype {value.dtype}"
    return a(kind)


def convert_hint(value: Any) -> str:
    """How to make ``value`` a tensor, said after an error that expected one."""
    if type_name(value) == "torch.Tensor":
        return "; pass t.numpy() for a torch tensor t (or mlckit.nd.array(t.numpy()))"
    if isinstance(value, (list, tuple, int, float, np.generic)) or hasattr(value, "__array__"):
        return "; make it one with mlckit.nd.array(...) (or np.asarray(..., dtype=...))"
    return ""


def type_name(value: Any) -> str:
    """``float``, ``list``, ``torch.Tensor``, ``numpy.float32``: the full name of a value's type."""
    cls = type(value)
    module = cls.__module__.split(".")[0]
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def a(word: str) -> str:
    """``word`` with its indefinite article: "a float32", "an int32"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def division_by_zero(name: str) -> VMError:
    """The error for an integer division by zero while ``name`` ran: a divisor read from the
    data (both targets raise ZeroDivisionError there, as Python and numba do)."""
    return VMError(f"{name}: integer division by zero (a divisor computed from the data is 0)")


class PackedFunc:
    """A compiled function callable with NDArrays, numpy arrays or numbers, checked against
    its parameters (:func:`check_arguments`) before it runs."""

    def __init__(
        self,
        name: str,
        func: Callable[..., Any],
        params: Sequence[ParamSpec],
        on_gpu: bool = False,
    ):
        self.name = name
        self.func = func
        self.params = tuple(params)
        self.on_gpu = on_gpu

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs:
            names = ", ".join(p.name for p in self.params)
            raise VMError(
                f"{self.name} takes its arguments by position, {self.name}({names}); got "
                f"keyword arguments {', '.join(kwargs)}"
            )
        checked = check_arguments(self.name, self.params, args, self.on_gpu)
        try:
            return self.func(*checked)
        except ZeroDivisionError:
            raise division_by_zero(self.name) from None

    def __repr__(self) -> str:
        return f"<PackedFunc {self.name}>"


class Module:
    """What ``mlckit.build`` returns: ``lib["name"](*args)``, ``lib.source("name")``.

    ``aliases`` are other names of functions: a function is named by its ``global_symbol``,
    as in TVM, and also answers to the name it had in the IRModule (``lib["main"]`` for the
    ``main`` of ``sch.mod`` whose ``global_symbol`` is ``"scale_transpose"``)."""

    def __init__(
        self,
        functions: dict[str, Callable[..., Any]],
        sources: dict[str, str],
        target: Any,
        params: dict[str, tuple[ParamSpec, ...]],
        aliases: dict[str, str] | None = None,
    ):
        self._functions = functions
        self._sources = sources
        self.target = target
        # What each function's parameters take, to check its arguments against.
        self._params = params
        self._aliases = aliases or {}

    def __getitem__(self, name: str) -> PackedFunc:
        return self.get_function(name)

    def __contains__(self, name: object) -> bool:
        return name in self._functions or name in self._aliases

    def _name_of(self, name: str) -> str:
        if name not in self._functions:
            name = self._aliases.get(name, name)
        if name not in self._functions:
            known = ", ".join(sorted(self._functions)) or "none"
            raise MLCError(f"the module has no function {name!r} (functions: {known})")
        return name

    def get_function(self, name: str) -> PackedFunc:
        name = self._name_of(name)
        return PackedFunc(name, self._functions[name], self._params[name], self.target.is_gpu)

    def function_names(self) -> list[str]:
        return list(self._functions)

    @property
    def entry_name(self) -> str:
        """The function that calling the module runs (TVM's entry function): the only one, or
        ``main``."""
        names = self.function_names()
        if len(names) == 1:
            return names[0]
        if "main" in names:
            return "main"
        raise MLCError(
            f"the module has {len(names)} functions and none is named 'main', so it has no entry "
            f"function to call; call one by name: lib[name](...) with name in {sorted(names)}"
        )

    def __call__(self, *args: Any) -> Any:
        return self.get_function(self.entry_name)(*args)

    def source(self, name: str | None = None) -> str:
        """The generated Python of one function, or of all of them."""
        if name is None:
            return "\n\n".join(self._sources.values())
        return self._sources[self._name_of(name)]

    def get_source(self, fmt: str = "") -> str:
        return self.source()

    @property
    def type_key(self) -> str:
        return self.target.kind.name

    @property
    def imported_modules(self) -> list[Module]:
        """TVM's host module imports one device module per GPU target, whose ``get_source()``
        shows the kernels (the course prints a CUDA kernel so). mlckit generates one Python
        module for a GPU build, its ``@cuda.jit`` kernels next to the host functions that launch
        them, so the device module is this module; a CPU build imports none."""
        return [self] if self.target.is_gpu else []

    def time_evaluator(
        self,
        name: str,
        dev: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
    ) -> Callable[..., BenchmarkResult]:
        return time_function(self.get_function(name), number, repeat, min_repeat_ms)

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the module to one file that ``mlckit.runtime.load_module(path)`` loads in
        another process without compiling its PrimFuncs again (see mlckit.runtime.export)."""
        export_library(self, path)

    def __repr__(self) -> str:
        return f"<mlckit.runtime.Module {self.target} functions={self.function_names()}>"
