"""TensorIR -> readable Python: the course's "low-level numpy".

A PrimFunc becomes one Python function with destination passing: buffers arrive as numpy
arrays, symbolic shape variables are read off their shapes, blocks turn into plain code
(iter vars bound to their loop values, ``T.init`` into ``if k == 0:``, ``T.where`` into an
``if``, block allocations into ``np.empty``), and loops stay loops. The same text runs under
CPython (target "python") and under ``numba.njit`` (target "llvm"), where ``parallel`` loops
become ``prange``.

**Integer semantics** (TVM's): arithmetic on an intN/uintN value wraps around at the dtype's
width (two's complement) on every target, and so does a cast to a narrower integer. Python's
integers never overflow and numba computes small integers in 64 bits, so the code computes an
integer expression exactly and reduces it with a ``wrap_<dtype>`` helper wherever its exact
value may leave the dtype; an operation on numpy scalars takes their ``int()`` first, so that
it never overflows under CPython. Where a sum or product may leave 64 bits, its operands go
through ``u64``: plain integers under CPython, uint64 under numba (whose int64 arithmetic
assumes it never overflows). The printer tracks the bounds of every integer expression (loop
variables by their ranges, symbolic dims as non-negative, loaded values by their dtype), so
index arithmetic over constant extents carries no wrap. Index arithmetic over symbolic shapes
(on loop variables, shapes and constants only) stays exact, as TVM's LLVM code assumes it never
overflows; a value stored from it wraps at the store. (One quotient has no defined value:
``INT64_MIN // -1`` traps in C; numba gives 0.)

**User text** never reaches the source as code: identifiers go through the NameSupply
(sanitized, uniquified, never a keyword or a name the module uses), and any other text, a block
name in a comment or a name in an error message, through :func:`comment` or
:func:`string_literal`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from mlckit.arith import simplify
from mlckit.errors import BuildError
from mlckit.ir.dtype import INT_DTYPES, UINT_DTYPES, bits, is_float, is_int
from mlckit.ir.name_supply import NameSupply
from mlckit.ir.structural import structural_equal
from mlckit.tir import expr as E
from mlckit.tir import stmt as S
from mlckit.tir.analysis import collect_vars
from mlckit.tir.buffer import ACCESS_PTR, Buffer, BufferRegion
from mlckit.tir.function import PrimFunc
from mlckit.tir.op import CALL_EXTERN
from mlckit.tir.stmt_functor import post_order_visit, substitute

from .extern import ExternFunction, check_c_types, resolve_extern

# The longest identifier in generated code: numba names its cache files after the function,
# and LLVM cuts long argument names short (two long names that share a prefix would clash).
MAX_NAME = 64

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
    # The external functions it calls, by the name the code calls them.
    externs: dict[str, ExternCall] = field(default_factory=dict)


@dataclass(frozen=True)
class ExternCall:
    """An external function a kernel calls, with the dtypes of its result and arguments."""

    function: ExternFunction
    dtype: str
    arg_dtypes: tuple[str, ...]


class _Printed(NamedTuple):
    """An expression's text, with what its consumers need to know about it."""

    text: str
    prec: int
    # An integer expression's exact value lies within these bounds (None: unknown).
    bounds: tuple[int, int] | None = None
    # Under CPython the text gives a plain Python value, never a numpy scalar (a load).
    plain: bool = True
    # The bounds depend on sizes known only when the kernel runs (symbolic dims).
    symbolic: bool = False


def _dtype_bounds(dtype: str) -> tuple[int, int]:
    if dtype == "bool":
        return 0, 1
    width = bits(dtype)
    if dtype.startswith("u"):
        return 0, 2**width - 1
    return -(2 ** (width - 1)), 2 ** (width - 1) - 1


def _within(bounds: tuple[int, int] | None, dtype: str) -> bool:
    lo, hi = _dtype_bounds(dtype)
    return bounds is not None and lo <= bounds[0] and bounds[1] <= hi


def _corners(op: Callable[[int, int], int], a: tuple[int, int], b: tuple[int, int]):
    values = [op(x, y) for x in a for y in b]
    return min(values), max(values)


def _div_bounds(op: Callable[[int, int], int], a: tuple[int, int], b: tuple[int, int]):
    if b[0] > 0 or b[1] < 0:  # quotients are monotone in each operand away from zero
        return _corners(op, a, b)
    largest = max(abs(a[0]), abs(a[1]))
    return -largest, largest


