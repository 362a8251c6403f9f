"""TensorIR -> numba.cuda kernels, and the host function that launches them.

A scheduled PrimFunc for the cuda target binds loops to GPU threads
(``sch.bind(i0, "blockIdx.x")``, ``sch.bind(i1, "threadIdx.x")``). Code generation splits it
the way TVM's SplitHostDevice does:

* the **host function** keeps the PrimFunc's name and signature: it checks the arguments'
  shapes, allocates the function's global intermediate buffers on the device, runs the loops
  that are not bound to threads, and *launches* one kernel for each outermost thread-bound
  loop, with the grid and block sizes read off the bound loops' extents (computed at call time
  when they are symbolic);
* each **kernel** (``@cuda.jit``) is that loop nest as the course's low-level numpy, where a
  bound loop becomes the thread's index (``i1 = cuda.threadIdx.x``) instead of a loop.

Inside a kernel, ``"shared"`` buffers become ``cuda.shared.array`` (one per thread block) and
other block-local buffers ``cuda.local.array`` (one per thread), both declared at the kernel's
start; ``cuda.syncthreads()`` goes wherever threads may read a shared buffer that other threads
wrote (or write one they may still be reading). Loops that are not bound in a kernel run
serially in each thread; ``vectorize``/``parallel``/``unroll`` mean nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlckit.errors import BuildError
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.analysis import expr_deep_equal
from mlckit.tir.buffer import Buffer
from mlckit.tir.stmt_functor import post_order_visit

from .codegen import _INTRINSICS, _PREC_ADD, GeneratedFunction, PythonCodegen, comment

# numba's CUDA target compiles the math module's functions to the GPU's; numpy's array
# functions are for the host.
_GPU_INTRINSICS = {
    **_INTRINSICS,
    "tir.exp": lambda a, t: f"math.exp({a[0]})",
    "tir.log": lambda a, t: f"math.log({a[0]})",
    "tir.sqrt": lambda a, t: f"math.sqrt({a[0]})",
    "tir.tanh": lambda a, t: f"math.tanh({a[0]})",
    "tir.sin": lambda a, t: f"math.sin({a[0]})",
    "tir.cos": lambda a, t: f"math.cos({a[0]})",
    "tir.sigmoid": lambda a, t: f"np.{t}(1) / (np.{t}(1) + math.exp(-{a[0]}))",
    "tir.rsqrt": lambda a, t: f"np.{t}(1) / math.sqrt({a[0]})",
}

_AXES = ("x", "y", "z")
# The thread tags a loop may be bound to (each becomes ``cuda.<tag>`` in the kernel).
_THREAD_TAGS = frozenset(f"{kind}.{axis}" for kind in ("blockIdx", "threadIdx") for axis in _AXES)
# What every CUDA GPU of compute capability 2.0 or later allows (a target may allow fewer:
# its max_num_threads).
MAX_THREADS_PER_BLOCK = 1024


@dataclass
class _Launch:
    """The launch configuration of one kernel: the extent bound to each thread tag."""

    extents: dict[str, E.PrimExpr]

    def dims(self, kind: str, codegen: PythonCodegen) -> str:
        """``(gx, gy)`` for kind "blockIdx", ``(tx,)`` for "threadIdx" (trailing 1s dropped)."""
        sizes = [self.extents.get(f"{kind}.{axis}") for axis in _AXES]
        while len(sizes) > 1 and sizes[-1] is None:
            sizes.pop()
        texts = ["1" if size is None else codegen.expr(size) for size in sizes]
        return f"({', '.join(texts)}{',' if len(texts) == 1 else ''})"


class CudaCodegen(PythonCodegen):
    """Emit one PrimFunc as its cuda kernels and a host function named ``name``."""

    intrinsics = _GPU_INTRINSICS
    float_divide_call = False
    calls_externs = False

    def __init__(self, func, name: str, max_threads: int = MAX_THREADS_PER_BLOCK):
        super().__init__(func, name, parallel=False)
        self.max_threads = max_threads
        self.kernels: list[str] = []
        self.kernel_keys: list[object] = []  # what each kernel's name is registered under
        self.hoisted: set[int] = set()  # buffers declared at the start of the current kernel
        self.launch = _Launch({})

    # ------------------------------------------------------------------ the host function
    def generate(self) -> GeneratedFunction:
        params, buffers = self.signature()
        self._bind_shapes(buffers)
        self.host(self.func.body)
        header = f"def {self.name}({', '.join(params)}):"
        host = "\n".join([header, *self.lines]) + "\n"
        source = "\n\n".join([*self.kernels, host])
        return GeneratedFunction(
            self.name, source, params, False, self.helpers, self.uses_shape_check
        )

    def host(self, node: S.Stmt) -> None:
        """Statements outside every thread-bound loop: allocations, host loops, launches."""
        if isinstance(node, S.SeqStmt):
            for stmt in node.seq:
                self.host(stmt)
        elif isinstance(node, S.BlockRealize) and not node.block.iter_vars:
            for buffer in node.block.alloc_buffers:
                self.device_allocate(buffer)
            self.host(node.block.body)
        elif isinstance(node, S.For) and node.kind == S.ForKind.THREAD_BINDING:
            self.kernel(node)
        elif isinstance(node, S.For) and _thread_loops(node):
            var = self.names.get(node.loop_var, node.loop_var.name_hint)
            self.emit(f"for {var} in range({self.loop_bounds(node)}):")
            self.indent += 1
            self.host(node.body)
            self.indent -= 1
        elif isinstance(node, S.LetStmt):
            self.assign(node.var, node.value)
            self.host(node.body)
        elif isinstance(node, S.AssertStmt):
            self.check(node)
            self.host(node.body)
        else:
            raise BuildError(_unbound_message(self.name, node))

    def device_allocate(self, buffer: Buffer) -> None:
        if buffer.scope.split(".")[0] not in ("global", ""):  # global.<tag> is global too
            raise BuildError(
                f"{self.name}: the {buffer.scope} buffer {buffer.name!r} is allocated outside "
                "every thread-bound loop: some block that writes or reads it is not under the "
                "loops bound to GPU threads; move it there (compute_at for a producer, "
                "reverse_compute_at for a consumer)"
            )
        name = self.names.get(buffer, buffer.name)
        self.emit(f"{name} = cuda.device_array({self.shape_text(buffer)}, dtype=np.{buffer.dtype})")

    def shape_text(self, buffer: Buffer) -> str:
        dims = [self.expr(d) for d in buffer.shape]
        return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"

    # ------------------------------------------------------------------ one kernel
    def kernel(self, loop: S.For) -> None:
        self.kernel_keys.append(object())
        kernel_name = self.names.get(self.kernel_keys[-1], f"{self.name}_kernel{len(self.kernels)}")
        self.launch = _Launch(_launch_extents(self.name, loop))
        threads = 1
        for tag, extent in self.launch.extents.items():
            if tag.startswith("threadIdx") and isinstance(extent, E.IntImm):
                threads *= extent.value
        if threads > self.max_threads:
            raise BuildError(
                f"{self.name}: a thread block of {threads} threads; the target runs at most "
                f"{self.max_threads} per block: split the loops bound to threadIdx smaller "
                "and bind the outer part to blockIdx"
            )
        # What the kernel reads from outside: buffers, and the host's scalars (shape
        # variables, host loop variables), which are exactly the names defined so far.
        used_buffers: dict[int, Buffer] = {}
        used_vars: dict[int, E.Var] = {}
        local: dict[int, Buffer] = {}

        def collect(node: object) -> None:
            if isinstance(node, (E.BufferLoad, S.BufferStore)):
                used_buffers.setdefault(id(node.buffer), node.buffer)
            elif isinstance(node, E.Var) and self.names.has(node):
                used_vars.setdefault(id(node), node)
            elif isinstance(node, S.Block):
                local.update((id(b), b) for b in node.alloc_buffers)

        post_order_visit(loop, collect)
        args = [self.names.get(b, b.name) for i, b in used_buffers.items() if i not in local]
        args += [self.names.get(v, v.name_hint) for v in used_vars.values()]

        host_lines, host_indent = self.lines, self.indent
        self.lines, self.indent = [], 1
        scope = self.names.checkpoint()
        grid, block = self.launch.dims("blockIdx", self), self.launch.dims("threadIdx", self)
        self.emit(comment(f"launched with {grid} thread blocks of {block} threads"))
        for buffer in local.values():
            self.declare(buffer)
        self.stmt(loop)
        body = self.lines
        self.names.restore(scope)
        self.lines, self.indent = host_lines, host_indent

        self.kernels.append(
            "\n".join(["@cuda.jit(cache=True)", f"def {kernel_name}({', '.join(args)}):", *body])
        )
        self.emit(f"{kernel_name}[{grid}, {block}]({', '.join(args)})")

    def declare(self, buffer: Buffer) -> None:
        """A buffer of the kernel, declared at its start: per block if shared, else per thread."""
        if not all(isinstance(d, E.IntImm) for d in buffer.shape):
            raise BuildError(
                f"{self.name}: buffer {buffer.name!r} inside a kernel needs a shape known at "
                f"compile time, not {self.shape_text(buffer)}"
            )
        memory = "shared" if buffer.scope == "shared" else "local"
        name = self.names.get(buffer, buffer.name)
        self.emit(
            f"{name} = cuda.{memory}.array({self.shape_text(buffer)}, dtype=np.{buffer.dtype})"
        )
        self.hoisted.add(id(buffer))

    def allocate(self, buffer: Buffer) -> None:
        if id(buffer) not in self.hoisted:
            raise BuildError(f"{self.name}: buffer {buffer.name!r} has no place in a kernel")

    # ------------------------------------------------------------------ kernel statements
    def loop(self, node: S.For) -> None:
        var = self.names.get(node.loop_var, node.loop_var.name_hint)
        if node.kind != S.ForKind.THREAD_BINDING:
            self.emit(f"for {var} in range({self.loop_bounds(node)}):")
            self.indent += 1
            mark = len(self.lines)
            self.stmt(node.body)
            reads, writes = _shared_accesses(node.body)
            if reads & writes:
                # The next iteration overwrites what other threads may still be reading.
                self.emit("cuda.syncthreads()")
            if len(self.lines) == mark:
                self.emit("pass")
            self.indent -= 1
            return
        tag = node.thread_binding.thread_tag  # type: ignore[union-attr]
        launched = self.launch.extents[tag]
        begin, threads = self._expr(node.min), self._expr(launched)
        index = f"cuda.{tag}"
        if not E.is_const_int(node.min, 0):
            index = f"{self._wrap(begin, _PREC_ADD)} + {index}"
        self.emit(f"{var} = {index}")
        if begin.bounds is not None and threads.bounds is not None:
            # The thread's index runs over the launched extent, from the loop's start.
            bounds = (begin.bounds[0], begin.bounds[1] + threads.bounds[1] - 1)
            self.var_bounds[id(node.loop_var)] = (bounds, begin.symbolic or threads.symbolic)
        if _same(node.extent, launched):
            self.stmt(node.body)
            return
        # A loop bound to fewer threads than the launch has: the others skip it.
        self.emit(f"if {var} < {self.expr(E.Add(node.min, node.extent))}:")
        self.body(node.body)

    def stmt_SeqStmt(self, node: S.SeqStmt) -> None:
        written: set[int] = set()  # shared buffers written since the last barrier
        read: set[int] = set()
        for stmt in node.seq:
            reads, writes = _shared_accesses(stmt)
            if reads & written or writes & read:
                self.emit("cuda.syncthreads()")
                written, read = set(), set()
            self.stmt(stmt)
            written |= writes
            read |= reads


def _thread_loops(node: S.Stmt) -> list[S.For]:
    found: list[S.For] = []

    def visit(n: object) -> None:
        if isinstance(n, S.For) and n.kind == S.ForKind.THREAD_BINDING:
            found.append(n)

    post_order_visit(node, visit)
    return found


def _launch_extents(func_name: str, loop: S.For) -> dict[str, E.PrimExpr]:
    """Each thread tag's extent in the kernel rooted at ``loop``: the largest when constant."""
    extents: dict[str, E.PrimExpr] = {}
    for bound in _thread_loops(loop):
        tag = bound.thread_binding.thread_tag if bound.thread_binding else ""
        if tag not in _THREAD_TAGS:
            raise BuildError(
                f"{func_name}: loop {bound.loop_var.name_hint!r} is bound to {tag!r}; bind "
                "loops to blockIdx.x/y/z or threadIdx.x/y/z"
            )
        known = extents.get(tag)
        if known is None or _same(known, bound.extent):
            extents[tag] = bound.extent
        elif isinstance(known, E.IntImm) and isinstance(bound.extent, E.IntImm):
            extents[tag] = max(known, bound.extent, key=lambda e: e.value)
        else:
            raise BuildError(
                f"{func_name}: loops bound to {tag} have the extents {known.script()} and "
                f"{bound.extent.script()}; one kernel launches one size per thread axis"
            )
    return extents


