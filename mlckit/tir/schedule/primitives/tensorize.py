"""``tensorize``: replace what a block computes with a hardware intrinsic.

A registered :class:`~mlckit.tir.tensor_intrin.TensorIntrin` has a description (``desc``: the
loop nest the instruction stands for, over small buffers such as ``A: (16, 16)``) and an
implementation (``impl``: how to run it). ``tensorize(block, name)`` works in two steps:

1. **Match.** The body of the block is compared with the body of ``desc``'s root block, node by
   node, up to renaming: the block's loops and iter vars stand for the description's, and each
   of the description's buffers stands for a region of one of the block's (the region the
   block's ``T.reads``/``T.writes`` list for it, whose extents must be the description buffer's
   shape, in the same storage scope). An access ``C[vi_o * 16 + vi_i, ...]`` in the block
   matches ``C[vii, ...]`` in the description when the index minus the region's start is the
   description's index. The first difference is an error that shows both sides in the
   description's names, with where it is.
2. **Replace.** The block keeps its iter vars and regions; its body becomes a fresh copy of
   ``impl``'s, and each of ``impl``'s buffers (the one at the position of a description buffer)
   views, through a ``T.match_buffer`` of the block, the region that description buffer stood
   for.

Given a loop, tensorize first makes the loop's subtree a block (``blockize``), as TVM does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...buffer import Buffer, BufferRegion, MatchBufferRegion
from ...function import PrimFunc
from ...stmt_functor import RenewDefs, StmtExprMutator, substitute
from ...tensor_intrin import TensorIntrin, param_buffers
from ..state import BlockRV, LoopRV, ScheduleState
from .block_scope import unique_name
from .blockize import blockize


def tensorize(sch: ScheduleState, block_or_loop: BlockRV | LoopRV, intrin_name: str) -> None:
    intrin = TensorIntrin.get(intrin_name)
    assert intrin is not None  # get raises for an unknown name
    block_rv = blockize(sch, block_or_loop) if isinstance(block_or_loop, LoopRV) else block_or_loop
    realize = sch.block_realize(block_rv)
    matcher = _Matcher(realize.block, intrin.desc, intrin_name)
    matcher.match()
    block = _implement(sch, realize.block, matcher, intrin.impl)
    sch.replace(realize, realize.with_fields(block=block))


# ---------------------------------------------------------------------------- matching
@dataclass
class _Binding:
    """What a description buffer stands for: a region of one of the block's buffers."""

    buffer: Buffer
    region: tuple[E.Range, ...]