def _floormod_bounds(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return min(b[0] + 1, 0), max(b[1] - 1, 0)  # the sign of the divisor


def _truncmod_bounds(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    largest = max(abs(b[0]), abs(b[1])) - 1  # the sign of the dividend
    return max(-largest, min(a[0], 0)), min(largest, max(a[1], 0))


def _c_div(x: int, y: int) -> int:
    quotient = abs(x) // abs(y) if y else 0
    return quotient if (x >= 0) == (y > 0) else -quotient


# The exact bounds of a binary integer operation from those of its operands.
_BOUNDS: dict[type, Callable[[tuple[int, int], tuple[int, int]], tuple[int, int]]] = {
    E.Add: lambda a, b: (a[0] + b[0], a[1] + b[1]),
    E.Sub: lambda a, b: (a[0] - b[1], a[1] - b[0]),
    E.Mul: lambda a, b: _corners(lambda x, y: x * y, a, b),
    E.FloorDiv: lambda a, b: _div_bounds(lambda x, y: x // y if y else 0, a, b),
    E.Div: lambda a, b: _div_bounds(_c_div, a, b),
    E.FloorMod: _floormod_bounds,
    E.Mod: _truncmod_bounds,
    E.Min: lambda a, b: (min(a[0], b[0]), min(a[1], b[1])),
    E.Max: lambda a, b: (max(a[0], b[0]), max(a[1], b[1])),
}


def _union(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))


def _plain(printed: _Printed) -> _Printed:
    """``printed`` as a plain Python integer under CPython (numba's ``int`` keeps the type)."""
    return (
        printed
        if printed.plain
        else printed._replace(text=f"int({printed.text})", prec=_PREC_ATOM, plain=True)
    )


def float_literal(value: float, dtype: str) -> str:
    """A float constant as text that gives the same value, of the same dtype, on every target
    (``inf`` and ``nan`` are no Python names; numba reads ``np.inf`` as a constant)."""
    if math.isnan(value):
        text = "np.nan"
    elif math.isinf(value):
        text = "np.inf" if value > 0 else "-np.inf"
    else:
        text = repr(value)
    return f"np.{dtype}({text})"


def string_literal(text: str) -> str:
    """``text`` as a Python string literal of printable ASCII: no quote, backslash, line break
    or invisible character in it can end the literal or the line."""
    return ascii(text)


def comment(text: str) -> str:
    """A one-line comment showing ``text``: as it is when it is printable ASCII (nothing in it
    can end the line), else as its escaped string literal."""
    return "# " + (text if text.isascii() and text.isprintable() else string_literal(text))


class PrimExprPrinter:
    """Python text for PrimExprs, with names from a shared NameSupply.

    Used for kernel bodies (``wrap_integers``: TIR's wrapping integer semantics) and, by
    relax.build, for shape arithmetic in the VM's functions, which stays exact Python integers.
    """

    # How each tir intrinsic is spelled (the cuda code generator spells some differently).
    intrinsics = _INTRINSICS
    # A float division as np.divide(a, b): numba compiles `a / b` with Python's error model,
    # raising ZeroDivisionError where IEEE (numpy, TVM) gives inf or nan, and the check on
    # every division keeps LLVM from vectorizing the loop. (numba.cuda divides as numpy.)
    float_divide_call = True

    def __init__(self, names: NameSupply, *, wrap_integers: bool = False):
        self.names = names
        self.wrap_integers = wrap_integers
        # Block iter vars bound directly to a loop variable are replaced by it.
        self.substitution: dict[int, E.PrimExpr] = {}
        # The bounds of the integer variables the code defines (loops, lets, symbolic dims),
        # and whether they depend on symbolic dims; a variable not in it may take any value.
        self.var_bounds: dict[int, tuple[tuple[int, int] | None, bool]] = {}
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
        return self._expr(node).text

    def _expr(self, node: E.PrimExpr) -> _Printed:
        if isinstance(node, E.Var):
            target = self.substitution.get(id(node))
            if target is not None:
                return self._expr(target)
            name = self.names.get(node, node.name_hint)
            known = self.var_bounds.get(id(node))
            if known is not None:
                return _Printed(name, _PREC_ATOM, known[0], True, known[1])
            integer = is_int(node.dtype) or node.dtype == "bool"
            return _Printed(
                name, _PREC_ATOM, _dtype_bounds(node.dtype) if integer else None, True, integer
            )
        if isinstance(node, E.IntImm):
            bounds = (node.value, node.value)
            if node.dtype == "bool":
                return _Printed("True" if node.value else "False", _PREC_ATOM, bounds)
            if node.dtype == "uint64" and self.wrap_integers:
                # numba types a bare literal int64, and mixing it with a uint64 computes in
                # int64 (or in float64, for max).
                return _Printed(f"np.uint64({node.value})", _PREC_ATOM, bounds, False)
            prec = _PREC_ATOM if node.value >= 0 else _PREC_UNARY
            return _Printed(str(node.value), prec, bounds)
        if isinstance(node, E.FloatImm):
            # Wrap float constants so float32 arithmetic stays float32 (no float64 promotion).
            return _Printed(float_literal(node.value, node.dtype), _PREC_ATOM)
        if isinstance(node, E.BufferLoad):
            text = self.load_text(node.buffer, node.indices)
            integer = is_int(node.dtype) or node.dtype == "bool"
            return _Printed(text, _PREC_ATOM, _dtype_bounds(node.dtype) if integer else None, False)
        infix = _INFIX.get(type(node))
        if infix is not None:
            symbol, prec = infix
            return self._binary(node, lambda a, b: self._infix(a, b, symbol, prec), prec)  # type: ignore[arg-type]
        if isinstance(node, E.Div):
            if is_float(node.dtype) and self.float_divide_call:
                return self._binary(node, lambda a, b: f"np.divide({a.text}, {b.text})")
            if is_float(node.dtype):
                return self._binary(node, lambda a, b: self._infix(a, b, "/", _PREC_MUL), _PREC_MUL)
            if node.dtype.startswith("u"):  # unsigned: rounding toward zero is rounding down
                return self._binary(
                    node, lambda a, b: self._infix(a, b, "//", _PREC_MUL), _PREC_MUL
                )
            self.helpers.add("truncdiv")
            return self._binary(node, lambda a, b: f"truncdiv({a.text}, {b.text})")
        if isinstance(node, E.Mod):
            if is_float(node.dtype):
                return self._binary(node, lambda a, b: f"np.fmod({a.text}, {b.text})")
            if node.dtype.startswith("u"):
                return self._binary(node, lambda a, b: self._infix(a, b, "%", _PREC_MUL), _PREC_MUL)
            self.helpers.add("truncmod")
            return self._binary(node, lambda a, b: f"truncmod({a.text}, {b.text})")
        if isinstance(node, (E.Min, E.Max)):
            fn = "min" if isinstance(node, E.Min) else "max"
            return self._binary(node, lambda a, b: f"{fn}({a.text}, {b.text})")
        if isinstance(node, E.Not):
            return _Printed(f"not {self._wrap(self._expr(node.a), _PREC_NOT)}", _PREC_NOT)
        if isinstance(node, E.Select):
            return self._ternary(node.condition, node.true_value, node.false_value)
        if isinstance(node, E.Cast):
            return self._cast(node.dtype, node.value)
        if isinstance(node, E.Call):
            return self._call(node)
        if isinstance(node, E.Let):
            raise BuildError("Let expressions are not supported by code generation; use LetStmt")
        raise BuildError(f"code generation does not support the expression {type(node).__name__}")

    def _binary(
        self,
        node: E.BinaryOpExpr,
        compose: Callable[[_Printed, _Printed], str],
        prec: int = _PREC_ATOM,
    ) -> _Printed:
        a, b = self._expr(node.a), self._expr(node.b)
        rule = _BOUNDS.get(type(node))
        bounds = None
        if is_int(node.dtype) and rule is not None and a.bounds and b.bounds:
            bounds = rule(a.bounds, b.bounds)
        ring = isinstance(node, (E.Add, E.Sub, E.Mul))
        return self._integer_result(
            node.dtype, [a, b], lambda ops: compose(*ops), prec, bounds, ring=ring
        )

    def _integer_result(
        self,
        dtype: str,
        operands: list[_Printed],
        compose: Callable[[list[_Printed]], str],
        prec: int,
        bounds: tuple[int, int] | None,
        *,
        ring: bool = False,
    ) -> _Printed:
        """The text of an operation on ``operands`` with the exact ``bounds``, wrapped to
        ``dtype`` when they leave it. The operands then become plain integers, which compute
        the exact value; a sum, difference or product that may leave 64 bits, where numba's
        int64 arithmetic has no defined result, computes on ``u64`` operands."""
        plain = all(op.plain for op in operands)
        symbolic = any(op.symbolic for op in operands)
        exact = _Printed(compose(operands), prec, bounds, plain, symbolic)
        if not (self.wrap_integers and is_int(dtype)):
            return exact
        fits, fits_int64 = _within(bounds, dtype), _within(bounds, "int64")
        if not fits and bounds is not None and bounds[0] == bounds[1]:
            return self._wrapped(dtype, "", bounds)  # a constant
        # Index arithmetic over symbolic shapes stays exact, as TVM's LLVM code assumes it
        # never overflows (a wrap in an index would cost numba its range analysis).
        if (fits and (fits_int64 or not ring)) or (plain and symbolic):
            return exact
        if ring and not fits_int64:
            self.helpers.add("u64")
            text = compose(
                [op._replace(text=f"u64({op.text})", prec=_PREC_ATOM) for op in operands]
            )
        else:
            text = compose([_plain(op) for op in operands])
        return exact._replace(text=text) if fits else self._wrapped(dtype, text, bounds)

    def _wrap(self, printed: _Printed, min_prec: int) -> str:
        return f"({printed.text})" if printed.prec < min_prec else printed.text

    def _infix(self, a: _Printed, b: _Printed, symbol: str, prec: int) -> str:
        # Left-associative: the right operand needs parentheses at equal precedence;
        # comparisons chain in Python, so both sides do.
        left_min = prec + 1 if prec == _PREC_CMP else prec
        return f"{self._wrap(a, left_min)} {symbol} {self._wrap(b, prec + 1)}"

    def _ternary(self, cond: E.PrimExpr, t: E.PrimExpr, f: E.PrimExpr) -> _Printed:
        c, a, b = self._expr(cond), self._expr(t), self._expr(f)
        text = (
            f"{self._wrap(a, _PREC_TERNARY + 1)} if {self._wrap(c, _PREC_TERNARY + 1)} "
            f"else {self._wrap(b, _PREC_TERNARY)}"
        )
        bounds = _union(a.bounds, b.bounds)
        return _Printed(text, _PREC_TERNARY, bounds, a.plain and b.plain, a.symbolic or b.symbolic)

    def _wrapped(self, dtype: str, text: str, bounds: tuple[int, int] | None) -> _Printed:
        """``text`` wrapped to ``dtype``, whose range its exact value (within ``bounds``) may
        leave."""
        if bounds is not None and bounds[0] == bounds[1]:
            # A constant: CPython would fold it into a literal too large for numba to type.
            lo, hi = _dtype_bounds(dtype)
            return self._expr(E.IntImm(dtype, (bounds[0] - lo) % (hi - lo + 1) + lo))
        self.helpers.add(f"wrap_{dtype}")
        # The 64-bit helpers return numpy scalars (numba has no wider integer to return).
        return _Printed(f"wrap_{dtype}({text})", _PREC_ATOM, _dtype_bounds(dtype), bits(dtype) < 64)

    def _cast(self, dtype: str, value: E.PrimExpr) -> _Printed:
        printed = self._expr(value)
        if dtype == "bool":
            return _Printed(f"bool({printed.text})", _PREC_ATOM, (0, 1))
        if not (is_int(dtype) and is_int(value.dtype)):
            bounds = _dtype_bounds(dtype) if is_int(dtype) else None
            return _Printed(f"np.{dtype}({printed.text})", _PREC_ATOM, bounds, False)
        if _within(printed.bounds, dtype):
            # The value is unchanged, but a numpy scalar (a load) takes the new dtype, lest it
            # compute in its old one: abs() of an int8 -128 stays -128 in int8. So does a uint64,
            # which numba would otherwise mix with int64 (in float64, for a select).
            if printed.plain and dtype != "uint64":
                return printed
            return printed._replace(
                text=f"np.{dtype}({printed.text})", prec=_PREC_ATOM, plain=False
            )
        if not self.wrap_integers:
            return _Printed(f"np.{dtype}({printed.text})", _PREC_ATOM, _dtype_bounds(dtype), False)
        return self._wrapped(dtype, printed.text, printed.bounds)

    def _call(self, node: E.Call) -> _Printed:
        name = node.op.name
        if name == "tir.if_then_else":
            printed = self._ternary(*node.args)
            return printed._replace(text=f"({printed.text})", prec=_PREC_ATOM)
        template = self.intrinsics.get(name)
        if template is None:
            raise BuildError(f"code generation does not know the intrinsic {name}")
        args = [self._expr(a) for a in node.args]
        min_prec = _PREC_UNARY if name in ("tir.sigmoid", "tir.pow") else 0
        bounds = None
        if name in ("tir.abs", "tir.fabs") and args[0].bounds is not None:
            lo, hi = args[0].bounds
            bounds = (0 if lo <= 0 <= hi else min(abs(lo), abs(hi)), max(abs(lo), abs(hi)))
        return self._integer_result(
            node.dtype,
            args,
            lambda ops: template([self._wrap(op, min_prec) for op in ops], node.dtype),
            _PREC_ATOM,
            bounds,
        )


class _ShortNames(NameSupply):
    """A NameSupply whose names have at most MAX_NAME characters (and a suffix if they clash)."""

    def get(self, obj: Any, hint: str) -> str:
        return super().get(obj, hint[:MAX_NAME])


class PythonCodegen(PrimExprPrinter):
    """Emit one PrimFunc as a Python function named ``name``; its ``call_extern``s resolve to
    the C functions of ``libraries`` or to registered Python functions (mlckit.backend.extern).
    """

    # Whether the generated code may call external functions (the host's, through ctypes);
    # a code generator that may not never resolves them.
    calls_externs = True

    def __init__(
        self,
        func: PrimFunc,
        name: str,
        *,
        parallel: bool = True,
        libraries: Sequence[Path] = (),
    ):
        super().__init__(_ShortNames(RESERVED), wrap_integers=True)
        self.func = func
        self.libraries = tuple(libraries)
        # The external functions called, by their name in TensorIR: the code's name for each.
        self.externs: dict[str, tuple[str, ExternCall]] = {}
        # Each buffer by its data variable, for access_ptr.
        self.data_buffers: dict[int, Buffer] = {}
        # A kernel named like a builtin the code calls (``abs``, ``max``) must not shadow it;
        # and a module's dunder attributes (``__class__``) are not its globals, so none is a
        # kernel's name.
        dunder = name.startswith("__") and name.endswith("__")
        self.name = self.names.get(func, name.strip("_") if dunder else name)
        self.parallel = parallel
        self.lines: list[str] = []
        self.indent = 1
        self.uses_prange = False
        self.uses_shape_check = False
        self.inside_parallel = False
        # The local variable a reduction accumulates a buffer's one element in (see
        # ``reduce_loop``), by buffer id: every access of that buffer reads or writes it.
        self.accumulators: dict[int, str] = {}
        # 0-d buffers viewed as one element (``X[0]``), by id: numba's parallel loops cannot
        # read a 0-d array (they take it for a scalar), so a kernel with a parallel loop
        # (``views_0d``) never has one.
        self.one_element: set[int] = set()
        self.views_0d = False

    # ------------------------------------------------------------------ entry point
    def generate(self) -> GeneratedFunction:
        params, buffers = self.signature()
        self._declare_externs()
        self._bind_shapes(buffers)
        loops: list[S.For] = []
        post_order_visit(
            self.func.body,
            lambda n: loops.append(n) if isinstance(n, S.For) else None,  # type: ignore[func-returns-value]
        )
        self.views_0d = self.parallel and any(n.kind == S.ForKind.PARALLEL for n in loops)
        for buffer in buffers:
            if not buffer.shape and self.views_0d:
                if not self.one_element:
                    self.emit("# numba's parallel loops cannot read 0-d arrays: view them as (1,)")
                name = self.names.get(buffer, buffer.name)
                self.emit(f"{name} = {name}.reshape(1)")
                self.one_element.add(id(buffer))
        self.stmt(self.func.body)
        if len(self.lines) == 0 or all(line.lstrip().startswith("#") for line in self.lines):
            self.emit("pass")
        header = f"def {self.name}({', '.join(params)}):"
        source = "\n".join([header, *self.lines]) + "\n"
        externs = dict(self.externs.values())
        return GeneratedFunction(
            self.name,
            source,
            params,
            self.uses_prange,
            self.helpers,
            self.uses_shape_check,
            externs,
        )

    def _declare_externs(self) -> None:
        """Resolve and name every function the body calls with call_extern, before the body
        names anything: the names are the module's, bound once at import."""
        calls: list[E.Call] = []
        post_order_visit(
            self.func.body,
            lambda node: (
                calls.append(node) if isinstance(node, E.Call) and node.op is CALL_EXTERN else None
            ),
        )
        for call in calls:
            name = call.args[0].value  # type: ignore[attr-defined]
            arg_dtypes = tuple(a.dtype for a in call.args[1:])
            known = self.externs.get(name)
            if known is not None:
                if (known[1].dtype, known[1].arg_dtypes) != (call.dtype, arg_dtypes):
                    raise BuildError(
                        f"call_extern {name!r} is called with two signatures: "
                        f"{known[1].arg_dtypes} -> {known[1].dtype} and {arg_dtypes} -> "
                        f"{call.dtype}"
                    )
                continue
            function = resolve_extern(name, self.libraries)
            if function.library is not None:
                check_c_types(name, [call.dtype, *arg_dtypes])
            extern = ExternCall(function, call.dtype, arg_dtypes)
            self.externs[name] = (self.names.get(extern, name), extern)

    def signature(self) -> tuple[list[str], list[Buffer]]:
        """The parameter names, and the buffers the parameters are."""
        params: list[str] = []
        buffers: list[Buffer] = []
        for param in self.func.params:
            buffer = self.func.buffer_map.get(param)
            if buffer is not None:
                params.append(self.names.get(buffer, buffer.name))
                buffers.append(buffer)
                self.data_buffers[id(buffer.data)] = buffer
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
            for dim in new_vars:
                self.var_bounds[id(dim)] = ((0, _dtype_bounds(dim.dtype)[1]), True)
            if len(new_vars) == len(dims) and len({id(d) for d in dims}) == len(dims):
                targets = ", ".join(self.names.get(d, d.name_hint) for d in dims)
                self.emit(f"{targets}{',' if len(dims) == 1 else ''} = {array}.shape")
                read_off.add(id(buffer))
                continue
            for axis, dim in enumerate(dims):
                if isinstance(dim, E.Var) and not self.names.has(dim):
                    self.emit(f"{self.names.get(dim, dim.name_hint)} = {array}.shape[{axis}]")
        for buffer in buffers:
            self._bind_strides(buffer)
        for buffer in buffers:
            if id(buffer) in read_off:
                continue
            array = self.names.get(buffer, buffer.name)
            dims = [self.expr(d) for d in buffer.shape]
            expected = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
            self.uses_shape_check = True
            self.emit(f"if {array}.shape != {expected}:")
            message = string_literal(f"{self.name}: {array} must have shape {expected}")
            self.emit(f"    raise VMError({message})")

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
        reduction = _register_reduction(node)
        if reduction is None:
            self.loop(node)
        else:
            self.reduce_loop(node, *reduction)
        self.names.restore(scope)

    def reduce_loop(
        self, loop: S.For, moving: set[int], elements: dict[int, tuple[Buffer, tuple]]
    ) -> None:
        """A reduction block alone under ``loop``, annotated ``ACCUMULATE_LOCALLY``, whose
        output elements stay put while ``loop`` runs: each element is read into a local
        variable before the loop (or set by the block's init when the loop starts the
        reduction), accumulated there, and stored after it. LLVM keeps a local variable in a
        register (and, with fastmath, vectorizes the sum); an array element it must load and
        store at every step::

            acc = np.float32(0.0) if rc == 0 else out[f]     # or the init's value
            for k in range(128):
                acc = acc + x[f, k]
            out[f] = acc
        """
        realize: S.BlockRealize = loop.body  # type: ignore[assignment]
        block = realize.block
        self.emit(comment(f"block {block.name_hint}: accumulated in local variables"))
        self.bind_iter_vars(realize, lambda n: n not in moving)
        for buffer, _ in elements.values():
            self.accumulators[id(buffer)] = self.names.fresh(f"{buffer.name}_acc")
        starts = self.reduction_starts(realize, moving, loop)
        if E.is_true(starts):
            self.stmt(block.init)  # type: ignore[arg-type]  # sets the accumulators
        else:
            branch = not E.is_const_int(starts, 0)
            if branch:
                self.emit(f"if {self.expr(starts)}:")
                self.body(block.init)  # type: ignore[arg-type]
                self.emit("else:")
                self.indent += 1
            for buffer, indices in elements.values():
                acc = self.accumulators[id(buffer)]
                self.emit(f"{acc} = {self.element_text(buffer, indices)}")
            if branch:
                self.indent -= 1
        bounds = self.loop_bounds(loop)
        self.emit(
            f"for {self.names.get(loop.loop_var, loop.loop_var.name_hint)} in range({bounds}):"
        )
        self.indent += 1
        self.bind_iter_vars(realize, lambda n: n in moving)
        self.stmt(block.body)
        self.indent -= 1
        for buffer, indices in elements.values():
            acc = self.accumulators.pop(id(buffer))
            self.emit(f"{self.element_text(buffer, indices)} = {acc}")

    def reduction_starts(
        self, realize: S.BlockRealize, moving: set[int], loop: S.For
    ) -> E.PrimExpr:
        """Whether the reduction starts where ``loop`` starts: every reduction iter var at the
        start of its domain (false for a block without init: its reduction started before)."""
        if realize.block.init is None:
            return E.convert(False)
        first = {loop.loop_var: loop.min}
        condition: E.PrimExpr = E.convert(True)
        for n, (iv, value) in enumerate(zip(realize.block.iter_vars, realize.iter_values)):
            if iv.iter_type == E.IterVarType.CommReduce:
                at = substitute(value, first) if n in moving else iv.var
                condition = E.And(condition, E.EQ(at, iv.dom.min))
        return simplify(condition)

    def loop(self, node: S.For) -> None:
        var = self.names.get(node.loop_var, node.loop_var.name_hint)
        if node.kind == S.ForKind.THREAD_BINDING:
            tag = node.thread_binding.thread_tag if node.thread_binding else "a thread"
            raise BuildError(
                f"loop {node.loop_var.name_hint!r} is bound to {tag}; thread bindings only "
                "compile for the cuda target"
            )
        bounds = self.loop_bounds(node)
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

    def loop_bounds(self, node: S.For) -> str:
        """The arguments of the loop's ``range``; the loop variable takes their bounds."""
        begin = self._expr(node.min)
        if E.is_const_int(node.min, 0):
            end = self._expr(node.extent)
            text = end.text
        else:
            end = self._expr(simplify(E.Add(node.min, node.extent)))
            text = f"{begin.text}, {end.text}"
        if begin.bounds is not None and end.bounds is not None:
            bounds = (begin.bounds[0], max(begin.bounds[0], end.bounds[1] - 1))
            self.var_bounds[id(node.loop_var)] = (bounds, begin.symbolic or end.symbolic)
        return text

    def assign(self, var: E.Var, value: E.PrimExpr) -> None:
        """``var = value``; the variable takes the value's bounds."""
        printed = self._expr(value)
        if printed.bounds is not None:
            self.var_bounds[id(var)] = (printed.bounds, printed.symbolic)
        self.emit(f"{self.names.get(var, var.name_hint)} = {printed.text}")

    def stmt_BlockRealize(self, node: S.BlockRealize) -> None:
        block = node.block
        if block.name_hint and block.name_hint != "root":
            self.emit(comment(f"block {block.name_hint}"))
        self.bind_iter_vars(node, lambda n: True)
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

    def bind_iter_vars(self, realize: S.BlockRealize, which: Callable[[int], bool]) -> None:
        """Bind the block's iter vars (those ``which`` selects, by position) to their values:
        a loop variable or constant replaces the iter var, anything else is assigned."""
        for n, (iv, value) in enumerate(zip(realize.block.iter_vars, realize.iter_values)):
            if not which(n):
                continue
            value = self.substitute(value)
            if isinstance(value, (E.Var, E.IntImm)):
                self.substitution[id(iv.var)] = value
            else:
                self.assign(iv.var, value)

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

    def _bind_strides(self, buffer: Buffer) -> None:
        """Read symbolic strides (``strides=[sa, 1]``) off the buffer's array, in elements."""
        array = self.names.get(buffer, buffer.name)
        for axis, stride in enumerate(buffer.strides):
            if isinstance(stride, E.Var) and not self.names.has(stride):
                self.var_bounds[id(stride)] = ((0, _dtype_bounds(stride.dtype)[1]), True)
                name = self.names.get(stride, stride.name_hint)
                self.emit(f"{name} = {array}.strides[{axis}] // {array}.itemsize")

    def allocate(self, buffer: Buffer) -> None:
        self.data_buffers[id(buffer.data)] = buffer
        name = self.names.get(buffer, buffer.name)
        shape = ", ".join(self.expr(s) for s in buffer.shape)
        if not buffer.shape and self.views_0d:
            shape = "1"
            self.one_element.add(id(buffer))
        if len(buffer.shape) == 1 or id(buffer) in self.one_element:
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
        self.data_buffers[id(buffer.data)] = buffer
        self._bind_strides(buffer)

    def _call(self, node: E.Call) -> _Printed:
        if node.op is CALL_EXTERN:
            callee = node.args[0].value  # type: ignore[attr-defined]
            if not self.calls_externs:
                raise BuildError(
                    f"call_extern {callee!r}: external functions are called from CPU kernels "
                    "only (targets llvm and python)"
                )
            name, extern = self.externs[callee]
            args = [self._extern_arg(arg, extern) for arg in node.args[1:]]
            return _Printed(f"{name}({', '.join(args)})", _PREC_ATOM)
        if node.op is ACCESS_PTR:
            raise BuildError("access_ptr(...) is an argument of a call_extern, not a value")
        return super()._call(node)

    def _extern_arg(self, arg: E.PrimExpr, extern: ExternCall) -> str:
        """An argument of an extern call: a C function takes ``access_ptr`` as the address of
        the element at the offset, a Python function takes the buffer's array."""
        if not (isinstance(arg, E.Call) and arg.op is ACCESS_PTR):
            return self.expr(arg)
        data, offset = arg.args[0], arg.args[1]
        buffer = self.data_buffers.get(id(data))
        if buffer is None:
            raise BuildError(
                f"call_extern {extern.function.name!r}: access_ptr of {data} names no buffer "
                "of this function"
            )
        array = self.names.get(buffer, buffer.name)
        if extern.function.library is not None:
            if E.is_const_int(offset, 0):
                return f"{array}.ctypes.data"
            start = self._wrap(self._expr(offset), _PREC_MUL)
            return f"{array}.ctypes.data + {start} * {array}.itemsize"
        if not E.is_const_int(offset, 0):
            raise BuildError(
                f"call_extern {extern.function.name!r}: a Python extern takes {buffer.name}'s "
                "array, so its access_ptr has no offset; match the region you mean with "
                "T.match_buffer and pass that buffer"
            )
        return array

    def load_text(self, buffer: Buffer, indices: tuple[E.PrimExpr, ...]) -> str:
        accumulator = self.accumulators.get(id(buffer))
        if accumulator is not None:
            return accumulator
        return self.element_text(buffer, indices)

    def element_text(self, buffer: Buffer, indices: tuple[E.PrimExpr, ...]) -> str:
        if id(buffer) in self.one_element:
            return f"{self.names.get(buffer, buffer.name)}[0]"
        return super().load_text(buffer, indices)

    def stmt_BufferStore(self, node: S.BufferStore) -> None:
        value = self._expr(node.value)
        dtype = node.buffer.dtype
        if is_int(dtype) and not _within(value.bounds, dtype):
            value = self._wrapped(dtype, value.text, value.bounds)  # index arithmetic as data
        self.emit(f"{self.load_text(node.buffer, node.indices)} = {value.text}")

    def stmt_IfThenElse(self, node: S.IfThenElse) -> None:
        self.emit(f"if {self.expr(node.condition)}:")
        self.body(node.then_case)
        if node.else_case is not None:
            self.emit("else:")
            self.body(node.else_case)

    def stmt_LetStmt(self, node: S.LetStmt) -> None:
        self.assign(node.var, node.value)
        self.stmt(node.body)

    def stmt_AssertStmt(self, node: S.AssertStmt) -> None:
        self.check(node)
        self.stmt(node.body)

    def check(self, node: S.AssertStmt) -> None:
        """``if not cond: raise VMError(message)``; the message is a string literal,
        never pasted: it holds user names."""
        self.uses_shape_check = True
        self.emit(f"if not ({self.expr(node.condition)}):")
        self.emit(f"    raise VMError({string_literal(node.message)})")

    def stmt_Evaluate(self, node: S.Evaluate) -> None:
        if isinstance(node.value, (E.IntImm, E.FloatImm)):
            return  # T.evaluate(0) is a no-op
        self.emit(self.expr(node.value))

    def stmt_Allocate(self, node: S.Allocate) -> None:
        name = self.names.get(node.buffer_var, node.buffer_var.name_hint)
        extents = ", ".join(self.expr(e) for e in node.extents)
        self.emit(f"{name} = np.empty(({extents},), dtype=np.{node.dtype})")
        self.stmt(node.body)


# The block annotation that asks the code generator to accumulate a reduction's output
# elements in local variables over its innermost loop (``PythonCodegen.reduce_loop``).
ACCUMULATE_LOCALLY = "accumulate_locally"


def _register_reduction(
    loop: S.For,
) -> tuple[set[int], dict[int, tuple[Buffer, tuple[E.PrimExpr, ...]]]] | None:
    """For a loop ``reduce_loop`` can emit: the positions of the iter vars that move with the
    loop (reduction iter vars, each growing with it) and, by buffer, the one element each
    store and load of the block's outputs touches. None for any other loop."""
    realize = loop.body
    if (
        loop.kind not in (S.ForKind.SERIAL, S.ForKind.UNROLLED)
        or not isinstance(realize, S.BlockRealize)
        or not realize.block.annotations.get(ACCUMULATE_LOCALLY)
        or not E.is_true(realize.predicate)
        or realize.block.alloc_buffers
        or realize.block.match_buffers
    ):
        return None
    block = realize.block
    moving: set[int] = set()  # positions
    for n, (iv, value) in enumerate(zip(block.iter_vars, realize.iter_values)):
        if not any(v is loop.loop_var for v in collect_vars(value)):
            continue
        step = simplify(value - substitute(value, {loop.loop_var: loop.loop_var - 1}))
        if iv.iter_type != E.IterVarType.CommReduce or not (
            isinstance(step, E.IntImm) and step.value > 0
        ):
            return None  # a spatial iter var moves, or the reduction does not move forward
        moving.add(n)
    moving_vars = {id(block.iter_vars[n].var) for n in moving}
    elements: dict[int, tuple[Buffer, tuple[E.PrimExpr, ...]]] = {}
    stores: list[S.BufferStore] = []
    post_order_visit(
        block.body, lambda n: stores.append(n) if isinstance(n, S.BufferStore) else None
    )
    for store in stores:
        if any(id(v) in moving_vars for v in collect_vars(store.indices)):
            return None
        seen = elements.setdefault(id(store.buffer), (store.buffer, tuple(store.indices)))
        if not structural_equal(list(seen[1]), list(store.indices)):
            return None
    if not elements or not _touches_only(block, elements):
        return None
    return moving, elements


def _touches_only(block: S.Block, elements: dict[int, tuple[Buffer, tuple]]) -> bool:
    """Whether the block (body and init) reads and writes the ``elements``' buffers only at
    those elements, and its init only writes them."""
    touched: list[tuple[Buffer, tuple]] = []

    def visit(node: object) -> None:
        if isinstance(node, (E.BufferLoad, S.BufferStore)) and id(node.buffer) in elements:
            touched.append((node.buffer, tuple(node.indices)))

    post_order_visit(block.body, visit)
    if block.init is not None:
        init_stores: list[S.BufferStore] = []
        post_order_visit(
            block.init, lambda n: init_stores.append(n) if isinstance(n, S.BufferStore) else None
        )
        if any(id(store.buffer) not in elements for store in init_stores):
            return False
        post_order_visit(block.init, visit)
    return all(
        structural_equal(list(indices), list(elements[id(buffer)][1]))
        for buffer, indices in touched
    )


def _wrap_helper(dtype: str) -> str:
    """The source of ``wrap_<dtype>``: the same text is right under CPython (on plain integers
    and numpy scalars alike) and under numba (on its 64-bit integers)."""
    width = bits(dtype)
    mask = f"0x{2**width - 1:X}"
    if width == 64:  # numba has no wider integer: reinterpret the 64 bits instead
        body = f"np.uint64(int(x) & {mask})"
        body = body if dtype.startswith("u") else f"np.int64({body})"
    elif dtype.startswith("u"):
        body = f"int(x) & {mask}"
    else:
        half = f"0x{2 ** (width - 1):X}"
        body = f"(int(x) + {half} & {mask}) - {half}"
    return (
        f"def wrap_{dtype}(x):\n"
        f"    # {dtype} arithmetic wraps around at {width} bits (two's complement).\n"
        f"    return {body}\n"
    )


# Helpers a function may use; emitted once per generated module, only when needed. None of them
# overflows on numpy scalars where the result fits (no abs(), no product of a quotient).
HELPER_SOURCE: dict[str, str] = {
    "truncdiv": (
        "def truncdiv(a, b):\n"
        "    # C-style integer division, rounding toward zero (TVM's Div on integers).\n"
        "    q = a // b\n"
        "    return q + 1 if q < 0 and a % b != 0 else q\n"
    ),
    "truncmod": (
        "def truncmod(a, b):\n"
        "    # C-style remainder: takes the sign of the dividend (TVM's Mod on integers).\n"
        "    r = a % b\n"
        "    return r - b if r != 0 and (a < 0) != (b < 0) else r\n"
    ),
    "u64": (
        "def u64(x):\n"
        "    # An operand of a sum or product that may leave 64 bits: exact under CPython.\n"
        "    return int(x)\n"
    ),
    **{f"wrap_{dtype}": _wrap_helper(dtype) for dtype in INT_DTYPES + UINT_DTYPES},
}
# Under numba, whose int64 arithmetic assumes it never overflows (LLVM's "nsw"), the 64-bit
# sums and products compute in uint64, which wraps around.
NUMBA_HELPER_SOURCE: dict[str, str] = {
    "u64": (
        "def u64(x):\n"
        "    # An operand of a sum or product that may leave 64 bits: uint64 arithmetic wraps.\n"
        "    return np.uint64(x)\n"
    ),
}

# Names the generated module defines or imports, and the builtins it calls: user identifiers
# never take them (a buffer named ``cuda`` or ``max`` would shadow what the code calls).
RESERVED = frozenset(
    {
        "np",
        "math",
        "numba",
        "njit",
        "prange",
        "cuda",
        "numba_cuda",
        "NoAliasCompiler",
        "VMError",
        "range",
        "min",
        "max",
        "abs",
        "int",
        "float",
        "bool",
        "len",
        "print",
        "c_extern",
        "python_extern",
        *HELPER_SOURCE,
    }
)


def generate_function(
    func: PrimFunc, name: str, *, parallel: bool = True, libraries: Sequence[Path] = ()
) -> GeneratedFunction:
    """Generate the Python source of ``func`` under the (already sanitized) ``name``; its
    extern calls may call the C functions of ``libraries``."""
    return PythonCodegen(func, name, parallel=parallel, libraries=libraries).generate()
