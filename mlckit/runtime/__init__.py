"""Runtime objects: NDArray and Device."""

from .ndarray import Device, NDArray, array, cpu, cuda, empty

__all__ = ["Device", "NDArray", "array", "cpu", "cuda", "empty"]
