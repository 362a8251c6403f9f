"""Helpers outside the compiler proper, under TVM's names: ``contrib.clang.create_llvm``
(source code a kernel links with, for ``"pragma_import_llvm"``) and ``contrib.utils.tempdir``.
"""

from . import clang, utils

__all__ = ["clang", "utils"]
