"""The default GPU schedule: every loop nest bound to CUDA blocks and threads, one thread per
output element.

A GPU runs a kernel as a grid of thread blocks, and a loop of TensorIR runs on it only once it is
bound to ``blockIdx.x`` (which block) or ``threadIdx.x`` (which thread of the block). A PrimFunc
nobody scheduled has no bound loop, so it cannot run on ``cuda``. Like TVM's
``DefaultGPUSchedule``, this schedule binds every loop nest with one fixed recipe:

* **inline**: first, an elementwise block writing an intermediate buffer is inlined into its
  consumers (the CPU schedule's ``inline_elementwise``): one kernel launch and one buffer in GPU
  memory fewer (conv2d's ``pad_temp`` disappears into the convolution).
* **bind**: the outer loops of each nest that are spatial (they feed only spatial iter vars of
  the blocks under them) and perfectly nested are fused into one loop, split by
  ``[None, threads]``, and the two loops are bound to ``blockIdx.x`` and ``threadIdx.x``: thread
  ``t`` of block ``b`` computes element ``b * threads + t`` of the fused iteration space.
  ``threads`` is ``max_threads_per_block`` (256), or the fused extent when that is smaller (a
  kernel of 10 elements runs one block of 10 threads: no thread idles and the split is exact).
  A symbolic extent (a batch ``n``) is split by ``max_threads_per_block`` too: the split's
  predicate (``T.where``) keeps the threads past the end of the last block idle.
* **reductions stay serial**: the loops from the first reduction loop on run in order inside
  each thread, so one thread computes one output element, its whole sum (a matmul's ``k``, a
  softmax row's max and sum, a pooling window).
* **no spatial loop**: a nest that starts with a reduction loop (``sum`` of a whole tensor) or a
  block without loops (a 0-d result) gets a unit loop (``add_unit_loop``), bound to one block
  of one thread. Spatial loops written inside a reduction loop are not moved out: such a nest
  also runs in a single thread (legalized operators put their reduction loops innermost).
* **shared loops**: blocks under one loop nest (a producer computed at its consumer's loop)
  are bound together at their common outer spatial loops; each thread runs both blocks' inner
  loops in order.

This is a correct schedule, not a fast one: no shared memory, no cooperative reductions, no
tiling. The grid has ``ceil(extent / threads)`` blocks (CUDA allows 2**31 - 1 along x).

Functions that already have a thread binding (scheduled by hand) are left as they are, and so
are functions with the attribute ``tir.is_scheduled``. A nest the recipe cannot bind (a block
with an opaque or scan iter var, one reading an output element another iteration writes) raises
a ScheduleError naming the function and the block.

``schedule_for_gpu(func)`` returns the Schedule (its ``trace`` shows every step),
``default_gpu_schedule(func_or_mod)`` the scheduled function or module, and
``DefaultGPUSchedule()`` is the module pass that schedules every PrimFunc without the attribute
``tir.is_scheduled`` and sets it.
"""

from __future__ import annotations

from mlckit.errors import ScheduleError
from mlckit.ir import transform
from mlckit.ir.module import IRModule

from .. import expr as E
from .. import stmt as S
from ..analysis import collect_vars
from ..function import PrimFunc
from ..stmt_functor import post_order_visit
from .default_schedule import _block_names, _needs_schedule, _try, inline_elementwise
from .schedule import BlockRV, Schedule
from .state import _walk_until_block

MAX_THREADS_PER_BLOCK = 256


# ---------------------------------------------------------------------- loop structure
def has_thread_binding(func: PrimFunc) -> bool:
    """Whether some loop of ``func`` is bound to a GPU thread axis."""
    found: list[S.For] = []
    post_order_visit(
        func.body,
        lambda n: (
            found.append(n) if isinstance(n, S.For) and n.thread_binding is not None else None
        ),
    )
    return bool(found)


def _root_scope_blocks(func: PrimFunc) -> list[str]:
    """The names of the blocks directly under the root block (not inside another block), in
    program order: each heads a loop nest of its own or shares one with its neighbours."""
    body = func.body
    if isinstance(body, S.BlockRealize) and body.block.name_hint == "root":
        body = body.block.body
    return [realize.block.name_hint for realize in _walk_until_block(body)]


def _spatial_chain(top: S.Stmt) -> list[S.For]:
    """The perfectly nested loops from ``top`` down that can be fused and bound: each feeds
    only spatial iter vars of the blocks under it, starts at 0, carries no annotation, and has
    an extent that does not depend on the loops above it in the chain."""
    chain: list[S.For] = []
    node = top
    while isinstance(node, S.For) and _is_fusable_spatial(node, chain):
        chain.append(node)
        node = node.body
    return chain


