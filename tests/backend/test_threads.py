"""Kernel threads: numba's OpenMP threads start with a sleeping wait policy, and the process's
environment is left as it was (torch's OpenMP, loaded later, keeps its defaults)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import os, sys
from mlckit.backend.threads import start_kernel_threads
before = os.environ.get("OMP_WAIT_POLICY")
threads = start_kernel_threads()
import numba
print(threads == numba.get_num_threads(), os.environ.get("OMP_WAIT_POLICY") == before,
      numba.threading_layer())
"""


@pytest.mark.parametrize("policy", [None, "ACTIVE"])
def test_threads_start_without_changing_the_environment(policy: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy  # the user's choice wins and stays
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[:2] == ["True", "True"]
