"""The "scripts" campaign: mutated TVMScript text, parsed, printed and parsed again.

A case is a valid script from a corpus (the course's example modules, printed; hand-written
scripts covering the TensorIR and Relax dialects; programs after passes, the default pipeline
or a schedule, printed)
with one to three random mutations: a token changed, deleted or duplicated, identifiers
swapped, a number made 0, -1, huge, a float or infinite, a dtype string changed, a line deleted,
duplicated or re-indented, an extra argument inserted into a call, or an expression replaced by
an injection payload (:func:`~mlckit.testing.fuzzing.canary_payload` and other ways out of the
script: ``__import__``, dunder chains, lambdas, imports, ...).

The verdict: the text is ACCEPTED when it parses and printing the result and parsing that again
gives a structurally equal program, which prints the same text; REJECTED when parsing raises an
MLCError located in the text (``<string>``, line > 0). A printed program that does not parse
back, or parses to something else, is a WRONG result; an unlocated error or a Python exception
is RAW; a tripped canary is CODE_RUN. No program is built: the parser and the printer are what
is tried.
"""

from __future__ import annotations

import functools
import io
import random
import tokenize
from collections.abc import Callable

import numpy as np

from mlckit import relax, tir
from mlckit.errors import MLCError, StructuralMismatchError
from mlckit.ir import assert_structural_equal
from mlckit.script import from_source
from mlckit.testing import examples

from . import CANARY, Trial, WrongResult, canary_payload, judge

__all__ = ["CAMPAIGN", "corpus", "mutate"]

# ------------------------------------------------------------------------------ corpus
# Hand-written scripts for what the course's examples do not show.
TIR_FEATURES = """
@T.prim_func
def features(a: T.handle, B: T.Buffer((8, 8), "float32"), n: T.int32):
    T.func_attr({"tir.noalias": True, "note": "x", "level": 2, "scale": 0.5})
    m = T.int64()
    A = T.match_buffer(a, (m, 8), "float32")
    C = T.alloc_buffer((8,), "float32", scope="local")
    for i in T.serial(0, 8):
        with T.block("init"):
            vi = T.axis.spatial(8, i)
            C[vi] = T.float32(0.0)
    for i, k in T.grid(8, 8):
        with T.block("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            T.reads(B[vi, 0:8])
            T.writes(C[vi])
            T.block_attr({"meta_schedule.tiling": 1})
            with T.init():
                C[vi] = T.float32(0.0)
            C[vi] = C[vi] + B[vi, vk] * T.float32(2.0)
    for i in T.parallel(8):
        for j in T.vectorized(8):
            with T.block("out"):
                vi = T.axis.spatial(8, i)
                vj = T.axis.spatial((0, 8), j)
                T.where(i < 8)
                if vi % 2 == 0:
                    B[vi, vj] = T.max(C[vi], T.float32(0.0))
                else:
                    B[vi, vj] = T.Select(vj < n, T.exp(C[vi]), T.Cast("float32", vj))
    for i in T.unroll(4, annotations={"pragma": 1}):
        with T.block("let"):
            vi = T.axis.opaque(4, i)
            x: T.int32 = T.floordiv(vi * 3 + n, 2) - T.truncmod(vi, 3)
            B[x % 8, T.floormod(vi, 8)] = T.if_then_else(x > 0, T.float32(1.5), -T.float32(1.0))
"""

TIR_GPU = """
@T.prim_func
def gpu(A: T.Buffer((64, 64), "float16"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for tx in T.thread_binding(8, thread="threadIdx.x"):
            for k in range(64):
                with T.block("B"):
                    vi = T.axis.spatial(64, bx * 8 + tx)
                    vk = T.axis.reduce(64, k)
                    T.reads(A[vi, vk])
                    T.writes(B[vi])
                    with T.init():
                        B[vi] = T.float32(0.0)
                    B[vi] = B[vi] + T.Cast("float32", A[vi, vk]) * T.float32(0.25)
"""

