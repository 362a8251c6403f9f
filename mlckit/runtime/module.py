"""Runtime modules: compiled functions looked up by name, with their source and a timer."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlckit.errors import MLCError, VMError

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


def as_numpy_args(name: str, args: Iterable[Any], written: Sequence[int] = ()) -> list[Any]:
    """Unwrap NDArrays to the numpy arrays compiled kernels take (no copy). The arguments at
    ``written`` are the ones the function stores into: they must be C-contiguous (a copy would
    take the result) and overlap no other argument (kernels assume ``tir.noalias``)."""
    out = []
    for index, arg in enumerate(args):
        if isinstance(arg, NDArray):
            out.append(arg._data)
        elif isinstance(arg, np.ndarray):
            if not arg.flags.c_contiguous and index in written:
                raise VMError(
                    f"{name}: argument {index} receives a result but is not C-contiguous (a "
                    "view with strides); pass np.ascontiguousarray(...) and read the result "
                    "from that array"
                )
            out.append(arg if arg.flags.c_contiguous else np.ascontiguousarray(arg))
        elif isinstance(arg, (int, float, np.number)):
            out.append(arg)
        else:
            raise VMError(
                f"{name}: argument {index} is a {type(arg).__name__}; pass NDArrays, "
                "numpy arrays or numbers"
            )
    for index in written:
        result = out[index] if index < len(out) else None
        if not isinstance(result, np.ndarray):
            continue
        for other, arg in enumerate(out):
            if other != index and isinstance(arg, np.ndarray) and np.may_share_memory(result, arg):
                raise VMError(
                    f"{name}: argument {index} receives a result but shares memory with "
                    f"argument {other}; a compiled function's buffers must not overlap (pass a "
                    "separate output array)"
                )
    return out


class PackedFunc:
    """A compiled function callable with NDArrays, numpy arrays or numbers. ``written``: the
    indices of the arguments it stores into."""

    def __init__(self, name: str, func: Callable[..., Any], written: Sequence[int] = ()):
        self.name = name
        self.func = func
        self.written = tuple(written)

    def __call__(self, *args: Any) -> Any:
        try:
            return self.func(*as_numpy_args(self.name, args, self.written))
        except TypeError as err:
            # numba's dispatcher refuses arguments whose dtype or rank differ from the
            # compiled signature; say so in terms of the function that was called.
            signatures = getattr(self.func, "signatures", None)
            if not signatures or "No matching definition" not in str(err):
                raise
            expected = ", ".join(str(t) for t in signatures[0])
            raise VMError(
                f"{self.name}: {str(err).split(' for ', 1)[-1]}; it was compiled for "
                f"({expected}): check each argument's dtype and number of dimensions"
            ) from None

    def __repr__(self) -> str:
        return f"<PackedFunc {self.name}>"


class Module:
    """What ``mlckit.build`` returns: ``lib["name"](*args)``, ``lib.source("name")``."""

    def __init__(
        self,
        functions: dict[str, Callable[..., Any]],
        sources: dict[str, str],
        target: Any,
        written: dict[str, tuple[int, ...]] | None = None,
    ):
        self._functions = functions
        self._sources = sources
        self.target = target
        # For each function, the indices of the arguments it stores into.
        self._written = written or {}

    def __getitem__(self, name: str) -> PackedFunc:
        return self.get_function(name)

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def get_function(self, name: str) -> PackedFunc:
        func = self._functions.get(name)
        if func is None:
            known = ", ".join(sorted(self._functions)) or "none"
            raise MLCError(f"the module has no function {name!r} (functions: {known})")
        return PackedFunc(name, func, self._written.get(name, ()))

    def function_names(self) -> list[str]:
        return list(self._functions)

    def source(self, name: str | None = None) -> str:
        """The generated Python of one function, or of all of them."""
        if name is None:
            return "\n\n".join(self._sources.values())
        if name not in self._sources:
            known = ", ".join(sorted(self._sources)) or "none"
            raise MLCError(f"the module has no function {name!r} (functions: {known})")
        return self._sources[name]

    def get_source(self, fmt: str = "") -> str:
        return self.source()

    def time_evaluator(
        self,
        name: str,
        dev: Device | None = None,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: float = 0,
    ) -> Callable[..., BenchmarkResult]:
        return time_function(self.get_function(name), number, repeat, min_repeat_ms)

    def __repr__(self) -> str:
        return f"<mlckit.runtime.Module {self.target} functions={self.function_names()}>"
