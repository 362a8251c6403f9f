"""The entry points: ``@I.ir_module``, ``@T.prim_func``, ``@R.function``, ``from_source``.

A decorated definition is parsed from its source text, found through ``linecache`` (which
also holds notebook cells), so the Python that ran the definition only matters for its names:
the defining frame's locals and closure, and the module's globals. A decorator applied inside
a class body leaves the function alone; the class's ``@I.ir_module`` parses it.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import sys
import tokenize
import types
from collections.abc import Callable
from typing import Any

from mlckit.errors import ParseError, WellFormedError
from mlckit.ir.module import IRModule
from mlckit.relax import Function
from mlckit.relax.analysis import well_formed

from .core import Environment, Parser, is_docstring
from .diagnostics import Source
from .dialects import Dialect, dialect_of, dialects
from .namespaces import importable

Definition = ast.ClassDef | ast.FunctionDef


# ------------------------------------------------------------------------------ decorators
def ir_module(cls: type | None = None, /, *, check_well_formed: bool = True) -> Any:
    """Parse a class of ``@T.prim_func`` / ``@R.function`` methods into an IRModule.

    The module's relax functions are checked with ``relax.analysis.well_formed`` (an impure
    call inside a dataflow block, a dataflow var used outside it, ...); pass
    ``check_well_formed=False`` to build a malformed module on purpose.
    """

    def wrap(klass: type) -> Any:
        return _decorate(klass, sys._getframe(1))

    return wrap if cls is None else _decorate(cls, sys._getframe(1))


def prim_func(
    func: Callable[..., Any] | None = None,
    /,
    *,
    private: bool = False,
    s_tir: bool = False,
    check_well_formed: bool = True,
) -> Any:
    """Parse a function written in TVMScript's TensorIR dialect into a ``tir.PrimFunc``.

    ``private=True`` leaves out the ``global_symbol`` attribute. Inside an ``@I.ir_module``
    class the function is parsed with its module.
    """

    def wrap(fn: Callable[..., Any]) -> Any:
        return _decorate(fn, sys._getframe(1))

    return wrap if func is None else _decorate(func, sys._getframe(1))


def function(
    func: Callable[..., Any] | None = None,
    /,
    *,
    private: bool = False,
    pure: bool = True,
    check_well_formed: bool = True,
) -> Any:
    """Parse a function written in TVMScript's Relax dialect into a ``relax.Function``.

    ``private=True`` leaves out the ``global_symbol`` attribute; ``pure=False`` marks a
    function with side effects; ``check_well_formed=False`` skips the well-formedness check.
    """

    def wrap(fn: Callable[..., Any]) -> Any:
        return _decorate(fn, sys._getframe(1))

    return wrap if func is None else _decorate(func, sys._getframe(1))


def _decorate(obj: Any, frame: types.FrameType) -> Any:
    in_class_body = "__qualname__" in frame.f_locals and "__module__" in frame.f_locals
    if in_class_body and not isinstance(obj, type):
        # A function in a class body: the class's @I.ir_module parses it with the module.
        return obj
    source, node, env = _capture(obj, frame)
    return parse_definition(source, node, env, check_well_formed=True)


# ------------------------------------------------------------------------------ source
def _capture(obj: Any, frame: types.FrameType) -> tuple[Source, Definition, Environment]:
    """The source text, the definition's AST and the names it sees."""
    if isinstance(obj, type):
        filename = frame.f_code.co_filename
        module_globals = frame.f_globals
        # While a decorator runs, the frame's line is the decorator's line.
        starts = [frame.f_lineno]
        local_names = dict(frame.f_locals)
    else:
        code = getattr(obj, "__code__", None)
        if code is None:
            raise ParseError(
                f"TVMScript decorators apply to functions and classes, not to {type(obj).__name__}"
            )
        filename = code.co_filename
        module_globals = obj.__globals__
        starts = [code.co_firstlineno]
        local_names = dict(frame.f_locals)
        for name, cell in zip(code.co_freevars, obj.__closure__ or ()):
            try:
                local_names[name] = cell.cell_contents
            except ValueError:  # a closure variable not assigned yet
                continue
    lines = linecache.getlines(filename, module_globals)
    name = getattr(obj, "__name__", "?")
    if not lines:
        raise ParseError(
            f"TVMScript needs the source code of {name!r} to parse it, but Python cannot find "
            f"it (defined in {filename}); define it in a file or a notebook cell, or pass the "
            "text to mlckit.script.from_source",
            filename=filename,
            lineno=starts[0],
        )
    source = Source(filename, tuple(line.rstrip("\r\n") for line in lines))
    if isinstance(obj, type):
        with contextlib.suppress(OSError, TypeError):
            starts.append(inspect.getsourcelines(obj)[1])
    for start in starts:
        node = _definition_at(lines, start, name)
        if node is not None:
            env = Environment(module_globals, local_names)
            return source, node, env
    raise ParseError(
        f"TVMScript could not find the definition of {name!r} in {filename}",
        filename=filename,
        lineno=starts[0],
    )


