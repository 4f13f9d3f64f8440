"""How a sweep measures, as one frozen object: what ``RunConfig`` is to "what to train", :class:`SweepOptions` is to
"how to measure it" (rounds, the stopping rule, the calibration and its budgets, derivation, processes, resuming,
the executor, what the manifest records). A command builds it once from its options (``gnnbench compare``: in
:mod:`gnnbench.cli.commands`, beside the base configuration :func:`gnnbench.cli.options.resolve_run` resolves)
and it travels whole: :func:`gnnbench.measure.sweep.full.sweep_and_compare` reads it, and hands it on to
:func:`~gnnbench.measure.sweep.rounds.run_calibration` and :func:`~gnnbench.measure.sweep.rounds.run_sweep`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gnnbench.measure.compare import BUDGET_FACTOR, DEFAULT_CALIBRATION_RUNS, DEFAULT_EQUIVALENCE_MARGIN
from gnnbench.measure.run import DEFAULT_TIMEOUT
from gnnbench.measure.stats import DEFAULT_REPEATS
from gnnbench.measure.sweep.executors import RoundExecutor

__all__ = ["SweepOptions"]


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep measures its entries (the entries and the base configuration are the caller's).

    Attributes:
        repeats: Rounds at most (processes per configuration).
        calibration_runs: Baseline runs on seeds no round uses that fix the target, the validation cadence and
            the budgets before the rounds (:func:`~gnnbench.measure.sweep.rounds.run_calibration`); 0: none,
            the target is then read off the measured baseline.
        target_acc: A validation target fixed by the caller, replacing the calibrated one.
        budget_factor: Each run's time budget, in multiples of the calibrated time to the target.
        aa: Also run the baseline against itself (the A/A noise check).
        include_all_recommended: Add the registry's recommended entries together as one row.
        derive: Run entries proven to keep the baseline's trajectory short and derive their time to accuracy
            (only with a calibration that reached its target).
        interleave: Time each entry that does the baseline's work per step and can share a process with it
            against its round's baseline in one process after its run, steps interleaved, and read its time
            per step from there (:mod:`gnnbench.measure.run.paired`); with ``aa``, add the baseline against
            itself so timed (the in-process A/A).
        also_measured: Derived entries also trained to the target (rows ``"<name> (measured)"``).
        accuracy_rounds: With a fixed target, rounds from this one on stop at the target (time to accuracy
            only); ``None`` or ``>= repeats``: every round trains to the plateau.
        stop_when_settled: Stop giving rounds to a row once its verdict is settled, under
            :meth:`~gnnbench.measure.stats.sequential.StoppingRule.for_repeats` (needs 2 rounds or more and a
            target fixed before the rounds).
        equivalence_margin: Declared in the manifest before the rounds: a row that keeps the work per step and
            whose steps to the target are shown equivalent to the baseline's within it is judged by its time per
            step x the baseline's steps to the target; ``None``: every row by its measured time to accuracy.
        order_seed: Seed of the per-round run order (recorded).
        isolate: Run each configuration in its own process.
        resume: Keep a stored result whose config, code and environment match.
        dist_timeout: Seconds a multi-rank run's collective may wait.
        executor: Run the rounds as jobs on identical machines (``None``: one round at a time, here).
        record_outcome: Record the measured best row and the trade-offs in the manifest.
        best_set: After the single-entry rounds, measure the entries that paid, switched on together, against
            the baseline in rounds of their own (:mod:`gnnbench.measure.sweep.best_set`).

    Raises:
        ValueError: on construction, for a value outside what the sweep accepts (named with what would be).
    """

    repeats: int = DEFAULT_REPEATS
    calibration_runs: int = DEFAULT_CALIBRATION_RUNS
    target_acc: float | None = None
    budget_factor: float = BUDGET_FACTOR
    aa: bool = False
    include_all_recommended: bool = True
    derive: bool = False
    interleave: bool = False
    also_measured: tuple[str, ...] = ()
    accuracy_rounds: int | None = None
    stop_when_settled: bool = False
    equivalence_margin: float | None = DEFAULT_EQUIVALENCE_MARGIN
    order_seed: int = 0
    isolate: bool = True
    resume: bool = True
    dist_timeout: float = DEFAULT_TIMEOUT
    executor: RoundExecutor | None = None
    record_outcome: bool = False
    best_set: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "also_measured", tuple(self.also_measured))

        def whole(name: str, low: int) -> None:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low} (got {value!r})")

        def positive(name: str, value) -> None:
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")

        whole("repeats", 1)
        whole("calibration_runs", 0)
        if not isinstance(self.order_seed, int) or isinstance(self.order_seed, bool):
            raise ValueError(f"order_seed must be an integer (got {self.order_seed!r})")
        if self.accuracy_rounds is not None:
            whole("accuracy_rounds", 0)
        positive("budget_factor", self.budget_factor)
        positive("dist_timeout", self.dist_timeout)
        if self.equivalence_margin is not None:
            positive("equivalence_margin", self.equivalence_margin)
        if self.target_acc is not None and not (
            isinstance(self.target_acc, (int, float)) and 0.0 < self.target_acc <= 1.0
        ):
            raise ValueError(f"target_acc must be a validation accuracy in (0, 1] (got {self.target_acc!r})")

    def fixed_accuracy_rounds(self, fixed_target: bool) -> int | None:
        """The round from which runs stop at the target: only with a target fixed before the rounds, and only
        when it leaves some rounds to the plateau."""
        if fixed_target and self.accuracy_rounds is not None and self.accuracy_rounds < self.repeats:
            return self.accuracy_rounds
        return None
