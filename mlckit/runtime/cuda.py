"""numba.cuda, loaded on first use: the real GPU when there is one, else numba's simulator.

On a machine without an NVIDIA GPU (a laptop, CI) the cuda target still runs: numba's CUDA
simulator executes every GPU thread as a Python thread, with the same shared memory, local
arrays and barriers. It is slow (keep sizes small) but shows exactly what the kernels compute.
Set ``NUMBA_ENABLE_CUDASIM=1`` to use the simulator on a machine that has a GPU, or ``=0`` to
insist on the GPU.
"""

from __future__ import annotations

import os
import shutil
import warnings
from types import ModuleType
from typing import Any

_CUDA: ModuleType | None = None


def _has_nvidia_gpu() -> bool:
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def numba_cuda() -> ModuleType:
    """The ``numba.cuda`` module, with the simulator switched on when no GPU is present."""
    global _CUDA
    if _CUDA is None:
        from numba.core import config

        choice = os.environ.get("NUMBA_ENABLE_CUDASIM")
        if choice is None and not _has_nvidia_gpu():
            warnings.warn(
                "no NVIDIA GPU found: cuda kernels run in numba's CUDA simulator, one Python "
                "thread per GPU thread (right results, slow; keep sizes small)",
                stacklevel=3,
            )
            choice = "1"
        # numba read its configuration when it was imported; numba.cuda reads this flag when
        # it is imported, which is now.
        config.ENABLE_CUDASIM = choice == "1"
        from numba import cuda

        _CUDA = cuda
    return _CUDA


def simulated() -> bool:
    """Whether cuda kernels run in numba's simulator rather than on a GPU."""
    from numba.core import config

    numba_cuda()
    return bool(config.ENABLE_CUDASIM)


def is_device_array(value: Any) -> bool:
    """A numba device array (real or simulated), as the cuda target's kernels take."""
    return hasattr(value, "copy_to_host") and hasattr(value, "shape")


def to_device(array: Any) -> Any:
    return numba_cuda().to_device(array)


def device_array(shape: Any, dtype: Any) -> Any:
    return numba_cuda().device_array(shape, dtype=dtype)
