"""How the kernels' parallel loops use threads on the CPU.

A ``parallel`` loop becomes numba's ``prange``, which runs on numba's threading layer: here
its OpenMP layer (GNU OpenMP, what numba picks when TBB is absent), with one thread per core
(numba's default, ``NUMBA_NUM_THREADS``). Two settings matter on a machine that is shared, as
a student's laptop or a notebook server is:

* **Waiting threads sleep** (``OMP_WAIT_POLICY=PASSIVE``). GNU OpenMP's default lets a thread
  that finished its share spin for a while before it sleeps. When another process keeps a core
  busy, the spinning threads take turns on the cores with the one thread that still has work,
  and the end of a parallel loop waits for the operating system to schedule it again:
  measured on 2 cores with four other busy processes, the median call of the course's CNN
  took 10.5 ms with spinning and 0.36 ms with sleeping threads (0.32 ms with one thread),
  the MLP 16 ms against 0.08 ms. Sleeping threads cost a wake-up (about 5 us) at each
  parallel loop, which is why the default schedule only runs loops in parallel whose work
  pays for it (``PARALLEL_MIN_WORK`` in ``mlckit.tir.schedule.default_schedule``, 2^18
  iterations: 10-20 us on one core).
* **Only numba's threads are affected.** OpenMP reads the setting once, when its library
  loads, so :func:`start_kernel_threads` sets it just while numba starts its threads (the first
  time a kernel is compiled or loaded) and then restores the environment: torch's own OpenMP,
  loaded later, keeps its defaults. A policy set in the environment by the user wins, and
  threads numba started before mlckit keep theirs.
"""

from __future__ import annotations

import functools
import os

WAIT_POLICY = "OMP_WAIT_POLICY"


@functools.cache
def start_kernel_threads() -> int:
    """Start numba's threads (once per process) with waiting threads that sleep; the number of
    threads."""
    import numba

    if WAIT_POLICY in os.environ:
        return numba.get_num_threads()
    os.environ[WAIT_POLICY] = "PASSIVE"
    try:
        return numba.get_num_threads()  # loads the threading layer, and OpenMP with it
    finally:
        del os.environ[WAIT_POLICY]
