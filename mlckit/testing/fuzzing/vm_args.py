"""The "vm_args" campaign: whatever a student passes to ``vm["f"](...)``, the VM either computes
what numpy computes or raises a VMError that names the argument.

Each trial calls one function of a small relax module (:data:`FUNCTIONS`: static and symbolic
shapes, int32 and float16, a 0-d tensor, tuples in and out, R.Prim, R.Shape and R.Object
parameters, an if, a tensor of unknown dtype passed on to a kernel, and an impure function
whose kernel writes into its parameter ``out``), built once per process for
"python" and, one trial in ten, for "llvm". Its arguments are drawn from the parameters' struct
info, each in a form the VM must take (a numpy array, an NDArray, a strided, transposed,
read-only or broadcast view, a list for a tuple, a numpy integer for an R.Prim, ...), and in
about half of the trials one argument in a form it must refuse (another dtype, rank or size,
sizes that disagree on a symbolic dim, a 0-d array, a Python number, a list, a tuple, None, a
torch tensor, an NDArray of the wrong shape, an output that is read-only or aliases an input),
or one argument too many or too few.

An accepted call must return numpy's result and leave its inputs unchanged; a refusal must be
a VMError naming the argument (or, for a wrong count, the parameters). A refused good call, an
accepted bad one, a wrong number or any other exception is a failure. ``trial_for_seed(seed)``
repeats a trial; the case printed with it says what was passed.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from mlckit import relax
from mlckit.errors import MLCError, VMError
from mlckit.ir.module import IRModule
from mlckit.runtime.ndarray import NDArray
from mlckit.runtime.ndarray import array as nd_array
from mlckit.script import ir as I
from mlckit.script import relax as R
from mlckit.script import tir as T
from mlckit.tir import expr as E

from . import Trial, WrongResult, judge

__all__ = ["CAMPAIGN", "FUNCTIONS", "trial_for_seed"]

NAME = "vm_args"
LLVM_SHARE = 0.1
TOLERANCE = 1e-5


# ---------------------------------------------------------------------- the functions called
@I.ir_module
class Functions:
    @T.prim_func
    def add_half(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.block("B"):
                vi = T.axis.remap("S", [i])
                B[vi] = A[vi] + T.float32(0.5)

    @R.function
    def add(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
        return R.add(x, y)

    @R.function
    def sym(a: R.Tensor(("n",), "float32"), b: R.Tensor(("n",), "float32")):
        return R.multiply(a, b)

    @R.function
    def mm(x: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32")):
        return R.nn.relu(R.matmul(x, w))

    @R.function
    def ints(x: R.Tensor((5,), "int32"), y: R.Tensor((5,), "int32")):
        return R.add(x, y)

    @R.function
    def half(x: R.Tensor((4,), "float16"), y: R.Tensor((4,), "float16")):
        return R.add(x, y)

    @R.function
    def pair(t: R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((3,), "float32"))):
        return R.add(t[0], t[1])

    @R.function
    def scalar(x: R.Tensor((), "float32"), y: R.Tensor((3,), "float32")):
        return R.multiply(x, y)

    @R.function
    def prim(x: R.Tensor((3,), "float32"), k: R.Prim("int64"), f: R.Prim("float32")):
        return x

    @R.function
    def shape(x: R.Tensor(("n", 2), "float32"), s: R.Shape(["n"])):
        return x

    @R.function
    def two(x: R.Tensor(("n",), "int32")):
        return (R.add(x, x), x)

    @R.function
    def cond(c: R.Tensor((), "bool"), x: R.Tensor((2,), "float32")):
        if c:
            y = x
        else:
            y = R.add(x, x)
        return y

    @R.function
    def second(t: R.Object):
        return t[1]

    @R.function
    def loose(x: R.Tensor(ndim=1)):
        y = R.call_tir(Functions.add_half, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y

    @R.function(pure=False)
    def into(x: R.Tensor((4,), "float32"), out: R.Tensor((4,), "float32")):
        Functions.add_half(x, out)
        return out


# What each function computes, on the arguments' values; the parameters its kernels write;
# the targets it runs on (numba has no float16 arithmetic); what the arguments whose struct
# info leaves it open must be (their kernel's parameter).
@dataclasses.dataclass(frozen=True)
class Function:
    reference: Callable[..., Any]
    written: frozenset[str] = frozenset()
    targets: tuple[str, ...] = ("python", "llvm")
    given: dict[str, relax.StructInfo] = dataclasses.field(default_factory=dict)


FUNCTIONS: dict[str, Function] = {
    "add": Function(lambda x, y: x + y),
    "sym": Function(lambda a, b: a * b),
    "mm": Function(lambda x, w: np.maximum(x @ w, 0)),
    "ints": Function(lambda x, y: x + y),
    "half": Function(lambda x, y: x + y, targets=("python",)),
    "pair": Function(lambda t: t[0] + t[1]),
    "scalar": Function(lambda x, y: x * y),
    "prim": Function(lambda x, k, f: x),
    "shape": Function(lambda x, s: x),
    "two": Function(lambda x: (x + x, x)),
    "cond": Function(lambda c, x: x if c else x + x),
    "second": Function(
        lambda t: t[1],
        given={
            "t": relax.TupleStructInfo(
                [relax.TensorStructInfo((2,), "int32"), relax.TensorStructInfo((3,), "float32")]
            )
        },
    ),
    "loose": Function(
        lambda x: x + np.float32(0.5), given={"x": relax.TensorStructInfo((4,), "float32")}
    ),
    "into": Function(lambda x, out: x + np.float32(0.5), written=frozenset({"out"})),
}


@functools.cache
def executable(target: str) -> relax.VirtualMachine:
    """The functions that run on ``target``, built once per process."""
    kept = IRModule(
        {
            gv: func
            for gv, func in Functions.functions.items()
            if gv.name_hint not in FUNCTIONS or target in FUNCTIONS[gv.name_hint].targets
        }
    )
    return relax.VirtualMachine(relax.build(relax.transform.LegalizeOps()(kept), target))


# ---------------------------------------------------------------------- drawing arguments
@dataclasses.dataclass
class Arg:
    """One argument as passed, and the value numpy computes with (None: it must be refused)."""

    passed: Any
    value: Any
    form: str


def _dims(sinfo: Any, sizes: dict[str, int]) -> tuple[int, ...]:
    return tuple(
        sizes[d.name_hint] if isinstance(d, E.Var) else d.value for d in sinfo.shape_values
    )


def _array(dtype: str, shape: tuple[int, ...], nprng: np.random.Generator) -> np.ndarray:
    if dtype.startswith("int"):
        return nprng.integers(-50, 50, shape).astype(dtype)
    return nprng.standard_normal(shape).astype(dtype)


def _good_tensor(value: np.ndarray, form: str) -> tuple[Any, np.ndarray]:
    """``value`` passed as ``form``, a form the VM must take (as an output, only "numpy" and
    "nd": the others are views or copies), and the value it stands for."""
    if form == "nd":
        return nd_array(value), value
    if form == "strided" and value.ndim:  # every other element of a wider array
        wide = np.zeros((*value.shape[:-1], 2 * value.shape[-1]), value.dtype)
        wide[..., ::2] = value
        return wide[..., ::2], value
    if form == "fortran":
        return value.copy(order="F"), value
    if form == "readonly":
        value = value.copy()
        value.setflags(write=False)
        return value, value
    if form == "broadcast" and value.ndim:  # the first row, zero strides
        passed = np.broadcast_to(value[:1], value.shape)
        return passed, passed.copy()
    return value.copy(), value


GOOD_TENSOR_FORMS = ("numpy", "nd", "strided", "fortran", "readonly", "broadcast")
OTHER_DTYPES = ("float64", "float32", "int32", "int64", "bool", "float16")


def _bad_tensor(
    sinfo: Any, value: np.ndarray, shared: set[str], rng: random.Random
) -> tuple[Any, str]:
    """A form of a tensor argument the VM must refuse, and its name."""
    forms = ["dtype", "rank", "scalar", "list", "tuple", "none", "nd_shape", "string", "torch"]
    static = [a for a, d in enumerate(sinfo.shape_values) if isinstance(d, E.IntImm)]
    symbolic = [
        a
        for a, d in enumerate(sinfo.shape_values)
        if isinstance(d, E.Var) and d.name_hint in shared
    ]
    if static or symbolic:
        forms.append("size")
    forms += ["zero_d"] if value.ndim else []
    forms += ["fewer_dims"] if value.ndim > 1 else []
    form = rng.choice(forms)
    if form == "dtype":
        dtype = rng.choice([d for d in OTHER_DTYPES if d != sinfo.dtype])
        return value.astype(dtype), f"dtype {dtype}"
    if form in ("rank", "fewer_dims", "zero_d"):
        bad = {
            "rank": lambda: value[None],
            "fewer_dims": lambda: value.reshape(-1),
            "zero_d": lambda: np.zeros((), value.dtype),
        }[form]()
        return np.asarray(bad, value.dtype), f"shape {np.shape(bad)}"
    if form == "size":
        axis = rng.choice(static + symbolic)
        shape = list(value.shape)
        shape[axis] += rng.choice([-1, 1]) if shape[axis] else 1
        return np.zeros(shape, value.dtype), f"shape {tuple(shape)}"
    if form == "nd_shape":
        return nd_array(np.zeros((*value.shape, 2), value.dtype)), "an NDArray of another shape"
    if form == "torch":
        try:
            import torch
        except ImportError:
            return None, "None (torch is not installed)"
        return torch.from_numpy(value.copy()), "a torch tensor"
    plain = {
        "scalar": 1.5,
        "list": value.tolist(),
        "tuple": tuple(value.tolist()) if value.ndim else (value.item(),),
        "none": None,
        "string": "x",
    }
    return plain[form], form


def _symbolic_owners(params: list[Any]) -> dict[str, set[str]]:
    """For each symbolic dim, the parameters whose shapes use it."""
    owners: dict[str, set[str]] = {}

    def visit(sinfo: Any, name: str) -> None:
        if isinstance(sinfo, relax.TupleStructInfo):
            for field in sinfo.fields:
                visit(field, name)
            return
        dims = getattr(sinfo, "shape_values", None) or getattr(sinfo, "values", None) or ()
        for dim in dims:
            if isinstance(dim, E.Var):
                owners.setdefault(dim.name_hint, set()).add(name)

    for param in params:
        visit(param.struct_info, param.name_hint)
    return owners


@dataclasses.dataclass
class Case:
    """What a trial drew, kept up to date while it runs so that a failure can say."""

    seed: int
    function: str = ""
    target: str = ""
    forms: list[str] = dataclasses.field(default_factory=list)
    # The names a refusal must mention (empty: the call must be accepted).
    blame: set[str] = dataclasses.field(default_factory=set)
    # The arguments are passed by keyword (TVM's VM, like ours, takes them by position).
    keywords: bool = False

    def __str__(self) -> str:
        args = ", ".join(f"{f} (by keyword)" if self.keywords else f for f in self.forms)
        verdict = f"must be refused, naming one of {sorted(self.blame)}" if self.blame else "valid"
        return (
            f"# vm_args.trial_for_seed({self.seed}) repeats this trial\n"
            f'vm["{self.function}"]({args})  # on {self.target!r}: {verdict}'
        )


def draw(case: Case, rng: random.Random) -> list[Arg]:
    """The arguments of one call; at most one of them (or the count) is wrong."""
    func = Functions[case.function]
    spec = FUNCTIONS[case.function]
    params = list(func.params)
    owners = _symbolic_owners(params)
    sizes = {name: rng.choice([0, 1, 2, 3, 5]) for name in owners}
    nprng = np.random.default_rng(rng.randrange(1 << 32))
    bad = rng.randrange(len(params)) if rng.random() < 0.5 else None
    args = []
    for index, param in enumerate(params):
        name, written = param.name_hint, param.name_hint in spec.written
        shared = {d for d, users in owners.items() if len(users) > 1 and name in users}
        sinfo = spec.given.get(name, param.struct_info)
        opaque = isinstance(param.struct_info, relax.ObjectStructInfo)
        arg = _draw(sinfo, name, written, sizes, shared, index == bad and not opaque, nprng, rng)
        if index == bad and opaque:
            # Anything is an R.Object: only what the function takes from it can be missing.
            passed = rng.choice([tuple(arg.passed)[:1], 5, None])
            arg = Arg(passed, None, f"{name}={passed!r}")
        if arg.value is None:
            case.blame |= {name} | {user for d in shared for user in owners[d]}
        args.append(arg)
    if bad is None and len(params) > 1 and rng.random() < 0.15:
        # One array for two parameters of the same struct info: fine unless one is written.
        first, second = rng.sample(range(len(params)), 2)
        same = str(params[first].struct_info) == str(params[second].struct_info)
        if same and isinstance(args[first].passed, np.ndarray):
            args[second] = Arg(
                args[first].passed, args[first].value, f"the same array as arg {first}"
            )
            if {params[first].name_hint, params[second].name_hint} & spec.written:
                args[second].value = None
                case.blame |= {params[first].name_hint, params[second].name_hint}
    case.forms = [a.form for a in args]
    if bad is None and rng.random() < 0.1:
        if rng.random() < 0.3:
            case.keywords = True
            case.blame.add("by position")
        elif rng.random() < 0.5:
            args.append(Arg(np.zeros(1, "float32"), None, "one argument too many"))
            case.forms.append("<one argument too many>")
        else:
            case.forms.append(f"<{args.pop().form}: left out>")
        if not case.keywords:
            case.blame.add(f"takes {len(params)} arguments")
    return args


def _draw(
    sinfo: Any,
    name: str,
    written: bool,
    sizes: dict[str, int],
    shared: set[str],
    bad: bool,
    nprng: np.random.Generator,
    rng: random.Random,
) -> Arg:
    if isinstance(sinfo, relax.TensorStructInfo):
        value = _array(sinfo.dtype, _dims(sinfo, sizes), nprng)
        if bad and written and rng.random() < 0.5:
            # An output the caller could not read the result from: a read-only array, or a
            # strided one (the VM would write a contiguous copy).
            form = rng.choice(["readonly", "strided"])
            passed, _ = _good_tensor(value, form)
            return Arg(passed, None, f"{name}={form} output")
        if bad:
            passed, form = _bad_tensor(sinfo, value, shared, rng)
            return Arg(passed, None, f"{name}={form}")
        form = rng.choice(("numpy", "nd") if written else GOOD_TENSOR_FORMS)
        passed, value = _good_tensor(value, form)
        return Arg(passed, value, f"{name}={form} {value.dtype}{value.shape}")
    if isinstance(sinfo, relax.TupleStructInfo):
        fields = [
            _draw(f, f"{name}[{i}]", written, sizes, shared, False, nprng, rng)
            for i, f in enumerate(sinfo.fields)
        ]
        if bad:
            form = rng.choice(["short", "long", "array", "bad field"])
            passed = [f.passed for f in fields]
            if form == "short":
                passed = passed[:-1]
            elif form == "long":
                passed = [*passed, passed[-1]]
            elif form == "array":
                passed = passed[0]
            else:
                index = rng.randrange(len(fields))
                passed[index] = _draw(
                    sinfo.fields[index], name, written, sizes, shared, True, nprng, rng
                ).passed
            return Arg(
                tuple(passed) if isinstance(passed, list) else passed, None, f"{name}={form}"
            )
        kind = rng.choice([tuple, list])
        value = tuple(f.value for f in fields)
        return Arg(kind(f.passed for f in fields), value, f"{name}={kind.__name__} of fields")
    if isinstance(sinfo, relax.PrimStructInfo):
        number = rng.randint(-5, 5)
        if bad:
            choices = [None, "3", True, np.zeros(2)]
            choices += [1.5, 2**63] if sinfo.dtype.startswith("int") else [1j]
            passed = rng.choice(choices)
            return Arg(passed, None, f"{name}={passed!r}")
        if sinfo.dtype.startswith("int"):
            passed = rng.choice([number, np.int64(number), np.int32(number)])
        else:
            passed = rng.choice([number, number + 0.25, np.float32(number)])
        return Arg(passed, passed, f"{name}={passed!r}")
    if isinstance(sinfo, relax.ShapeStructInfo):
        dims = [sizes[d.name_hint] if isinstance(d, E.Var) else d.value for d in sinfo.values]
        if bad:
            form = rng.choice(["size", "float", "length", "array"])
            passed = {
                "size": tuple(d + 1 for d in dims),
                "float": tuple(d + 0.5 for d in dims),
                "length": (*dims, 1),
                "array": np.array(dims),
            }[form]
            return Arg(passed, None, f"{name}={passed!r}")
        passed = rng.choice([tuple, list])(dims)
        return Arg(passed, tuple(dims), f"{name}={passed!r}")
    raise AssertionError(f"no argument to draw for {sinfo}")


# ---------------------------------------------------------------------- one trial
def check(case: Case, args: list[Arg]) -> None:
    """Call the function; raise WrongResult when it accepted what it must refuse, computed
    another result than numpy, or changed an input."""
    vm = executable(case.target)
    snapshots = [_copy(a.passed) for a in args]
    if case.keywords:
        params = [p.name_hint for p in Functions[case.function].params]
        result = vm[case.function](**{n: a.passed for n, a in zip(params, args)})
    else:
        result = vm[case.function](*[a.passed for a in args])
    if case.blame:
        raise WrongResult(f"the call was accepted (returned {result!r})")
    _compare(result, FUNCTIONS[case.function].reference(*[a.value for a in args]))
    written = FUNCTIONS[case.function].written
    params = [p.name_hint for p in Functions[case.function].params]
    for name, arg, before in zip(params, args, snapshots):
        if name not in written and not _same(arg.passed, before):
            raise WrongResult(f"the input {name} was changed by the call")


def _compare(result: Any, expected: Any) -> None:
    if isinstance(expected, tuple):
        if not isinstance(result, tuple) or len(result) != len(expected):
            raise WrongResult(f"returned {result!r}, numpy computes a tuple of {len(expected)}")
        for r, e in zip(result, expected):
            _compare(r, e)
        return
    actual = result.numpy() if isinstance(result, NDArray) else result
    if np.shape(actual) != np.shape(expected) or not np.allclose(
        actual, expected, rtol=TOLERANCE, atol=TOLERANCE
    ):
        raise WrongResult(f"returned {actual!r}, numpy computes {expected!r}")
    if getattr(actual, "dtype", None) != getattr(expected, "dtype", None):
        raise WrongResult(f"returned dtype {actual.dtype}, numpy's is {expected.dtype}")


def _copy(value: Any) -> Any:
    if isinstance(value, NDArray):
        return value.numpy()
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


def _same(value: Any, before: Any) -> bool:
    if isinstance(value, (NDArray, np.ndarray)):
        return np.array_equal(_copy(value), before, equal_nan=True)
    if isinstance(value, (list, tuple)):
        return all(_same(v, b) for v, b in zip(value, before))
    return True


def _judge_error(case: Case) -> Callable[[MLCError], str | None]:
    def check_error(err: MLCError) -> str | None:
        if not case.blame:
            return "a valid call was refused"
        if not isinstance(err, VMError):
            return "a wrong argument was refused with another error than VMError"
        message = str(err)
        if not any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", message) for n in case.blame):
            return f"the error names none of {sorted(case.blame)}"
        return None

    return check_error


def trial_for_seed(seed: int) -> Trial:
    """The trial drawn from ``seed``: its function, target and arguments."""
    rng = random.Random(seed)
    case = Case(seed)
    case.function = rng.choice(list(FUNCTIONS))
    targets = FUNCTIONS[case.function].targets
    case.target = "llvm" if "llvm" in targets and rng.random() < LLVM_SHARE else "python"

    def action() -> None:
        check(case, draw(case, rng))

    trial = judge(NAME, "", action, check_error=_judge_error(case))
    return dataclasses.replace(trial, case=str(case))


class _Campaign:
    name = NAME

    def trial(self, rng: random.Random) -> Trial:
        return trial_for_seed(rng.randrange(1 << 31))


CAMPAIGN = _Campaign()
