"""Compile generated kernel source for a target, with an on-disk cache.

Each PrimFunc becomes one small Python module: imports, any helpers, and the function. For
the ``llvm`` target the function carries ``@njit("<signature>", cache=True)``: the explicit
signature compiles it when the module is imported (so typing problems surface at build time),
and because the source is a real file named by its hash, numba's own cache lets a later
process load the machine code instead of compiling it again.

A cache directory that cannot be used (read-only, a file in its place, a file in it that cannot
be replaced) costs the cache, not the build: the process warns once and compiles its kernels
in a temporary directory instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import linecache
import os
import sys
import tempfile
import types
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlckit.errors import BuildError
from mlckit.ir.instrument import build_step
from mlckit.ir.module import IRModule
from mlckit.ir.name_supply import sanitize
from mlckit.ir.transform import Pass
from mlckit.runtime.gpu import simulated
from mlckit.runtime.module import ParamSpec
from mlckit.target import Target
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.buffer import ACCESS_PTR
from mlckit.tir.function import PrimFunc
from mlckit.tir.stmt_functor import post_order_visit
from mlckit.tir.transform import lower_prim_func

from .codegen import (
    HELPER_SOURCE,
    NUMBA_HELPER_SOURCE,
    GeneratedFunction,
    comment,
    generate_function,
)
from .cuda_codegen import CudaCodegen
from .extern import IMPORT_ANNOTATION, compile_library
from .llvm_options import kernel_compilation
from .threads import start_kernel_threads

CODEGEN_VERSION = "6"

_NUMBA_DTYPES = {"bool": "boolean"}


@dataclass
class Kernel:
    """A compiled PrimFunc: call it with numpy arrays in destination-passing style."""

    name: str
    source: str
    target: Target
    func: Callable[..., Any]
    # None for a kernel loaded from an exported library (mlckit.runtime.load_module).
    generated: GeneratedFunction | None
    cache_path: Path | None = None
    # What each parameter takes: arguments are checked against it (runtime.module).
    signature: tuple[ParamSpec, ...] = ()

    def __call__(self, *args: Any) -> Any:
        return self.func(*args)


def cache_dir() -> Path:
    """Where compiled kernels live: ``$MLCKIT_CACHE_DIR``, else the user cache folder."""
    override = os.environ.get("MLCKIT_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mlckit"


def extern_library(code: str, cc: str | None = None, options: tuple[str, ...] = ()) -> Path:
    """The shared library compiled from an extern's C++ source, in the kernel cache."""
    return compile_library(code, cache_dir() / "externs", cc, options)


def attached_sources(func: PrimFunc) -> list[str]:
    """The source code attached to ``func``'s loops with ``"pragma_import_llvm"``."""
    sources: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, S.For) and node.annotations:
            code = node.annotations.get(IMPORT_ANNOTATION)
            if code is None:
                return
            if not isinstance(code, str):
                raise BuildError(
                    f'loop {node.loop_var.name_hint!r}: "{IMPORT_ANNOTATION}" takes source code '
                    f"(mlckit.contrib.clang.create_llvm(code)), got {type(code).__name__}"
                )
            if code not in sources:
                sources.append(code)

    post_order_visit(func.body, visit)
    return sources


def _numba_signature(func: PrimFunc) -> str:
    parts = []
    for spec in kernel_signature(func):
        elem = _NUMBA_DTYPES.get(spec.dtype, spec.dtype)
        if spec.ndim is None:
            parts.append(elem)
        else:
            # An input is typed read-only: numba then takes read-only arrays (np.frombuffer,
            # a broadcast view) as well as writable ones, which convert to read-only for free.
            readonly = "" if spec.written else ", readonly=True"
            parts.append(f"Array({elem}, {spec.ndim}, 'C'{readonly})")  # in double quotes
    return f"void({', '.join(parts)})"


