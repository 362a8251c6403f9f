"""Campaign "injection": hostile names through every name that reaches generated code.

Each trial builds one small program through the normal APIs and names its parts with strings
a careless student or an attacker might choose: the canary payload behind a newline, a quote,
a triple quote, a backslash or a ``#``; unicode (``β``, right-to-left marks, NUL, ``\\r``,
``\\u2028``); Python keywords; the names the generated code itself uses (``np``, ``range``,
``wrap_int32``, ``check_tensor``, ``__builtins__``); names that clash once sanitized
(``a-b`` and ``a_b``); the empty string and very long names. The programs
(:data:`SCENARIOS`) put those names on

* ``te.placeholder``/``te.compute`` tensors (buffer and block names), index and reduction
  variables, symbolic dims, the PrimFunc's key in its IRModule and its ``global_symbol``, and
  a function attribute;
* schedule products: blocks looked up by name, split loops, a ``cache_write`` buffer, the
  blocks ``decompose_reduction`` names, block and loop annotations (keys and values);
* TVMScript text: a block name, ``T.block_attr`` and ``T.func_attr`` values;
* several PrimFuncs of one module whose names clash (each must keep computing its own result);
* relax: functions, parameters, bound variables and the PrimFuncs ``bb.emit_te`` adds,
  built with ``relax.build`` and run by the ``VirtualMachine``.

Each program runs on "python" (one in ten on "llvm", one in 25 on "cuda", where numba's
simulator stands in for a missing GPU) and its result is compared with numpy's.
A trial passes when it computes numpy's result or is refused with an MLCError; it fails when
the canary trips (a name ran as code), a result differs, the generated code does not compile,
or another exception escapes.
``trial_for_seed(seed)`` repeats a trial; its case lists the names it used, as ``repr``.
"""

from __future__ import annotations

import keyword
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import mlckit
from mlckit import relax, te, tir, topi
from mlckit.backend.codegen import RESERVED
from mlckit.errors import MLCError
from mlckit.ir.module import IRModule
from mlckit.relax.vm.codegen import VM_RUNTIME_NAMES
from mlckit.script import from_source
from mlckit.target import Target
from mlckit.tir.schedule.default_gpu_schedule import DefaultGPUSchedule

from . import Trial, WrongResult, canary_payload, judge

__all__ = ["CAMPAIGN", "SCENARIOS", "hostile_name", "trial_for_seed"]

NAME = "injection"
# numba compiles each kernel in ~0.3 s, and its simulator of a GPU runs one thread per element.
TARGET_SHARES = {"python": 0.86, "llvm": 0.1, "cuda": 0.04}

_PAYLOAD = canary_payload()
# Text around the payload that would end a comment, a string literal or a line of the
# generated source, or open an f-string field, if pasted into it.
_BREAKOUTS = (
    "\n{p}\n",
    # A new line at the indentation of a comment in a loop nest: valid code if pasted there.
    "B\n    {p}",
    "B\n        {p}",
    "B\n            {p}",
    "B\n                {p}",
    "\r{p}",
    "\r\n{p}",
    "\u2028{p}",
    "\x0c{p}",
    "\x00{p}",
    "'); {p}; ('",
    '"); {p}; ("',
    "'''); {p}; ('''",
    '"""); {p}; ("""',
    "\\\n{p}",
    "\\')); {p}; (('",
    "# \n{p}",
    "{{{p}}}",
    "x = 1; {p}",
    "{p}",
    "{p} #",
)
_UNICODE = (
    "β",
    "γ",
    "βγ",
    "変数",
    "é",
    "x\u0301",
    "\u200f",
    "\u202eA",
    "a\u200bb",
    "\x00",
    "a\x00b",
    "\r",
    "\u2028",
    "\t",
    "\x7f",
)
# What the generated kernels and VM functions define, import or call, and Python's own names.
_CODE_NAMES = tuple(
    sorted(
        RESERVED
        | VM_RUNTIME_NAMES
        | {
            "__builtins__",
            "__name__",
            "__file__",
            "__import__",
            "__class__",
            "__dict__",
            "exec",
            "eval",
            "globals",
            "vm",
            "R",
            "T",
            "I",
            "tvm",
            "mlckit",
        }
    )
)
# Plain names that clash with each other, with the names the programs use, or once sanitized.
_CLASHES = (
    "",
    "0",
    "1x",
    "a.b",
    "a-b",
    "a b",
    "a_b",
    "main",
    "A",
    "B",
    "C",
    "i",
    "k",
    "v",
    "v_1",
    "_1",
    "A_1",
    "i_0",
    "C_local",
    "x" * 300,
    "y" * 5000,
)
_FAMILIES: tuple[Callable[[random.Random], str], ...] = (
    lambda rng: rng.choice(_BREAKOUTS).format(p=_PAYLOAD),
    lambda rng: rng.choice(_UNICODE),
    lambda rng: rng.choice(keyword.kwlist + keyword.softkwlist),
    lambda rng: rng.choice(_CODE_NAMES),
    lambda rng: rng.choice(_CLASHES),
)


