"""Training with Relax: loss functions and optimizers built as Relax functions."""

from . import loss, optimizer
