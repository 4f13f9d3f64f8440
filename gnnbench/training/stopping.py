"""When a run stops: a fixed number of epochs, or a validation plateau within a budget.

A run to a plateau (``RunConfig.epochs=None``) evaluates the model ``EVALS_PER_EPOCH`` times per epoch (or every
``eval_every`` steps) and stops once the validation metric has not risen by ``min_delta`` above its reference
best for ``patience`` epochs (and at least :data:`MIN_PATIENCE_STEPS` steps: a full-batch epoch is one step), or,
once the run has reached ``patience_target`` (a sweep's calibrated target), for as many steps as it took to reach it
when that is fewer: the patience follows the time scale of the run's own learning, not the epoch's length; and
never before ``min_steps`` steps; or when a budget is spent: ``max_epochs``, ``max_steps`` (the step budget
within which a run that judges accuracy reaches its plateau) or ``max_seconds`` (a hard stop on the run clock);
a time-to-accuracy run (``stop_at``) stops at its target, or once past its censoring budget without it.
The reason a run stopped is recorded with its result.

The plateau rule (:class:`Plateau`) keeps its reference best fixed until a rise *qualifies* (is at least
``min_delta`` above it), so a steady climb of small rises restarts the patience once it adds up to
``min_delta``; a rise that does not qualify moves nothing. ``min_delta`` is never below the validation metric's
granularity (one validation node of an accuracy), and rises are compared with a tolerance of half that
granularity, so a one-node rise counts the same whatever float rounding the two values carry.

The training loop asks two objects: :class:`Stopping` (every rule above, each decision a clock can split agreed
across the ranks of a data-parallel run, behind one :meth:`Stopping.should_stop` and its
:attr:`~Stopping.reason`) and :class:`EvaluationCadence` (when a validation point is recorded).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from gnnbench.training.config import RunConfig

__all__ = [
    "EVALS_PER_EPOCH",
    "MIN_PATIENCE_STEPS",
    "Plateau",
    "STOP_REASONS",
    "CONVERGED_REASONS",
    "TIME_TO_ACCURACY_REASONS",
    "Stopping",
    "EvaluationCadence",
    "any_rank",
    "eval_interval",
]

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
        target: A validation level (a sweep's calibrated target; ``None``: none). Once a validation point is at
            or above it, after ``s`` steps, the patience is at most ``s`` steps (never below
            :data:`MIN_PATIENCE_STEPS`): a run that learned to the target in ``s`` steps has as long again to show
            a further rise. Steps only, never the clock, so a slow configuration waits as long as a fast one.
    """

    patience: float
    min_delta: float
    granularity: float = 0.0
    min_steps: int = 0
    target: float | None = None
    best: float = -math.inf  # the reference best: moves only on a qualifying rise
    best_step: int = 0
    target_step: int | None = None  # the step of the first point at or above ``target``

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
        if self.target is not None and self.target_step is None and val >= self.target - 1e-12:
            self.target_step = step
        if self.best == -math.inf or val - self.best >= self.threshold - self.tolerance:
            self.best, self.best_step = val, step
            return True
        return False

    def reached(self, step: int, steps_per_epoch: int | None) -> bool:
        """Whether ``step`` steps leave the patience exhausted (never before the epoch's length is known, nor
        before ``min_steps``)."""
        if not steps_per_epoch or self.best == -math.inf or step < self.min_steps:
            return False
        return step - self.best_step >= self.wait(steps_per_epoch)

    def wait(self, steps_per_epoch: int) -> int:
        """Steps without a qualifying rise that exhaust the patience: ``patience`` epochs, or the steps the run
        took to reach ``target`` when fewer; never below :data:`MIN_PATIENCE_STEPS`."""
        wait = math.ceil(self.patience * steps_per_epoch)
        if self.target_step is not None:
            wait = min(wait, self.target_step)
        return max(MIN_PATIENCE_STEPS, wait)


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


