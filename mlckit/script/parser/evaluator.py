"""Evaluate the expressions of a script (an ``ast`` subtree) into Python values and IR nodes.

Names are looked up through the parser (its variables, then the script's Python environment).
Python operators apply to whatever the operands are, so ``i + 1`` on a TensorIR variable
builds an ``Add`` node and ``x + y`` on relax expressions a call of ``relax.add``; the only
operators given a meaning here are the ones Python cannot overload (``and``, ``or``, ``not``,
chained comparisons) and ``**`` on TensorIR values.

Every node is evaluated under a guard: an exception raised while evaluating it becomes an
error located at that node (the innermost one wins).
"""

from __future__ import annotations

import ast
import difflib
import inspect
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlckit.errors import MLCError
from mlckit.tir import op as tir_op
from mlckit.tir.expr import And, Not, Or, PrimExpr, Select, convert

if TYPE_CHECKING:
    from .core import Parser

# Each operator with its source text (for messages) and its Python meaning.
_BINARY: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Add: ("+", operator.add),
    ast.Sub: ("-", operator.sub),
    ast.Mult: ("*", operator.mul),
    ast.Div: ("/", operator.truediv),
    ast.FloorDiv: ("//", operator.floordiv),
    ast.Mod: ("%", operator.mod),
    ast.Pow: ("**", operator.pow),
    ast.MatMult: ("@", operator.matmul),
    ast.BitAnd: ("&", operator.and_),
    ast.BitOr: ("|", operator.or_),
    ast.BitXor: ("^", operator.xor),
    ast.LShift: ("<<", operator.lshift),
    ast.RShift: (">>", operator.rshift),
}
_COMPARE: dict[type, tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.Is: ("is", operator.is_),
    ast.IsNot: ("is not", operator.is_not),
    ast.In: ("in", lambda a, b: a in b),
    ast.NotIn: ("not in", lambda a, b: a not in b),
}
# What `in` may look into: containers whose membership test ends (an IR node does not).
_CONTAINERS = (tuple, list, dict, str, set, frozenset)
_UNARY: dict[type, tuple[str, Callable[[Any], Any]]] = {
    ast.USub: ("-", operator.neg),
    ast.UAdd: ("+", operator.pos),
    ast.Invert: ("~", operator.invert),
}

# Python syntax a script cannot use, with what to write instead.
_UNSUPPORTED: dict[type, str] = {
    ast.Lambda: "lambda expressions are not supported in TVMScript",
    ast.ListComp: "list comprehensions are not supported in TVMScript; write the list out",
    ast.SetComp: "set comprehensions are not supported in TVMScript",
    ast.DictComp: "dict comprehensions are not supported in TVMScript; write the dict out",
    ast.GeneratorExp: "generator expressions are not supported in TVMScript",
    ast.Await: "await is not supported in TVMScript",
    ast.Yield: "yield is not supported in TVMScript",
    ast.YieldFrom: "yield is not supported in TVMScript",
    ast.NamedExpr: "assignment expressions (:=) are not supported in TVMScript",
    ast.JoinedStr: "f-strings are not supported in TVMScript; write the string out",
    ast.Set: "set literals are not supported in TVMScript",
}


def describe_callee(node: ast.AST) -> str:
    """How a message names the callee of a call: its source text, e.g. ``T.max``."""
    return ast.unparse(node)


