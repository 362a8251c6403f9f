"""Malformed TVMScript: every mistake is a ParseError (or a StructInfoError for a shape
mistake) at the right line, naming what was expected. No bare Python exception escapes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlckit.errors import ParseError, StructInfoError
from mlckit.script import from_source
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T

TIR = """@T.prim_func
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), n: T.int32):
"""
RELAX = """@R.function
def f(x: R.Tensor((3, 4), "float32"), y: R.Tensor((4, 5), "float32")):
"""


def block(body: str) -> str:
    """A TensorIR function whose body is a 2-d loop nest with a block around ``body``."""
    lines = [
        "    for i, j in T.grid(4, 4):",
        '        with T.block("b"):',
        '            vi, vj = T.axis.remap("SS", [i, j])',
    ]
    lines += ["            " + line for line in body.splitlines()]
    return TIR + "\n".join(lines) + "\n"


# (script, error type, line, key phrase)
CASES = {
    "unknown T name": (
        TIR + "    for i in T.grdi(4):\n        pass\n",
        ParseError,
        3,
        "did you mean 'grid'",
    ),
    "unknown R name": (
        RELAX + "    z = R.multiplyy(x, x)\n    return z\n",
        ParseError,
        3,
        "did you mean 'multiply'",
    ),
    "unknown I name": (
        "@I.ir_modul\nclass M:\n    pass\n",
        ParseError,
        1,
        "did you mean 'ir_module'",
    ),
    "undefined variable": (
        block("B[vi, vj] = C[vi, vj]"),
        ParseError,
        6,
        "name 'C' is not defined",
    ),
    "undefined variable with hint": (
        block("B[vi, vj] = A[vi, vjj]"),
        ParseError,
        6,
        "did you mean 'vj'",
    ),
    "remap kind count": (
        TIR + "    for i, j in T.grid(4, 4):\n        with T.block('b'):\n"
        "            vi, vj = T.axis.remap('SSR', [i, j])\n",
        ParseError,
        5,
        "3 kinds 'SSR' for 2 loop variables",
    ),
    "remap kind letter": (
        TIR + "    for i, j in T.grid(4, 4):\n        with T.block('b'):\n"
        "            vi, vj = T.axis.remap('SQ', [i, j])\n",
        ParseError,
        5,
        "unknown iterator kind 'Q'",
    ),
    "remap of a non-loop": (
        TIR + "    for i in range(4):\n        with T.block('b'):\n"
        "            vi = T.axis.remap('S', [n])\n",
        ParseError,
        5,
        "loop variables of enclosing loops",
    ),
    "R.output outside dataflow": (
        RELAX + "    z = R.matmul(x, y)\n    R.output(z)\n    return z\n",
        ParseError,
        4,
        "R.output can only be used",
    ),
    "R.output not last": (
        RELAX + "    with R.dataflow():\n        z = R.matmul(x, y)\n"
        "        R.output(z)\n        w = R.add(z, z)\n    return z\n",
        ParseError,
        5,
        "must be the last statement",
    ),
    "dataflow var used after block": (
        RELAX + "    with R.dataflow():\n"
        "        z = R.matmul(x, y)\n"
        "        w = R.add(z, z)\n"
        "        R.output(w)\n    return z\n",
        ParseError,
        7,
        "list it in R.output",
    ),
    "call with wrong arity": (
        block("B[vi, vj] = T.max(A[vi, vj])"),
        ParseError,
        6,
        "wrong arguments to T.max(a, b)",
    ),
    "relax op with wrong arity": (
        RELAX + "    z = R.add(x)\n    return z\n",
        ParseError,
        3,
        "missing a required argument",
    ),
    "non-struct-info annotation": (
        "@R.function\ndef f(x: T.int32):\n    return x\n",
        ParseError,
        2,
        "not a struct info",
    ),
    "non-struct-info binding annotation": (
        RELAX + "    z: T.int32 = R.add(x, x)\n    return z\n",
        ParseError,
        3,
        "not a struct info",
    ),
    "matmul shape mismatch": (
        RELAX + "    z = R.matmul(y, x)\n    return z\n",
        StructInfoError,
        3,
        "relax.matmul",
    ),
    "add shape mismatch in dataflow": (
        RELAX + "    with R.dataflow():\n"
        "        z = R.add(x, y)\n"
        "        R.output(z)\n    return z\n",
        StructInfoError,
        4,
        "relax.add",
    ),
    "buffer with wrong number of indices": (
        block("B[vi, vj] = A[vi]"),
        ParseError,
        6,
        "2 dimensions but is indexed with 1",
    ),
    "store to undefined buffer": (
        block("Q[vi, vj] = A[vi, vj]"),
        ParseError,
        6,
        "name 'Q' is not defined",
    ),
    "store to a non-buffer": (block("n[vi] = A[vi, vj]"), ParseError, 6, "is not a buffer"),
    "T.init outside block": (
        TIR + "    with T.init():\n        B[0, 0] = T.float32(0)\n",
        ParseError,
        3,
        "inside a `with T.block",
    ),
    "T.axis outside block": (
        TIR + "    for i in range(4):\n        vi = T.axis.spatial(4, i)\n",
        ParseError,
        4,
        "inside a `with T.block",
    ),
    "T.reads outside block": (
        TIR + "    T.reads(A[0, 0])\n",
        ParseError,
        3,
        "inside a `with T.block",
    ),
    "loop var used in block": (
        block("B[vi, vj] = A[i, vj]"),
        ParseError,
        6,
        "loop variable 'i' is used directly inside block",
    ),
    "loop var used outside its loop": (
        TIR + "    for i in range(4):\n        B[i, 0] = A[i, 0]\n    B[i, 1] = A[0, 1]\n",
        ParseError,
        5,
        "used outside its loop",
    ),
    "return missing": (RELAX + "    z = R.matmul(x, y)\n", ParseError, 2, "must end with a return"),
    "statement after return": (
        RELAX + "    return x\n    z = R.add(x, x)\n",
        ParseError,
        4,
        "after `return`",
    ),
    "while loop": (
        TIR + "    while n < 4:\n        pass\n",
        ParseError,
        3,
        "while loops are not supported",
    ),
    "lambda": (TIR + "    g = lambda v: v\n", ParseError, 3, "lambda"),
    "list comprehension": (
        TIR + "    xs = [k for k in range(3)]\n",
        ParseError,
        3,
        "list comprehensions are not supported",
    ),
    "f-string": (RELAX + "    z = R.str(f'{x}')\n    return z\n", ParseError, 3, "f-strings"),
    "try statement": (
        TIR + "    try:\n        pass\n    except Exception:\n        pass\n",
        ParseError,
        3,
        "try/except",
    ),
    "dtype typo": (
        '@T.prim_func\ndef f(A: T.Buffer((4, 4), "flaot32")):\n    pass\n',
        ParseError,
        2,
        "did you mean 'float32'",
    ),
    "relax dtype typo": (
        '@R.function\ndef f(x: R.Tensor((4,), "flot32")):\n    return x\n',
        ParseError,
        2,
        "unknown dtype 'flot32'",
    ),
    "T.Buffer with a float shape": (
        '@T.prim_func\ndef f(A: T.Buffer((4.5, 4), "float32")):\n    pass\n',
        ParseError,
        2,
        "the shape is a tuple of integers",
    ),
    "R.call_tir without out_sinfo": (
        RELAX + "    z = R.call_tir('env.f', (x,))\n    return z\n",
        ParseError,
        3,
        "out_sinfo=R.Tensor",
    ),
    "assign to a function parameter": (
        TIR + "    n = 5\n",
        ParseError,
        3,
        "cannot assign to 'n': it is a function parameter",
    ),
    "assign to a buffer parameter": (TIR + "    A = 5\n", ParseError, 3, "cannot assign to 'A'"),
    "augmented assign to a scalar": (TIR + "    n += 1\n", ParseError, 3, "cannot be reassigned"),
    "T.block as an expression": (
        TIR + "    b = T.block('b')\n",
        ParseError,
        3,
        "`with T.block(name):`",
    ),
    "T.int64() as a value": (
        TIR + "    x = T.int64() + 1\n",
        ParseError,
        3,
        "declares a symbolic variable",
    ),
    "missing TIR parameter type": (
        "@T.prim_func\ndef f(A):\n    pass\n",
        ParseError,
        2,
        "needs a type",
    ),
    "missing relax parameter type": (
        "@R.function\ndef f(x):\n    return x\n",
        ParseError,
        2,
        "needs a struct info annotation",
    ),
    "store of the wrong dtype": (
        TIR + "    A[0, 0] = n + 1\n",
        ParseError,
        3,
        "cannot store a int32 value",
    ),
    "two T.init": (
        TIR + "    for i in range(4):\n        with T.block('b'):\n"
        "            vi = T.axis.spatial(4, i)\n"
        "            with T.init():\n                B[vi, 0] = T.float32(0)\n"
        "            with T.init():\n                B[vi, 0] = T.float32(0)\n",
        ParseError,
        8,
        "already has a T.init()",
    ),
    "unsupported with": (
        TIR + "    with T.grid(4):\n        pass\n",
        ParseError,
        3,
        "`with T.block(name):`",
    ),
    "loop over a list": (
        TIR + "    for i in [1, 2]:\n        pass\n",
        ParseError,
        3,
        "iterates over range",
    ),
    "float loop bound": (
        TIR + "    for i in range(4.0):\n        pass\n",
        ParseError,
        3,
        "range expects integer extents, got 4.0",
    ),
    "grid with too few names": (
        TIR + "    for i in T.grid(4, 4):\n        pass\n",
        ParseError,
        3,
        "2 nested loops need 2 loop variables, got 1",
    ),
    "T.where with a float": (
        TIR + "    for i in range(4):\n        with T.block('b'):\n"
        "            vi = T.axis.spatial(4, i)\n"
        "            T.where(T.float32(1))\n",
        ParseError,
        6,
        "T.where",
    ),
    "match_buffer of a non-handle": (
        TIR + "    C = T.match_buffer(n, (4,), 'float32')\n",
        ParseError,
        3,
        "takes a T.handle parameter",
    ),
    "if without else in relax": (
        RELAX + "    if x:\n        z = x\n    return x\n",
        ParseError,
        3,
        "needs an `else` branch",
    ),
    "if branches assign different names": (
        '@R.function\ndef f(x: R.Tensor((3,), "float32"), c: R.Prim("bool")):\n'
        "    if c:\n        a = x\n    else:\n        b = x\n    return x\n",
        ParseError,
        6,
        "same name",
    ),
    "return inside dataflow": (
        RELAX + "    with R.dataflow():\n        z = R.add(x, x)\n        return z\n",
        ParseError,
        5,
        "`return` must be the last statement",
    ),
    "nested dataflow": (
        RELAX + "    with R.dataflow():\n        with R.dataflow():\n"
        "            pass\n    return x\n",
        ParseError,
        4,
        "cannot be nested",
    ),
    "relax tuple unpacking": (
        RELAX + "    a, b = R.add(x, x)\n    return a\n",
        ParseError,
        3,
        "t[0], t[1]",
    ),
    "legacy relax op typo": (
        "from mlckit import relax\n"
        + RELAX.replace("def f", "def g")
        + "    z = relax.multiplyy(x, x)\n    return z\n",
        ParseError,
        4,
        "did you mean 'multiply'",
    ),
    "call_tir of an unknown module function": (
        "@I.ir_module\nclass M:\n    @R.function\n"
        '    def main(x: R.Tensor((4,), "float32")):\n        cls = M\n'
        '        y = R.call_tir(cls.mainn, (x,), out_sinfo=R.Tensor((4,), "float32"))\n'
        "        return y\n",
        ParseError,
        6,
        "module 'M' has no function 'mainn'; did you mean 'main'",
    ),
    "statement in a module class": (
        "@I.ir_module\nclass M:\n    x = 1\n",
        ParseError,
        3,
        "holds only functions",
    ),
    "python syntax error": ("@T.prim_func\ndef f(:\n", ParseError, 2, "invalid Python syntax"),
    "two definitions in text": (
        "@T.prim_func\ndef f():\n    pass\n\n@T.prim_func\ndef g():\n    pass\n",
        ParseError,
        6,
        "exactly one",
    ),
    "unknown decorator option": (
        "@T.prim_func(privat=True)\ndef f():\n    pass\n",
        ParseError,
        1,
        "no option 'privat'",
    ),
    # ---- errors that used to escape as Python exceptions, or only relabel one
    "block without a body": (
        TIR + '    for i in range(4):\n        with T.block("b"):\n    A[0, 0] = 1.0\n',
        ParseError,
        5,
        "expected an indented block",
    ),
    "NUL byte": (TIR + "    A[0, 0] = 1\0\n", ParseError, 3, "null bytes"),
    "nested too deeply for Python": (
        TIR + "    A[0, 0] = " + "-" * 100000 + "1\n",
        ParseError,
        1,
        "nested too deeply",
    ),
    "T.Buffer annotation with data": (
        '@T.prim_func\ndef f(A: T.Buffer((4,), "float32", 1)):\n    pass\n',
        ParseError,
        2,
        "T.Buffer: data= (a view of another buffer's memory) is not supported",
    ),
    "T.Buffer annotation with a scope that is no string": (
        '@T.prim_func\ndef f(A: T.Buffer((4,), "float32", scope=1)):\n    pass\n',
        ParseError,
        2,
        "the scope is a string",
    ),
    "T.Buffer assigned in a body": (
        TIR + '    Y = T.Buffer((4,), "float32")\n',
        ParseError,
        3,
        "declares no memory: T.Buffer is a parameter's annotation; to allocate a buffer "
        "write `Y = T.alloc_buffer(shape, dtype)`",
    ),
    "T.Buffer used in a body": (
        TIR + '    A[0, 0] = T.Buffer((4,), "float32")[0]\n',
        ParseError,
        3,
        "is not declared in this function",
    ),
    "R.dtype of a variable": (
        RELAX + "    z = R.dtype(x)\n    return x\n",
        ParseError,
        3,
        "unknown R.dtype's dtype",
    ),
    "division by zero": (
        TIR + "    for i in range(4 // 0):\n        pass\n",
        ParseError,
        3,
        "division by zero in `4 // 0`",
    ),
    "T.grid of a string": (
        TIR + '    for i in T.grid("a"):\n        pass\n',
        ParseError,
        3,
        "T.grid expects integer extents, got 'a'",
    ),
    "dtype constructor of a string": (
        TIR + '    A[0, 0] = T.int32("a")\n',
        ParseError,
        3,
        "T.int32(value) takes a number or a TensorIR expression, got 'a'",
    ),
    "R.Tensor with an unknown keyword": (
        RELAX + '    z: R.Tensor((3, 4), "float32", w0=1) = x\n    return x\n',
        ParseError,
        3,
        "wrong arguments to R.Tensor(shape=None, dtype=None, ndim=-1, vdevice=None): "
        "got an unexpected keyword argument 'w0'",
    ),
    "R.Prim whose value has another dtype": (
        RELAX + '    z: R.Prim("int64", T.int32(1)) = R.prim_value(T.int64(1))\n    return x\n',
        ParseError,
        3,
        "the value is int32, the dtype says int64",
    ),
    "R.const of a string": (
        RELAX + '    z = R.const("a", "float32")\n    return x\n',
        ParseError,
        3,
        "relax.const takes a number, a numpy array or (nested) lists of numbers, got 'a'",
    ),
    "R.const that does not fit its dtype": (
        RELAX + '    z = R.const(300, "int8")\n    return x\n',
        ParseError,
        3,
        "relax.const: 300 is not exactly representable as int8",
    ),
    "float of a word": (
        TIR + '    A[0, 0] = T.float32(float("shared"))\n',
        ParseError,
        3,
        'float() takes a number or "inf", "-inf" or "nan", got \'shared\'',
    ),
    "operator on unsupported operands": (
        TIR + "    A[0, 0] = A[0, 0] @ 2\n",
        ParseError,
        3,
        "`@` cannot combine a BufferLoad and the int 2",
    ),
    "missing metadata key": (
        'metadata = {"a": [1]}\n' + RELAX + '    z = metadata["b"]\n    return x\n',
        ParseError,
        4,
        "a dict has no item 'b'; its keys are 'a'",
    ),
    "huge power": (TIR + "    A[0, 0] = 9 ** 9 ** 9\n", ParseError, 3, "the constant is too large"),
    "huge repetition": (TIR + '    A[0, 0] = "a" * 10 ** 9\n', ParseError, 3, "makes it too long"),
    "unpacking a buffer": (
        TIR + "    A[0, 0] = T.max(*A)\n",
        ParseError,
        3,
        "*A unpacks only a tuple or list, not a Buffer",
    ),
    "membership in a buffer": (
        TIR + "    A[0, 0] = 1 in A\n",
        ParseError,
        3,
        "`in` tests membership in a Python",
    ),
    # ---- input that used to be accepted and then print as something else
    "function attribute holding a module": (
        TIR + '    T.func_attr({"m": T})\n',
        ParseError,
        3,
        "the value of 'm' holds a module",
    ),
    "function attribute holding a GlobalVar": (
        "@I.ir_module\nclass M:\n    @T.prim_func\n    def f():\n"
        '        T.func_attr({"callee": M.g})\n\n'
        "    @T.prim_func\n    def g():\n        pass\n",
        ParseError,
        5,
        "the value of 'callee' holds a GlobalVar",
    ),
    "block attribute beyond int64": (
        TIR + '    with T.block("b"):\n        T.block_attr({"n": 2**64})\n',
        ParseError,
        4,
        "the value of 'n' holds the int 18446744073709551616",
    ),
    "loop annotation holding a function": (
        TIR + '    for i in T.serial(4, annotations={"f": T.exp}):\n        pass\n',
        ParseError,
        3,
        "T.serial's annotations: the value of 'f' holds a function",
    ),
    "infinite ndim": (
        "@R.function\ndef f(x: R.Tensor(ndim=1e400)):\n    return x\n",
        ParseError,
        2,
        "R.Tensor's ndim is the number of dimensions (-1: unknown), got inf",
    ),
    "tuple struct info of an expression": (
        RELAX + "    z: R.TupleStructInfo(x) = x\n    return x\n",
        ParseError,
        3,
        "R has no attribute 'TupleStructInfo'",
    ),
    "callable struct info of an expression": (
        RELAX + "    z: R.Callable(x, R.Object) = x\n    return x\n",
        ParseError,
        3,
        "R.Callable's params is a tuple of struct infos",
    ),
    "alloc_buffer with an extra positional argument": (
        TIR + '    C = T.alloc_buffer((4,), "float32", None, None, None, "global", 64)\n',
        ParseError,
        3,
        "T.alloc_buffer: align=64 is not supported",
    ),
    "match_buffer with a buffer type": (
        "@T.prim_func\ndef f(a: T.handle):\n"
        '    A = T.match_buffer(a, (4,), "float32", None, None, None, "global", -1, 1, "auto")\n',
        ParseError,
        3,
        "T.match_buffer: buffer_type='auto' is not supported",
    ),
    "match_buffer with a negative offset factor": (
        "@T.prim_func\ndef f(a: T.handle):\n"
        '    A = T.match_buffer(a, (4,), "float32", offset_factor=-16)\n',
        ParseError,
        3,
        "T.match_buffer: offset_factor is a non-negative integer, got -16",
    ),
    "T.var without a dtype": (
        "@T.prim_func\ndef f(a: T.handle):\n    n = T.var()\n",
        ParseError,
        3,
        'T.var takes the dtype alone: `n = T.var("int32")`',
    ),
    "T.var outside a declaration": (
        TIR + '    T.evaluate(T.var("int32") + 1)\n',
        ParseError,
        3,
        "declares a symbolic variable; write it as an assignment",
    ),
    "access_ptr with a bad mode": (
        TIR + '    T.evaluate(T.call_extern("int32", "f", A.access_ptr("x")))\n',
        ParseError,
        3,
        "A.access_ptr: the access mask is 'r', 'w' or 'rw' (or 1, 2, 3), got 'x'",
    ),
    "call_extern without a dtype": (
        TIR + '    T.evaluate(T.call_extern("f", A.access_ptr("r")))\n',
        ParseError,
        3,
        "T.call_extern takes the result dtype, then the function name",
    ),
    "region with float bounds": (
        TIR + '    with T.block("b"):\n        T.reads(A[0:1.5, 0])\n',
        ParseError,
        4,
        "the bounds of a region of A are integers",
    ),
    "block iterator bound to a loop inside the block": (
        TIR + '    with T.block("b"):\n        for k in range(4):\n'
        "            vk = T.axis.spatial(4, k)\n",
        ParseError,
        5,
        "uses 'k', which is defined inside block 'b'",
    ),
    "function buffer sized by a let variable": (
        TIR + '    m: T.int32 = 4\n    C = T.alloc_buffer((m,), "float32")\n',
        ParseError,
        4,
        "the shape of 'C' uses 'm', which is bound inside the function",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_malformed_script(name):
    text, error_type, line, phrase = CASES[name]
    with pytest.raises(error_type) as info:
        from_source(text)
    message = str(info.value)
    location = re.match(r"<string>:(\d+):(\d+): error: ", message)
    assert location is not None, message
    assert int(location.group(1)) == line, message
    assert phrase in message, message
    # The offending source line is shown, with a caret under the node.
    source_line = text.splitlines()[line - 1]
    assert source_line.rstrip() in message and "^" in message, message


def test_there_are_at_least_thirty_malformed_scripts():
    assert len(CASES) >= 30


def test_caret_is_under_the_offending_node():
    text = TIR + "    for i in T.grdi(4):\n        pass\n"
    with pytest.raises(ParseError) as info:
        from_source(text)
    error = info.value
    assert (error.lineno, error.col) == (3, 13)
    assert error.msg.startswith("T has no attribute 'grdi'")
    caret_line = str(error).splitlines()[-1]
    assert caret_line == " " * (4 + 13) + "^" * len("T.grdi")


# ------------------------------------------------------------------------ decorated code
def _line_of(marker: str) -> int:
    """The line of this file that contains ``marker`` (once, apart from this call)."""
    lines = Path(__file__).read_text().splitlines()
    found = [i + 1 for i, line in enumerate(lines) if marker in line and "_line_of" not in line]
    assert len(found) == 1, found
    return found[0]


def test_decorated_function_error_is_located_in_this_file():
    with pytest.raises(ParseError) as info:

        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = undefined_thing  # marker: undefined

    assert info.value.filename == __file__
    assert info.value.lineno == _line_of("# marker: undefined")
    assert info.value.col == len("                A[i] = ")


def test_module_error_is_located_in_this_file():
    with pytest.raises(StructInfoError) as info:

        @I.ir_module
        class Broken:
            @R.function
            def main(x: R.Tensor((2, 3), "float32")):
                y = R.matmul(x, x)  # marker: matmul
                return y

    assert info.value.lineno == _line_of("# marker: matmul")
    assert f"{__file__}:{info.value.lineno}:" in str(info.value)


def test_source_must_be_available():
    code = compile("@T.prim_func\ndef f():\n    pass\n", "<nowhere>", "exec")
    with pytest.raises(ParseError, match="needs the source code"):
        exec(code, {"T": T})


def test_no_bare_python_exception_escapes():
    # A broad sample of odd input: each must fail as an mlckit error, never as a Python one.
    scripts = [
        TIR + "    A[0, 0] = {}\n",
        TIR + "    x = (1, 2)[5]\n",
        TIR + "    T.func_attr(5)\n",
        RELAX + "    z = x[0:2]\n    return z\n",
        RELAX + "    z = R.call_tir(x, (x,), out_sinfo=R.Tensor((3,), 'float32'))\n    return z\n",
        RELAX + "    z = R.Tensor((3,), 'float32')(x)\n    return z\n",
        RELAX + "    R.func_attr({1: 2})\n    return x\n",
        "@R.function\ndef f(x: R.Tuple):\n    return x\n",
        "x = 1\n",
    ]
    for text in scripts:
        with pytest.raises((ParseError, StructInfoError)):
            from_source(text)