class _Matcher:
    """Compares the block's body with the description's, node by node, binding the
    description's variables and buffers to the block's as it goes."""

    def __init__(self, block: S.Block, desc: PrimFunc, intrin_name: str):
        self.block, self.intrin_name = block, intrin_name
        self.desc_buffers = param_buffers(desc, "desc")
        root = desc.body
        self.desc_root = root.block if isinstance(root, S.BlockRealize) else None
        self.desc_body = self.desc_root.body if self.desc_root is not None else root
        self.vars: dict[int, E.PrimExpr] = {}  # description var -> the block's
        self.names: dict[int, E.Var] = {}  # the block's var -> description var (to show)
        self.buffers: dict[int, _Binding] = {}  # description buffer -> the block's region
        self.path: list[str] = []  # where the comparison is, in the block's names
        self.context: tuple[str, Any, Any] = ("has", None, None)  # what it compares now
        self.loose = False  # after a difference: binding only to show it (bind_loosely)
        self.analyzer = Analyzer()

    def match(self) -> None:
        desc_init = self.desc_root.init if self.desc_root is not None else None
        if self.block.init is not None and desc_init is None:
            self.fail(
                "the block has a T.init() and the description does not; "
                "decompose_reduction(block, loop) first moves the init into a block of its own"
            )
        if self.block.init is None and desc_init is not None:
            self.fail("the description has a T.init() and the block does not")
        if self.block.init is not None:
            with self.at("T.init()"):
                self.stmt(self.block.init, desc_init)
        self.stmt(self.block.body, self.desc_body)
        unused = [b.name for b in self.desc_buffers if id(b) not in self.buffers]
        if unused:
            self.fail(
                f"the description never accesses its buffer(s) {', '.join(unused)}, so "
                "nothing says which region of the block's buffers they stand for"
            )

    @contextlib.contextmanager
    def at(self, step: str) -> Iterator[None]:
        """Compare inside ``step`` (a loop, a block, a branch): where an error says it is."""
        self.path.append(step)
        yield
        self.path.pop()

    def binding(self, desc_buffer: Buffer) -> _Binding:
        return self.buffers[id(desc_buffer)]

    # ------------------------------------------------------------------ statements
    def stmt(self, b: S.Stmt, d: S.Stmt) -> None:
        self.context = ("has", b, d)
        if type(b) is not type(d):
            self.fail(f"the block has {_kind(b)} where the description has {_kind(d)}")
        if isinstance(b, S.SeqStmt):
            if len(b.seq) != len(d.seq):
                self.fail(
                    f"the block has {len(b.seq)} statements in a row where the description "
                    f"has {len(d.seq)}"
                )
            for i, (bs, ds) in enumerate(zip(b.seq, d.seq)):
                with self.at(f"statement {i + 1}"):
                    self.stmt(bs, ds)
        elif isinstance(b, S.For):
            self.expr_in("has", b, d, b.min, d.min)
            self.expr_in("has", b, d, b.extent, d.extent)
            self.define(d.loop_var, b.loop_var)
            with self.at(f"for {b.loop_var.name_hint}"):
                self.stmt(b.body, d.body)
        elif isinstance(b, S.BlockRealize):
            self.block_realize(b, d)
        elif isinstance(b, S.BufferStore):
            written = E.BufferLoad(b.buffer, b.indices), E.BufferLoad(d.buffer, d.indices)
            self.expr_in("writes", *written, *written)
            self.expr_in("computes", b.value, d.value, b.value, d.value)
        elif isinstance(b, S.Evaluate):
            self.expr_in("evaluates", b.value, d.value, b.value, d.value)
        elif isinstance(b, S.IfThenElse):
            self.expr_in("tests", b.condition, d.condition, b.condition, d.condition)
            with self.at("then"):
                self.stmt(b.then_case, d.then_case)
            if (b.else_case is None) != (d.else_case is None):
                self.fail("one side has an else branch and the other does not")
            if b.else_case is not None:
                with self.at("else"):
                    self.stmt(b.else_case, d.else_case)
        else:
            self.fail(
                f"tensorize compares loops, blocks, stores, conditions and evaluations; "
                f"the description has {_kind(d)}"
            )

    def block_realize(self, b: S.BlockRealize, d: S.BlockRealize) -> None:
        bb, db = b.block, d.block
        if len(bb.iter_vars) != len(db.iter_vars):
            self.fail(
                f"block {bb.name_hint!r} has {len(bb.iter_vars)} iter vars where the "
                f"description's block has {len(db.iter_vars)}"
            )
        with self.at(f"block {bb.name_hint!r}"):
            for biv, div, bv, dv in zip(bb.iter_vars, db.iter_vars, b.iter_values, d.iter_values):
                if biv.iter_type != div.iter_type:
                    self.fail(
                        f"iter var {biv.var.name_hint} is {_iter_kind(biv)} where the "
                        f"description's {div.var.name_hint} is {_iter_kind(div)}"
                    )
                self.expr_in("binds", bv, dv, bv, dv)
                self.expr_in("declares", biv, div, biv.dom.min, div.dom.min)
                self.expr_in("declares", biv, div, biv.dom.extent, div.dom.extent)
                self.define(div.var, biv.var)
            self.expr_in("has the predicate", b.predicate, d.predicate, b.predicate, d.predicate)
            if _extras(bb) != _extras(db):
                self.fail(
                    f"block {bb.name_hint!r} has {_extras(bb)} where the description's block has "
                    f"{_extras(db)}"
                )
            if bb.init is not None:
                with self.at("T.init()"):
                    self.stmt(bb.init, db.init)
            self.stmt(bb.body, db.body)

    def define(self, desc_var: E.Var, block_var: E.Var) -> None:
        self.vars[id(desc_var)] = block_var
        self.names[id(block_var)] = desc_var

    # ------------------------------------------------------------------ expressions
    def expr_in(self, verb: str, b_whole: Any, d_whole: Any, b: Any, d: Any) -> None:
        """Compare ``b`` with ``d``, parts of ``b_whole`` and ``d_whole`` (what an error
        shows, saying the block ``verb`` it)."""
        self.context = (verb, b_whole, d_whole)
        self.expr(b, d)

    def expr(self, b: Any, d: Any) -> None:
        if isinstance(d, E.Var):
            expected = self.vars.get(id(d), d)
            if b is not expected:
                self.differ(b, d)
            return
        if type(b) is not type(d):
            self.differ(b, d)
        if isinstance(b, E.IntImm):
            if b.value != d.value:
                self.differ(b, d)
        elif isinstance(b, E.FloatImm):
            if b.value != d.value or b.dtype != d.dtype:
                self.differ(b, d)
        elif isinstance(b, E.BufferLoad):
            self.access(b, d)
        else:
            if isinstance(b, (E.Cast, E.Call)) and b.dtype != d.dtype:
                self.differ(b, d)
            for (_, bf), (_, df) in zip(b.structural_fields(), d.structural_fields()):
                self.field(b, d, bf, df)

    def field(self, b: Any, d: Any, bf: Any, df: Any) -> None:
        if isinstance(bf, (tuple, list)):
            if not isinstance(df, (tuple, list)) or len(bf) != len(df):
                self.differ(b, d)
            for bi, di in zip(bf, df):
                self.field(b, d, bi, di)
        elif isinstance(df, E.PrimExpr):
            self.expr(bf, df)
        elif bf != df:
            self.differ(b, d)

    def access(self, b: E.BufferLoad, d: E.BufferLoad) -> None:
        """``b`` accesses what ``d`` does: ``d``'s buffer stands for a region of ``b``'s (bound
        on first sight) and each index of ``b`` minus the region's start is ``d``'s."""
        bound = self.buffers.get(id(d.buffer))
        if bound is None:
            bound = self.bind(b.buffer, d.buffer)
        elif bound.buffer is not b.buffer:
            self.differ(
                b,
                d,
                f"the block accesses {b.buffer.name} where the description accesses "
                f"{d.buffer.name}, which stands for the block's {bound.buffer.name}",
            )
        lead = len(bound.region) - len(d.indices)
        if len(b.indices) != len(bound.region):
            self.differ(b, d)
        for index, rng in zip(b.indices[:lead], bound.region):
            if not self.analyzer.can_prove_equal(index, rng.min):
                self.differ(b, d)
        for index, rng, desc_index in zip(b.indices[lead:], bound.region[lead:], d.indices):
            relative = self.analyzer.simplify(index - rng.min)
            if not self.analyzer.can_prove_equal(relative, self.in_block_terms(desc_index)):
                self.differ(b, d)

    def bind(self, buffer: Buffer, desc_buffer: Buffer) -> _Binding:
        if not any(desc_buffer is p for p in self.desc_buffers):
            self.fail(
                f"the description accesses {desc_buffer.name}, which is not one of its "
                "parameters' buffers; only those can stand for the block's"
            )
        for other in self.desc_buffers:
            if id(other) in self.buffers and self.buffers[id(other)].buffer is buffer:
                self.fail(
                    f"the block's {buffer.name} would stand for two of the description's "
                    f"buffers, {other.name} and {desc_buffer.name}"
                )
        what = f"the block's {buffer.name} and the description's {desc_buffer.name}"
        if buffer.scope != desc_buffer.scope:
            self.fail(
                f"{what} are in different storage scopes: {buffer.scope} and "
                f"{desc_buffer.scope} (cache_read/cache_write with "
                f"storage_scope={desc_buffer.scope!r} makes a copy in that scope)"
            )
        if buffer.dtype != desc_buffer.dtype:
            self.fail(f"{what} differ in dtype: {buffer.dtype} and {desc_buffer.dtype}")
        region = next(
            (r.region for r in (*self.block.writes, *self.block.reads) if r.buffer is buffer),
            None,
        )
        if region is None:
            self.fail(f"the block accesses {buffer.name}, which its T.reads/T.writes do not list")
        extents = [r.extent for r in region]
        lead = len(extents) - len(desc_buffer.shape)
        fits = lead >= 0 and all(E.is_const_int(e, 1) for e in extents[:lead])
        fits = fits and all(
            self.analyzer.can_prove_equal(e, s) for e, s in zip(extents[lead:], desc_buffer.shape)
        )
        if not fits:
            shown = ", ".join(f"{r.min.script()}:{(r.min + r.extent).script()}" for r in region)
            shape = ", ".join(s.script() for s in desc_buffer.shape)
            self.fail(
                f"the block's region {buffer.name}[{shown}] does not have the shape ({shape}) "
                f"of the description's {desc_buffer.name}"
            )
        self.buffers[id(desc_buffer)] = _Binding(buffer, region)
        return self.buffers[id(desc_buffer)]

    def in_block_terms(self, desc_expr: E.PrimExpr) -> E.PrimExpr:
        return substitute(desc_expr, lambda v: self.vars.get(id(v)))

    # ------------------------------------------------------------------ reporting
    def differ(self, b: Any, d: Any, what: str | None = None) -> NoReturn:
        if what is None:
            if isinstance(b, E.BinaryOpExpr) and isinstance(d, E.BinaryOpExpr):
                # Operands may still match: name the operations, not the whole subtrees.
                shown = f"{type(b).__name__} in the block, {type(d).__name__}"
            else:
                shown = f"{self.show(b)} in the block, {self.show(d, desc=True)}"
            what = f"first difference: {shown} in the description"
        self.fail(what)

    def fail(self, what: str) -> NoReturn:
        if self.loose:
            raise ScheduleError(what)
        verb, b_whole, d_whole = self.context
        where = " > ".join(self.path) or "the top of the block's body"
        lines = [
            f"block {self.block.name_hint!r} does not match intrinsic {self.intrin_name!r} "
            f"at {where}:"
        ]
        if b_whole is not None and d_whole is not None:
            # The block's side in the description's names, so that only real differences
            # show: bind what the comparison had not reached yet where the shapes agree.
            self.loose = True
            self.bind_loosely(b_whole, d_whole)
            b_text, d_text = self.show(b_whole), self.show(d_whole, desc=True)
            width = len(f"the description {verb}:")
            lines.append(f"  {f'the block {verb}:':<{width}} {b_text}")
            lines.append(f"  {f'the description {verb}:':<{width}} {d_text}")
            what += " (the block's names shown as the description's they stand for)"
        lines.append(f"  {what}")
        raise ScheduleError("tensorize: " + "\n".join(lines))

    def bind_loosely(self, b: Any, d: Any) -> None:
        """Bind the description buffers ``d`` accesses where ``b`` has an access in the same
        place, ignoring every other difference (only to show the block in the description's
        names)."""
        loads = isinstance(b, E.BufferLoad) and isinstance(d, E.BufferLoad)
        if loads and id(d.buffer) not in self.buffers:
            try:
                self.bind(b.buffer, d.buffer)
            except ScheduleError:
                return
        if isinstance(b, E.PrimExpr) and isinstance(d, E.PrimExpr):
            same_shape = type(b) is type(d) or (
                isinstance(b, E.BinaryOpExpr) and isinstance(d, E.BinaryOpExpr)
            )
            if same_shape:
                for (_, bf), (_, df) in zip(b.structural_fields(), d.structural_fields()):
                    self.bind_loosely(bf, df)
        elif isinstance(b, (tuple, list)) and isinstance(d, (tuple, list)):
            for bi, di in zip(b, d):
                self.bind_loosely(bi, di)

    def show(self, node: Any, desc: bool = False) -> str:
        """One line of ``node`` (the block's in the description's names)."""
        if not desc:
            node = _InDescTerms(self).visit(node)
        return _one_line(node)