def hostile_name(rng: random.Random) -> str:
    """One hostile string; now and then two joined."""
    name = rng.choice(_FAMILIES)(rng)
    if rng.random() < 0.15:
        name += rng.choice(_FAMILIES)(rng)
    return name


@dataclass(frozen=True)
class Scenario:
    """A program with named slots: ``run(names, target, nprng)`` builds it with those names,
    runs it and raises WrongResult when its result is not numpy's."""

    name: str
    slots: tuple[str, ...]
    run: Callable[[dict[str, str], str, np.random.Generator], None]
    # Its schedule is for a CPU; the others also run on "cuda" (numba's simulator without a GPU).
    cpu_only: bool = False


def _close(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=1e-5, atol=1e-5):
        raise WrongResult(f"{what}: got {got!r}, numpy computes {expected!r}")


def _floats(nprng: np.random.Generator, *shape: int) -> np.ndarray:
    return nprng.standard_normal(shape).astype("float32")


def _build(functions: dict[str, tir.PrimFunc], target: str) -> Any:
    """``mlckit.build`` of the PrimFuncs, bound to GPU threads first for "cuda"."""
    mod = IRModule(functions)
    if Target(target).is_gpu:
        mod = DefaultGPUSchedule()(mod)
    return mlckit.build(mod, target)


def _device(target: str) -> Any:
    return Target(target).device()


def _call(lib: Any, key: str, target: str, inputs: list[np.ndarray], shape: tuple) -> np.ndarray:
    """``lib[key](*inputs, out)`` with the arrays on the target's device; returns ``out``."""
    device = _device(target)
    out = mlckit.nd.empty(shape, "float32", device)
    lib[key](*[mlckit.nd.array(x, device) for x in inputs], out)
    return out.numpy()


# ---------------------------------------------------------------------- te + mlckit.build
def _elementwise(names: dict[str, str], target: str, nprng: np.random.Generator) -> None:
    """C = A + 2 B over (n, 3), n symbolic, with named tensors, index variables, function and
    attribute."""
    n = te.var(names["n"], "int64")
    a = te.placeholder((n, 3), "float32", name=names["A"])
    b = te.placeholder((n, 3), "float32", name=names["B"])
    c = te.compute(
        (n, 3),
        lambda *idx: a[idx] + b[idx] * 2,
        name=names["C"],
        varargs_names=[names["i"], names["j"]],
    )
    func = te.create_prim_func([a, b, c]).with_attr(names["attr"], names["value"])
    func = func.with_attr("global_symbol", names["symbol"])
    lib = _build({names["func"]: func}, target)
    x, y = _floats(nprng, 5, 3), _floats(nprng, 5, 3)
    _close(_call(lib, names["func"], target, [x, y], (5, 3)), x + 2 * y, "elementwise")


def _scheduled_matmul(names: dict[str, str], target: str, nprng: np.random.Generator) -> None:
    """C = A @ B with a named reduction axis, scheduled: blocks found by their names, loops
    split, a cache_write buffer, decompose_reduction's blocks, annotations."""
    a = te.placeholder((4, 6), "float32", name=names["A"])
    b = te.placeholder((6, 5), "float32", name=names["B"])
    k = te.reduce_axis((0, 6), name=names["k"])
    c = te.compute((4, 5), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=names["C"])
    sch = mlckit.tir.Schedule(te.create_prim_func([a, b, c]))
    block = sch.get_block(names["C"])
    i, j, kk = sch.get_loops(block)
    sch.split(j, [None, 2])
    sch.annotate(block, names["attr"], names["value"])
    sch.annotate(i, names["attr"], names["value"])
    local = sch.cache_write(block, 0, "local")
    sch.reverse_compute_at(local, i)
    sch.decompose_reduction(block, kk)
    lib = _build({names["func"]: sch.mod["main"]}, target)
    x, y = _floats(nprng, 4, 6), _floats(nprng, 6, 5)
    _close(_call(lib, names["func"], target, [x, y], (4, 5)), x @ y, "scheduled matmul")


def _script(names: dict[str, str], target: str, nprng: np.random.Generator) -> None:
    """TVMScript text whose block name, block attribute and function attribute are strings."""
    text = f"""
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({{{names["attr"]!r}: {names["value"]!r}}})
    for i in range(4):
        with T.block({names["C"]!r}):
            vi = T.axis.remap("S", [i])
            T.block_attr({{{names["attr"]!r}: {names["value"]!r}}})
            B[vi] = A[vi] * T.float32(3)
"""
    lib = _build({names["func"]: from_source(text)}, target)
    x = _floats(nprng, 4)
    _close(_call(lib, names["func"], target, [x], (4,)), x * 3, "script")


