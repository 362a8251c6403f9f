"""The on-disk kernel cache: a second process loads compiled kernels instead of compiling,
and a damaged entry is rebuilt, never loaded wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import json, sys
import numpy as np
import mlckit
from mlckit.script import tir as T

@T.prim_func
def add_one(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.float32(1)

lib = mlckit.build(add_one, "llvm")
a = np.arange(16, dtype="float32")
b = np.zeros(16, "float32")
lib["add_one"](a, b)
func = lib.get_function("add_one").func
print(json.dumps({"ok": bool((b == a + 1).all()),
                  "hits": sum(func.stats.cache_hits.values()),
                  "misses": sum(func.stats.cache_misses.values())}))
"""


def _run(cache: Path, tmp_path: Path) -> dict:
    script = tmp_path / "build_add_one.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, MLCKIT_CACHE_DIR=str(cache))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "cache"


def test_second_process_loads_from_cache(cache, tmp_path):
    first = _run(cache, tmp_path)
    assert first == {"ok": True, "hits": 0, "misses": 1}
    kernels = list((cache / "kernels").glob("k*.py"))
    assert len(kernels) == 1 and "def add_one(A, B):" in kernels[0].read_text()
    second = _run(cache, tmp_path)
    assert second == {"ok": True, "hits": 1, "misses": 0}


def test_damaged_entries_are_rebuilt(cache, tmp_path):
    _run(cache, tmp_path)
    source = next((cache / "kernels").glob("k*.py"))
    # A source file that does not match what the compiler generates is rewritten...
    source.write_text(source.read_text().replace("+ np.float32(1.0)", "+ np.float32(2.0)"))
    assert _run(cache, tmp_path)["ok"]
    assert "np.float32(1.0)" in source.read_text()
    # ...and truncated machine code is recompiled.
    for compiled in (cache / "kernels" / "__pycache__").glob("*.nbc"):
        compiled.write_bytes(compiled.read_bytes()[:10])
    assert _run(cache, tmp_path)["ok"]
