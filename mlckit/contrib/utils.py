"""Temporary directories, as TVM's ``tvm.contrib.utils.tempdir``."""

from __future__ import annotations

import os
import tempfile


class TempDirectory:
    """A directory that lives as long as this object (or its ``with`` block)."""

    def __init__(self, custom_path: str | None = None):
        if custom_path is not None:
            os.makedirs(custom_path, exist_ok=True)
            self._owned = None
            self.temp_dir = custom_path
        else:
            self._owned = tempfile.TemporaryDirectory(prefix="mlckit-")
            self.temp_dir = self._owned.name

    def relpath(self, name: str) -> str:
        """The path of ``name`` inside the directory."""
        return os.path.join(self.temp_dir, name)

    def listdir(self) -> list[str]:
        return os.listdir(self.temp_dir)

    def remove(self) -> None:
        """Delete the directory now (a custom path is left alone)."""
        if self._owned is not None:
            self._owned.cleanup()

    def __enter__(self) -> TempDirectory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def tempdir(custom_path: str | None = None) -> TempDirectory:
    """A new temporary directory (or ``custom_path``, created if missing)."""
    return TempDirectory(custom_path)
