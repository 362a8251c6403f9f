"""Measuring candidate programs: build them in parallel, time them one at a time.

``measure(funcs, target, builder, runner)`` turns scheduled PrimFuncs (candidates of one
workload) into :class:`MeasureResult` s: seconds per run, or the reason the candidate failed.
A candidate that fails to build, crashes, hangs or computes a wrong result is recorded as
failed with its reason; it never stops the search.

* :class:`Builder` sends each candidate as TVMScript text (``func.script()``, read back with
  ``mlckit.script.from_source``) to the workers of an executor, which run ``mlckit.build``.
  numba compiles the kernel and stores the machine code in mlckit's kernel cache
  (``$MLCKIT_CACHE_DIR``), so the runner loads it in milliseconds instead of compiling again.
  Builds run in parallel: by default in a process pool with one worker per core.
* :class:`Runner` times the candidates one after another (never two timings at once, so they
  do not disturb each other), by default in one separate worker process: a kernel that hangs
  past ``timeout_s`` or crashes the process is killed with its worker, and a fresh worker takes
  the next candidate. Timing follows TVM's ``time_evaluator``: ``repeat`` results, each the
  mean of ``number`` runs (doubled until a repeat lasts ``min_repeat_ms``), on random inputs
  made once per workload from the buffers' shapes and dtypes. A candidate's time is the
  median of its repeats (:func:`median_secs`). A CPU target's ``--num-cores=N`` is the number
  of threads its parallel loops run on while they are timed (``"llvm --num-cores=1"``
  measures single-threaded programs, as the MLC course does).
* With ``reference=`` (the unscheduled PrimFunc), ``measure`` also checks each candidate's
  output once against the reference's, built for ``"llvm"`` with the default CPU schedule (as
  an untuned build runs it): a schedule that changes the result is a failure (``"run: wrong
  result ..."``).

The default pools use the ``spawn`` start method: a forked child would inherit numba's worker
threads and any CUDA context in an unusable state. As with every process pool, a *script*
(not a notebook) that tunes must keep its top-level code under ``if __name__ == "__main__":``,
since each worker imports the main module again.

Any ``concurrent.futures.Executor`` can do the work instead: ``Builder(executor=...)`` and
``Runner(executor=...)``. A ``ThreadPoolExecutor`` runs everything in this process (no start
up cost; but a hung kernel cannot be stopped, it is only recorded as timed out).

Tuning on a cluster
-------------------
A Dask cluster (the optional extra ``pip install "mlckit[distributed]"``) spreads the builds of
a large search over several machines: pass its ``distributed.Client`` itself as the executor::

    from distributed import Client

    client = Client("tcp://scheduler:8786")            # a running Dask scheduler
    with ms.Builder(executor=client, timeout_s=120) as builder:
        database = ms.tune_tir(mod, "llvm", max_trials_global=256, builder=builder)

Each candidate travels as TVMScript text (and the runner's inputs as numpy arrays); a worker
imports ``mlckit.meta_schedule.measure`` to run it, so every worker needs mlckit and numba
installed, at the same mlckit version as this process (another version may read the text
differently). Builder and Runner submit through ``client.get_executor(pure=False)``: Dask
would otherwise hand back an earlier result for the same arguments, and each timing must be
measured anew. To keep the work on some of the workers, pass
``client.get_executor(pure=False, workers=[...])`` instead of the client.

Where a candidate runs is where it is measured. A worker on another machine builds into that
machine's kernel cache (its ``$MLCKIT_CACHE_DIR`` or user cache folder), so the default local
runner compiles each kernel again before timing it: the usual arrangement, since the timings
then describe this machine, the one the tuned model will run on. A runner on the cluster
(``Runner(executor=client)``) times the candidates on the workers' machines, still one at a
time; give it a single worker (``workers=["tcp://box:40331"]``) unless they are all alike, or
the database compares timings taken on different hardware. A cluster cannot stop a hung
kernel: it is recorded as timed out and keeps its worker's thread busy.

Any other executor works the same way; Ray's, for instance, is a small subclass (each task's
``ObjectRef.future()`` is a ``concurrent.futures.Future``)::

    class RayExecutor(concurrent.futures.Executor):
        def submit(self, fn, /, *args, **kwargs):
            return ray.remote(fn).remote(*args, **kwargs).future()

    builder = Builder(executor=RayExecutor())
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from mlckit.driver import build
from mlckit.errors import MLCError
from mlckit.ir.module import IRModule
from mlckit.ir.structural import structural_hash
from mlckit.runtime.gpu import numba_cuda, simulated
from mlckit.runtime.module import time_function
from mlckit.runtime.ndarray import aligned_copy, array, cuda
from mlckit.script import from_source
from mlckit.target import Target
from mlckit.tir.expr import IntImm
from mlckit.tir.function import PrimFunc
from mlckit.tir.schedule.default_schedule import schedule_prim_func


# ------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class TensorInfo:
    """The dtype and shape of one buffer argument (TVM's ``TensorInfo``)."""

    dtype: str
    shape: tuple[int, ...]


def median_secs(run_secs: Sequence[float] | None) -> float:
    """A candidate's seconds per run: the median of its repeats; infinity when it failed.

    The median rather than the mean TVM ranks by: on a shared machine, one repeat that another
    process slowed down would bury a good program (the default schedule of a kernel once
    measured 69, 38 and 40 us, and lost to a program that ran 49 us every time)."""
    return float(np.median(run_secs)) if run_secs else float("inf")


@dataclass
class MeasureResult:
    """Seconds per run of one candidate (one entry per repeat), or why it failed."""

    run_secs: list[float] | None
    error: str | None = None

    def median_secs(self) -> float:
        return median_secs(self.run_secs)


@dataclass
class BuildResult:
    """One candidate after the builder: its TVMScript, and the build error if it failed."""

    source: str
    error: str | None = None


def args_info_of(func: PrimFunc | IRModule) -> list[TensorInfo]:
    """The buffer arguments of ``func`` (TVM's ``ArgInfo.from_prim_func``); only static shapes
    can be measured."""
    func = the_prim_func(func)
    infos = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            raise MLCError(
                f"measure: parameter {param.name_hint!r} is a scalar; only functions whose "
                "parameters are all buffers can be measured"
            )
        if not all(isinstance(dim, IntImm) for dim in buffer.shape):
            raise MLCError(
                f"measure: buffer {buffer.name!r} has the symbolic shape "
                f"({', '.join(str(d) for d in buffer.shape)}); tuning needs static shapes: "
                "specialize the function first (func.specialize or a concrete T.Buffer)"
            )
        infos.append(TensorInfo(buffer.dtype, tuple(dim.value for dim in buffer.shape)))
    return infos


class TuneError(MLCError):
    """Tuning cannot start or cannot use what it was given (no PrimFunc, no records, ...)."""


def the_prim_func(func_or_mod: PrimFunc | IRModule) -> PrimFunc:
    """The PrimFunc being tuned: ``func_or_mod`` itself, or the module's only PrimFunc (or
    its ``main``)."""
    if isinstance(func_or_mod, PrimFunc):
        return func_or_mod
    if isinstance(func_or_mod, IRModule):
        funcs = [f for f in func_or_mod.functions.values() if isinstance(f, PrimFunc)]
        if len(funcs) == 1:
            return funcs[0]
        if "main" in func_or_mod and isinstance(func_or_mod["main"], PrimFunc):
            return func_or_mod["main"]  # type: ignore[return-value]
        raise TuneError(
            f"tune_tir tunes one PrimFunc; the module holds {len(funcs)} and none is named "
            "'main' (pass one of them, or use tune_relax for a whole model)"
        )
    raise TuneError(f"expected a PrimFunc or an IRModule, not {type(func_or_mod).__name__}")


def random_inputs(args_info: Sequence[TensorInfo], seed: int = 0) -> list[np.ndarray]:
    """Arrays for ``args_info``: floats uniform in [-1, 1), small non-negative integers."""
    rng = np.random.default_rng(seed)
    arrays = []
    for info in args_info:
        dtype = np.dtype(info.dtype)
        if dtype.kind == "f":
            arrays.append(rng.uniform(-1, 1, info.shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(rng.random(info.shape) < 0.5)
        else:
            arrays.append(rng.integers(0, 8, info.shape).astype(dtype))
    return arrays


# ------------------------------------------------------------------------- worker side
# These functions run in the executor's workers; they take and return only picklable data
# and report failures as text, since an exception object may not survive the trip back.
def _describe(err: BaseException) -> str:
    return str(err) if isinstance(err, MLCError) else f"{type(err).__name__}: {err}"


def _load(source: str, target: str) -> Any:
    """Build the candidate (or load it from the kernel cache) and return its function."""
    return build(IRModule({"main": from_source(source)}), target)["main"]


def _ready() -> None:
    """Nothing to do: a worker imports this module, and with it the compiler, to run it, so the
    first timed candidate does not pay for the import."""


def _build_one(source: str, target: str) -> str | None:
    try:
        _load(source, target)
    except Exception as err:
        return _describe(err)
    return None


def _device_args(arrays: list[np.ndarray], target: str) -> tuple[list[Any], Callable[[], None]]:
    """The arguments for a kernel of ``target``, and a function that waits until it is done.
    Host arrays start on a cache line, as the VM's and ``mlckit.nd``'s do: a kernel is timed
    on the memory layout it will run on."""
    if not Target(target).is_gpu:
        return [aligned_copy(a) for a in arrays], lambda: None
    return [array(a, cuda()) for a in arrays], numba_cuda().synchronize


@contextlib.contextmanager
def _threads_of(target: str) -> Iterator[None]:
    """Run parallel loops on the target's ``--num-cores`` threads meanwhile (numba's thread
    count belongs to the calling thread, so a runner thread in the user's process changes
    only its own, and gives it back). More cores than numba started threads with are as many
    as it has."""
    cores = Target(target).attrs.get("num-cores")
    if cores is None:
        yield
        return
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(cores, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _as_host(args: list[Any]) -> list[np.ndarray]:
    return [a if isinstance(a, np.ndarray) else a.numpy() for a in args]


def _reference_outputs(source: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    reference = from_source(source)
    if not reference.attrs.get("tir.is_scheduled"):
        # As an untuned build runs it: the loops as written take minutes on a large workload
        # (a 4096^3 matmul), the default CPU schedule a second.
        reference = schedule_prim_func(reference)
    func = build(IRModule({"main": reference}), "llvm")["main"]
    args = [a.copy() for a in inputs]
    func(*args)
    return args


def _first_mismatch(
    args_info: Sequence[TensorInfo], got: list[np.ndarray], expected: list[np.ndarray]
) -> str | None:
    for index, (actual, want) in enumerate(zip(got, expected)):
        close = np.isclose(actual, want, rtol=1e-3, atol=1e-3, equal_nan=True)
        if not close.all():
            where = tuple(int(i) for i in np.argwhere(~close)[0])
            return (
                f"run: wrong result in argument {index} ({args_info[index].dtype}"
                f"{list(args_info[index].shape)}) at index {where}: {actual[where]!r}, "
                f"expected {want[where]!r}"
            )
    return None


def _run_one(
    source: str,
    target: str,
    args_info: list[TensorInfo],
    inputs: list[np.ndarray],
    expected: list[np.ndarray] | None,
    number: int,
    repeat: int,
    min_repeat_ms: float,
) -> tuple[list[float] | None, str | None]:
    try:
        func = _load(source, target)
        args, sync = _device_args(inputs, target)
        with _threads_of(target):
            func(*args)
            sync()
            if expected is not None:
                wrong = _first_mismatch(args_info, _as_host(args), expected)
                if wrong is not None:
                    return None, wrong

            def run(*call_args: Any) -> None:
                func(*call_args)
                sync()

            timing = time_function(run, number, repeat, min_repeat_ms)(*args)
    except Exception as err:
        return None, f"run: {_describe(err)}"
    return list(timing.results), None


# ------------------------------------------------------------------------- parent side
class _OwnPool:
    """A process pool started on first use, which a timeout or a crash replaces."""

    def __init__(self, max_workers: int):
        self.max_workers = max_workers
        self.pool: cf.ProcessPoolExecutor | None = None

    def get(self) -> cf.ProcessPoolExecutor:
        if self.pool is None:
            context = multiprocessing.get_context("spawn")
            self.pool = cf.ProcessPoolExecutor(self.max_workers, mp_context=context)
            # Start the workers now, so their start-up is not counted against a timeout.
            for future in [self.pool.submit(_ready) for _ in range(self.max_workers)]:
                future.result()
        return self.pool

    def kill(self) -> None:
        """Stop the workers at once (a hung kernel ignores everything else)."""
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        # ProcessPoolExecutor has no public way to stop a busy worker before Python 3.14.
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _given_executor(executor: Any, owner: str) -> Any:
    """``executor`` as something whose ``submit`` returns ``concurrent.futures.Future`` s: a
    Dask ``distributed.Client`` becomes its impure executor (without importing Dask, which is
    optional: a client exists only where it was imported)."""
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(executor, distributed.Client):
        return executor.get_executor(pure=False)
    if not callable(getattr(executor, "submit", None)):
        raise TuneError(
            f"{owner}: executor must be a concurrent.futures.Executor or a distributed.Client "
            f"(an object whose submit(fn, *args) returns a future), not {executor!r}"
        )
    return executor


class InProcessExecutor(cf.Executor):
    """Runs each call at once, in the calling process and thread: a :class:`Runner` on it
    times programs where the model that uses them runs (its threads, its caches), which a
    worker process does not show. No timeout can stop a call here, so it is meant for programs
    that already ran in a worker (``tune_relax`` measures its leaders again with it)."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> cf.Future:
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as err:
            future.set_exception(err)
        return future


class _UsesExecutor:
    """An executor given by the user, or a process pool of our own made on first use."""

    def __init__(self, executor: cf.Executor | Any | None, max_workers: int):
        self._given = None if executor is None else _given_executor(executor, type(self).__name__)
        self._own = _OwnPool(max_workers) if self._given is None else None

    def _executor(self) -> cf.Executor:
        return self._given if self._own is None else self._own.get()

    @property
    def is_local(self) -> bool:
        """Whether it works on worker processes of its own on this machine (no executor was
        given: a cluster's, say)."""
        return self._own is not None

    def _replace_pool(self) -> None:
        """After a timeout or a dead worker: stop our own pool (a given one is the user's)."""
        if self._own is not None:
            self._own.kill()

    def shutdown(self) -> None:
        """Stop our own worker processes (a given executor is left alone)."""
        if self._own is not None:
            self._own.shutdown()

    def __enter__(self) -> _UsesExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class Builder(_UsesExecutor):
    """Builds candidates in parallel on ``executor``, a ``concurrent.futures.Executor`` or a
    ``distributed.Client`` (default: a process pool of our own, one process per core).

    A build that takes longer than ``timeout_s`` seconds, raises, or kills its worker is a
    :class:`BuildResult` with an ``error`` starting ``"build: "``.
    """

    def __init__(
        self,
        executor: cf.Executor | Any | None = None,
        timeout_s: float = 60,
        max_workers: int | None = None,
    ):
        super().__init__(executor, max_workers or os.cpu_count() or 1)
        self.timeout_s = timeout_s

    def build(self, funcs: Sequence[PrimFunc | IRModule], target: Any) -> list[BuildResult]:
        target_text = str(Target(target))
        sources = [the_prim_func(f).script() for f in funcs]
        executor = self._executor()
        futures = [executor.submit(_build_one, s, target_text) for s in sources]
        results, broken = [], False
        # Every build gets at least timeout_s: the later ones have been running meanwhile.
        for source, future in zip(sources, futures):
            try:
                error = future.result(timeout=self.timeout_s)
            except cf.TimeoutError:
                error, broken = f"timed out after {self.timeout_s:g} s", True
            except Exception as err:  # a worker that died takes its pending builds with it
                error, broken = f"the worker failed: {_describe(err)}", True
            results.append(BuildResult(source, None if error is None else f"build: {error}"))
        if broken:
            self._replace_pool()
        return results


class Runner(_UsesExecutor):
    """Times built candidates one at a time on ``executor``, a ``concurrent.futures.Executor``
    or a ``distributed.Client`` (default: one worker process of our own).

    ``number``, ``repeat`` and ``min_repeat_ms`` are those of TVM's ``time_evaluator``. A
    candidate that takes longer than ``timeout_s`` seconds (load, check and timing together),
    raises, or kills its worker is a :class:`MeasureResult` with an ``error`` starting
    ``"run: "``.
    """

    def __init__(
        self,
        executor: cf.Executor | Any | None = None,
        timeout_s: float = 30,
        number: int = 3,
        repeat: int = 3,
        min_repeat_ms: float = 20,
    ):
        if number < 1 or repeat < 1:
            raise MLCError("Runner: number and repeat must be at least 1")
        super().__init__(executor, 1)
        self.timeout_s = timeout_s
        self.number, self.repeat, self.min_repeat_ms = number, repeat, min_repeat_ms
        # Inputs and reference outputs, made once per workload.
        self._inputs: dict[tuple[TensorInfo, ...], list[np.ndarray]] = {}
        self._expected: dict[tuple[int, tuple[TensorInfo, ...]], list[np.ndarray]] = {}

    def inputs(self, args_info: Sequence[TensorInfo]) -> list[np.ndarray]:
        key = tuple(args_info)
        if key not in self._inputs:
            self._inputs[key] = random_inputs(args_info)
        return self._inputs[key]

    def expected_outputs(
        self, reference: PrimFunc | IRModule, args_info: Sequence[TensorInfo]
    ) -> list[np.ndarray]:
        """Every argument after running the unscheduled ``reference`` (for ``"llvm"``)."""
        func = the_prim_func(reference)
        key = (structural_hash(func), tuple(args_info))
        if key not in self._expected:
            future = self._executor().submit(
                _reference_outputs, func.script(), self.inputs(args_info)
            )
            try:
                self._expected[key] = future.result(timeout=self.timeout_s)
            except Exception as err:
                if isinstance(err, cf.TimeoutError):
                    self._replace_pool()
                raise MLCError(
                    f"measure: the reference program could not be run: {_describe(err)}"
                ) from None
        return self._expected[key]

    def run(
        self,
        builds: Sequence[BuildResult],
        target: Any,
        args_info: Sequence[TensorInfo],
        reference: PrimFunc | IRModule | None = None,
    ) -> list[MeasureResult]:
        target_text = str(Target(target))
        number, repeat, min_repeat_ms = self.number, self.repeat, self.min_repeat_ms
        if timed_in_simulator(target):
            number, repeat, min_repeat_ms = 1, 1, 0  # one run checks the candidate
        args_info = list(args_info)
        inputs = self.inputs(args_info)
        expected = None if reference is None else self.expected_outputs(reference, args_info)
        results = []
        for built in builds:
            if built.error is not None:
                results.append(MeasureResult(None, built.error))
                continue
            future = self._executor().submit(
                _run_one,
                built.source,
                target_text,
                args_info,
                inputs,
                expected,
                number,
                repeat,
                min_repeat_ms,
            )
            try:
                run_secs, error = future.result(timeout=self.timeout_s)
            except cf.TimeoutError:
                self._replace_pool()
                run_secs, error = None, f"run: timed out after {self.timeout_s:g} s"
            except Exception as err:  # the worker died: a crash in the kernel
                self._replace_pool()
                run_secs, error = None, f"run: the worker failed: {_describe(err)}"
            results.append(MeasureResult(run_secs, error))
        return results


def timed_in_simulator(target: Any) -> bool:
    """Whether ``target``'s kernels run in numba's CUDA simulator, where a timing measures
    Python threads standing in for GPU threads and says nothing about a schedule's speed: each
    candidate then runs once, to check its output, and nothing is measured again."""
    return Target(target).is_gpu and simulated()


def measure(
    funcs: Sequence[PrimFunc | IRModule],
    target: Any,
    builder: Builder,
    runner: Runner,
    args_info: Sequence[TensorInfo] | None = None,
    *,
    reference: PrimFunc | IRModule | None = None,
) -> list[MeasureResult]:
    """Build ``funcs`` (schedules of one workload) in parallel, then time them one by one.

    ``args_info`` defaults to the buffers of the first function. With ``reference`` (the
    unscheduled function), each candidate's output is checked against it once.
    """
    if not funcs:
        return []
    if args_info is None:
        args_info = args_info_of(funcs[0])
    builds = builder.build(funcs, target)
    return runner.run(builds, target, args_info, reference)


__all__ = [
    "BuildResult",
    "Builder",
    "InProcessExecutor",
    "MeasureResult",
    "Runner",
    "TensorInfo",
    "args_info_of",
    "measure",
    "median_secs",
    "random_inputs",
    "timed_in_simulator",
]