def _definition_at(lines: list[str], start: int, name: str) -> Definition | None:
    """The class or function definition starting at line ``start`` (its first decorator)."""
    if not 1 <= start <= len(lines):
        return None
    try:
        block = inspect.getblock(lines[start - 1 :])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    text = "".join(block)
    indented = text[:1] in (" ", "\t")
    if indented:
        # Parse the block in place under a dummy `if` so that columns stay those of the file.
        text = "if 1:\n" + text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    ast.increment_lineno(tree, start - 1 - (1 if indented else 0))
    node = tree.body[0].body[0] if indented else tree.body[0]  # type: ignore[attr-defined]
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
        return node
    return None


# ------------------------------------------------------------------------------ dispatch
def definition_kind(parser: Parser, node: Definition) -> tuple[Dialect, dict[str, Any]]:
    """The dialect whose decorator decorates ``node``, and the decorator's keyword options."""
    first_error: ParseError | None = None
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        try:
            func = parser.eval(target)
        except ParseError as err:
            if not parser.env.trusted:
                raise
            # Maybe another library's decorator; report it only if none of ours is found.
            first_error = first_error or err
            continue
        dialect = dialect_of(func)
        if dialect is None:
            if not parser.env.trusted:
                raise parser.error(
                    dec, "TVMScript text decorates with @I.ir_module, @T.prim_func or @R.function"
                )
            continue
        options: dict[str, Any] = {}
        if isinstance(dec, ast.Call):
            if dec.args:
                raise parser.error(
                    dec.args[0],
                    "decorator options are keyword arguments, e.g. @T.prim_func(private=True)",
                )
            options = parser.evaluator.call_arguments(dec)[1]
            known = [p for p in inspect.signature(func).parameters if p not in ("func", "cls")]
            for option in options:
                if option not in known:
                    raise parser.error(
                        dec,
                        f"@{ast.unparse(target)} has no option {option!r}; "
                        f"its options are {', '.join(known) or 'none'}",
                    )
        if (func is ir_module) != isinstance(node, ast.ClassDef):
            what = "a class" if func is ir_module else "a function"
            raise parser.error(dec, f"@{ast.unparse(target)} decorates {what}")
        return dialect, options
    if first_error is not None:
        raise first_error
    raise parser.error(
        node, f"{node.name!r} is not decorated with @I.ir_module, @T.prim_func or @R.function"
    )


def parse_definition(
    source: Source, node: Definition, env: Environment, check_well_formed: bool = False
) -> Any:
    """Parse a decorated class or function into an IRModule, PrimFunc or relax Function.

    With ``check_well_formed`` (what the decorators do, unless told otherwise) a relax module or
    function must be well formed. Text read back with ``from_source`` is not checked: a printed
    program after a lowering pass (impure kernel calls in a pure ``main``) must read back as it
    was printed.
    """
    dialect, options = definition_kind(Parser(source, env), node)
    check = options.pop("check_well_formed", True) and check_well_formed
    result = dialect.parse(source, node, env, options)
    if check:
        _check_well_formed(result, source, node)
    return result


def _check_well_formed(result: Any, source: Source, node: Definition) -> None:
    """Raise WellFormedError, naming the definition, when its relax code is malformed."""
    functions = result.functions.values() if isinstance(result, IRModule) else [result]
    if not any(isinstance(f, Function) for f in functions):
        return  # only PrimFuncs: the TensorIR parser has checked them
    try:
        well_formed(result, raise_error=True)
    except WellFormedError as err:
        message = (
            f"{source.filename}:{node.lineno}: {node.name} {err} (pass "
            "check_well_formed=False to the decorator to build it anyway)"
        )
        wrapped = WellFormedError(message)
        wrapped.problems = getattr(err, "problems", [])  # type: ignore[attr-defined]
        raise wrapped from None