TIR_SUBREGION = """
@T.prim_func(private=True)
def sub(A: T.Buffer((16, 16), "int32"), B: T.Buffer((16, 16), "int64")):
    for i, j in T.grid(4, 4):
        with T.block("tile"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])
            T.writes(B[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4])
            S = T.match_buffer(A[vi * 4:vi * 4 + 4, vj * 4:vj * 4 + 4], (4, 4), "int32")
            for k in range(4):
                with T.block("copy"):
                    vk = T.axis.spatial(4, k)
                    B[vi * 4 + vk, vj * 4] = T.Cast("int64", S[vk, 0]) // T.int64(2)
"""

RELAX_FEATURES = """
@I.ir_module
class Features:
    @T.prim_func(private=True)
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.spatial(4, i)
                B[vi] = A[vi] + T.float32(1.0)

    @R.function(private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.nn.relu(x)
        return y

    @R.function
    def main(
        x: R.Tensor((4,), "float32"),
        s: R.Shape([4]),
        p: R.Prim("int64"),
        t: R.Tuple(R.Tensor((4,), "float32"), R.Object),
        c: R.Tensor((), "bool"),
    ) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor(ndim=1)):
        R.func_attr({"num_input": 2})
        cls = Features
        with R.dataflow():
            a = R.add(x, R.const(1.5, "float32"))
            b = R.call_tir(cls.add_one, (a,), out_sinfo=R.Tensor((4,), "float32"))
            d = R.nn.softmax(b, axis=0)
            e = R.match_cast(d, R.Tensor((4,), "float32"))
            f: R.Tensor((4,), "float32") = cls.helper(e)
            R.output(f)
        g = t[0]
        h = R.call_pure_packed("env.f", g, sinfo_args=R.Tensor((4,), "float32"))
        if c:
            k = R.multiply(h, f)
        else:
            k = R.subtract(h, f)
        r = (k, R.reshape(f, R.shape([4])))
        return r
"""

RELAX_SYMBOLIC = """
@R.function
def sym(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, "m"), "float32")):
    n = T.int64()
    m = T.int64()
    with R.dataflow():
        y = R.matmul(x, w)
        z = R.sum(y, axis=[1], keepdims=True)
        u = R.astype(z, "float16")
        v = R.permute_dims(y, axes=[1, 0])
        q = R.match_cast(v, R.Tensor((m, n), "float32"))
        R.output(u, q)
    o = R.call_packed("env.log", u, R.str("text"), R.dtype("int8"), R.prim_value(T.int64(3)),
                      sinfo_args=R.Object)
    e = R.ExternFunc("env.g")
    return (u, q, o, e)
"""

HAND_WRITTEN = (TIR_FEATURES, TIR_GPU, TIR_SUBREGION, RELAX_FEATURES, RELAX_SYMBOLIC)


@functools.cache
def corpus() -> tuple[str, ...]:
    """The valid scripts the mutations start from (each parses and round-trips)."""
    texts = [text.strip() + "\n" for text in HAND_WRITTEN]
    parsed = [from_source(text) for text in texts]
    modules = [
        examples.Module,
        examples.MyModule,
        examples.MyModuleLegacy,
        examples.MyModuleWithExternCall,
        examples.MyModuleMixture,
        relax.transform.LegalizeOps()(examples.MyModule),
        # Fused and scheduled by the default pipeline; with explicit memory (R.memory.*).
        relax.get_pipeline("default")(examples.Module),
        relax.transform.StaticPlanBlockMemory()(
            relax.transform.CallTIRRewrite()(
                relax.transform.ToNonDataflow()(relax.transform.LegalizeOps()(examples.MyModule))
            )
        ),
    ]
    # A scheduled kernel: split, reorder, parallel, vectorize, unroll in its loops.
    sch = tir.Schedule(examples.MyModuleMixture["linear0"])
    _, j, k = sch.get_loops(sch.get_block("Y"))
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(j0, k, j1)
    sch.parallel(j0)
    sch.vectorize(j1)
    k0, _ = sch.split(k, [None, 4])
    sch.unroll(k0)
    modules.append(sch.mod)
    # Constants too large to print inline: a metadata section.
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2, 3), "float32"))
    with bb.function("main", [x]):
        weights = relax.const(np.arange(6, dtype="float32").reshape(2, 3))
        bb.emit_func_output(bb.emit(relax.op.add(x, weights)))
    printed = [m.script() for m in [*parsed, *modules]]
    printed.append(bb.get().script(show_meta=True))
    return tuple(texts + printed)


