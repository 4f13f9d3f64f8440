"""When a run stops: a fixed number of epochs, or a validation plateau within a budget.

A run to a plateau (``RunConfig.epochs=None``) evaluates the model ``EVALS_PER_EPOCH`` times per epoch (or every
``eval_every`` steps) and stops once the best validation metric has not risen by ``min_delta`` for ``patience``
epochs (and at least :data:`MIN_PATIENCE_STEPS` steps: a full-batch epoch is one step), or when the budget is
spent: ``max_epochs``, or ``max_seconds`` on the run clock (setup + training, evaluation excluded). A budget in
seconds applies to fixed-length runs too. The reason a run stopped is recorded with its result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["EVALS_PER_EPOCH", "MIN_PATIENCE_STEPS", "Plateau", "STOP_REASONS", "eval_interval"]

EVALS_PER_EPOCH = 4  # a run to a plateau with no eval_every: validation points per epoch
MIN_PATIENCE_STEPS = 20  # patience never shorter than this many optimizer steps
STOP_REASONS = ("epochs", "plateau", "max_epochs", "max_seconds")


def eval_interval(steps_per_epoch: int | None) -> int | None:
    """Steps between validation points of a run to a plateau: ``EVALS_PER_EPOCH`` per epoch (``None`` while
    the epoch's length is unknown: then at epoch ends until the first epoch has told it)."""
    if not steps_per_epoch:
        return None
    return max(1, math.ceil(steps_per_epoch / EVALS_PER_EPOCH))


@dataclass
class Plateau:
    """The plateau rule's state over one run's validation points.

    Args:
        patience: Epochs without a new best before stopping.
        min_delta: The rise over the best so far that counts as a new best.
    """

    patience: float
    min_delta: float
    best: float = -math.inf
    best_step: int = 0

    def update(self, val: float, step: int) -> None:
        """Record the validation metric ``val`` measured after ``step`` steps."""
        if val == val and val >= self.best + self.min_delta:
            self.best, self.best_step = val, step
        elif val == val and val > self.best:  # a rise below min_delta: the best moves, its step does not
            self.best = val

    def reached(self, step: int, steps_per_epoch: int | None) -> bool:
        """Whether ``step`` steps leave the patience exhausted (never before the epoch's length is known)."""
        if not steps_per_epoch or self.best == -math.inf:
            return False
        wait = max(MIN_PATIENCE_STEPS, math.ceil(self.patience * steps_per_epoch))
        return step - self.best_step >= wait
