"""``transform_layout``: change how a buffer's elements are laid out in memory.

``transform_layout(block, ("write", 0), lambda i, j: [i // 4, j, i % 4])`` gives the buffer
the shape the map's values range over (``(32, 128, 4)`` for a ``(128, 128)`` buffer) and
rewrites every access ``Y[a, b]`` of the function into ``Y[a // 4, b, a % 4]``; the loops do
not change. The map must be a bijection from the old shape onto the new one: every element
keeps exactly one place and no padding appears (``pad_value`` is not supported). A parameter's
layout may change too, which changes the function's signature, as in TVM.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mlckit.arith import Analyzer
from mlckit.errors import ScheduleError

from ... import expr as E
from ... import stmt as S
from ...buffer import Buffer, BufferRegion
from ...stmt_functor import StmtExprMutator, substitute
from ..state import BlockRV, ScheduleState, _walk
from .block_scope import NotEvaluable, evaluate, used_vars

# Largest buffer whose map is checked element by element where its new indices mix old ones;
# beyond it only permutations of the axes pass.
_MAX_CHECKED_ELEMENTS = 1 << 24


def transform_layout(
    sch: ScheduleState,
    block: BlockRV,
    buffer: tuple[str, int] | str,
    index_map: Callable[..., Any],
    pad_value: Any = None,
) -> None:
    blk = sch.block_realize(block).block
    target = _find_buffer(blk, buffer)
    where = f"buffer {target.name!r} of block {blk.name_hint!r}"
    if pad_value is not None:
        raise ScheduleError(
            f"transform_layout: pad_value is not supported ({where}); use a map that is a "
            "bijection onto the new shape"
        )
    func = sch.func
    is_param = any(b is target for b in func.buffer_map.values())
    nodes = list(_walk(func.body))
    allocated = any(
        isinstance(n, S.Block) and any(b is target for b in n.alloc_buffers) for n in nodes
    )
    if not (is_param or allocated):
        raise ScheduleError(
            f"transform_layout: {where} is neither a parameter nor allocated by a block "
            "(T.alloc_buffer); a match_buffer view cannot change layout"
        )
    if any(
        isinstance(n, S.Block) and any(m.source.buffer is target for m in n.match_buffers)
        for n in nodes
    ):
        raise ScheduleError(
            f"transform_layout: {where} is viewed by a T.match_buffer, whose region would "
            "need the new layout too"
        )
    if target.strides:
        raise ScheduleError(f"transform_layout: {where} has explicit strides")
    params, outputs = _apply(index_map, target, where)
    new_shape = _new_shape(target, params, outputs, where)
    new_buffer = target.with_fields(shape=tuple(new_shape))
    rewriter = _Relayout(target, new_buffer, params, outputs)
    buffer_map = {p: (new_buffer if b is target else b) for p, b in func.buffer_map.items()}
    sch.set_func(func.with_fields(body=rewriter.visit(func.body), buffer_map=buffer_map))


def _find_buffer(block: S.Block, spec: Any) -> Buffer:
    name = repr(block.name_hint)
    if isinstance(spec, str):
        for region in (*block.reads, *block.writes):
            if region.buffer.name == spec:
                return region.buffer
        names = ", ".join(sorted({r.buffer.name for r in (*block.reads, *block.writes)}))
        raise ScheduleError(
            f"transform_layout: block {name} accesses no buffer named {spec!r} "
            f"(it accesses {names or 'none'})"
        )
    if isinstance(spec, tuple | list) and len(spec) == 2 and spec[0] in ("read", "write"):
        kind, index = spec
        regions = block.reads if kind == "read" else block.writes
        if not isinstance(index, int) or not 0 <= index < len(regions):
            raise ScheduleError(
                f"transform_layout: {kind} index {index} is out of range: block {name} "
                f"{kind}s {len(regions)} buffer(s)"
            )
        return regions[index].buffer
    raise ScheduleError(
        f"transform_layout: name the buffer of block {name} as ('read', i), ('write', i) or "
        f"by its name, not {spec!r}"
    )


def _apply(
    index_map: Callable[..., Any], buffer: Buffer, where: str
) -> tuple[list[E.Var], list[E.PrimExpr]]:
    """The map's parameters (one Var per old dimension) and its results on them."""
    if not callable(index_map):
        raise ScheduleError(
            f"transform_layout: index_map for {where} must be a function such as "
            f"lambda i, j: [i // 4, j, i % 4], not {type(index_map).__name__}"
        )
    names = [
        p.name
        for p in inspect.signature(index_map).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(names) != buffer.ndim:
        raise ScheduleError(
            f"transform_layout: index_map takes {len(names)} argument(s) but {where} has "
            f"{buffer.ndim} dimension(s)"
        )
    params = [E.Var(n, dim.dtype) for n, dim in zip(names, buffer.shape)]
    result = index_map(*params)
    items = result if isinstance(result, list | tuple) else [result]
    outputs = []
    for item in items:
        value = E.convert(item)
        if not value.dtype.startswith(("int", "uint")):
            raise ScheduleError(
                f"transform_layout: index_map for {where} returned {value.script()}, "
                "which is not an integer index"
            )
        outputs.append(value)
    if not outputs:
        raise ScheduleError(f"transform_layout: index_map for {where} returned no index")
    return params, outputs


def _new_shape(
    buffer: Buffer, params: list[E.Var], outputs: list[E.PrimExpr], where: str
) -> list[E.PrimExpr]:
    """The extents the map's results range over; raises unless the map is a bijection."""
    analyzer = Analyzer()
    dom = {
        p: E.Range.from_min_extent(E.make_const(0, d.dtype), d)
        for p, d in zip(params, buffer.shape)
    }
    shape = []
    for k, out in enumerate(outputs):
        bounds = analyzer.int_set(out, dom)
        if bounds.min_value is None or bounds.max_value is None:
            raise ScheduleError(
                f"transform_layout: new index {k} ({out.script()}) of {where} has no bounds"
            )
        if not analyzer.can_prove_equal(bounds.min_value, 0):
            raise ScheduleError(
                f"transform_layout: new index {k} ({out.script()}) of {where} starts at "
                f"{bounds.min_value.script()}, not 0"
            )
        shape.append(analyzer.simplify(bounds.max_value + 1))
    old = [d.value if isinstance(d, E.IntImm) else None for d in buffer.shape]
    new = [d.value if isinstance(d, E.IntImm) else None for d in shape]
    text = f"({', '.join(s.script() for s in shape)})"
    if None not in old and None not in new:
        if int(np.prod(new)) != int(np.prod(old)):
            raise ScheduleError(
                f"transform_layout: index_map puts the {int(np.prod(old))} elements of {where} "
                f"into a {text} buffer of {int(np.prod(new))}: it is not a bijection "
                "(padding with pad_value is not supported)"
            )
        # A map whose new indices each read one old index (a split, a transpose, a fuse's
        # inverse) is a bijection when each old index's part is: check them one by one, a
        # few thousand places each, not every element of a large buffer.
        parts = _parts_by_old_index(params, outputs)
        if parts is None and int(np.prod(old)) <= _MAX_CHECKED_ELEMENTS:
            parts = [(list(range(len(params))), list(range(len(outputs))))]
        if parts is not None:
            for ins, outs in parts:
                _check_bijection(
                    [params[i] for i in ins],
                    [old[i] for i in ins],
                    [outputs[k] for k in outs],
                    [new[k] for k in outs],
                    where,
                    text,
                )
            return shape
    # A symbolic shape: only a permutation of the axes is known to be a bijection.
    if not (
        len(outputs) == len(params)
        and all(isinstance(o, E.Var) for o in outputs)
        and len(used_vars(outputs)) == len(params)
    ):
        raise ScheduleError(
            f"transform_layout: cannot prove that index_map is a bijection on the shape of "
            f"{where}; with a symbolic (or very large) shape only permutations of the axes "
            "are accepted"
        )
    return shape


def _parts_by_old_index(
    params: list[E.Var], outputs: list[E.PrimExpr]
) -> list[tuple[list[int], list[int]]] | None:
    """(one old index, the new indices computed from it) for each old index, when every new
    index reads at most one old index; None otherwise."""
    parts: list[tuple[list[int], list[int]]] = [([i], []) for i in range(len(params))]
    position = {id(p): i for i, p in enumerate(params)}
    for k, out in enumerate(outputs):
        used = [position[v] for v in used_vars(out) if v in position]
        if len(used) > 1:
            return None
        if used:
            parts[used[0]][1].append(k)
    return parts


def _check_bijection(
    params: list[E.Var],
    old: list[int],
    outputs: list[E.PrimExpr],
    new: list[int],
    where: str,
    text: str,
) -> None:
    """Raise unless ``outputs`` map the grid ``old`` of ``params`` one to one onto ``new`` (a
    part of the map: the whole map's sizes agree, so a part with more places than elements
    leaves another part too few)."""
    several = ScheduleError(
        f"transform_layout: index_map sends several elements of {where} to the same "
        f"place of the new {text} buffer: it is not a bijection"
    )
    if int(np.prod(new)) != int(np.prod(old)):
        raise several
    grid = np.indices(old, dtype=np.int64).reshape(len(old), -1)
    env = {id(p): grid[k] for k, p in enumerate(params)}
    try:
        places = [np.broadcast_to(evaluate(out, env), grid.shape[1:]) for out in outputs]
    except NotEvaluable as err:
        raise ScheduleError(
            f"transform_layout: index_map for {where} cannot be evaluated on the indices "
            f"({err}); use + - * // % min max of the indices and integer constants"
        ) from None
    flat = np.ravel_multi_index(places, new) if places else np.zeros(1, np.int64)
    if len(np.unique(flat)) != flat.size:
        raise several


class _Relayout(StmtExprMutator):
    """Every access to ``old`` becomes an access to ``new`` at the mapped indices."""

    def __init__(self, old: Buffer, new: Buffer, params: list[E.Var], outputs: list[E.PrimExpr]):
        self.old, self.new = old, new
        self.params, self.outputs = params, outputs
        self.analyzer = Analyzer()

    def map_point(self, indices: Sequence[E.PrimExpr]) -> list[E.PrimExpr]:
        values = dict(zip(self.params, indices))
        return [self.analyzer.simplify(substitute(o, values)) for o in self.outputs]

    def visit_buffer(self, buffer: Buffer) -> Buffer:
        return self.new if buffer is self.old else buffer

    def visit_buffer_load_(self, op: E.BufferLoad) -> E.PrimExpr:
        indices = self.visit(op.indices)
        if op.buffer is self.old:
            return E.BufferLoad(self.new, self.map_point(indices))
        return op if indices is op.indices else E.BufferLoad(op.buffer, indices)

    def visit_buffer_store_(self, op: S.BufferStore) -> S.Stmt:
        value, indices = self.visit(op.value), self.visit(op.indices)
        if op.buffer is self.old:
            return S.BufferStore(self.new, value, self.map_point(indices))
        if value is op.value and indices is op.indices:
            return op
        return S.BufferStore(op.buffer, value, indices)

    def visit_buffer_region_(self, op: BufferRegion) -> BufferRegion:
        region = self.visit(op.region)
        if op.buffer is not self.old:
            return op if region is op.region else BufferRegion(op.buffer, region)
        # Point dimensions substitute; ranged ones relax the map over their range.
        points = {p: r.min for p, r in zip(self.params, region) if E.is_const_int(r.extent, 1)}
        dom = {p: r for p, r in zip(self.params, region) if not E.is_const_int(r.extent, 1)}
        ranges = []
        for out, dim in zip(self.outputs, self.new.shape):
            value = self.analyzer.simplify(substitute(out, points))
            if not used_vars(value) & {id(p) for p in dom}:
                ranges.append(E.Range.from_min_extent(value, E.make_const(1, value.dtype)))
                continue
            bounds = self.analyzer.int_set(value, dom)
            if bounds.min_value is None or bounds.max_value is None:
                ranges.append(E.Range.from_min_extent(E.make_const(0, dim.dtype), dim))
                continue
            extent = self.analyzer.simplify(bounds.max_value - bounds.min_value + 1)
            ranges.append(E.Range.from_min_extent(bounds.min_value, extent))
        return BufferRegion(self.new, ranges)