class _InDescTerms(StmtExprMutator):
    """The block's code with its variables and buffers renamed to the description's ones
    they stand for, and indices made relative to the regions bound (to show side by side)."""

    def __init__(self, matcher: _Matcher):
        self.matcher = matcher
        self.by_buffer = {
            id(binding.buffer): (desc, binding)
            for desc in matcher.desc_buffers
            if (binding := matcher.buffers.get(id(desc))) is not None
        }

    def visit_var_(self, op: E.Var) -> E.PrimExpr:
        return self.matcher.names.get(id(op), op)

    def visit_buffer_load_(self, op: E.BufferLoad) -> E.PrimExpr:
        indices = [self.visit(i) for i in op.indices]
        hit = self.by_buffer.get(id(op.buffer))
        if hit is None or len(indices) != len(hit[1].region):
            return E.BufferLoad(op.buffer, indices)
        desc, binding = hit
        lead = len(binding.region) - len(desc.shape)
        starts = [self.visit(r.min) for r in binding.region[lead:]]
        relative = [self.matcher.analyzer.simplify(i - s) for i, s in zip(indices[lead:], starts)]
        return E.BufferLoad(desc, relative)


def _one_line(node: Any) -> str:
    if isinstance(node, E.IterVar):
        dom = _range_text(node.dom.min, node.dom.extent)
        return f"{node.var.name_hint} in range({dom}), {_iter_kind(node)}"
    if isinstance(node, S.For):
        return f"for {node.loop_var.name_hint} in range({_range_text(node.min, node.extent)})"
    if isinstance(node, S.BlockRealize):
        return f"block {node.block.name_hint!r}"
    if isinstance(node, S.Stmt):
        return _kind(node)
    return node.script()


