"""Models people bring, imported from torch and built with the default pipeline, against torch
eager in the same process.

Four families, each at several sizes (``FAMILIES``):

* ``mlp``: 784-256-10 (``nn.Linear``, relu) at batch 1, 16 and 64;
* ``cnn``: the course's CNN (conv 3x3 1->32, relu, max-pool 2, flatten, linear 5408->128, relu,
  linear 128->10) at batch 1 and 16;
* ``res``: a residual block (two 3x3 convs with padding 1 and no bias, each followed by an
  inference batch norm, relu, residual add, relu) on 28x28 images with 16, 32 and 64 channels;
* ``block``: a transformer block (d=128, 4 heads: layer norm, q/k/v projections, softmax
  attention, output projection, residual; layer norm, 4d GELU MLP, residual) at 32, 64 and 128
  tokens.

Each model goes through ``torch.fx.symbolic_trace``, ``from_fx``, ``relax.get_pipeline
("default")`` and ``relax.build(mod, "llvm")``, and ``vm["main"]`` runs it. The MLP and the CNN
are also imported once with a symbolic batch (``("n", 784)``) and that one build runs at every
batch. At each size, mlckit (static and symbolic batch), torch eager (``no_grad``, eval mode,
one intra-op thread per core) and, for the MLP, numpy take turns: each turn is the mean of
back-to-back calls lasting ``TURN_MS`` or more, and each time is the best of ``ROUNDS`` turns.
Every output is compared with torch's first: a wrong one marks its rows ``ok=False`` and says
so in their names, so that no speed of a wrong program passes unnoticed; a size that fails to
import, build or run gets one ``FAILED`` row naming the error, and the other sizes still run.

Worked example: one size of a run on the 2-core development machine, as ``run.py`` prints it
(mlckit 32.17 us / torch 19.65 us = 1.637, over the goal; the symbolic-batch build ran as fast
as torch, 0.611 of the static one)::

    models  mlp batch 1: torch eager               19.65  us
    models  mlp batch 1: mlckit                    32.17  us
    models  mlp batch 1: mlckit / torch            1.637  x torch   <= 1.5x  MISS
    models  mlp batch 1: symbolic batch            19.65  us
    models  mlp batch 1: symbolic batch / torch        1  x torch   <= 1.5x  ok
    models  mlp batch 1: symbolic / static batch   0.611  x static  <= 1.2x  ok

Then the geometric mean of every ``mlckit / torch`` and ``symbolic batch / torch`` ratio (goal
<= 1.0x), and each model's cold build at the issue's size (and with a symbolic batch): from_fx,
the pipeline, the build and the first call, timed in a new process whose kernel cache
(``$MLCKIT_CACHE_DIR``) is an empty folder, after numba's once-per-process start-up (goal <= 3 s).

The first row is the machine's load average when the run began: on this 2-core machine, with
other processes running, the parallel kernels of mlckit, torch and numpy alike slow down by
factors of 10-100 that vary from call to call, and the ratios mean little.

``python benchmarks/bench_models.py [mlp] [cnn] [res] [block]`` runs some families only.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from timing import best_times, calls_lasting
from torch import nn

import mlckit
from mlckit import relax
from mlckit.relax.frontend.torch import from_fx
from mlckit.runtime.gpu import numba_cuda

ROUNDS = 5
TURN_MS = 20
RATIO_GOAL = 1.5
GEOMEAN_GOAL = 1.0
SYMBOLIC_GOAL = 1.2
BUILD_GOAL_S = 3.0
# An output is right when its largest difference from torch's is this small a fraction of its
# largest magnitude (float32 sums in another order differ by ~1e-6 of it).
TOLERANCE = 1e-4
WRONG = "OUTPUT WRONG"
COLD_BUILD = "--cold-build"
ROOT = Path(__file__).resolve().parents[1]


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l0 = nn.Linear(784, 256)
        self.l1 = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l1(torch.relu(self.l0(x)))


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)
        self.pool = nn.MaxPool2d(2)
        self.l0 = nn.Linear(32 * 13 * 13, 128)
        self.l1 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.pool(torch.relu(self.conv(x))), 1)
        return self.l1(torch.relu(self.l0(x)))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        # Running statistics and affine parameters other than the identity a new BatchNorm2d
        # starts from, so that a wrong fold of them into the convolutions shows.
        for bn in (self.bn1, self.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            nn.init.uniform_(bn.weight, 0.5, 1.5)
            nn.init.uniform_(bn.bias, -0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class TransformerBlock(nn.Module):
    # Separate q/k/v projections and explicit attention: the importer takes neither
    # nn.MultiheadAttention nor Tensor.split.
    def __init__(self, d: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        dh = d // self.heads
        y = self.ln1(x)
        q, k, v = (
            p(y).reshape(b, t, self.heads, dh).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        attention = torch.softmax(q @ k.transpose(-2, -1) / dh**0.5, dim=-1)
        x = x + self.o((attention @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


def numpy_mlp(model: MLP) -> Callable[[np.ndarray], np.ndarray]:
    w0, b0, w1, b1 = (p.detach().numpy() for p in (*model.l0.parameters(), *model.l1.parameters()))
    return lambda x: np.maximum(x @ w0.T + b0, 0) @ w1.T + b1


@dataclass(frozen=True)
class Family:
    """A model measured at several sizes: ``make(size)`` builds it, ``shape(size)`` is its input's
    shape, ``size_name`` names a size in rows ("batch {}" -> "batch 16")."""

    make: Callable[[int], nn.Module]
    shape: Callable[[int], tuple[int, ...]]
    sizes: tuple[int, ...]
    size_name: str
    # The size the issue measured: its build is also timed cold.
    cold_size: int
    # Also imported with a symbolic batch ("n", ...) and run at every size.
    symbolic: bool = False
    numpy: Callable[[Any], Callable[[np.ndarray], np.ndarray]] | None = None


FAMILIES: dict[str, Family] = {
    "mlp": Family(lambda _: MLP(), lambda b: (b, 784), (1, 16, 64), "batch {}", 1, True, numpy_mlp),
    "cnn": Family(lambda _: CNN(), lambda b: (b, 1, 28, 28), (1, 16), "batch {}", 1, True),
    "res": Family(ResidualBlock, lambda c: (1, c, 28, 28), (16, 32, 64), "{} channels", 32),
    "block": Family(
        lambda _: TransformerBlock(), lambda t: (1, t, 128), (32, 64, 128), "{} tokens", 64
    ),
}
DEFAULT_PARTS = tuple(FAMILIES)


def row(name: str, value: Any, unit: str, goal: str = "", ok: bool | None = None) -> dict:
    return dict(name=name, value=value, unit=unit, goal=goal, ok=ok)


def make_model(family: Family, size: int) -> nn.Module:
    torch.manual_seed(0)  # the same weights in this process and in the cold-build one
    return family.make(size).eval()


def import_shape(family: Family, size: int, symbolic: bool) -> tuple[int | str, ...]:
    shape = family.shape(size)
    return ("n", *shape[1:]) if symbolic else shape


def build(
    model: nn.Module, shape: tuple[int | str, ...], target: str = "llvm"
) -> Callable[..., Any]:
    """``model`` through the importer, the default pipeline and the build for ``target``: its
    entry."""
    mod = from_fx(torch.fx.symbolic_trace(model), [(shape, "float32")])
    mod = relax.get_pipeline("default")(mod)
    return relax.VirtualMachine(relax.build(mod, target), mlckit.device(target))["main"]


def synchronize(target: str) -> Callable[[], None]:
    """What waits for the launched kernels of both sides: a GPU call only starts them."""
    if target == "llvm":
        return lambda: None
    cuda = numba_cuda()

    def both() -> None:
        torch.cuda.synchronize()
        cuda.synchronize()

    return both


def as_numpy(result: Any) -> np.ndarray:
    # The VM hands back an NDArray, or a tuple of them where a function returns several.
    if isinstance(result, (tuple, list)):
        result = result[0]
    return result.numpy() if hasattr(result, "numpy") else np.asarray(result)


def relative_error(output: np.ndarray, expected: np.ndarray) -> float:
    if output.shape != expected.shape:
        return math.inf
    return float(np.abs(output - expected).max() / max(np.abs(expected).max(), 1e-30))


def wrong(error: float) -> str:
    return "" if error <= TOLERANCE else f", {WRONG} (max error {error:.1e} of max |output|)"


def timed_rows(
    label: str, fns: dict[str, Callable[[], Any]], errors: dict[str, float]
) -> list[dict[str, Any]]:
    """Times ``fns`` (torch eager, mlckit, and the symbolic-batch build and numpy where there are
    ones) in alternating rounds; the rows of one model at one size."""
    times = best_times(fns, ROUNDS, calls_lasting(TURN_MS))
    torch_s = times["torch"]
    rows = [row(f"{label}: torch eager", torch_s * 1e6, "us")]
    for key, name in (("mlckit", "mlckit"), ("symbolic", "symbolic batch")):
        if key not in times:
            continue
        ratio = times[key] / torch_s
        error = wrong(errors[key])
        ok = ratio <= RATIO_GOAL and not error
        rows += [
            row(f"{label}: {name}{error}", times[key] * 1e6, "us"),
            row(f"{label}: {name} / torch{error}", ratio, "x torch", f"<= {RATIO_GOAL}x", ok),
        ]
    if "symbolic" in times:
        ratio = times["symbolic"] / times["mlckit"]
        ok = ratio <= SYMBOLIC_GOAL
        rows.append(
            row(f"{label}: symbolic / static batch", ratio, "x static", f"<= {SYMBOLIC_GOAL}x", ok)
        )
    if "numpy" in times:
        rows += [
            row(f"{label}: numpy", times["numpy"] * 1e6, "us"),
            row(f"{label}: mlckit / numpy", times["mlckit"] / times["numpy"], "x numpy"),
        ]
    return rows


def size_rows(
    label: str,
    family: Family,
    size: int,
    symbolic: Callable[..., Any] | None,
    target: str = "llvm",
) -> list[dict[str, Any]]:
    """One model at one size: built with a static shape, run with ``symbolic`` (the build with a
    symbolic batch) where there is one, checked against torch, and timed. On ``"cuda"`` torch
    runs on the same GPU, and every timed call waits for its kernels."""
    torch_device = "cpu" if target == "llvm" else "cuda"
    model = make_model(family, size).to(torch_device)
    x = np.random.default_rng(size).standard_normal(family.shape(size), dtype=np.float32)
    xt, xa = torch.from_numpy(x).to(torch_device), mlckit.nd.array(x, mlckit.device(target))
    entries = {"mlckit": build(model, family.shape(size), target)}
    if symbolic is not None:
        entries["symbolic"] = symbolic
    expected = model(xt).cpu().numpy()
    errors = {key: relative_error(as_numpy(entry(xa)), expected) for key, entry in entries.items()}
    sync = synchronize(target)
    fns: dict[str, Callable[[], Any]] = {"torch": lambda: (model(xt), sync())}
    fns.update({key: lambda entry=entry: (entry(xa), sync()) for key, entry in entries.items()})
    if family.numpy is not None and target == "llvm":
        reference = family.numpy(model)
        fns["numpy"] = lambda: reference(x)
    return timed_rows(label, fns, errors)


def family_rows(name: str, family: Family, target: str = "llvm") -> list[dict[str, Any]]:
    """The rows of every size of one model; a size whose import, build or run fails gets one
    row saying how, and the other sizes are measured. Rows of a ``"cuda"`` build start with
    "cuda"."""
    symbolic = None
    rows: list[dict[str, Any]] = []
    for size in family.sizes:
        label = f"{name} {family.size_name.format(size)}"
        if target != "llvm":
            label = f"{target} {label}"
        try:
            if family.symbolic and symbolic is None:
                model = make_model(family, size)
                symbolic = build(model, import_shape(family, size, True), target)
            rows += size_rows(label, family, size, symbolic, target)
        except Exception as err:  # one broken model must not hide the others' rows
            lines = str(err).splitlines() or [""]
            failed = f"{label}: FAILED ({type(err).__name__}: {lines[0]})"
            rows.append(row(failed, "", "x torch", f"<= {RATIO_GOAL}x", False))
    return rows


def build_seconds(name: str, size: int, symbolic: bool) -> float:
    """From the import to the first call's result, in this process (run it in a new one with an
    empty kernel cache to time a cold build)."""
    family = FAMILIES[name]
    model = make_model(family, size)
    x = mlckit.nd.array(np.zeros(family.shape(size), np.float32))
    start = time.perf_counter()
    build(model, import_shape(family, size, symbolic))(x)
    return time.perf_counter() - start


def cold_build_seconds(name: str, size: int, symbolic: bool) -> float:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, MLCKIT_CACHE_DIR=cache)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        mode = "symbolic" if symbolic else "static"
        out = subprocess.run(
            [sys.executable, __file__, COLD_BUILD, name, str(size), mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def cold_build_rows(name: str, family: Family) -> list[dict[str, Any]]:
    rows = []
    for symbolic in (False, True) if family.symbolic else (False,):
        what = "symbolic batch" if symbolic else family.size_name.format(family.cold_size)
        label = f"{name}: cold build, {what}"
        try:
            seconds = cold_build_seconds(name, family.cold_size, symbolic)
        except (RuntimeError, subprocess.TimeoutExpired) as err:
            rows.append(row(f"{label}, FAILED ({err})", "", "s", f"<= {BUILD_GOAL_S:g} s", False))
            continue
        rows.append(row(label, seconds, "s", f"<= {BUILD_GOAL_S:g} s", seconds <= BUILD_GOAL_S))
    return rows


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def load_rows() -> list[dict[str, Any]]:
    """How busy the machine was when the run began: with more runnable processes than cores,
    the parallel kernels of both sides slow down by large and varying factors, and the ratios
    say little."""
    if not hasattr(os, "getloadavg"):
        return []
    return [row(f"load average (1 min) at start, {cores()} cores", os.getloadavg()[0], "")]


def geometric_mean_rows(
    rows: list[dict[str, Any]], goal: str = "", met: Callable[[float], bool | None] = lambda _: None
) -> list[dict[str, Any]]:
    """The geometric mean of every ``x torch`` ratio in ``rows``: neither a wrong program's
    speed nor a failed build's missing one counts."""
    ratios = [
        r["value"]
        for r in rows
        if r["unit"] == "x torch" and isinstance(r["value"], float) and WRONG not in r["name"]
    ]
    if not ratios:
        return []
    mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    name = f"geometric mean of mlckit / torch ({len(ratios)} ratios)"
    return [row(name, mean, "x torch", goal, met(mean))]


def run(parts: tuple[str, ...] | list[str] = DEFAULT_PARTS) -> list[dict[str, Any]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(cores())
    rows = load_rows()
    try:
        with torch.no_grad():
            for name in parts:
                rows += family_rows(name, FAMILIES[name])
    finally:
        torch.set_num_threads(threads)
    rows += geometric_mean_rows(rows, f"<= {GEOMEAN_GOAL}x", lambda mean: mean <= GEOMEAN_GOAL)
    for name in parts:
        rows += cold_build_rows(name, FAMILIES[name])
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == [COLD_BUILD]:
        import numba

        # numba's once-per-process start-up (its registries load with the first compiled
        # function) is not the model's build; bench_mlp reports it on its own row.
        numba.njit("int64()")(lambda: 0)()
        name, size, mode = sys.argv[2:5]
        print(json.dumps({"seconds": build_seconds(name, int(size), mode == "symbolic")}))
    else:
        for r in run(sys.argv[1:] or DEFAULT_PARTS):
            value = (
                f"{r['value']:10.3f}" if isinstance(r["value"], float) else f"{r['value']!s:>10}"
            )
            print(f"{r['name']:55s} {value} {r['unit']:8s} {r['goal']} {r['ok']}")
