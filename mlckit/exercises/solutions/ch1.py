"""Reference solutions of chapter 1's exercises (tensor programs)."""

from __future__ import annotations

import numpy as np

from mlckit.script import tir as T


def lnumpy_linear_relu():
    def lnumpy_linear_relu(X: np.ndarray, W: np.ndarray, B: np.ndarray, Z: np.ndarray):
        n, k_size = X.shape
        m = W.shape[0]
        Y = np.empty((n, m), dtype="float32")
        for i in range(n):
            for j in range(m):
                for k in range(k_size):
                    if k == 0:
                        Y[i, j] = 0
                    Y[i, j] = Y[i, j] + X[i, k] * W[j, k]
        for i in range(n):
            for j in range(m):
                Z[i, j] = max(Y[i, j] + B[j], 0)

    return lnumpy_linear_relu


def bias_relu():
    @T.prim_func
    def bias_relu(
        A: T.Buffer((4, 16), "float32"),
        B: T.Buffer((16,), "float32"),
        C: T.Buffer((4, 16), "float32"),
    ):
        for i, j in T.grid(4, 16):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [i, j])
                C[vi, vj] = T.max(A[vi, vj] + B[vj], T.float32(0))

    return bias_relu


def row_sum():
    @T.prim_func
    def row_sum(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
        for i, k in T.grid(8, 16):
            with T.block("B"):
                vi, vk = T.axis.remap("SR", [i, k])
                with T.init():
                    B[vi] = T.float32(0)
                B[vi] = B[vi] + A[vi, vk]

    return row_sum