def _clashing_functions(names: dict[str, str], target: str, nprng: np.random.Generator) -> None:
    """Three PrimFuncs whose names may clash once sanitized: each adds its own constant."""

    def add(offset: int) -> tir.PrimFunc:
        a = te.placeholder((3,), "float32", name=names["A"])
        return te.create_prim_func([a, te.compute((3,), lambda i: a[i] + offset, name=names["B"])])

    keys = list(dict.fromkeys([names["func"], names["symbol"], names["C"]]))
    functions = {key: add(offset) for offset, key in enumerate(keys, start=1)}
    lib = _build(functions, target)
    x = _floats(nprng, 3)
    for offset, key in enumerate(keys, start=1):
        _close(_call(lib, key, target, [x], (3,)), x + offset, f"function {key!r}")


# ---------------------------------------------------------------------- relax + the VM
def _relax(names: dict[str, str], target: str, nprng: np.random.Generator) -> None:
    """main(x, y) = (x + y) * y over (n, 3), and a second function calling it, every name
    hostile: functions, parameters, bound variables, PrimFuncs, the symbolic dim."""
    n = tir.Var(names["n"], "int64")
    sinfo = relax.TensorStructInfo((n, 3), "float32")
    x, y = relax.Var(names["x"], sinfo), relax.Var(names["y"], sinfo)
    bb = relax.BlockBuilder()
    with bb.function(names["func"], [x, y]):
        with bb.dataflow():
            total = bb.emit_te(topi.add, x, y, primfunc_name_hint=names["A"], name_hint=names["lv"])
            product = bb.emit_te(
                topi.multiply, total, y, primfunc_name_hint=names["B"], name_hint=names["gv"]
            )
            out = bb.emit_output(product, name_hint=names["C"])
        bb.emit_func_output(out)
    main = bb.get().get_global_var(names["func"])
    p = relax.Var(names["y"], sinfo)
    with bb.function(names["symbol"], [p]):
        result = bb.emit(relax.Call(main, [p, p]), name_hint=names["x"])
        bb.emit_func_output(result)
    device = _device(target)
    vm = relax.VirtualMachine(relax.build(bb.get(), target), device)
    a, b = _floats(nprng, 5, 3), _floats(nprng, 5, 3)
    x_in, y_in = mlckit.nd.array(a, device), mlckit.nd.array(b, device)
    _close(vm[names["func"]](x_in, y_in).numpy(), (a + b) * b, "relax main")
    _close(vm[names["symbol"]](x_in).numpy(), (a + a) * a, "relax caller")


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "elementwise",
        ("n", "A", "B", "C", "i", "j", "attr", "value", "symbol", "func"),
        _elementwise,
    ),
    Scenario(
        "scheduled_matmul",
        ("A", "B", "C", "k", "attr", "value", "func"),
        _scheduled_matmul,
        cpu_only=True,
    ),
    Scenario("script", ("C", "attr", "value", "func"), _script),
    Scenario("clashing_functions", ("A", "B", "C", "symbol", "func"), _clashing_functions),
    Scenario("relax", ("n", "x", "y", "lv", "gv", "A", "B", "C", "func", "symbol"), _relax),
)

# The names a slot has when it is not hostile.
_PLAIN = {
    "n": "n",
    "A": "A",
    "B": "B",
    "C": "C",
    "i": "i",
    "j": "j",
    "k": "k",
    "x": "x",
    "y": "y",
    "lv": "lv",
    "gv": "gv",
    "attr": "note",
    "value": "plain",
    "symbol": "other",
    "func": "main",
}


def trial_for_seed(seed: int) -> Trial:
    """The trial drawn from ``seed``: its program, target and names."""
    rng = random.Random(seed)
    scenario = rng.choice(SCENARIOS)
    target = rng.choices(list(TARGET_SHARES), weights=list(TARGET_SHARES.values()))[0]
    if scenario.cpu_only and Target(target).is_gpu:
        target = "llvm"
    hostile = set(rng.sample(scenario.slots, rng.randint(1, len(scenario.slots))))
    names = {s: hostile_name(rng) if s in hostile else _PLAIN[s] for s in scenario.slots}
    nprng = np.random.default_rng(seed)
    listed = "\n".join(f"  {slot}: {names[slot]!r}" for slot in scenario.slots)
    case = f"seed {seed}: {scenario.name} on {target!r}, names\n{listed}"
    return judge(NAME, case, lambda: scenario.run(names, target, nprng), check_error=_check_error)


def _check_error(err: MLCError) -> str | None:
    """A name may be refused, but never by the code it generated failing to compile."""
    if "numba could not compile" in str(err):
        return "the generated code did not compile"
    return None


class _Campaign:
    name = NAME

    def trial(self, rng: random.Random) -> Trial:
        return trial_for_seed(rng.randrange(1 << 31))


CAMPAIGN = _Campaign()
