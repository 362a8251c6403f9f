"""Reference solutions of chapter 9's exercises (training)."""

from __future__ import annotations

import numpy as np

from mlckit.relax.training.optimizer import Adam


def sigmoid_grads():
    def sigmoid_grads(x, w, b):
        # forward, keeping what the backward pass reads
        s = 1 / (1 + np.exp(-(x @ w + b)))
        # backward: the sum's adjoint is ones; sigmoid' = s * (1 - s)
        lv1_adjoint = np.ones_like(s) * s * (1 - s)
        lv0_adjoint = lv1_adjoint
        b_adjoint = lv1_adjoint.sum(axis=0)  # b was broadcast over the rows
        x_adjoint = lv0_adjoint @ w.T
        w_adjoint = x.T @ lv0_adjoint
        return x_adjoint, w_adjoint, b_adjoint

    return sigmoid_grads


def sigmoid_jvp():
    def sigmoid_jvp(x, w, b, x_dot, w_dot, b_dot):
        lv0, lv0_dot = x @ w, x_dot @ w + x @ w_dot  # the product rule
        lv1, lv1_dot = lv0 + b, lv0_dot + b_dot
        s = 1 / (1 + np.exp(-lv1))
        lv2, lv2_dot = s, s * (1 - s) * lv1_dot
        return lv2.sum(), lv2_dot.sum()

    return sigmoid_jvp


def one_epoch():
    # Adam adapts each weight's step to its gradients, so a learning rate 5x the chapter's
    # is still stable, and one epoch gets as far as several at 1e-3.
    return Adam(5e-3)
