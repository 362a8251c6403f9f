"""Code generation from lowered TensorIR to Python source, and its compilation per target."""

from .codegen import GeneratedFunction, generate_function
from .kernel import Kernel, build_kernels, cache_dir, compile_kernel, kernel_source

__all__ = [
    "GeneratedFunction",
    "Kernel",
    "build_kernels",
    "cache_dir",
    "compile_kernel",
    "generate_function",
    "kernel_source",
]
