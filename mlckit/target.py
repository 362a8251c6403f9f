"""Targets: where compiled code runs, described once (TVM's ``tvm.target.Target``).

A target is a *kind* plus *attributes*, written as TVM writes them::

    Target("llvm")                                 # numba-compiled code for this CPU
    Target("llvm --num-cores=1 -mcpu=skylake")     # attributes after the kind
    Target("cuda -max_num_threads=128")            # numba.cuda kernels, at most 128 threads a block
    Target("nvidia/geforce-rtx-2080-ti")           # a tag: kind cuda with that device's limits
    Target({"kind": "cuda", "arch": "sm_80"})      # the dict form
    Target("cuda", host="llvm")                    # a device target and the host that drives it
    Target("python")                               # the generated source run by CPython

Everything that depends on the target asks it rather than comparing its name: the backend reads
``target.kind.codegen``, the VM ``target.device()`` and ``target.is_gpu``, ``relax.build`` its
``default_schedule()`` (the rules that make PrimFuncs nobody scheduled fast on this target: the
CPU schedule for ``llvm``, one GPU thread per output element for ``cuda`` with at most
``max_num_threads`` threads a block, nothing for the ``python`` reference interpreter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mlckit.errors import BuildError
from mlckit.ir import transform
from mlckit.runtime.ndarray import Device
from mlckit.tir.schedule.default_gpu_schedule import (
    MAX_THREADS_PER_BLOCK,
    DefaultGPUSchedule,
    has_thread_binding,
)
from mlckit.tir.schedule.default_schedule import DefaultSchedule


@dataclass(frozen=True)
class TargetKind:
    """What every target of one kind shares.

    ``codegen`` names the backend's generator: ``"numba"`` (Python loops compiled by
    ``numba.njit``), ``"numba_cuda"`` (``numba.cuda.jit`` kernels) or ``"python"`` (the same
    loops run by CPython). ``attrs`` are the attributes the kind accepts, with their types and
    defaults."""

    name: str
    device_type: str
    codegen: str
    description: str
    attrs: dict[str, tuple[type, Any]] = field(default_factory=dict)
    # The default schedule's pass for a target of this kind, or None (code runs as written).
    schedule: Callable[[Target], transform.Pass] | None = None

    @property
    def is_gpu(self) -> bool:
        return self.device_type == "cuda"

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"


def _cpu_schedule(target: Target) -> transform.Pass:
    return DefaultSchedule()


def _gpu_schedule(target: Target) -> transform.Pass:
    # One output element a thread; a block holds the default number of threads or fewer when
    # the target allows fewer (``cuda -max_num_threads=128``).
    return DefaultGPUSchedule(min(MAX_THREADS_PER_BLOCK, target.max_num_threads))


_CPU_ATTRS: dict[str, tuple[type, Any]] = {
    "mcpu": (str, None),
    "mtriple": (str, None),
    "num-cores": (int, None),
}

KINDS: dict[str, TargetKind] = {
    kind.name: kind
    for kind in (
        TargetKind(
            "llvm",
            "cpu",
            "numba",
            "machine code for this CPU, compiled by numba",
            _CPU_ATTRS,
            _cpu_schedule,
        ),
        TargetKind(
            "cuda",
            "cuda",
            "numba_cuda",
            "kernels for NVIDIA GPUs, compiled by numba.cuda (its simulator without a GPU)",
            {
                "arch": (str, None),
                "max_num_threads": (int, 1024),
                "max_shared_memory_per_block": (int, 49152),
                "thread_warp_size": (int, 32),
                "registers_per_block": (int, 65536),
            },
            _gpu_schedule,
        ),
        TargetKind(
            "python",
            "cpu",
            "python",
            "the generated Python run by CPython: the slow, readable reference",
            _CPU_ATTRS,
        ),
    )
}

# Other names of a kind, as TVM and the course write them.
KIND_ALIASES = {"cpu": "llvm", "c": "llvm"}


def _cuda_tag(arch: str) -> dict[str, Any]:
    return {"kind": "cuda", "arch": arch, "max_num_threads": 1024}


# TVM's tags for the NVIDIA cards students meet most: kind cuda with that device's limits.
TAGS: dict[str, dict[str, Any]] = {
    "nvidia/geforce-rtx-2080-ti": _cuda_tag("sm_75"),
    "nvidia/geforce-rtx-3090": _cuda_tag("sm_86"),
    "nvidia/geforce-rtx-4090": _cuda_tag("sm_89"),
    "nvidia/nvidia-t4": _cuda_tag("sm_75"),
    "nvidia/nvidia-v100": _cuda_tag("sm_70"),
    "nvidia/nvidia-a100": _cuda_tag("sm_80"),
    "nvidia/nvidia-h100": _cuda_tag("sm_90"),
}


class Target:
    """A compilation target: its kind (``target.kind.name``), attributes (``target.attrs``),
    tag and host. Two targets are equal when kind, attributes and host are."""

    def __init__(self, target: str | Target | dict[str, Any], host: Any = None):
        if isinstance(target, Target):
            self.kind, self.attrs, self.tag = target.kind, dict(target.attrs), target.tag
            self.host = target.host if host is None else Target(host)
            return
        if isinstance(target, str):
            config = _parse(target)
        elif isinstance(target, dict):
            config = dict(target)
        else:
            raise BuildError(
                f"a target is a string such as 'llvm' or 'cuda', a dict with a 'kind', or a "
                f"Target, not {type(target).__name__}"
            )
        tag = config.pop("tag", None)
        if tag is not None:
            config = {**_tag_config(tag), **config}
        kind_name = str(config.pop("kind", ""))
        host = config.pop("host", None) if host is None else host
        self.kind = _kind(kind_name)
        self.tag: str | None = tag
        self.attrs = _checked_attrs(self.kind, config)
        self.host = Target(host) if host is not None else None

    # ------------------------------------------------------------------ what users ask
    @property
    def is_gpu(self) -> bool:
        """Whether the code runs on a GPU (its arrays live in GPU memory)."""
        return self.kind.is_gpu

    @property
    def device_type(self) -> str:
        """The ``Device.device_type`` of the device the code runs on ("cpu" or "cuda")."""
        return self.kind.device_type

    def device(self, index: int = 0) -> Device:
        """The device the compiled code runs on: ``mlckit.cpu(index)`` or ``mlckit.cuda(index)``."""
        return Device(self.kind.device_type, index)

    @property
    def max_num_threads(self) -> int:
        """The most threads a GPU block may have (TVM's ``max_num_threads``)."""
        default = self.kind.attrs.get("max_num_threads", (int, 1))[1]
        return int(self.attrs.get("max_num_threads", default))

    def default_schedule(self) -> transform.Pass | None:
        """The pass that schedules the PrimFuncs nobody scheduled for this target (those
        without ``tir.is_scheduled``), or None when the code runs as written."""
        return self.kind.schedule(self) if self.kind.schedule else None

    def needs_default_schedule(self, func: Any) -> bool:
        """Whether ``relax.build`` schedules ``func`` for this target: nobody scheduled it, or
        (on a GPU) its schedule binds no GPU thread: a CPU schedule never runs on the GPU."""
        if self.kind.schedule is None:
            return False
        if not func.attrs.get("tir.is_scheduled"):
            return True
        return self.is_gpu and not has_thread_binding(func)

    # ------------------------------------------------------------------ TVM's spellings
    @staticmethod
    def list_kinds() -> list[str]:
        return sorted(KINDS)

    @staticmethod
    def list_tags() -> list[str]:
        return sorted(TAGS)

    def export(self) -> dict[str, Any]:
        """The dict form (``Target(target.export()) == target``)."""
        config: dict[str, Any] = {"kind": self.kind.name, **self.attrs}
        if self.host is not None:
            config["host"] = self.host.export()
        return config

    def __str__(self) -> str:
        words = [self.kind.name]
        for key, value in self.attrs.items():
            dashes = "--" if key == "num-cores" else "-"
            words.append(f"{dashes}{key}" if value is True else f"{dashes}{key}={value}")
        return " ".join(words)

    def __repr__(self) -> str:
        host = f", host={str(self.host)!r}" if self.host is not None else ""
        return f"Target({str(self)!r}{host})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return False
        return (self.kind, self.attrs, self.host) == (other.kind, other.attrs, other.host)

    def __hash__(self) -> int:
        return hash((self.kind.name, tuple(sorted(self.attrs.items())), self.host))


def _parse(text: str) -> dict[str, Any]:
    """``"cuda -max_num_threads=128"`` as a config dict; a tag stands for its config."""
    words = text.split()
    if not words:
        raise BuildError(f"empty target {text!r}; choose one of {_choices()}")
    config: dict[str, Any] = {}
    if "/" in words[0]:
        config["tag"] = words[0]
    else:
        config["kind"] = words[0]
    for word in words[1:]:
        if not word.startswith("-"):
            raise BuildError(
                f"target {text!r}: attribute {word!r} must start with '-' "
                "(for example 'cuda -max_num_threads=128')"
            )
        key, _, value = word.lstrip("-").partition("=")
        config[key] = value if value else True
    return config


def _tag_config(tag: str) -> dict[str, Any]:
    config = TAGS.get(tag)
    if config is None:
        raise BuildError(f"unknown target tag {tag!r}; known tags: {', '.join(sorted(TAGS))}")
    return dict(config)


def _kind(name: str) -> TargetKind:
    kind = KINDS.get(KIND_ALIASES.get(name, name))
    if kind is None:
        raise BuildError(f"unknown target {name!r}; choose one of {_choices()}")
    return kind


def _choices() -> str:
    return (
        ", ".join([*sorted(KINDS), *sorted(KIND_ALIASES)])
        + ", or a tag such as "
        + next(iter(TAGS))
    )


def _checked_attrs(kind: TargetKind, config: dict[str, Any]) -> dict[str, Any]:
    """The attributes converted to their types; an unknown one is an error naming the known."""
    attrs: dict[str, Any] = {}
    for key, value in config.items():
        name = key.replace("_", "-") if key.replace("_", "-") in kind.attrs else key
        if name not in kind.attrs:
            known = ", ".join(f"-{k}" for k in kind.attrs) or "none"
            raise BuildError(
                f"target {kind.name}: unknown attribute -{key}; {kind.name} takes {known}"
            )
        expected = kind.attrs[name][0]
        try:
            attrs[name] = expected(value) if not isinstance(value, expected) else value
        except (TypeError, ValueError):
            raise BuildError(
                f"target {kind.name}: attribute -{name} must be {expected.__name__}, not {value!r}"
            ) from None
        if expected is int and attrs[name] <= 0:
            raise BuildError(f"target {kind.name}: attribute -{name} must be positive")
    return attrs


__all__ = ["KINDS", "TAGS", "Target", "TargetKind"]
