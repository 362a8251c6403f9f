"""numba's CUDA simulator as mlckit uses it when there is no GPU."""

from __future__ import annotations

import time

import numpy as np
import pytest

import mlckit.runtime.gpu as runtime_gpu
from mlckit.runtime.gpu import numba_cuda, simulated

# The simulator runs a kernel with its module global `cuda` swapped for a fake one.
cuda = numba_cuda()


@cuda.jit
def rotate(out):
    tile = cuda.shared.array(32, dtype=np.float32)
    t = cuda.threadIdx.x
    tile[t] = t
    cuda.syncthreads()
    out[t] = tile[(t + 1) % 32]


def test_every_thread_of_a_block_gets_the_same_shared_array(monkeypatch):
    if not simulated():
        pytest.skip("a property of numba's simulator; a GPU has real shared memory")

    def slow_allocate(shape, dtype):
        # The block's other threads ask for the array while this one creates it.
        time.sleep(0.01)
        return np.empty(shape, dtype)

    monkeypatch.setattr(runtime_gpu, "_allocate", slow_allocate)
    out = np.zeros(32, np.float32)
    rotate[1, 32](out)
    np.testing.assert_array_equal(out, (np.arange(32) + 1) % 32)
