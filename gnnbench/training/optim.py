"""The optimizer a configuration trains with, and its learning-rate schedule.

Where SGD's momentum lives is decided here: with top-k gradient compression under data parallelism the
momentum moves into the compression hook (DGC's momentum correction, :mod:`gnnbench.parallel.compression`)
and the optimizer steps plain SGD on the averaged sparse update; otherwise the optimizer keeps it.
"""

from __future__ import annotations

import math

import torch

from gnnbench.parallel.data_parallel import moves_momentum_into_hook
from gnnbench.training.config import RunConfig

__all__ = ["hook_momentum", "make_optimizer", "schedule_lr"]


def hook_momentum(config: RunConfig) -> float:
    """Momentum the gradient hook applies (DGC's momentum correction): SGD's, when the parallel layer's hook
    takes it over; else 0 (the optimizer keeps its own)."""
    if config.optimizer == "sgd" and moves_momentum_into_hook(config.flags):
        return float(config.momentum)
    return 0.0


def make_optimizer(config: RunConfig, params) -> torch.optim.Optimizer:
    """The optimizer ``config`` trains with (SGD's momentum moved into the gradient hook, if it takes it)."""
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr)
    return torch.optim.SGD(params, lr=config.lr, momentum=0.0 if hook_momentum(config) else config.momentum)


def schedule_lr(optimizer: torch.optim.Optimizer, config: RunConfig, epoch: int, epochs: float) -> None:
    """Set epoch ``epoch``'s learning rate of ``epochs`` (``RunConfig.lr_schedule``; runs cycling epochs
    forever keep ``lr``)."""
    if config.lr_schedule == "cosine" and epochs != float("inf"):
        lr = config.lr * 0.5 * (1.0 + math.cos(math.pi * epoch / epochs))
        for group in optimizer.param_groups:
            group["lr"] = lr