class Stopping:
    """Whether a run stops, and why: its epochs, the plateau rule, the step and time budgets, a time-to-accuracy
    run's target and censoring budget. Each decision is agreed across ranks (``agree``), so the ranks of a
    data-parallel run stop at one step; the step budget needs no agreement (the same count on every rank).

    The loop calls, per step, :meth:`after_step` (the budgets, on the run clock), :meth:`after_evaluation` for
    a validation point recorded then, and :meth:`should_stop` once (the censoring budget, then the decision);
    per epoch, :meth:`end_epoch`. When one step meets several rules the first of ``plateau``, ``target``,
    ``censored``, ``max_seconds``, ``max_steps`` names it.

    Args:
        config: The run's configuration (its length, the plateau rule's fields, the budgets, ``stop_at``).
        epochs: Epochs to run; ``None``: ``config``'s own length (``config.epochs``, or a run to a plateau
            within ``config.max_epochs``), raised to ``floor``.
        evaluate: Whether the loop records validation points (a run to a plateau reads them).
        floor: The fewest epochs ``config``'s own length is raised to (the batch source's regime).
        granularity: The validation metric's granularity (:class:`Plateau`).
        per_epoch: The batch source's steps per epoch when known before the first epoch (``None``: the first
            epoch that trains tells it).
        cap: Steps per epoch at most (``None``: whole epochs).
        clock: The run clock now (setup + training, evaluation excluded), read by the time budgets.
        agree: ``flag`` agreed across ranks (:func:`any_rank`).

    Attributes:
        epochs: The epochs the loop may run (``float("inf")``: until the consumer stops pulling).
        to_plateau: Whether this is a run to a validation plateau (``epochs=None`` and ``config.epochs=None``).
        schedule_epochs: The epochs the learning-rate schedule spans (a run to a plateau: ``max_epochs``).
        plateau: The plateau rule (``None`` outside a run to a plateau, and in a time-to-accuracy run: its time
            to the target must not depend on where a plateau stop would fall).
        per_epoch: Steps per epoch, once known (a run to a plateau learns it from its first epoch).
        stopped: Whether the run has stopped.
        reason: Why it stopped (:data:`STOP_REASONS`): ``"epochs"`` or ``"max_epochs"`` until a rule stops it.

    Raises:
        ValueError: for a run to a plateau without evaluation.
    """

    def __init__(
        self,
        config: "RunConfig",
        epochs: int | float | None,
        *,
        evaluate: bool,
        floor: int = 1,
        granularity: float = 0.0,
        per_epoch: int | None = None,
        cap: int | None = None,
        clock: Callable[[], float],
        agree: Callable[[bool], bool] = any_rank,
    ) -> None:
        self.config = config
        self.to_plateau = epochs is None and config.to_plateau
        if self.to_plateau and not evaluate:
            raise ValueError(
                "a run to a validation plateau (RunConfig.epochs=None) needs evaluate=True: "
                "the plateau is read from the validation curve"
            )
        if epochs is None:
            epochs = max(config.max_epochs if self.to_plateau else config.epochs, floor)
        self.epochs = epochs
        self.schedule_epochs = config.max_epochs if self.to_plateau else epochs
        self.plateau = (
            Plateau(
                config.patience,
                config.min_delta,
                granularity=granularity,
                min_steps=config.min_steps,
                target=config.patience_target,
            )
            if self.to_plateau and config.stop_at is None
            else None
        )
        if cap is not None and per_epoch is not None:
            per_epoch = min(per_epoch, cap)
        self.per_epoch = per_epoch
        self._rescale()
        self.clock, self.agree = clock, agree
        self.stopped = False
        self.reason = "max_epochs" if self.to_plateau else "epochs"
        self._over = self._spent = False  # the step's time budget, its step budget
        self._recent: deque[float] = deque(maxlen=config.smoothing)  # the last validation points

    def each_epoch(self) -> Iterator[int]:
        """The epochs to train, ``0, 1, ...``: up to :attr:`epochs`, none once the run has stopped."""
        epoch = 0
        while epoch < self.epochs and not self.stopped:
            yield epoch
            epoch += 1

    def last_epoch(self, epoch: int) -> bool:
        """Whether ``epoch`` is the run's last (its epochs are spent, or it stopped)."""
        return epoch + 1 >= self.epochs or self.stopped

    def after_step(self, steps: int) -> bool:
        """``steps`` steps taken: read the budgets (``max_seconds`` on the run clock, agreed across ranks: one
        rank's clock alone would hang the rest; a run to a plateau's ``max_steps``); whether one is spent (the
        run then ends on a validation point)."""
        cfg = self.config
        self._over = cfg.max_seconds is not None and self.agree(self.clock() >= cfg.max_seconds)
        self._spent = self.to_plateau and self.max_steps is not None and steps >= self.max_steps
        return self._over or self._spent

    def after_evaluation(self, val: float, steps: int) -> None:
        """A validation point ``val`` after ``steps`` steps: the plateau rule reads it, and a time-to-accuracy
        run stops at it when the mean of its last ``config.smoothing`` points is at or above ``config.stop_at`` (the tolerance of
        :func:`gnnbench.measure.compare.calibration.time_to`) after ``config.min_steps`` steps (a sweep keeps a
        baseline's epochs that its short runs are read against). Both agreed across ranks."""
        cfg, reached = self.config, False
        if self.plateau is not None:
            self.plateau.update(val, steps)
            reached = self.plateau.reached(steps, self.per_epoch)
        if self.agree(reached):
            self._stop("plateau")
        self._recent.append(float(val))
        read = sum(self._recent) / len(self._recent)  # the trailing mean the target is read on (RunConfig.smoothing)
        if (
            cfg.stop_at is not None
            and not self.stopped
            and self.agree(read >= cfg.stop_at - 1e-12 and steps >= cfg.min_steps)
        ):
            self._stop("target")

    def should_stop(self) -> bool:
        """Once per step, after its validation point if any: whether the run stops after this step. A
        time-to-accuracy run stops once the run clock is past ``config.censor_seconds`` (agreed across
        ranks): its time to accuracy is censored there; then the budgets :meth:`after_step` read."""
        cfg = self.config
        if (
            cfg.stop_at is not None
            and cfg.censor_seconds is not None
            and not self.stopped
            and self.agree(self.clock() > cfg.censor_seconds)
        ):
            self._stop("censored")
        if self._over:
            self._stop("max_seconds")
        if self._spent:
            self._stop("max_steps")
        return self.stopped

    def end_epoch(self, epoch: int, taken: int) -> None:
        """``epoch`` trained ``taken`` steps: a run to a plateau learns the epoch's length from the first epoch
        that trains.

        Raises:
            RuntimeError: when an endless run's epoch yielded no batches (it would never stop).
        """
        if taken == 0 and self.epochs == float("inf"):
            raise RuntimeError(f"the batch source yielded no batches for epoch {epoch}")
        if self.per_epoch is None and taken and self.to_plateau:
            self.per_epoch = taken
            self._rescale()

    def _rescale(self) -> None:
        """The step floor and budget in this run's own unit of work: ``config.min_steps`` and
        ``config.max_steps`` counted in epochs of ``config.step_unit`` steps, taken as as many epochs of this
        batch source (one full-batch step is an epoch); as given without a unit or before the epoch length is
        known."""
        cfg = self.config
        self.min_steps, self.max_steps = cfg.min_steps, cfg.max_steps
        unit = getattr(cfg, "step_unit", None)
        if unit and self.per_epoch and self.per_epoch != unit:
            scale = self.per_epoch / unit
            self.min_steps = math.ceil(cfg.min_steps * scale)
            self.max_steps = math.ceil(cfg.max_steps * scale) if cfg.max_steps is not None else None
        if self.plateau is not None:
            self.plateau.min_steps = self.min_steps

    def _stop(self, reason: str) -> None:
        if not self.stopped:
            self.stopped, self.reason = True, reason


