"""TVMScript text is data: ``from_source`` evaluates only what TVMScript offers (T., R. and I.
constructors, literals, the names the script binds), so a printed module or a tuning
database's record can never run code. Decorated Python keeps its caller's names, as in TVM."""

from __future__ import annotations

import builtins
import json
import math

import pytest

from mlckit.errors import ParseError
from mlckit.ir import assert_structural_equal
from mlckit.meta_schedule.database import JSONDatabase
from mlckit.script import from_source
from mlckit.script import tir as T
from mlckit.testing.fuzzing import CANARY, canary_payload

PAYLOAD = canary_payload()  # sets builtins.<CANARY> if ever evaluated
SET = f"__setattr__('{CANARY}', 1)"

TIR = """@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = {}
"""
RELAX = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        cls = Module
        y = {}
        return x
"""

# Each way out of the closed world of TVMScript text, as the expression assigned in a body.
ESCAPES = {
    "__import__": PAYLOAD,
    "getattr": f"getattr(__import__('builtins'), '__setattr__')('{CANARY}', 1)",
    "dunder chain": "().__class__.__bases__[0].__subclasses__()",
    "T.__dict__": f"T.__dict__['__builtins__']['__import__']('builtins').{SET}",
    "function globals": f"T.exp.__globals__['__builtins__']['__import__']('builtins').{SET}",
    "module imported by R": f"R.builtins.{SET}",
    "module imported by I": f"I.np.__builtins__['__import__']('builtins').{SET}",
    "private name of T": "T._tir",
    "private name of R": "R._op",
    "lambda": f"(lambda: {PAYLOAD})()",
    "comprehension": f"[{PAYLOAD} for _ in range(1)]",
    "f-string": f'f"{{{PAYLOAD}}}"',
    "open": "open('/etc/passwd')",
    "eval": f'eval("{PAYLOAD}")',
    "exec": "exec('import os')",
    "call of a result": "T.max(1, 2)(3)",
    "decorator called": "T.prim_func(T.exp)",
    "relax namespace internals": f"R.symbol_scope.__wrapped__.__globals__['builtins'].{SET}",
}


def _rejected(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        from_source(text)
    assert not hasattr(builtins, CANARY), "an injected payload ran"
    error = info.value
    assert error.filename == "<string>" and error.lineno > 0, str(error)
    return error


@pytest.mark.parametrize("name", list(ESCAPES))
@pytest.mark.parametrize("template", [TIR, RELAX], ids=["tir", "relax"])
def test_no_escape_from_a_function_body(name, template):
    text = template.format(ESCAPES[name])
    error = _rejected(text)
    assert (
        error.lineno
        == text.splitlines().index(
            next(line for line in text.splitlines() if ESCAPES[name] in line)
        )
        + 1
    )


@pytest.mark.parametrize(
    "top, phrase",
    [
        ("import os", "imports only its namespaces"),
        ("from os import system", "imports only its namespaces"),
        ("import mlckit.script.tir", "imports only its namespaces"),
        ("from mlckit.script import from_source", "imports only its namespaces"),
        (f"metadata = {PAYLOAD}", "'__import__' is not defined"),
        ("metadata = __builtins__", "'__builtins__' is not defined"),
        (f"x = ().__class__.__base__.{SET}", "reads attributes only of T, R, I"),
    ],
)
def test_no_escape_at_top_level(top, phrase):
    error = _rejected(top + "\n" + TIR.format("1.0"))
    assert error.lineno == 1 and phrase in str(error), str(error)


def test_no_escape_through_a_decorator():
    error = _rejected(f"@{PAYLOAD}\n" + TIR.format("1.0"))
    assert "'__import__' is not defined" in str(error)


def test_denials_say_what_text_may_not_do():
    assert "no Python builtins but range and float" in str(_rejected(TIR.format("open('x')")))
    assert "private or special attributes" in str(_rejected(TIR.format("T.__dict__")))
    message = str(_rejected(TIR.format("T.max(1, 2)(3)")))
    assert "calls only T., R. and I. constructors" in message


def test_a_decorator_called_as_a_statement_is_located_at_it():
    # It used to report <unknown>:0:1.
    for text, line in [
        (TIR.format("1.0") + "    T.prim_func(A)\n", 5),
        (RELAX.replace("y = {}", "y = R.function(x)"), 6),
    ]:
        error = _rejected(text)
        assert error.lineno == line and "is a decorator" in str(error), str(error)


def test_text_may_import_the_script_namespaces():
    for header in (
        "from mlckit.script import ir as I, tir as T, relax as R",
        "from tvm.script import tir as T",
        "import mlckit.script.tir as T",
        "from mlckit.script import tirx as T",
    ):
        func = from_source(header + "\n" + TIR.format("T.float32(1.0)"))
        assert_structural_equal(func, from_source(TIR.format("T.float32(1.0)")))


def test_text_names_extra_vars_and_uses_range_and_float():
    func = from_source(
        TIR.replace("range(4)", "range(n)").format('T.float32(float("inf"))'),
        extra_vars={"n": 4},
    )
    assert func.body.extent.value == 4


def test_a_tuning_database_cannot_run_code(tmp_path):
    path = tmp_path / "tuning.json"
    source = f"metadata = {PAYLOAD}\n" + TIR.format("1.0")
    path.write_text(json.dumps({"workload": "0", "source": source}) + "\n")
    with pytest.raises(ParseError):
        JSONDatabase(path).get_workload("0")
    assert not hasattr(builtins, CANARY)


HELPER_N = 4


def test_decorated_python_still_sees_its_callers_names():
    # Decorators parse code the student runs anyway: constants and modules of the caller work.
    scale = 2

    @T.prim_func
    def f(A: T.Buffer((HELPER_N,), "float32")):
        for i in range(math.prod((HELPER_N, 1))):
            A[i] = T.float32(scale * 1.5)

    assert f.body.extent.value == HELPER_N
    assert f.body.body.value.value == 3.0