def _is_fusable_spatial(loop: S.For, outer: list[S.For]) -> bool:
    if loop.annotations or not (isinstance(loop.min, E.IntImm) and loop.min.value == 0):
        return False
    outer_vars = {id(o.loop_var) for o in outer}
    if any(id(v) in outer_vars for v in collect_vars(loop.extent)):
        return False
    for realize in _walk_until_block(loop.body):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            feeds = any(v is loop.loop_var for v in collect_vars(value))
            if feeds and iv.iter_type != E.IterVarType.DataPar:
                return False
    return True


# ---------------------------------------------------------------------- the rule
def bind_block(sch: Schedule, block: BlockRV, max_threads_per_block: int) -> None:
    """Bind the loop nest of ``block`` (a block under the root) to ``blockIdx.x`` and
    ``threadIdx.x``: fuse its outer spatial loops (or add a unit loop), split, bind."""
    loops = sch.get_loops(block)
    nodes = [sch.get(rv) for rv in loops]
    if any(node.thread_binding is not None for node in nodes):
        return  # it shares a nest with a block bound before it
    chain = loops[: len(_spatial_chain(nodes[0]))] if nodes else []
    if chain:
        fused = sch.fuse(*chain) if len(chain) > 1 else chain[0]
    else:
        fused = sch.add_unit_loop(loops[0] if loops else block)
    extent = sch.get(fused).extent
    threads = max_threads_per_block
    if isinstance(extent, E.IntImm):
        threads = max(1, min(extent.value, max_threads_per_block))
    block_x, thread_x = sch.split(fused, [None, threads])
    sch.bind(block_x, "blockIdx.x")
    sch.bind(thread_x, "threadIdx.x")


def _inline_elementwise(sch: Schedule) -> Schedule:
    for name in _block_names(sch):
        if name in _block_names(sch):  # not inlined by an earlier step
            sch = _try(sch, inline_elementwise, name)
    return sch


def schedule_for_gpu(
    func: PrimFunc, max_threads_per_block: int = MAX_THREADS_PER_BLOCK, name: str = "main"
) -> Schedule:
    """The default GPU schedule of ``func`` as a Schedule (``sch.trace.show()`` prints its
    steps). A function with a thread binding already is returned unscheduled. ``name`` is the
    function's name in error messages."""
    if max_threads_per_block < 1:
        raise ScheduleError(
            f"default GPU schedule: max_threads_per_block is {max_threads_per_block}; give a "
            "positive number of threads (256 suits every CUDA GPU)"
        )
    sch = Schedule(func)
    if has_thread_binding(func):
        return sch  # scheduled by hand: the binding is the author's
    sch = _inline_elementwise(sch)
    for block in _root_scope_blocks(sch.func):
        try:
            bind_block(sch, sch.get_block(block), max_threads_per_block)
        except ScheduleError as err:
            raise ScheduleError(
                f"default GPU schedule: cannot bind block {block!r} of function {name!r} to GPU "
                f"blocks and threads ({err}); schedule this function by hand (sch.bind)"
            ) from None
    return sch


def schedule_prim_func(
    func: PrimFunc, max_threads_per_block: int = MAX_THREADS_PER_BLOCK, name: str = "main"
) -> PrimFunc:
    """``func`` with every loop nest bound to GPU blocks and threads, marked scheduled."""
    sch = schedule_for_gpu(func, max_threads_per_block, name)
    return sch.func.with_attr("tir.is_scheduled", True)


def default_gpu_schedule(
    func_or_mod: PrimFunc | IRModule, max_threads_per_block: int = MAX_THREADS_PER_BLOCK
) -> PrimFunc | IRModule:
    """Apply the default GPU schedule to a PrimFunc, or to every unscheduled PrimFunc of a
    module (those without the attribute ``tir.is_scheduled``)."""
    if isinstance(func_or_mod, PrimFunc):
        return schedule_prim_func(func_or_mod, max_threads_per_block)
    return DefaultGPUSchedule(max_threads_per_block)(func_or_mod)


@transform.function_pass_for(_needs_schedule)(opt_level=0, name="tir.DefaultGPUSchedule")
class DefaultGPUSchedule:
    """Module pass: bind every PrimFunc nobody scheduled to GPU blocks and threads."""

    def __init__(self, max_threads_per_block: int = MAX_THREADS_PER_BLOCK):
        self.max_threads_per_block = max_threads_per_block

    def transform_function(
        self, func: PrimFunc, mod: IRModule, ctx: transform.PassContext
    ) -> PrimFunc:
        name = next((gv.name_hint for gv, f in mod.functions.items() if f is func), "main")
        return schedule_prim_func(func, self.max_threads_per_block, name)


__all__ = [
    "MAX_THREADS_PER_BLOCK",
    "DefaultGPUSchedule",
    "bind_block",
    "default_gpu_schedule",
    "has_thread_binding",
    "schedule_for_gpu",
    "schedule_prim_func",
]
