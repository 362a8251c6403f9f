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
import sys
import threading
import warnings
from types import ModuleType
from typing import Any

import numpy as np

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

        if config.ENABLE_CUDASIM:
            _lock_simulated_shared_arrays()
        _CUDA = cuda
    return _CUDA


def _allocate(shape: Any, dtype: Any) -> np.ndarray:
    # A function of its own so that a test can slow it down and force the race below.
    return np.empty(shape, dtype)


def _lock_simulated_shared_arrays() -> None:
    """Make the simulator's ``cuda.shared.array`` hand every thread of a block the same array.

    numba's simulator finds a block's shared array for a source line in a dict, and creates it
    when it is missing, with no lock: two of the block's threads (Python threads) can both find
    it missing and each create one, and a thread then writes into an array the others never
    read. That showed as rare wrong results of shared-memory kernels. This does the same
    lookup under a lock.
    """
    from numba.core import types
    from numba.cuda.simulator import kernelapi
    from numba.np import numpy_support

    original = kernelapi.FakeCUDAShared.array
    lock = threading.Lock()

    def array(self: Any, shape: Any, dtype: Any) -> np.ndarray:
        if shape == 0:  # dynamic shared memory: one buffer, no lookup
            return original(self, shape, dtype)
        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        # Arrays are told apart by the line that asks for them, as numba's are.
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with lock:
            found = self._allocations.get(key)
            if found is None:
                found = self._allocations[key] = _allocate(shape, dtype)
        return found

    kernelapi.FakeCUDAShared.array = array


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
