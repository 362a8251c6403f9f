"""Training with Relax, TVM's ``relax.training``: loss functions and optimizers built as Relax
functions, ``AppendLoss`` and ``SetupTrainer`` to build a training module from a model's
backbone, and ``Trainer`` to run it."""

from . import loss, optimizer
from .setup_trainer import SetupTrainer
from .trainer import Trainer
from .utils import AppendLoss

__all__ = ["AppendLoss", "SetupTrainer", "Trainer", "loss", "optimizer"]