@dataclass(frozen=True)
class _Codegen:
    """How a target kind's kernels are written and loaded (``TargetKind.codegen`` names it)."""

    # The module's imports after ``import numpy as np``.
    imports: tuple[str, ...]
    # The decorator of each helper function (truncdiv, ...), when it is compiled.
    helper_decorator: str | None
    # Whether a loop scheduled ``parallel`` becomes numba's ``prange`` (threads on the CPU);
    # elsewhere it runs in order (CPython, or inside one GPU thread).
    parallel_loops: bool
    # Whether the module is executed in memory instead of imported from the kernel cache.
    in_memory: bool


_CODEGENS = {
    "numba": _Codegen(("from numba import njit, prange",), '@njit(inline="always")', True, False),
    "numba_cuda": _Codegen(
        (
            "",
            "from mlckit.runtime.gpu import numba_cuda",
            "",
            "cuda = numba_cuda()  # numba.cuda (its simulator on a machine without a GPU)",
        ),
        "@cuda.jit(device=True)",
        False,
        False,
    ),
    "python": _Codegen(("prange = range",), None, False, True),
}


def kernel_source(func: PrimFunc, name: str, target: Target) -> tuple[str, GeneratedFunction]:
    """The complete module text of one kernel for ``target`` (after the TIR lowering passes)."""
    codegen = target.kind.codegen
    style = _CODEGENS[codegen]
    lowered = lower_prim_func(func)
    if codegen == "numba_cuda":
        generated = CudaCodegen(lowered, name, target.max_num_threads).generate()
    else:
        libraries = [extern_library(code) for code in attached_sources(lowered)]
        generated = generate_function(
            lowered, name, parallel=style.parallel_loops, libraries=libraries
        )
    lines = [
        comment(f"mlckit kernel {name!r} for target {target.kind.name}"),
        "import math",
        "",
        "import numpy as np",
        *style.imports,
    ]
    noalias = codegen == "numba" and bool(func.attrs.get("tir.noalias"))
    own_imports = []
    if noalias:
        own_imports.append("from mlckit.backend.noalias import NoAliasCompiler")
    if generated.checks_shapes:
        own_imports.append("from mlckit.errors import VMError")
    binders = sorted({extern.function.binder for extern in generated.externs.values()})
    if binders:
        own_imports.append(f"from mlckit.backend.extern import {', '.join(binders)}")
    if own_imports:
        lines += ["", *sorted(own_imports)]
    lines.append("")
    compiled = codegen == "numba"
    for ident, extern in generated.externs.items():
        function = extern.function
        lines.append(comment(f"extern {function.name}: {function.fingerprint()}"))
        lines.append(f"{ident} = {function.binding(extern.dtype, extern.arg_dtypes, compiled)}")
    if generated.externs:
        lines.append("")
    # numba's simulator of a GPU runs the kernels under CPython.
    numba_compiles = codegen == "numba" or (codegen == "numba_cuda" and not simulated())
    for helper in sorted(generated.helpers):
        if style.helper_decorator:
            # numba: inlined where it is called, compiled (and cached) with the kernel.
            lines.append(style.helper_decorator)
        helpers = NUMBA_HELPER_SOURCE if numba_compiles else {}
        lines.append(helpers.get(helper, HELPER_SOURCE[helper]))
    if codegen == "numba":
        lines.append(f"@njit({_njit_options(func, generated, noalias)})")
    lines.append(generated.source)
    return "\n".join(lines), generated


def _njit_options(func: PrimFunc, generated: GeneratedFunction, noalias: bool) -> str:
    # numba cannot cache a kernel that calls a C function (its address changes from process
    # to process) and would not notice a Python extern changing: those compile afresh.
    cache = not generated.externs
    options = [f'"{_numba_signature(func)}"', f"cache={cache}"]
    if generated.uses_prange:
        options.append("parallel=True")
    if wants_fastmath(func):
        # Reordering float additions is what vectorizes a reduction; NaN and infinity keep
        # their IEEE meaning (no "nnan"/"ninf").
        options.append('fastmath={"reassoc", "contract", "nsz", "arcp"}')
    else:
        # A multiply and the add that uses it may become one fused multiply-add (one
        # rounding instead of two), as in TVM, whose LLVM target sets FPOpFusion::Fast.
        options.append('fastmath={"contract"}')
    if noalias:
        # tir.noalias: the buffers never overlap, so LLVM may keep values in registers and
        # vectorize loops outside prange too (see mlckit/backend/noalias.py).
        options.append("pipeline_class=NoAliasCompiler")
    return ", ".join(options)