# ------------------------------------------------------------------------------ text
def from_source(text: str, extra_vars: dict[str, Any] | None = None) -> Any:
    """Parse TVMScript text: an ``@I.ir_module`` class, a ``@T.prim_func`` or an
    ``@R.function`` (as the printer writes them, metadata section included).

    The text is data, not code: it may use only what TVMScript offers (see
    :mod:`.namespaces`). ``extra_vars`` are names the caller lends it (values it may use and
    call). Nothing in the text is executed as Python."""
    if not isinstance(text, str):
        raise ParseError(f"TVMScript text is a string, not {type(text).__name__}")
    source = Source.from_text(text, "<string>")
    tree = _python_syntax(text, source)
    extra = dict(extra_vars or {})
    names: dict[str, Any] = {dialect.prefix: dialect.namespace for dialect in dialects()}
    names.update(extra)
    env = Environment(names, trusted=False, granted=extra.values())
    parser = Parser(source, env)
    definitions: list[Definition] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef)):
            definitions.append(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _import_namespaces(parser, stmt, names)
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            # `metadata = {...}`: evaluated before the definition, which then sees it.
            names[stmt.targets[0].id] = parser.eval(stmt.value)
        elif not is_docstring(stmt):
            raise parser.error(
                stmt,
                "TVMScript text holds one decorated class or function, "
                "imports of T, R and I, and a `metadata = ...` assignment",
            )
    if len(definitions) != 1:
        node = definitions[1] if definitions else (tree.body[0] if tree.body else None)
        raise parser.error(
            node,
            f"TVMScript text must define exactly one decorated class or "
            f"function, found {len(definitions)}",
        )
    definition = definitions[0]
    try:
        return parse_definition(source, definition, env)
    except RecursionError:
        raise parser.error(definition, "the script is nested too deeply to parse") from None


def _python_syntax(text: str, source: Source) -> ast.Module:
    """The text's Python syntax tree, or a located ParseError saying why it has none."""
    try:
        return ast.parse(text, "<string>")
    except SyntaxError as err:
        # A NUL byte is reported without a position.
        lineno = err.lineno or next(
            (i + 1 for i, line in enumerate(source.lines) if "\0" in line), 1
        )
        message, col = f"invalid Python syntax: {err.msg}", max((err.offset or 1) - 1, 0)
    except (RecursionError, MemoryError):
        # Python's own parser gives up on expressions nested thousands deep.
        lineno, col, message = 1, 0, "the text is nested too deeply for Python to parse"
    raise ParseError(
        message, filename="<string>", lineno=lineno, col=col, source_line=source.line(lineno)
    )


_NAMESPACE_IMPORTS = (
    "TVMScript text imports only its namespaces: "
    "`from mlckit.script import ir as I, tir as T, relax as R`"
)


def _import_namespaces(parser: Parser, stmt: ast.Import | ast.ImportFrom, names: dict) -> None:
    """Bind the names of ``from mlckit.script import tir as T`` (``tvm.script`` also works);
    any other import is an error: text imports nothing that could run."""
    for alias in stmt.names:
        if isinstance(stmt, ast.Import):
            dotted, bound = alias.name, alias.asname
        else:
            dotted = "" if stmt.level else f"{stmt.module}.{alias.name}"
            bound = alias.asname or alias.name
        dotted = "mlckit." + dotted[4:] if dotted.startswith("tvm.") else dotted
        module = importable().get(dotted)
        if module is None or bound is None:
            raise parser.error(stmt, _NAMESPACE_IMPORTS)
        names[bound] = module


def parse(program: Any, extra_vars: dict[str, Any] | None = None) -> Any:
    """Parse TVMScript given as text, or as a (undecorated) function or class object."""
    if isinstance(program, str):
        return from_source(program, extra_vars)
    frame = sys._getframe(1)
    source, node, env = _capture(program, frame)
    if extra_vars:
        env = Environment(env.globals, {**env.locals, **extra_vars})
    return parse_definition(source, node, env)
