"""StaticPlanBlockMemory: let tensors whose lifetimes do not overlap share memory.

After CallTIRRewrite every intermediate tensor is its own ``R.builtin.alloc_tensor``. This pass,
following TVM's pass of the same name, plans them within each binding block in three steps:

1. **Tokens.** Every ``builtin.alloc_tensor`` with a static shape and dtype gets a *storage
   token* (its size in bytes, dtype and scope) and a reference count: how many kernel calls
   (direct calls of a PrimFunc of the module, or of an ``R.ExternFunc``) take the tensor or an
   alias of it (``lv = alloc``, tuples of it) as an argument. A tensor is left out of planning
   when it may outlive the block or be held elsewhere: when it is returned, used in another
   block, used by any other kind of call (a relax function, an operator), matched by
   ``R.match_cast``, used as an ``if`` condition or captured by an inner function.
2. **Planning.** Walking the bindings in order, each kernel call lowers the counts of its
   arguments' tokens; a token whose count reaches zero is dead and goes back to a pool. A new
   allocation takes a dead token of the same dtype and scope from the pool: the smallest one
   at least as large (up to 16 times its size), else the largest smaller one (down to 1/16),
   which then grows; with none it gets a storage of its own.
3. **Rewrite.** The first tensor of each storage is preceded by
   ``storage = R.memory.alloc_storage(R.shape([nbytes]), device, scope, dtype)``, and each
   planned ``builtin.alloc_tensor`` becomes ``R.memory.alloc_tensor(storage, 0, shape, dtype)``.

Like TVM's current pass it inserts no ``R.memory.kill_tensor`` / ``kill_storage``: a storage
lives until the function returns (TVM frees earlier in a later pass, KillAfterLastUse).

Symbolic shapes: an allocation whose shape mentions a symbolic dim (``(n, 256)``) is left as
``R.builtin.alloc_tensor``. (TVM can plan those using upper bounds given in the function
attribute ``tir_var_upper_bound``; mlckit does not.)

``estimate_memory_usage(mod)`` reports the bytes allocated with and without planning.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from mlckit.errors import MLCError
from mlckit.ir import transform
from mlckit.ir.dtype import to_numpy
from mlckit.ir.module import GlobalVar, IRModule
from mlckit.ir.op import Op
from mlckit.tir import expr as E
from mlckit.tir.function import PrimFunc

from ..analysis.analysis import used_vars
from ..expr import (
    BindingBlock,
    Call,
    DataTypeImm,
    Expr,
    ExternFunc,
    Function,
    If,
    MatchCast,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
)
from ..expr_functor import ExprMutator, ExprVisitor
from ..op import memory

# A token search looks at dead storages between 1/16 and 16 times the requested size (TVM's).
_MATCH_RANGE = 16


@dataclass(eq=False)
class StorageToken:
    """Memory one or more tensors use in turn: its size, dtype, scope and live references."""

    nbytes: int
    dtype: str
    scope: str
    ref_counter: int = 0
    discarded: bool = False


# The tokens of a value: none, one (a tensor) or one entry per field (a tuple).
Tokens = StorageToken | tuple["Tokens", ...] | None


def _leaves(tokens: Tokens) -> Iterator[StorageToken]:
    if isinstance(tokens, StorageToken):
        yield tokens
    elif isinstance(tokens, tuple):
        for field in tokens:
            yield from _leaves(field)


def _static_nbytes(shape: Expr, dtype: str) -> int | None:
    """The size of a tensor of ``shape`` and ``dtype`` in bytes, if both are known."""
    if not isinstance(shape, ShapeExpr) or dtype == "void":
        return None
    size = to_numpy(dtype).itemsize
    for dim in shape.values:
        if not isinstance(dim, E.IntImm):
            return None
        size *= dim.value
    return size


def _is_op(call: Call, name: str) -> bool:
    return isinstance(call.op, Op) and call.op.name == name


class _TokenWalker:
    """What both analysis steps share: the tokens each variable holds, found through
    aliases (``lv = alloc``, tuples and their fields)."""

    def __init__(self) -> None:
        self.var_tokens: dict[Var, Tokens] = {}

    def tokens_of(self, expr: Expr) -> Tokens:
        if isinstance(expr, Var):
            tokens = self.var_tokens.get(expr)
            return tokens if any(not t.discarded for t in _leaves(tokens)) else None
        if isinstance(expr, Tuple):
            return tuple(self.tokens_of(f) for f in expr.fields)
        if isinstance(expr, TupleGetItem):
            tokens = self.tokens_of(expr.tuple_value)
            return tokens[expr.index] if isinstance(tokens, tuple) else None
        return None


class _TokenInit(_TokenWalker):
    """Step 1: a token for each plannable allocation, with its reference count."""

    def __init__(self, mod: IRModule):
        super().__init__()
        self.mod = mod
        self.alloc_tokens: dict[Call, StorageToken] = {}
        self.token_block: dict[StorageToken, BindingBlock] = {}

    def function(self, func: Function) -> None:
        # The results leave the function: their memory must stay its own.
        self.discard(self.seq(func.body))

    def seq(self, seq: Expr) -> Tokens:
        if not isinstance(seq, SeqExpr):
            return self.tokens_of(seq)
        for block in seq.blocks:
            for binding in block.bindings:
                self.binding(binding, block)
        tokens = self.tokens_of(seq.body)
        self.discard(tokens)
        return tokens

    def binding(self, binding: object, block: BindingBlock) -> None:
        if isinstance(binding, MatchCast):
            # The cast variable is another name for the value that is not tracked.
            self.discard(self.tokens_of(binding.value))
            return
        if not isinstance(binding, VarBinding):
            raise MLCError(f"StaticPlanBlockMemory: cannot plan a {type(binding).__name__}")
        value = binding.value
        if isinstance(value, Call):
            self.var_tokens[binding.var] = self.call(value, block)
        elif isinstance(value, If):
            self.discard(self.tokens_of(value.cond))
            self.seq(value.true_branch)
            self.seq(value.false_branch)
        elif isinstance(value, Function):
            for var in used_vars(value):
                self.discard(self.tokens_of(var))
        else:
            self.var_tokens[binding.var] = self.tokens_of(value)

    def call(self, call: Call, block: BindingBlock) -> Tokens:
        if _is_op(call, "relax.builtin.alloc_tensor"):
            dtype = call.args[1].value if isinstance(call.args[1], DataTypeImm) else "void"
            nbytes = _static_nbytes(call.args[0], dtype)
            if nbytes is None:
                return None
            scope = call.args[3].value if isinstance(call.args[3], StringImm) else "global"
            token = StorageToken(nbytes, dtype, scope)
            self.alloc_tokens[call] = token
            self.token_block[token] = block
            return token
        if self.is_kernel(call.op):
            # A kernel reads and writes its arguments only while it runs.
            for arg in call.args:
                for token in _leaves(self.tokens_of(arg)):
                    if self.token_block[token] is block:
                        token.ref_counter += 1
                    else:
                        token.discarded = True
        else:
            # Anything else might keep a reference (or return its argument).
            for arg in call.args:
                self.discard(self.tokens_of(arg))
        return None

    def is_kernel(self, callee: object) -> bool:
        if isinstance(callee, ExternFunc):
            return True
        return (
            isinstance(callee, GlobalVar)
            and callee.name_hint in self.mod
            and isinstance(self.mod[callee.name_hint], PrimFunc)
        )

    @staticmethod
    def discard(tokens: Tokens) -> None:
        for token in _leaves(tokens):
            token.discarded = True


class _Planner(_TokenWalker):
    """Step 2: walk the bindings in order, reusing the storage of dead tokens."""

    def __init__(self, init: _TokenInit):
        super().__init__()
        self.init = init
        # Which storage each planned allocation uses (a storage is a token itself).
        self.storage_of: dict[Call, StorageToken] = {}
        # Dead storages by (scope, dtype); a block never sees another block's storages.
        self.pool: dict[tuple[str, str], list[StorageToken]] = {}

    def seq(self, seq: Expr) -> None:
        if not isinstance(seq, SeqExpr):
            return
        outer = self.pool
        for block in seq.blocks:
            self.pool = {}
            for binding in block.bindings:
                self.binding(binding)
        self.pool = outer

    def binding(self, binding: object) -> None:
        if not isinstance(binding, VarBinding):
            return
        value = binding.value
        if isinstance(value, Call):
            prototype = self.init.alloc_tokens.get(value)
            if prototype is not None and not prototype.discarded:
                storage = self.reuse(prototype) or prototype
                self.storage_of[value] = storage
                self.var_tokens[binding.var] = storage
                return
            for arg in value.args:
                for token in _leaves(self.tokens_of(arg)):
                    token.ref_counter -= 1
                    if token.ref_counter == 0:
                        self.pool.setdefault((token.scope, token.dtype), []).append(token)
        elif isinstance(value, If):
            self.seq(value.true_branch)
            self.seq(value.false_branch)
        else:
            self.var_tokens[binding.var] = self.tokens_of(value)

    def reuse(self, prototype: StorageToken) -> StorageToken | None:
        """A dead storage for ``prototype``, taken out of the pool, or None."""
        if prototype.ref_counter == 0:
            # Never used: it does not matter where it lives (a later cleanup removes it).
            return None
        pool = self.pool.get((prototype.scope, prototype.dtype), [])
        size = prototype.nbytes
        # Stable sorts keep the order of death among equal sizes, as TVM's multimap does.
        larger = sorted(
            (t for t in pool if size <= t.nbytes <= size * _MATCH_RANGE), key=lambda t: t.nbytes
        )
        smaller = sorted(
            (t for t in pool if size // _MATCH_RANGE <= t.nbytes < size), key=lambda t: t.nbytes
        )
        if larger:
            chosen = larger[0]
        elif smaller:
            chosen = smaller[-1]
            chosen.nbytes = size
        else:
            return None
        pool.remove(chosen)
        chosen.ref_counter = prototype.ref_counter
        return chosen


class _Rewriter(ExprMutator):
    """Step 3: storages and tensors in them instead of the planned allocations."""

    def __init__(self, mod: IRModule, storage_of: dict[Call, StorageToken]):
        super().__init__(mod)
        self.storage_of = storage_of
        self.storage_vars: dict[StorageToken, Var] = {}

    def visit_call_(self, op: Call) -> Expr:
        storage = self.storage_of.get(op)
        if storage is None:
            return super().visit_call_(op)
        shape, dtype, device = op.args[0], op.args[1], op.args[2]
        storage_var = self.storage_vars.get(storage)
        if storage_var is None:
            alloc = memory.alloc_storage(
                ShapeExpr([storage.nbytes]), device, StringImm(storage.scope), storage.dtype
            )
            storage_var = self.storage_vars[storage] = self.builder_.emit(alloc, "storage")
        return memory.alloc_tensor(storage_var, PrimValue(0), shape, dtype)


def static_plan_block_memory(mod: IRModule) -> IRModule:
    """``mod`` with the static allocations of each relax function planned (see the module doc)."""
    result = mod.copy()
    for gv, func in mod.functions.items():
        if not isinstance(func, Function):
            continue
        init = _TokenInit(mod)
        init.function(func)
        planner = _Planner(init)
        planner.seq(func.body)
        if planner.storage_of:
            result[gv] = _Rewriter(mod, planner.storage_of).visit_expr(func)
    return result


def StaticPlanBlockMemory() -> transform.Pass:
    """The pass: reuse memory among the static ``R.builtin.alloc_tensor`` of each block (run it
    after CallTIRRewrite)."""

    @transform.module_pass(opt_level=0, name="StaticPlanBlockMemory")
    def plan(mod: IRModule, ctx: transform.PassContext) -> IRModule:
        return static_plan_block_memory(mod)

    return plan


# ------------------------------------------------------------------------------ statistics
@dataclass(frozen=True)
class FunctionMemoryUsage:
    """The static allocations of one function: without planning each tensor has its own memory
    (``bytes_before``); with it, tensors in one storage share it (``bytes_after``)."""

    name: str
    allocations_before: int
    bytes_before: int
    allocations_after: int
    bytes_after: int


@dataclass(frozen=True)
class MemoryUsage:
    """``estimate_memory_usage(mod)``: ``print`` it for a report, or read the byte counts."""

    functions: tuple[FunctionMemoryUsage, ...]

    @property
    def bytes_before(self) -> int:
        return sum(f.bytes_before for f in self.functions)

    @property
    def bytes_after(self) -> int:
        return sum(f.bytes_after for f in self.functions)

    def __str__(self) -> str:
        lines = ["Memory usage estimation:"]
        for f in self.functions:
            lines.append(f"- Function {f.name}:")
            lines.append(
                f"  * Without memory planning, there are {f.allocations_before} constant-size "
                f"memory allocation(s) with total size {_readable(f.bytes_before)}."
            )
            lines.append(
                f"  * With memory planning, there are {f.allocations_after} constant-size "
                f"memory allocation(s) with total size {_readable(f.bytes_after)}."
            )
            if f.bytes_before:
                share = 100 * f.bytes_after / f.bytes_before
                lines.append(f"  * Memory planning reduces constant memory size to {share:.1f}%.")
        return "\n".join(lines)


def _readable(nbytes: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit} ({nbytes} bytes)"
    return f"{nbytes} bytes"


class _AllocationCounter(ExprVisitor):
    """Counts the static allocations of a function, planned or not."""

    def __init__(self) -> None:
        self.before = [0, 0]  # allocations, bytes
        self.after = [0, 0]

    def visit_call_(self, op: Call) -> None:
        super().visit_call_(op)
        if _is_op(op, "relax.builtin.alloc_tensor"):
            # Unplanned: it costs its bytes with or without planning.
            self.add(self.before, op.args[0], op.args[1])
            self.add(self.after, op.args[0], op.args[1])
        elif _is_op(op, "relax.memory.alloc_tensor"):
            # A tensor placed in a storage: what it would have cost on its own.
            self.add(self.before, op.args[2], op.args[3])
        elif _is_op(op, "relax.memory.alloc_storage"):
            self.add(self.after, op.args[0], DataTypeImm("uint8"))

    @staticmethod
    def add(total: list[int], shape: Expr, dtype: Expr) -> None:
        nbytes = _static_nbytes(shape, dtype.value if isinstance(dtype, DataTypeImm) else "void")
        if nbytes is not None:
            total[0] += 1
            total[1] += nbytes


def estimate_memory_usage(mod: IRModule | Function) -> MemoryUsage:
    """The bytes the static allocations of each relax function take without and with memory
    planning, read from the module as it is (TVM's ``relax.analysis.estimate_memory_usage``).

    Run it after StaticPlanBlockMemory: ``R.memory.alloc_tensor`` counts its own size
    *before* planning, ``R.memory.alloc_storage`` its size *after*, and an unplanned
    ``R.builtin.alloc_tensor`` both. Allocations of symbolic size are not counted.
    """
    funcs = (
        [(mod.attrs.get("global_symbol", "main"), mod)]
        if isinstance(mod, Function)
        else [(gv.name_hint, f) for gv, f in mod.functions.items() if isinstance(f, Function)]
    )
    usage = []
    for name, func in funcs:
        counter = _AllocationCounter()
        counter.visit_expr(func)
        usage.append(FunctionMemoryUsage(name, *counter.before, *counter.after))
    return MemoryUsage(tuple(usage))


__all__ = [
    "FunctionMemoryUsage",
    "MemoryUsage",
    "StaticPlanBlockMemory",
    "StorageToken",
    "estimate_memory_usage",
    "static_plan_block_memory",
]
