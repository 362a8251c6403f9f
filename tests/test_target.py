"""mlckit.target.Target: the one description of a target, and nobody else compares kinds."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mlckit
from mlckit.errors import BuildError
from mlckit.target import KINDS, TAGS, Target
from mlckit.tir.schedule.default_gpu_schedule import DefaultGPUSchedule
from mlckit.tir.schedule.default_schedule import DefaultSchedule

PACKAGE = Path(mlckit.__file__).parent


def test_kinds_and_their_devices() -> None:
    llvm, cuda, python = Target("llvm"), Target("cuda"), Target("python")
    assert (llvm.kind.name, llvm.device(), llvm.is_gpu) == ("llvm", mlckit.cpu(), False)
    assert (cuda.kind.name, cuda.device(1), cuda.is_gpu) == ("cuda", mlckit.cuda(1), True)
    assert (python.kind.name, python.device_type) == ("python", "cpu")
    assert Target("cpu") == Target("c") == llvm  # the course's other names for llvm
    assert Target.list_kinds() == sorted(KINDS)


def test_attributes_as_tvm_writes_them() -> None:
    target = Target("llvm --num-cores=1 -mcpu=skylake")
    assert target.attrs == {"num-cores": 1, "mcpu": "skylake"}
    assert str(target) == "llvm --num-cores=1 -mcpu=skylake"
    cuda = Target("cuda -max_num_threads=128 -arch=sm_80")
    assert (cuda.max_num_threads, cuda.attrs["arch"]) == (128, "sm_80")
    assert Target("cuda").max_num_threads == 1024  # TVM's default for the kind
    assert Target(str(cuda)) == cuda and Target(cuda) == cuda


def test_tags_give_cuda_with_the_device_limits() -> None:
    card = Target("nvidia/geforce-rtx-2080-ti")
    assert (card.kind.name, card.tag, card.attrs["arch"]) == ("cuda", card.tag, "sm_75")
    assert Target("nvidia/nvidia-a100").attrs["arch"] == "sm_80"
    assert Target({"tag": "nvidia/nvidia-a100", "max_num_threads": 256}).max_num_threads == 256
    with pytest.raises(BuildError, match="unknown target tag 'nvidia/geforce-gtx-1'") as err:
        Target("nvidia/geforce-gtx-1")
    assert all(tag in str(err.value) for tag in TAGS)


def test_dict_and_host_forms() -> None:
    target = Target({"kind": "cuda", "max_num_threads": 64}, host="llvm")
    assert (target.max_num_threads, target.host) == (64, Target("llvm"))
    assert Target(target.export()) == target
    assert repr(target) == "Target('cuda -max_num_threads=64', host='llvm')"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("opencl", "unknown target 'opencl'; choose one of cuda, llvm, python"),
        ("", "empty target"),
        ("cuda -max_num_threads=many", "attribute -max_num_threads must be int, not 'many'"),
        ("cuda -max_num_threads=0", "attribute -max_num_threads must be positive"),
        ("llvm -max_num_threads=8", "llvm: unknown attribute -max_num_threads; llvm takes"),
        ("cuda max_num_threads=8", "attribute 'max_num_threads=8' must start with '-'"),
        (3, "a target is a string such as 'llvm'"),
        ({"max_num_threads": 8}, "unknown target ''"),
    ],
)
def test_bad_targets_say_what_is_wrong(spec: object, message: str) -> None:
    with pytest.raises(BuildError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Target(spec)  # type: ignore[arg-type]


def test_each_target_knows_its_default_schedule() -> None:
    assert isinstance(Target("llvm").default_schedule(), DefaultSchedule)
    gpu = Target("cuda -max_num_threads=128").default_schedule()
    assert isinstance(
        gpu, DefaultGPUSchedule
    )  # its threads a block: tests/relax/test_build_targets
    assert Target("python").default_schedule() is None


# ------------------------------------------------------------------ nobody else compares kinds
# Where target kinds are described (target.py) and implemented (backend/); runtime/ owns the
# Device and its types.
OWNERS = ("target.py", "backend/", "runtime/")
KIND_NAMES = {*KINDS, "cpu", "c"}


def _names_a_target(node: ast.expr) -> bool:
    """``target``, ``x.target``, ``target.kind``, ``t.kind.name``, ``dev.device_type``..."""
    while isinstance(node, ast.Attribute) and node.attr in ("kind", "name"):
        node = node.value
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    return name in ("target", "kind", "device", "device_type")


def _kind_comparisons(source: str, label: str) -> list[str]:
    """Comparisons of a target (its kind, its device) with a kind's name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        names_kind = any(
            isinstance(elt, ast.Constant) and elt.value in KIND_NAMES
            for op in operands
            for elt in (op.elts if isinstance(op, (ast.Tuple, ast.List, ast.Set)) else [op])
        )
        if names_kind and any(_names_a_target(op) for op in operands):
            found.append(f"{label}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_target_kind_is_compared_outside_the_target_and_backend() -> None:
    found = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if not str(path.relative_to(PACKAGE)).startswith(OWNERS)
        for hit in _kind_comparisons(
            path.read_text(encoding="utf-8"), str(path.relative_to(PACKAGE))
        )
    ]
    assert not found, "ask the Target (is_gpu, device(), default_schedule()):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        'target.kind == "cuda"',
        'self.target.kind.name != "llvm"',
        'target in ("llvm", "cuda")',
        'device.device_type == "cuda"',
        'self.device == "cuda"',
    ],
)
def test_the_check_finds_a_comparison(line: str) -> None:
    assert _kind_comparisons(f"ok = {line}\n", "sample") == [f"sample:1: {line}".replace('"', "'")]


def test_the_check_leaves_other_comparisons() -> None:
    assert _kind_comparisons('ok = "llvm" in targets or loop.kind == ForKind.SERIAL\n', "s") == []
