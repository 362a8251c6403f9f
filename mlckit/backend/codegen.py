"""TensorIR -> readable Python: the course's "low-level numpy".

A PrimFunc becomes one Python function with destination passing: buffers arrive as numpy
arrays, symbolic shape variables are read off their shapes, blocks turn into plain code
(iter vars bound to their loop values, ``T.init`` into ``if k == 0:``, ``T.where`` into an
``if``, block allocations into ``np.empty``), and loops stay loops. The same text runs under
CPython (target "python") and under ``numba.njit`` (target "llvm"), where ``parallel`` loops
become ``prange``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mlckit.errors import BuildError
from mlckit.ir.dtype import is_float
from mlckit.ir.name_supply import NameSupply
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.buffer import Buffer, BufferRegion
from mlckit.tir.function import PrimFunc

# Names the generated module defines or imports; user identifiers never take them.
RESERVED = frozenset(
    {
        "np",
        "math",
        "numba",
        "prange",
        "range",
        "min",
        "max",
        "abs",
        "int",
        "float",
        "bool",
        "truncdiv",
        "truncmod",
        "NoAliasCompiler",
        "VMError",
        "len",
        "print",
    }
)

# Python precedence levels (higher binds tighter).
_PREC_TERNARY, _PREC_OR, _PREC_AND, _PREC_NOT, _PREC_CMP = 1, 2, 3, 4, 5
_PREC_ADD, _PREC_MUL, _PREC_UNARY, _PREC_ATOM = 6, 7, 8, 10

_INFIX: dict[type, tuple[str, int]] = {
    E.Add: ("+", _PREC_ADD),
    E.Sub: ("-", _PREC_ADD),
    E.Mul: ("*", _PREC_MUL),
    E.FloorDiv: ("//", _PREC_MUL),
    E.FloorMod: ("%", _PREC_MUL),
    E.EQ: ("==", _PREC_CMP),
    E.NE: ("!=", _PREC_CMP),
    E.LT: ("<", _PREC_CMP),
    E.LE: ("<=", _PREC_CMP),
    E.GT: (">", _PREC_CMP),
    E.GE: (">=", _PREC_CMP),
    E.And: ("and", _PREC_AND),
    E.Or: ("or", _PREC_OR),
}

# tir intrinsic -> a format string over the argument texts (arguments already parenthesized
# as atoms where the template needs it).
_INTRINSICS: dict[str, Callable[[list[str], str], str]] = {
    "tir.exp": lambda a, t: f"np.exp({a[0]})",
    "tir.log": lambda a, t: f"np.log({a[0]})",
    "tir.sqrt": lambda a, t: f"np.sqrt({a[0]})",
    "tir.tanh": lambda a, t: f"np.tanh({a[0]})",
    "tir.sin": lambda a, t: f"np.sin({a[0]})",
    "tir.cos": lambda a, t: f"np.cos({a[0]})",
    "tir.floor": lambda a, t: f"np.floor({a[0]})",
    "tir.ceil": lambda a, t: f"np.ceil({a[0]})",
    "tir.round": lambda a, t: f"np.rint({a[0]})",
    "tir.fabs": lambda a, t: f"abs({a[0]})",
    "tir.abs": lambda a, t: f"abs({a[0]})",
    "tir.erf": lambda a, t: f"np.{t}(math.erf({a[0]}))",
    "tir.sigmoid": lambda a, t: f"np.{t}(1) / (np.{t}(1) + np.exp(-{a[0]}))",
    "tir.rsqrt": lambda a, t: f"np.{t}(1) / np.sqrt({a[0]})",
    "tir.pow": lambda a, t: f"{a[0]} ** {a[1]}",
}


@dataclass
class GeneratedFunction:
    """The Python source of one PrimFunc and what the caller needs to know to call it."""

    name: str
    source: str
    param_names: list[str]
    uses_prange: bool = False
    helpers: set[str] = field(default_factory=set)
    # The function raises mlckit.errors.VMError for an argument of the wrong shape.
    checks_shapes: bool = False


class PrimExprPrinter:
    """Python text for PrimExprs, with names from a shared NameSupply.

    Used for kernel bodies and, by relax.build, for shape arithmetic in the VM's functions.
    """

    # How each tir intrinsic is spelled (the cuda code generator spells some differently).
    intrinsics = _INTRINSICS

    def __init__(self, names: NameSupply):
        self.names = names
        # Block iter vars bound directly to a loop variable are replaced by it.
        self.substitution: dict[int, E.PrimExpr] = {}
        self.helpers: set[str] = set()

    def substitute(self, value: E.PrimExpr) -> E.PrimExpr:
        if isinstance(value, E.Var):
            return self.substitution.get(id(value), value)
        return value

    def load_text(self, buffer: Buffer, indices: tuple[E.PrimExpr, ...]) -> str:
        name = self.names.get(buffer, buffer.name)
        # A 0-d buffer's only element is `X[()]`.
        return f"{name}[{', '.join(self.expr(i) for i in indices) or '()'}]"

    def expr(self, node: E.PrimExpr) -> str:
        return self._expr(node)[0]

    def _expr(self, node: E.PrimExpr) -> tuple[str, int]:
        """The text of ``node`` and its precedence."""
        if isinstance(node, E.Var):
            target = self.substitution.get(id(node))
            if target is not None:
                return self._expr(target)
            return self.names.get(node, node.name_hint), _PREC_ATOM
        if isinstance(node, E.IntImm):
            if node.dtype == "bool":
                return ("True" if node.value else "False"), _PREC_ATOM
            return str(node.value), (_PREC_ATOM if node.value >= 0 else _PREC_UNARY)
        if isinstance(node, E.FloatImm):
            # Wrap float constants so float32 arithmetic stays float32 (no float64 promotion).
            return f"np.{node.dtype}({node.value!r})", _PREC_ATOM
        if isinstance(node, E.BufferLoad):
            return self.load_text(node.buffer, node.indices), _PREC_ATOM
        infix = _INFIX.get(type(node))
        if infix is not None:
            symbol, prec = infix
            return self._infix(node.a, node.b, symbol, prec), prec  # type: ignore[attr-defined]
        if isinstance(node, E.Div):
            if is_float(node.dtype):
                return self._infix(node.a, node.b, "/", _PREC_MUL), _PREC_MUL
            self.helpers.add("truncdiv")
            return f"truncdiv({self.expr(node.a)}, {self.expr(node.b)})", _PREC_ATOM
        if isinstance(node, E.Mod):
            if is_float(node.dtype):
                return f"np.fmod({self.expr(node.a)}, {self.expr(node.b)})", _PREC_ATOM
            self.helpers.add("truncmod")
            return f"truncmod({self.expr(node.a)}, {self.expr(node.b)})", _PREC_ATOM
        if isinstance(node, (E.Min, E.Max)):
            fn = "min" if isinstance(node, E.Min) else "max"
            return f"{fn}({self.expr(node.a)}, {self.expr(node.b)})", _PREC_ATOM
        if isinstance(node, E.Not):
            return f"not {self._wrap(node.a, _PREC_NOT)}", _PREC_NOT
        if isinstance(node, E.Select):
            return self._ternary(node.condition, node.true_value, node.false_value), _PREC_TERNARY
        if isinstance(node, E.Cast):
            return self._cast(node.dtype, node.value), _PREC_ATOM
        if isinstance(node, E.Call):
            return self._call(node), _PREC_ATOM
        if isinstance(node, E.Let):
            raise BuildError("Let expressions are not supported by code generation; use LetStmt")
        raise BuildError(f"code generation does not support the expression {type(node).__name__}")

    def _wrap(self, node: E.PrimExpr, min_prec: int) -> str:
        text, prec = self._expr(node)
        return f"({text})" if prec < min_prec else text

    def _infix(self, a: E.PrimExpr, b: E.PrimExpr, symbol: str, prec: int) -> str:
        # Left-associative: the right operand needs parentheses at equal precedence;
        # comparisons chain in Python, so both sides do.
        left_min = prec + 1 if prec == _PREC_CMP else prec
        return f"{self._wrap(a, left_min)} {symbol} {self._wrap(b, prec + 1)}"

    def _ternary(self, cond: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr) -> str:
        return (
            f"{self._wrap(t, _PREC_TERNARY + 1)} if {self._wrap(cond, _PREC_TERNARY + 1)} "
            f"else {self._wrap(f, _PREC_TERNARY)}"
        )

    def _cast(self, dtype: str, value: E.PrimExpr) -> str:
        if _is_widening_int_cast(value.dtype, dtype):
            return self.expr(value)  # Python and numba integers already hold every value
        if dtype == "bool":
            return f"bool({self.expr(value)})"
        return f"np.{dtype}({self.expr(value)})"

    def _call(self, node: E.Call) -> str:
        name = node.op.name
        if name == "tir.if_then_else":
            cond, t, f = node.args
            return f"({self._ternary(cond, t, f)})"
        template = self.intrinsics.get(name)
        if template is None:
            raise BuildError(f"code generation does not know the intrinsic {name}")
        args = [
            self._wrap(a, _PREC_UNARY if name in ("tir.sigmoid", "tir.pow") else 0)
            for a in node.args
        ]
        return template(args, node.dtype)


class PythonCodegen(PrimExprPrinter):
    """Emit one PrimFunc as a Python function named ``name``."""

    def __init__(self, func: PrimFunc, name: str, *, parallel: bool = True):
        super().__init__(NameSupply(RESERVED))
        self.func = func
        # A kernel named like a builtin the code calls (``abs``, ``max``) must not shadow it.
        self.name = self.names.get(func, name)
        self.parallel = parallel
        self.lines: list[str] = []
        self.indent = 1
        self.uses_prange = False
        self.uses_shape_check = False
        self.inside_parallel = False

    # ------------------------------------------------------------------ entry point
    def generate(self) -> GeneratedFunction:
        params, buffers = self.signature()
        self._bind_shapes(buffers)
        self.stmt(self.func.body)
        if len(self.lines) == 0 or all(line.lstrip().startswith("#") for line in self.lines):
            self.emit("pass")
        header = f"def {self.name}({', '.join(params)}):"
        source = "\n".join([header, *self.lines]) + "\n"
        return GeneratedFunction(
            self.name, source, params, self.uses_prange, self.helpers, self.uses_shape_check
        )

    def signature(self) -> tuple[list[str], list[Buffer]]:
        """The parameter names, and the buffers the parameters are."""
        params: list[str] = []
        buffers: list[Buffer] = []
        for param in self.func.params:
            buffer = self.func.buffer_map.get(param)
            if buffer is not None:
                params.append(self.names.get(buffer, buffer.name))
                buffers.append(buffer)
            else:
                params.append(self.names.get(param, param.name_hint))
        return params, buffers

    def _bind_shapes(self, buffers: list[Buffer]) -> None:
        """Read symbolic dims off the argument arrays (``M, K = X.shape``), then check every
        other dim of every argument: a kernel's loops trust those extents, so an array of
        another shape would be read out of bounds or only partly written."""
        read_off: set[int] = set()  # buffers whose every dim was just read off the array
        for buffer in buffers:
            array = self.names.get(buffer, buffer.name)
            dims = list(buffer.shape)
            new_vars = [d for d in dims if isinstance(d, E.Var) and not self.names.has(d)]
            if not new_vars:
                continue
            if len(new_vars) == len(dims) and len({id(d) for d in dims}) == len(dims):
                targets = ", ".join(self.names.get(d, d.name_hint) for d in dims)
                self.emit(f"{targets}{',' if len(dims) == 1 else ''} = {array}.shape")
                read_off.add(id(buffer))
                continue
            for axis, dim in enumerate(dims):
                if isinstance(dim, E.Var) and not self.names.has(dim):
                    self.emit(f"{self.names.get(dim, dim.name_hint)} = {array}.shape[{axis}]")
        for buffer in buffers:
            if id(buffer) in read_off:
                continue
            array = self.names.get(buffer, buffer.name)
            dims = [self.expr(d) for d in buffer.shape]
            expected = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
            self.uses_shape_check = True
            self.emit(f"if {array}.shape != {expected}:")
            self.emit(f'    raise VMError("{self.name}: {array} must have shape {expected}")')

    # ------------------------------------------------------------------ statements
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def stmt(self, node: S.Stmt) -> None:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise BuildError(
                f"code generation does not support the statement {type(node).__name__}"
            )
        method(node)

    def body(self, node: S.Stmt) -> None:
        self.indent += 1
        mark = len(self.lines)
        self.stmt(node)
        if len(self.lines) == mark:
            self.emit("pass")
        self.indent -= 1

    def stmt_SeqStmt(self, node: S.SeqStmt) -> None:
        for s in node.seq:
            self.stmt(s)

    def stmt_For(self, node: S.For) -> None:
        # Names defined in the loop (its variable, block iter vars, local buffers) are free
        # again after it.
        scope = self.names.checkpoint()
        self.loop(node)
        self.names.restore(scope)

    def loop(self, node: S.For) -> None:
        var = self.names.get(node.loop_var, node.loop_var.name_hint)
        if node.kind == S.ForKind.THREAD_BINDING:
            tag = node.thread_binding.thread_tag if node.thread_binding else "a thread"
            raise BuildError(
                f"loop {node.loop_var.name_hint!r} is bound to {tag}; thread bindings only "
                "compile for the cuda target"
            )
        begin = self.expr(node.min)
        end = self.expr(E.Add(node.min, node.extent)) if not E.is_const_int(node.min, 0) else None
        bounds = f"{begin}, {end}" if end is not None else self.expr(node.extent)
        # Only the outermost parallel loop becomes prange: nested prange would serialize.
        use_prange = node.kind == S.ForKind.PARALLEL and self.parallel and not self.inside_parallel
        if node.kind == S.ForKind.VECTORIZED:
            self.emit("# vectorized: a simple innermost loop LLVM turns into SIMD")
        elif node.kind == S.ForKind.UNROLLED:
            self.emit("# unrolled")
        self.emit(f"for {var} in {'prange' if use_prange else 'range'}({bounds}):")
        if use_prange:
            self.uses_prange = True
            self.inside_parallel = True
        self.body(node.body)
        if use_prange:
            self.inside_parallel = False

    def stmt_BlockRealize(self, node: S.BlockRealize) -> None:
        block = node.block
        if block.name_hint and block.name_hint != "root":
            self.emit(f"# block {block.name_hint}")
        for iv, value in zip(block.iter_vars, node.iter_values):
            value = self.substitute(value)
            if isinstance(value, (E.Var, E.IntImm)):
                self.substitution[id(iv.var)] = value
            else:
                self.emit(f"{self.names.get(iv.var, iv.var.name_hint)} = {self.expr(value)}")
        guarded = not E.is_true(node.predicate)
        if guarded:
            self.emit(f"if {self.expr(node.predicate)}:")
            self.indent += 1
        for buffer in block.alloc_buffers:
            self.allocate(buffer)
        for match in block.match_buffers:
            self.match_buffer(match.buffer, match.source)
        if block.init is not None:
            self.init(block)
        self.stmt(block.body)
        if guarded:
            self.indent -= 1

    def init(self, block: S.Block) -> None:
        """``T.init()`` runs when every reduction iter var sits at the start of its domain."""
        conditions = [
            f"{self.expr(iv.var)} == {self.expr(iv.dom.min)}"
            for iv in block.iter_vars
            if iv.iter_type == E.IterVarType.CommReduce
        ]
        if not conditions:
            self.stmt(block.init)  # type: ignore[arg-type]
            return
        self.emit(f"if {' and '.join(conditions)}:")
        self.body(block.init)  # type: ignore[arg-type]

    def allocate(self, buffer: Buffer) -> None:
        name = self.names.get(buffer, buffer.name)
        shape = ", ".join(self.expr(s) for s in buffer.shape)
        if len(buffer.shape) == 1:
            shape += ","
        self.emit(f"{name} = np.empty(({shape}), dtype=np.{buffer.dtype})")

    def match_buffer(self, buffer: Buffer, source: BufferRegion) -> None:
        if len(buffer.shape) != len(source.region):
            raise BuildError(
                f"match_buffer {buffer.name!r}: only regions of the same rank as the source "
                f"buffer are supported ({len(buffer.shape)} vs {len(source.region)})"
            )
        slices = ", ".join(
            f"{self.expr(r.min)}:{self.expr(E.Add(r.min, r.extent))}" for r in source.region
        )
        source_name = self.names.get(source.buffer, source.buffer.name)
        self.emit(f"{self.names.get(buffer, buffer.name)} = {source_name}[{slices}]")

    def stmt_BufferStore(self, node: S.BufferStore) -> None:
        self.emit(f"{self.load_text(node.buffer, node.indices)} = {self.expr(node.value)}")

    def stmt_IfThenElse(self, node: S.IfThenElse) -> None:
        self.emit(f"if {self.expr(node.condition)}:")
        self.body(node.then_case)
        if node.else_case is not None:
            self.emit("else:")
            self.body(node.else_case)

    def stmt_LetStmt(self, node: S.LetStmt) -> None:
        self.emit(f"{self.names.get(node.var, node.var.name_hint)} = {self.expr(node.value)}")
        self.stmt(node.body)

    def stmt_Evaluate(self, node: S.Evaluate) -> None:
        if isinstance(node.value, (E.IntImm, E.FloatImm)):
            return  # T.evaluate(0) is a no-op
        self.emit(self.expr(node.value))

    def stmt_Allocate(self, node: S.Allocate) -> None:
        name = self.names.get(node.buffer_var, node.buffer_var.name_hint)
        extents = ", ".join(self.expr(e) for e in node.extents)
        self.emit(f"{name} = np.empty(({extents},), dtype=np.{node.dtype})")
        self.stmt(node.body)


# Helpers a function may use; emitted once per generated module, only when needed.
HELPER_SOURCE: dict[str, str] = {
    "truncdiv": (
        "def truncdiv(a, b):\n"
        "    # C-style integer division, rounding toward zero (TVM's Div on integers).\n"
        "    q = abs(a) // abs(b)\n"
        "    return q if (a >= 0) == (b >= 0) else -q\n"
    ),
    "truncmod": (
        "def truncmod(a, b):\n"
        "    # C-style remainder: takes the sign of the dividend (TVM's Mod on integers).\n"
        "    return a - truncdiv(a, b) * b\n"
    ),
}
HELPER_DEPENDENCIES = {"truncmod": {"truncdiv"}}


def _is_widening_int_cast(source: str, dest: str) -> bool:
    from mlckit.ir.dtype import bits, is_int

    signed = source.startswith("int") and dest.startswith("int")
    return is_int(source) and is_int(dest) and signed and bits(dest) >= bits(source)


def generate_function(func: PrimFunc, name: str, *, parallel: bool = True) -> GeneratedFunction:
    """Generate the Python source of ``func`` under the (already sanitized) ``name``."""
    return PythonCodegen(func, name, parallel=parallel).generate()
