"""topi.collapse_sum vs numpy and topi.nn.nll_loss vs torch.nn.functional.nll_loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from topi_helpers import placeholders, random, run

from mlckit import te, topi
from mlckit.errors import StructInfoError


@pytest.mark.parametrize(
    ("target", "summed"),
    [((4, 1), (0, 2)), ((3,), (0, 1)), ((1, 4, 3), (0,)), ((), (0, 1, 2)), ((2, 4, 3), ())],
)
def test_collapse_sum_sums_the_broadcast_axes_and_copies_otherwise(target, summed):
    a = random((2, 4, 3))
    inputs = placeholders([a])
    got = run(inputs, topi.collapse_sum(inputs[0], target), a)
    np.testing.assert_allclose(got, a.sum(axis=summed, keepdims=True).reshape(target), rtol=1e-6)


def test_collapse_sum_rejects_a_target_with_more_dims():
    with pytest.raises(StructInfoError, match="more than the data's 3"):
        topi.collapse_sum(te.placeholder((2, 4, 3), name="A"), (1, 2, 4, 3))


# (predictions, targets): (N, C), (N, C, d1, d2) and one example (C,)
LAYOUTS = [((6, 4), (6,)), ((3, 4, 2, 2), (3, 2, 2)), ((4,), ())]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [True, False])
def test_nll_loss_matches_torch(layout, reduction, weighted):
    pred_shape, target_shape = layout
    rng = np.random.default_rng(len(pred_shape))
    pred = random(pred_shape)
    # Class 1 is ignored: some examples drop out of the sum and of the mean's weights.
    targets = rng.integers(0, 4, size=target_shape).astype("int64")
    targets.flat[0] = 0  # at least one example counts, so the mean is defined
    weights = rng.uniform(0.5, 2, size=4).astype("float32")
    arrays = [pred, targets, weights] if weighted else [pred, targets]
    inputs = placeholders(arrays)
    out = topi.nn.nll_loss(*inputs[:2], inputs[2] if weighted else None, reduction, 1)
    got = run(inputs, out, *arrays)
    # torch has no (C,) form: one example is a batch of one.
    batch = pred.ndim == 1
    want = torch.nn.functional.nll_loss(
        torch.tensor(pred[None] if batch else pred),
        torch.tensor(targets[None] if batch else targets),
        torch.tensor(weights) if weighted else None,
        ignore_index=1,
        reduction=reduction,
    ).numpy()
    np.testing.assert_allclose(got, want[0] if batch and reduction == "none" else want, 1e-5)


def test_nll_loss_with_every_example_ignored_has_a_nan_mean_as_torch():
    pred, targets = random((3, 4)), np.full(3, 2, "int64")
    inputs = placeholders([pred, targets])
    with np.errstate(invalid="ignore"):  # 0 / 0
        got = run(inputs, topi.nn.nll_loss(*inputs, None, "mean", 2), pred, targets)
    assert (
        np.isnan(got)
        and torch.nn.functional.nll_loss(
            torch.tensor(pred), torch.tensor(targets), ignore_index=2
        ).isnan()
    )


def test_nll_loss_rejects_an_unknown_reduction():
    inputs = placeholders([random((3, 4)), np.zeros(3, "int64")])
    with pytest.raises(StructInfoError, match="reduction must be one of 'mean', 'sum', 'none'"):
        topi.nn.nll_loss(*inputs, None, "average")
