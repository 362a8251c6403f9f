"""The models of ``bench_models`` on target "cuda", against torch on the same GPU.

Each model and size goes through ``from_fx``, ``relax.get_pipeline("default")`` (its GPU
schedules: DefaultGPUSchedule binds every loop nest to threads, one thread per output element)
and ``relax.build(mod, "cuda")``; input, weights and output stay on the GPU, and each timed
call (mlckit's and torch's alike) waits for its kernels. The MLP and the CNN also run their
symbolic-batch build. Outputs are checked against torch's as in ``bench_models``, with torch
in true fp32 (TF32 off for cuDNN's convolutions and for matmuls): at its default, cuDNN
computes convolutions in TF32, ~1e-4 of the output off.

The rows carry ``bench_models``' CPU goals as a yardstick; these are the figures a student
compares with, recorded by
``python benchmarks/run.py models_cuda --json benchmarks/results/models_cuda_<gpu>.json``.
Without an NVIDIA GPU the cuda target runs in numba's simulator, where times say nothing about
a GPU: the run then reports that and measures nothing.
"""

from __future__ import annotations

from typing import Any

import torch
from bench_cuda import gpu_name
from bench_models import FAMILIES, family_rows, geometric_mean_rows, row

from mlckit.runtime.gpu import numba_cuda, simulated


def run(parts: tuple[str, ...] | list[str] = tuple(FAMILIES)) -> list[dict[str, Any]]:
    if simulated() or not torch.cuda.is_available():
        return [row("models on cuda", "no GPU (numba simulator)", "")]
    rows = [row("GPU", gpu_name(numba_cuda().get_current_device()), "")]
    tf32 = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with torch.no_grad():
            for name in parts:
                rows += family_rows(name, FAMILIES[name], "cuda")
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = tf32
    return rows + geometric_mean_rows(rows)


if __name__ == "__main__":
    import sys

    for r in run(sys.argv[1:] or tuple(FAMILIES)):
        print(f"{r['name']:55s} {r['value']!s:>22} {r['unit']}")
