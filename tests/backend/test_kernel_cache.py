"""The on-disk kernel cache: a second process loads compiled kernels instead of compiling,
a damaged entry is rebuilt, never loaded wrong, and an unusable cache directory costs the
cache, not the build."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest

import mlckit
from mlckit import te
from mlckit.errors import BuildError

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


# ---------------------------------------------------------------------- an unusable cache
@pytest.fixture
def fresh_fallback(monkeypatch, tmp_path):
    """No temporary cache made and no warning given yet in this process; temporary
    directories go under tmp_path."""
    from mlckit.backend import kernel

    monkeypatch.setattr(kernel, "_TEMPORARY_CACHE", [])
    monkeypatch.setattr(kernel, "_WARNED", set())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _build_and_run_add_one():
    a = te.placeholder((16,), "float32", name="A")
    func = te.create_prim_func([a, te.compute((16,), lambda i: a[i] + 1, name="B")])
    lib = mlckit.build(func, "llvm")
    x, out = np.arange(16, dtype="float32"), np.zeros(16, "float32")
    lib["main"](x, out)
    np.testing.assert_array_equal(out, x + 1)


def _unusable(cache: Path) -> str:
    return f"cannot use the kernel cache {cache / 'kernels'}"


def test_a_file_in_place_of_the_cache_falls_back_to_a_temporary_one(
    monkeypatch, tmp_path, fresh_fallback
):
    cache = tmp_path / "cache"
    cache.write_text("not a directory")
    monkeypatch.setenv("MLCKIT_CACHE_DIR", str(cache))
    with pytest.warns(UserWarning, match=re.escape(_unusable(cache))):
        _build_and_run_add_one()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one warning per process
        _build_and_run_add_one()


def test_missing_parents_of_the_cache_are_made(monkeypatch, tmp_path, fresh_fallback):
    cache = tmp_path / "a" / "b" / "cache"
    monkeypatch.setenv("MLCKIT_CACHE_DIR", str(cache))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _build_and_run_add_one()
    assert list((cache / "kernels").glob("k*.py"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_cache_falls_back_to_a_temporary_one(monkeypatch, tmp_path, fresh_fallback):
    cache = tmp_path / "cache"
    (cache / "kernels").mkdir(parents=True)
    (cache / "kernels").chmod(0o555)
    monkeypatch.setenv("MLCKIT_CACHE_DIR", str(cache))
    try:
        with pytest.warns(UserWarning, match=re.escape(_unusable(cache))):
            _build_and_run_add_one()
    finally:
        (cache / "kernels").chmod(0o755)


def test_a_cache_file_that_cannot_be_replaced_falls_back(monkeypatch, tmp_path, fresh_fallback):
    # What a read-only directory or an immutable file does to a writer, even to root.
    cache = tmp_path / "cache"
    monkeypatch.setenv("MLCKIT_CACHE_DIR", str(cache))
    real_replace = os.replace

    def refuse_in_cache(src, dst):
        if Path(dst).parent == cache / "kernels":
            raise PermissionError(1, "Operation not permitted", str(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", refuse_in_cache)
    with pytest.warns(UserWarning, match=re.escape(_unusable(cache))):
        _build_and_run_add_one()
    assert not list((cache / "kernels").glob("*.tmp"))  # no half-written file left


def test_no_usable_directory_at_all_is_a_build_error(monkeypatch, tmp_path, fresh_fallback):
    cache = tmp_path / "cache"
    cache.write_text("not a directory")
    monkeypatch.setenv("MLCKIT_CACHE_DIR", str(cache))

    def no_temporary_directory(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", no_temporary_directory)
    with pytest.raises(BuildError, match=re.escape(str(cache / "kernels")) + ".*MLCKIT_CACHE_DIR"):
        _build_and_run_add_one()