def wants_fastmath(func: PrimFunc) -> bool:
    """Whether a block of ``func`` is annotated ``"fastmath"`` (``sch.annotate(block,
    "fastmath", True)``): it allows its float additions to be reordered. numba's option covers a
    whole function, so the kernel is compiled with it."""
    found = False

    def visit(node: object) -> None:
        nonlocal found
        if isinstance(node, S.Block) and node.annotations.get("fastmath"):
            found = True

    post_order_visit(func.body, visit)
    return found


def kernel_signature(func: PrimFunc) -> tuple[ParamSpec, ...]:
    """What each parameter of ``func`` takes, and whether ``func`` stores into it."""
    stored: set[int] = set()

    def visit(node: object) -> None:
        if isinstance(node, S.BufferStore):
            stored.add(id(node.buffer.data))
        elif isinstance(node, E.Call) and node.op is ACCESS_PTR and node.args[3].value & 2:
            stored.add(id(node.args[0]))  # an extern writes it
        elif isinstance(node, S.Block):
            # Writing a matched region writes its source (blocks come after their bodies).
            for match in node.match_buffers:
                if id(match.buffer.data) in stored:
                    stored.add(id(match.source.buffer.data))

    post_order_visit(func.body, visit)
    specs = []
    for param in func.params:
        buffer = func.buffer_map.get(param)
        if buffer is None:
            specs.append(ParamSpec(param.name_hint, param.dtype))
            continue
        shape = tuple(
            d.value if isinstance(d, E.IntImm) else getattr(d, "name_hint", "?")
            for d in buffer.shape
        )
        specs.append(
            ParamSpec(buffer.name, buffer.dtype, len(shape), shape, id(buffer.data) in stored)
        )
    return tuple(specs)


def compile_kernel(func: PrimFunc, name: str, target: Target) -> Kernel:
    """Generate ``func``'s kernel for ``target`` and load it: compiled by numba (through the
    on-disk cache) or, for the ``python`` target, executed in memory."""
    with build_step("build.kernel_source"):
        source, generated = kernel_source(func, name, target)
    compiled, path = load_kernel_source(source, generated.name, name, target)
    return Kernel(name, source, target, compiled, generated, path, kernel_signature(func))


def load_kernel_source(
    source: str, function: str, name: str, target: Target
) -> tuple[Callable[..., Any], Path | None]:
    """The function ``function`` of the kernel module ``source`` (what :func:`kernel_source`
    wrote for ``target``), and the file it was imported from: compiled by numba through the
    on-disk cache, or, for the ``python`` target, executed in memory (no file). ``name`` labels
    errors. An exported library's kernels load through here too, without their PrimFuncs."""
    if _CODEGENS[target.kind.codegen].in_memory:
        return _exec_in_memory(source, function), None
    numba_cpu = target.kind.codegen == "numba"
    if numba_cpu:
        start_kernel_threads()
    compiling = kernel_compilation() if numba_cpu else contextlib.nullcontext()
    with build_step(f"build.compile ({target.kind.codegen})"), compiling:
        directory = cache_dir() / "kernels"
        try:
            path = _cached_file(directory, source, target)
            module = _import_kernel_module(path, name)
        except OSError as err:
            try:
                path = _cached_file(_temporary_cache(directory, err), source, target)
                module = _import_kernel_module(path, name)
            except OSError as again:
                raise BuildError(f"cannot compile kernel {name!r}: {again}") from None
    return getattr(module, function), path