class EvaluationCadence:
    """When the loop records a validation point (with ``evaluate``; never without).

    Every ``eval_every`` steps (a run to a plateau without it: :func:`eval_interval`, ``EVALS_PER_EPOCH`` per
    epoch, at epoch ends until the first epoch tells its length), at a step where a budget is spent (the run
    ends on a point), and at the end of an epoch: every epoch without a step cadence, else the last one and a
    run to a plateau's first. Never twice at one step, nor at the end of an epoch that trained nothing.

    Args:
        stopping: The run's :class:`Stopping` (whether it runs to a plateau, its epoch length, its last epoch).
        eval_every: ``RunConfig.eval_every``.
        evaluate: Whether the run records validation points at all.

    Attributes:
        every: Steps between points (``None``: at epoch ends).
    """

    def __init__(self, stopping: Stopping, eval_every: int | None, *, evaluate: bool) -> None:
        self.stopping = stopping
        self.evaluate = evaluate
        self._learns = stopping.to_plateau and eval_every is None  # EVALS_PER_EPOCH per epoch, once it is known
        self.every = eval_every if evaluate else None
        if self._learns:
            self.every = eval_interval(stopping.per_epoch)
        self._last = -1  # the step of the last point

    def after_step(self, steps: int, ending: bool) -> bool:
        """Whether to record a point after ``steps`` steps (``ending``: a budget is spent); a yes is taken as
        recorded."""
        return self._due(self.every is not None and steps % self.every == 0 or self.evaluate and ending, steps)

    def at_epoch_end(self, epoch: int, taken: int, steps: int) -> bool:
        """Whether to record a point at the end of ``epoch`` (``taken`` steps in it, ``steps`` in all); a yes
        is taken as recorded."""
        if self._learns and self.every is None:
            self.every = eval_interval(self.stopping.per_epoch)
        return self._due(
            bool(
                self.evaluate
                and taken
                and self._last != steps
                and (self.every is None or self.stopping.last_epoch(epoch) or self.stopping.to_plateau and epoch == 0)
            ),
            steps,
        )

    def _due(self, due: bool, steps: int) -> bool:
        if due:
            self._last = steps
        return due