# ------------------------------------------------------------------------------ mutations
_SET = f"__setattr__('{CANARY}', 1)"
_PAYLOAD = canary_payload()
# Expressions that set the canary if the parser ever evaluates them as Python.
PAYLOADS = (
    _PAYLOAD,
    f"getattr(__import__('builtins'), '__setattr__')('{CANARY}', 1)",
    f"T.__dict__['__builtins__']['__import__']('builtins').{_SET}",
    f"T.exp.__globals__['__builtins__']['__import__']('builtins').{_SET}",
    f"R.builtins.{_SET}",
    f"I.np.__builtins__['__import__']('builtins').{_SET}",
    f"R.symbol_scope.__wrapped__.__globals__['builtins'].{_SET}",
    f"cls.__class__.__init__.__globals__['__builtins__']['__import__']('builtins').{_SET}",
    "().__class__.__bases__[0].__subclasses__()[-1].__init__.__globals__",
    f"(lambda: {_PAYLOAD})()",
    f"[{_PAYLOAD} for _ in range(1)]",
    f'f"{{{_PAYLOAD}}}"',
    f"eval({_PAYLOAD!r})",
    f"exec({_PAYLOAD!r})",
    "open('/etc/passwd').read()",
    "__import__('os').system('true')",
    "T.prim_func(T.exp)",
    "T.max(1, 2)(3)",
)
# Whole statements that would run code at the top of a text or in a body.
TOP_LEVEL = (
    "import os",
    "import builtins",
    "from os import system",
    "from mlckit.script import tir as T",
    f"metadata = {_PAYLOAD}",
    f"@{_PAYLOAD}",
)
NUMBERS = (
    "0", "-1", "1", "2", "3", "7", "128", "2**31", "2**63", "-2**63 - 1", "10**30", "1.5",
    "0.0", "-0.0", "1e400", "-1e400", 'float("nan")', 'float("inf")', "True", "None",
    "9**9**9", "1 << 100000", "4 // 0", "1 % 0", "1 / 0", "(1, 2)", "[]", '"a"',
)  # fmt: skip
STRINGS = (
    "float32", "float16", "float64", "int8", "int32", "int64", "uint8", "bool", "handle",
    "void", "floa32", "", "SSR", "S", "R", "RS", "SRS", "x y", "threadIdx.x", "blockIdx.x",
    "vthread", "local", "shared", "global", "env.f", "\\n", "é", 'a\\"b', "root",
    "tir.noalias", "global_symbol", "__import__",
)  # fmt: skip
NAMES = (
    "T", "R", "I", "cls", "None", "True", "range", "float", "int", "x", "A", "B", "i", "vi",
    "metadata", "Module", "main", "_", "n", "self", "print", "__builtins__", "__class__",
)  # fmt: skip
OPERATORS = (
    "+", "-", "*", "/", "//", "%", "**", "<", "==", "and", "not", ",", ":", "(", ")", "[",
    "]", "{", "}", ".", "=", "@", "->", "|", "<<", "*", "**", "in", "lambda", "if", "else",
)  # fmt: skip
EXTRA_ARGS = (
    "1", "None", '"x"', "0.5", "foo=1", 'dtype="int8"', "ndim=1e400", "ndim=-2", "align=64",
    "offset_factor=1", "data=A", "scope=1", "strides=(1,)", "T.int32(5)", "(1, 2)", "[x]",
    "*A", "**{}", "private=True", "axis=7", "out_sinfo=R.Object", "x", "i", "n",
)  # fmt: skip

_SKIPPED = {
    tokenize.NEWLINE,
    tokenize.NL,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
    tokenize.COMMENT,
}


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        found = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [t for t in found if t.type not in _SKIPPED]


def _offset(lines: list[str], position: tuple[int, int]) -> int:
    row, col = position
    return sum(len(line) for line in lines[: row - 1]) + col