def build_kernels(
    mod: IRModule,
    target: Target,
    tir_pipeline: str | Pass | None = "default",
    names: Mapping[str, str] | None = None,
) -> dict[str, Kernel]:
    """Compile every PrimFunc of ``mod`` for ``target``: the one build of kernels that
    ``mlckit.build``, ``relax.build`` and FoldConstant share.

    The TIR pipeline runs first: ``"default"`` (or None) is the lowering every kernel goes
    through; a Pass (``tir.transform.DefaultGPUSchedule()``, a Sequential of your own) runs on
    the module before it. ``names`` gives the Python name of each function (by its name in
    ``mod``); by default its name, made a valid identifier. Returns the kernels by name in
    ``mod``.
    """
    if isinstance(tir_pipeline, Pass):
        mod = tir_pipeline(mod)
    elif tir_pipeline not in (None, "default"):
        raise BuildError(
            f"tir_pipeline must be 'default' or a Pass (for example "
            f"tir.transform.DefaultGPUSchedule()), not {tir_pipeline!r}"
        )
    kernels = {}
    for gv, func in mod.functions.items():
        if isinstance(func, PrimFunc):
            name = names[gv.name_hint] if names is not None else sanitize(gv.name_hint)
            kernels[gv.name_hint] = compile_kernel(func, name, target)
    return kernels


def _exec_in_memory(source: str, name: str) -> Callable[..., Any]:
    filename = f"<mlckit kernel {name}>"
    # Registered with linecache so tracebacks from the reference interpreter show the code.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def _cache_key(source: str, target: Target) -> str:
    import numba

    text = "\n".join([CODEGEN_VERSION, target.kind.name, numba.__version__, sys.version, source])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _cached_file(directory: Path, source: str, target: Target) -> Path:
    """The kernel's source file in ``directory``, (re)written when missing or not
    byte-identical. Raises OSError when the directory cannot be used."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"k{_cache_key(source, target)}.py"
    try:
        current = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        current = None
    if current != source:
        # Write to a temporary file and rename, so a concurrent reader never sees half a file.
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(source)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _drop_numba_cache(path)
    return path


# Per process: the temporary directory that stands in for unusable caches, and those warned of.
_TEMPORARY_CACHE: list[Path] = []
_WARNED: set[Path] = set()


def _temporary_cache(unusable: Path, err: OSError) -> Path:
    """The directory to compile into instead of ``unusable``, with one warning per process."""
    if not _TEMPORARY_CACHE:
        try:
            _TEMPORARY_CACHE.append(Path(tempfile.mkdtemp(prefix="mlckit-kernels-")))
        except OSError as temp_err:
            raise BuildError(
                f"cannot write compiled kernels to {unusable} ({err.strerror or err}) nor to a "
                f"temporary directory ({temp_err.strerror or temp_err}); set $MLCKIT_CACHE_DIR "
                "to a writable directory"
            ) from None
    if unusable not in _WARNED:
        _WARNED.add(unusable)
        warnings.warn(
            f"mlckit cannot use the kernel cache {unusable} ({err.strerror or err}); this process "
            f"compiles its kernels in {_TEMPORARY_CACHE[0]} instead, so later processes will "
            "compile them again. Set $MLCKIT_CACHE_DIR to a writable directory to keep them.",
            stacklevel=3,
        )
    return _TEMPORARY_CACHE[0]


def _drop_numba_cache(path: Path) -> None:
    pycache = path.parent / "__pycache__"
    for stale in pycache.glob(f"{path.stem}.*"):
        stale.unlink(missing_ok=True)


def _import_kernel_module(path: Path, name: str) -> types.ModuleType:
    module_name = f"mlckit_kernel_{path.stem}"
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        return loaded
    for attempt in range(2):
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise BuildError(f"cannot import the kernel file {path}")
        module = importlib.util.module_from_spec(spec)
        # numba's cache re-imports the module by name when it loads a parallel kernel, so the
        # module must be registered before it runs.
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[module_name]
            if attempt == 0 and _looks_like_cache_problem(err):
                # A damaged numba cache entry: drop it and compile afresh once.
                _drop_numba_cache(path)
                continue
            if isinstance(err, OSError):
                raise  # the cache directory cannot be used: the caller compiles elsewhere
            raise BuildError(
                f"numba could not compile kernel {name!r}: {type(err).__name__}: {err}\n"
                f"generated source: {path}"
            ) from None
        return module
    raise BuildError(f"kernel {name!r} could not be loaded from {path}")


def _looks_like_cache_problem(err: Exception) -> bool:
    import pickle

    return isinstance(err, (EOFError, pickle.UnpicklingError, OSError, ValueError, KeyError))
