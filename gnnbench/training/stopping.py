"""When a run stops: a fixed number of epochs, or a validation plateau within a budget.

A run to a plateau (``RunConfig.epochs=None``) evaluates the model ``EVALS_PER_EPOCH`` times per epoch (or every
``eval_every`` steps) and stops once the validation metric has not risen by ``min_delta`` above its reference
best for ``patience`` epochs (and at least :data:`MIN_PATIENCE_STEPS` steps: a full-batch epoch is one step), and
never before ``min_steps`` steps; or when a budget is spent: ``max_epochs``, ``max_steps`` (the step budget
within which a run that judges accuracy reaches its plateau) or ``max_seconds`` (a hard stop on the run clock);
a time-to-accuracy run (``stop_at``) stops at its target, or once past its censoring budget without it.
The reason a run stopped is recorded with its result.

The plateau rule (:class:`Plateau`) keeps its reference best fixed until a rise *qualifies* (is at least
``min_delta`` above it), so a steady climb of small rises restarts the patience once it adds up to
``min_delta``; a rise that does not qualify moves nothing. ``min_delta`` is never below the validation metric's
granularity (one validation node of an accuracy), and rises are compared with a tolerance of half that
granularity, so a one-node rise counts the same whatever float rounding the two values carry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["EVALS_PER_EPOCH", "MIN_PATIENCE_STEPS", "Plateau", "STOP_REASONS", "CONVERGED_REASONS",
           "TIME_TO_ACCURACY_REASONS", "any_rank", "eval_interval"]

EVALS_PER_EPOCH = 4  # a run to a plateau with no eval_every: validation points per epoch
MIN_PATIENCE_STEPS = 20  # patience never shorter than this many optimizer steps
STOP_REASONS = ("epochs", "plateau", "max_epochs", "max_steps", "max_seconds", "target", "censored")
# A time-to-accuracy run (``RunConfig.stop_at``) stops at the target, or past its censoring budget without it:
# it measures time to accuracy only, and its accuracy is never read.
TIME_TO_ACCURACY_REASONS = ("target", "censored")
# A run measured to its end: its accuracy is read "at convergence" (a fixed-length run: at its end). The others
# were cut by a budget and are compared with the baseline at equal steps.
CONVERGED_REASONS = ("epochs", "plateau")
_CONTINUOUS_TOLERANCE = 1e-9  # a metric without a granularity (AUC): rises compared to this


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
        patience: Epochs without a qualifying rise before stopping.
        min_delta: The rise over the reference best that qualifies (raised to ``granularity`` when below it).
        granularity: The validation metric's smallest step (one validation node of an accuracy; 0 for a
            continuous metric such as AUC). Rises are compared with a tolerance of half of it.
        min_steps: No stop before this many steps (a sweep sets twice the calibrated steps to the target).
    """

    patience: float
    min_delta: float
    granularity: float = 0.0
    min_steps: int = 0
    best: float = -math.inf  # the reference best: moves only on a qualifying rise
    best_step: int = 0

    def __post_init__(self) -> None:
        if not (self.granularity >= 0 and math.isfinite(self.granularity)):
            raise ValueError(f"Plateau.granularity must be a finite number >= 0 (got {self.granularity!r})")

    @property
    def threshold(self) -> float:
        """The rise that qualifies: ``min_delta`` rounded up to whole validation nodes (at least one)."""
        if self.granularity <= 0:
            return self.min_delta
        return max(1, math.ceil(self.min_delta / self.granularity - 1e-9)) * self.granularity

    @property
    def tolerance(self) -> float:
        """Rounding allowed when a rise is compared with :attr:`threshold`."""
        return self.granularity / 2 if self.granularity > 0 else _CONTINUOUS_TOLERANCE

    def update(self, val: float, step: int) -> bool:
        """Record the validation metric ``val`` measured after ``step`` steps; whether it qualified as a new
        reference best (the first finite value always does)."""
        if val != val:
            return False
        if self.best == -math.inf or val - self.best >= self.threshold - self.tolerance:
            self.best, self.best_step = val, step
            return True
        return False

    def reached(self, step: int, steps_per_epoch: int | None) -> bool:
        """Whether ``step`` steps leave the patience exhausted (never before the epoch's length is known, nor
        before ``min_steps``)."""
        if not steps_per_epoch or self.best == -math.inf or step < self.min_steps:
            return False
        wait = max(MIN_PATIENCE_STEPS, math.ceil(self.patience * steps_per_epoch))
        return step - self.best_step >= wait


def any_rank(flag: bool) -> bool:
    """``flag`` agreed across the ranks of an initialized process group (true if any rank's is): a decision to
    stop is taken together, or the ranks still training would wait for the others forever. Called between
    steps, off the training clock; ``flag`` itself outside a process group."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return bool(flag)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())