class Evaluator:
    """Evaluates expression ASTs for one parser."""

    def __init__(self, parser: Parser):
        self.parser = parser
        self._handlers: dict[type, Callable[[Any], Any]] = {
            ast.Constant: lambda node: node.value,
            ast.Name: self._name,
            ast.Attribute: self._attribute,
            ast.Subscript: self._subscript,
            ast.Call: self._call,
            ast.BinOp: self._binop,
            ast.UnaryOp: self._unaryop,
            ast.BoolOp: self._boolop,
            ast.Compare: self._compare,
            ast.IfExp: self._ifexp,
            ast.Tuple: lambda node: tuple(self._elements(node.elts)),
            ast.List: lambda node: self._elements(node.elts),
            ast.Dict: self._dict,
            ast.Slice: self._slice,
            ast.Starred: self._starred,
        }

    def eval(self, node: ast.AST) -> Any:
        handler = self._handlers.get(type(node))
        if handler is None:
            message = _UNSUPPORTED.get(
                type(node), f"{type(node).__name__} expressions are not supported in TVMScript"
            )
            raise self.parser.error(node, message)
        try:
            return handler(node)
        except Exception as err:
            raise self.parser.relocate(err, node) from None

    # ------------------------------------------------------------------ leaves
    def _name(self, node: ast.Name) -> Any:
        return self.parser.convert_leaf(self.parser.lookup(node.id, node))

    def _attribute(self, node: ast.Attribute) -> Any:
        return self.parser.convert_leaf(self.parser.attribute(self.eval(node.value), node))

    def _subscript(self, node: ast.Subscript) -> Any:
        owner = self.eval(node.value)
        index = self.eval(node.slice)
        try:
            item = owner[index]
        except (KeyError, IndexError):
            keys = (
                f"; its keys are {', '.join(map(repr, owner))}" if isinstance(owner, dict) else ""
            )
            raise MLCError(f"{describe_value(owner)} has no item {index!r}{keys}") from None
        except TypeError:
            raise MLCError(
                f"{describe_value(owner)} cannot be indexed by {describe_value(index)}"
            ) from None
        return self.parser.convert_leaf(item)

    def _elements(self, nodes: list[ast.expr]) -> list[Any]:
        values: list[Any] = []
        for elt in nodes:
            if isinstance(elt, ast.Starred):
                values.extend(self._unpacked(elt.value, (tuple, list), "*", "a tuple or list"))
            else:
                values.append(self.eval(elt))
        return values

    def _unpacked(self, node: ast.expr, kinds: tuple[type, ...], star: str, what: str) -> Any:
        # Only Python containers: an IR node such as a buffer "iterates" without end.
        value = self.eval(node)
        if not isinstance(value, kinds):
            raise self.parser.error(
                node, f"{star}{ast.unparse(node)} unpacks only {what}, not a {type(value).__name__}"
            )
        return value

    def _dict(self, node: ast.Dict) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                result.update(self._unpacked(value, (dict,), "**", "a dict"))
            else:
                result[self.eval(key)] = self.eval(value)
        return result

    def _slice(self, node: ast.Slice) -> slice:
        def part(sub: ast.expr | None) -> Any:
            return None if sub is None else self.eval(sub)

        return slice(part(node.lower), part(node.upper), part(node.step))

    def _starred(self, node: ast.Starred) -> Any:
        raise self.parser.error(
            node, "a starred expression can only be a call argument or a tuple element"
        )

    # ------------------------------------------------------------------ calls
    def _call(self, node: ast.Call) -> Any:
        return self.call(node, self.eval(node.func))

    def call_arguments(self, node: ast.Call) -> tuple[list[Any], dict[str, Any]]:
        args = self._elements(node.args)
        kwargs: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                kwargs.update(self._unpacked(keyword.value, (dict,), "**", "a dict"))
            else:
                kwargs[keyword.arg] = self.eval(keyword.value)
        return args, kwargs

    def call(self, node: ast.Call, func: Any) -> Any:
        """Call ``func`` (already evaluated from ``node.func``) with the node's arguments."""
        args, kwargs = self.call_arguments(node)
        try:
            return self.parser.call_value(node, func, args, kwargs)
        except TypeError as err:
            raise self.parser.error(node, _wrong_arguments(node, func, args, kwargs, err)) from None

    # ------------------------------------------------------------------ operators
    def _binop(self, node: ast.BinOp) -> Any:
        return binary(node.op, self.eval(node.left), self.eval(node.right))

    def _unaryop(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return Not(value) if isinstance(value, PrimExpr) else not value
        symbol, apply = _UNARY[type(node.op)]
        try:
            return apply(value)
        except TypeError:
            raise MLCError(f"`{symbol}` cannot apply to {describe_value(value)}") from None

    def _boolop(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        result = self.eval(node.values[0])
        for sub in node.values[1:]:
            if not isinstance(result, PrimExpr):
                # Plain Python values keep Python's short-circuit meaning.
                if bool(result) != is_and:
                    return result
                result = self.eval(sub)
                continue
            rhs = self.eval(sub)
            result = And(result, convert(rhs)) if is_and else Or(result, convert(rhs))
        return result

    def _compare(self, node: ast.Compare) -> Any:
        lhs = self.eval(node.left)
        result: Any = None
        for op, right in zip(node.ops, node.comparators):
            rhs = self.eval(right)
            if isinstance(op, (ast.In, ast.NotIn)) and not isinstance(rhs, _CONTAINERS):
                raise self.parser.error(
                    right,
                    f"`in` tests membership in a Python tuple, list, dict or string, "
                    f"not in a {type(rhs).__name__}",
                )
            this = _operate(_COMPARE[type(op)], lhs, rhs)
            if result is None:
                result = this
            elif isinstance(result, PrimExpr) or isinstance(this, PrimExpr):
                result = And(convert(result), convert(this))
            else:
                result = result and this
            lhs = rhs
        return result

    def _ifexp(self, node: ast.IfExp) -> Any:
        cond = self.eval(node.test)
        if isinstance(cond, PrimExpr):
            return Select(cond, self.eval(node.body), self.eval(node.orelse))
        return self.eval(node.body) if cond else self.eval(node.orelse)


def binary(op: ast.operator, lhs: Any, rhs: Any) -> Any:
    """``lhs <op> rhs`` with Python's meaning, except ``**`` on TensorIR values (``T.pow``)."""
    if isinstance(op, ast.Pow) and (isinstance(lhs, PrimExpr) or isinstance(rhs, PrimExpr)):
        return tir_op.pow(lhs, rhs)
    _check_size(op, lhs, rhs)
    return _operate(_BINARY[type(op)], lhs, rhs)


def _operate(operation: tuple[str, Callable[[Any, Any], Any]], lhs: Any, rhs: Any) -> Any:
    symbol, apply = operation
    try:
        return apply(lhs, rhs)
    except TypeError:
        raise MLCError(
            f"`{symbol}` cannot combine {describe_value(lhs)} and {describe_value(rhs)}"
        ) from None


def describe_value(value: Any) -> str:
    """What a value is, for messages: ``a Buffer``, ``the str 'a'``, ``a function``."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        text = repr(value)
        return f"the {type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"
    kind = type(value)
    name = "function" if callable(value) and kind.__module__ == "builtins" else kind.__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


# Python computes `9**9**9` or `"a" * 10**12` before anything can object, for minutes; no
# shape, index or attribute needs constants anywhere near these sizes.
_MAX_CONSTANT_BITS = 4096
_MAX_REPEAT = 1 << 20


def _check_size(op: ast.operator, lhs: Any, rhs: Any) -> None:
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    bits = 0
    if isinstance(op, ast.Pow) and is_int(lhs) and is_int(rhs) and abs(lhs) > 1:
        bits = rhs * abs(lhs).bit_length()
    elif isinstance(op, ast.LShift) and is_int(lhs) and is_int(rhs) and lhs:
        bits = rhs + abs(lhs).bit_length()
    if bits > _MAX_CONSTANT_BITS:
        raise MLCError(f"the constant is too large (more than {_MAX_CONSTANT_BITS} bits)")
    if isinstance(op, ast.Mult):
        for seq, count in ((lhs, rhs), (rhs, lhs)):
            repeated = isinstance(seq, (str, bytes, tuple, list)) and is_int(count)
            if repeated and len(seq) * count > _MAX_REPEAT:
                raise MLCError(f"repeating a sequence {count} times makes it too long")


def _wrong_arguments(
    node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any], err: TypeError
) -> str:
    """The message for a TypeError raised by a call: the expected signature when the arguments
    do not fit it, the error itself otherwise."""
    name = describe_callee(node.func)
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return f"{name}: {err}"
    try:
        signature.bind(*args, **kwargs)
    except TypeError as bind_err:
        return f"wrong arguments to {name}{plain_signature(signature)}: {bind_err}"
    return f"{name}: {err}"


def plain_signature(signature: inspect.Signature) -> inspect.Signature:
    """A signature without annotations: what a student needs to see is the parameters."""
    empty = inspect.Parameter.empty
    return signature.replace(
        parameters=[p.replace(annotation=empty) for p in signature.parameters.values()],
        return_annotation=empty,
    )


def did_you_mean(name: str, candidates: Any) -> str:
    """``; did you mean 'x'?`` for the closest candidates, or nothing."""
    close = difflib.get_close_matches(name, [c for c in candidates if isinstance(c, str)], n=3)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
