"""mlckit.contrib as the course uses it: a temporary directory, and create_llvm returning the
source a loop's "pragma_import_llvm" annotation carries (compiled once, cached by its hash)."""

from __future__ import annotations

import os

import pytest

from mlckit.backend.extern import find_compiler
from mlckit.contrib import clang, utils
from mlckit.errors import BuildError

CODE = 'extern "C" int contrib_answer() { return 42; }\n'


def _have_compiler() -> bool:
    try:
        find_compiler()
    except BuildError:
        return False
    return True


def test_tempdir_relpath_and_removal():
    temp = utils.tempdir()
    path = temp.relpath("temp.ll")
    assert os.path.dirname(path) == temp.temp_dir and os.path.isdir(temp.temp_dir)
    with open(path, "w") as handle:
        handle.write("x")
    assert temp.listdir() == ["temp.ll"]
    temp.remove()
    assert not os.path.exists(temp.temp_dir)


@pytest.mark.skipif(not _have_compiler(), reason="no C++ compiler installed")
def test_create_llvm_returns_the_source_and_writes_output(tmp_path):
    output = tmp_path / "temp.ll"
    code = clang.create_llvm(CODE, output=str(output))
    assert code == CODE
    assert output.read_text() == CODE
    # A file's path reads as its source.
    source = tmp_path / "kernel.cc"
    source.write_text(CODE)
    assert clang.create_llvm([str(source)]) == CODE