def _same(a: E.PrimExpr, b: E.PrimExpr) -> bool:
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return a.value == b.value
    return expr_deep_equal(a, b)


def _shared_accesses(node: S.Stmt) -> tuple[set[int], set[int]]:
    """The shared buffers ``node`` reads and writes (by identity)."""
    reads: set[int] = set()
    writes: set[int] = set()

    def visit(n: object) -> None:
        if isinstance(n, E.BufferLoad) and n.buffer.scope == "shared":
            reads.add(id(n.buffer))
        elif isinstance(n, S.BufferStore) and n.buffer.scope == "shared":
            writes.add(id(n.buffer))

    post_order_visit(node, visit)
    return reads, writes


def _unbound_message(func_name: str, node: S.Stmt) -> str:
    """Which blocks sit under which loops that no thread runs."""
    found: list[str] = []

    def walk(stmt: S.Stmt, loops: tuple[str, ...]) -> None:
        if isinstance(stmt, S.For):
            walk(stmt.body, (*loops, stmt.loop_var.name_hint))
        elif isinstance(stmt, S.SeqStmt):
            for s in stmt.seq:
                walk(s, loops)
        elif isinstance(stmt, S.BlockRealize):
            if stmt.block.iter_vars or not loops:
                around = f"loops ({', '.join(loops)})" if loops else "no loop"
                found.append(f"block {stmt.block.name_hint!r} under {around}")
            else:
                walk(stmt.block.body, loops)
        elif isinstance(stmt, (S.LetStmt, S.IfThenElse)):
            walk(stmt.body if isinstance(stmt, S.LetStmt) else stmt.then_case, loops)

    walk(node, ())
    where = "; ".join(found) or type(node).__name__
    return (
        f"{func_name}: the cuda target runs every computation on GPU threads, but {where} "
        "is bound to no thread. Bind its loops, e.g. i0, i1 = sch.split(i, [None, 256]); "
        'sch.bind(i0, "blockIdx.x"); sch.bind(i1, "threadIdx.x") (relax.build binds them for '
        "you with the default GPU schedule)"
    )