def _range_text(start: E.PrimExpr, extent: E.PrimExpr) -> str:
    if E.is_const_int(start, 0):
        return extent.script()
    return f"{start.script()}, {(start + extent).script()}"


def _kind(stmt: Any) -> str:
    if isinstance(stmt, S.For):
        return f"a loop ({_one_line(stmt)})"
    if isinstance(stmt, S.BlockRealize):
        return f"a block ({stmt.block.name_hint!r})"
    if isinstance(stmt, S.BufferStore):
        return f"a store to {stmt.buffer.name}"
    if isinstance(stmt, S.SeqStmt):
        return f"{len(stmt.seq)} statements in a row"
    return f"a {type(stmt).__name__}"


def _iter_kind(iv: E.IterVar) -> str:
    return {E.IterVarType.DataPar: "spatial", E.IterVarType.CommReduce: "a reduction"}.get(
        iv.iter_type, "opaque"
    )


def _extras(block: S.Block) -> str:
    init = "a T.init()" if block.init is not None else "no T.init()"
    return f"{init} and {len(block.alloc_buffers)} allocated buffer(s)"


# ---------------------------------------------------------------------------- replacing
def _implement(sch: ScheduleState, block: S.Block, matcher: _Matcher, impl: PrimFunc) -> S.Block:
    """``block`` with a fresh copy of ``impl``'s body, each of ``impl``'s buffers viewing the
    region its description buffer stood for."""
    taken = {r.block.name_hint for r in sch.walk_blocks(sch.func.body)}
    renew = _Renew(sch, taken)
    root = impl.body
    impl_root = root.block if isinstance(root, S.BlockRealize) else None
    matches = []
    for desc_buffer, impl_buffer in zip(matcher.desc_buffers, param_buffers(impl, "impl")):
        binding = matcher.binding(desc_buffer)
        source = BufferRegion(binding.buffer, binding.region)
        matches.append(MatchBufferRegion(renew.visit_buffer(impl_buffer), source))
    if impl_root is None:
        impl_root = S.Block([], [], [], "root", root)
    return block.with_fields(
        body=renew.visit(impl_root.body),
        init=renew.visit(impl_root.init),
        alloc_buffers=(*block.alloc_buffers, *renew.visit(impl_root.alloc_buffers)),
        match_buffers=(*block.match_buffers, *matches, *renew.visit(impl_root.match_buffers)),
    )


class _Renew(RenewDefs):
    """A copy of the implementation with new variables (free ones too: it is a function of its
    own), buffers and block names, so that tensorizing several blocks with one intrinsic
    shares nothing between them."""

    def __init__(self, sch: ScheduleState, taken: set[str]):
        super().__init__()
        self.sch, self.taken = sch, taken
        self.new_buffers: dict[int, Buffer] = {}

    def visit_var_(self, op: E.Var) -> E.PrimExpr:
        return self.fresh(op)

    def visit_block_(self, op: S.Block) -> S.Stmt:
        new = self.generic_visit(op)
        name = unique_name(op.name_hint, self.taken)
        self.taken.add(name)
        return new.with_fields(name_hint=name)

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        if id(buffer) not in self.new_buffers:
            self.new_buffers[id(buffer)] = buffer.with_fields(
                data=self.fresh(buffer.data),
                shape=self.visit(buffer.shape),
                strides=self.visit(buffer.strides),
                elem_offset=self.visit(buffer.elem_offset),
            )
        return self.new_buffers[id(buffer)]