def _splice(text: str, token: tokenize.TokenInfo, new: str, *, keep: bool = False) -> str:
    """``text`` with ``token`` replaced by ``new`` (inserted before it when ``keep``)."""
    lines = text.splitlines(keepends=True)
    start, end = _offset(lines, token.start), _offset(lines, token.end)
    return text[:start] + new + (text[start:] if keep else text[end:])


Mutation = Callable[[random.Random, str], tuple[str, str]]


def _pick_token(rng: random.Random, text: str, *types: int) -> tokenize.TokenInfo | None:
    tokens = [t for t in _tokens(text) if not types or t.type in types]
    return rng.choice(tokens) if tokens else None


def _replace_token(rng: random.Random, text: str) -> tuple[str, str]:
    token = _pick_token(rng, text)
    if token is None:
        return text, "no token"
    choices = {
        tokenize.NUMBER: NUMBERS,
        tokenize.STRING: tuple(f'"{s}"' for s in STRINGS),
        tokenize.NAME: NAMES + tuple(t.string for t in _tokens(text) if t.type == tokenize.NAME),
    }.get(token.type, OPERATORS)
    new = rng.choice(choices)
    return _splice(text, token, new), f"token {token.string!r} at {token.start} -> {new!r}"


def _delete_token(rng: random.Random, text: str) -> tuple[str, str]:
    token = _pick_token(rng, text)
    if token is None:
        return text, "no token"
    return _splice(text, token, ""), f"deleted token {token.string!r} at {token.start}"


def _duplicate_token(rng: random.Random, text: str) -> tuple[str, str]:
    token = _pick_token(rng, text)
    if token is None:
        return text, "no token"
    new = _splice(text, token, token.string + " ", keep=True)
    return new, f"duplicated token {token.string!r} at {token.start}"


def _swap_identifiers(rng: random.Random, text: str) -> tuple[str, str]:
    names = sorted({t.string for t in _tokens(text) if t.type == tokenize.NAME})
    if len(names) < 2:
        return text, "no identifiers"
    a, b = rng.sample(names, 2)
    out = text
    for token in reversed(_tokens(text)):
        if token.type == tokenize.NAME and token.string in (a, b):
            out = _splice(out, token, b if token.string == a else a)
    return out, f"swapped identifiers {a!r} and {b!r}"


def _change_number(rng: random.Random, text: str) -> tuple[str, str]:
    token = _pick_token(rng, text, tokenize.NUMBER)
    if token is None:
        return _replace_token(rng, text)
    # Half the time another small number, which keeps more programs valid.
    new = rng.choice(NUMBERS) if rng.random() < 0.5 else str(rng.randint(0, 16))
    return _splice(text, token, new), f"number {token.string} at {token.start} -> {new}"


def _change_string(rng: random.Random, text: str) -> tuple[str, str]:
    token = _pick_token(rng, text, tokenize.STRING)
    if token is None:
        return _replace_token(rng, text)
    new = f'"{rng.choice(STRINGS)}"'
    return _splice(text, token, new), f"string {token.string} at {token.start} -> {new}"


def _line_edit(rng: random.Random, text: str) -> tuple[str, str]:
    lines = text.splitlines()
    if not lines:
        return text, "no lines"
    at = rng.randrange(len(lines))
    kind = rng.choice(("delete", "duplicate", "swap", "indent", "dedent", "tab", "space"))
    line = lines[at]
    if kind == "delete":
        del lines[at]
    elif kind == "duplicate":
        lines.insert(at, line)
    elif kind == "swap" and at + 1 < len(lines):
        lines[at], lines[at + 1] = lines[at + 1], line
    elif kind == "indent":
        lines[at] = "    " + line
    elif kind == "dedent":
        lines[at] = line[4:] if line.startswith("    ") else line
    elif kind == "tab":
        lines[at] = "\t" + line.lstrip(" ")
    elif kind == "space":
        lines[at] = " " + line
    return "\n".join(lines) + "\n", f"line {at + 1}: {kind}"


def _inject(rng: random.Random, text: str) -> tuple[str, str]:
    """An injection payload as an expression, a statement or a top-level line."""
    payload = rng.choice(PAYLOADS)
    where = rng.choice(("expression", "expression", "statement", "top"))
    if where == "expression":
        token = _pick_token(rng, text, tokenize.NAME, tokenize.NUMBER, tokenize.STRING)
        if token is not None:
            new = _splice(text, token, f"({payload})")
            return new, f"injected {payload!r} for {token.string!r} at {token.start}"
    lines = text.splitlines()
    if where == "top" or not lines:
        statement = rng.choice(TOP_LEVEL)
        at = rng.randrange(len(lines) + 1)
        lines.insert(at, statement)
        return "\n".join(lines) + "\n", f"inserted {statement!r} at line {at + 1}"
    at = rng.randrange(len(lines))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    statement = rng.choice((f"x = {payload}", payload, f"T.evaluate({payload})"))
    lines.insert(at, indent + statement)
    return "\n".join(lines) + "\n", f"inserted statement {statement!r} at line {at + 1}"


def _extra_argument(rng: random.Random, text: str) -> tuple[str, str]:
    """An argument added at the start or the end of a call's argument list."""
    tokens = _tokens(text)
    calls = [
        index
        for index, t in enumerate(tokens[1:], 1)
        if t.string == "(" and tokens[index - 1].type == tokenize.NAME
    ]
    if not calls:
        return _replace_token(rng, text)
    index = rng.choice(calls)
    arg = rng.choice(EXTRA_ARGS + PAYLOADS[:3])
    if "=" not in arg and rng.random() < 0.5:
        return _splice(text, tokens[index + 1], f"{arg}, ", keep=True), f"first argument {arg!r}"
    depth = 0
    for close in tokens[index:]:
        depth += {"(": 1, ")": -1}.get(close.string, 0)
        if depth == 0:
            break
    empty = tokens[tokens.index(close) - 1] is tokens[index]
    new = _splice(text, close, arg if empty else f", {arg}", keep=True)
    return new, f"last argument {arg!r} in the call at {tokens[index].start}"


MUTATIONS: tuple[tuple[Mutation, int], ...] = (
    (_replace_token, 4),
    (_delete_token, 2),
    (_duplicate_token, 1),
    (_swap_identifiers, 2),
    (_change_number, 4),
    (_change_string, 3),
    (_line_edit, 3),
    (_inject, 3),
    (_extra_argument, 4),
)


def mutate(rng: random.Random, text: str) -> tuple[str, list[str]]:
    """``text`` after one to three random mutations, and what they were."""
    done = []
    mutations, weights = zip(*MUTATIONS)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        mutation = rng.choices(mutations, weights)[0]
        text, what = mutation(rng, text)
        done.append(what)
    return text, done


# ------------------------------------------------------------------------------ verdict
def round_trip(text: str) -> None:
    """Parse ``text``; if it parses, its printed form must parse back to an equal program."""
    program = from_source(text)
    try:
        printed = program.script(show_meta=True)
    except MLCError as err:
        raise WrongResult(
            f"the parsed program does not print: {type(err).__name__}: {err}"
        ) from None
    try:
        again = from_source(printed)
        assert_structural_equal(again, program)
        if again.script(show_meta=True) != printed:
            raise WrongResult(f"the program prints differently once parsed again:\n{printed}")
    except StructuralMismatchError as err:
        raise WrongResult(f"the printed program parses to another one: {err}\n{printed}") from None
    except MLCError as err:
        raise WrongResult(f"the printed program does not parse: {err}\n{printed}") from None


def located_in_text(err: MLCError) -> str | None:
    """What is wrong with a refusal: None when it points into the text."""
    if getattr(err, "filename", None) == "<string>" and (getattr(err, "lineno", 0) or 0) > 0:
        return None
    return "the error does not point into the script"


class ScriptsCampaign:
    name = "scripts"

    def trial(self, rng: random.Random) -> Trial:
        texts = corpus()
        original = rng.randrange(len(texts))
        text, what = mutate(rng, texts[original])
        case = f"corpus[{original}] with {'; '.join(what)}\n{text}"
        return judge(
            self.name,
            case,
            lambda: round_trip(text),
            check_error=located_in_text,
            timeout_s=20.0,
        )


CAMPAIGN = ScriptsCampaign()
