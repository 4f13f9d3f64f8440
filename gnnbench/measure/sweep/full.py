"""A sweep measured from start to finish in one call: the calibration that fixes its target, the entries, the
interleaved rounds (stopping rows whose verdict is settled), the comparison, and the outcome in the manifest.

:func:`measure_sweep` is what ``gnnbench compare``, ``diagnose --verify``, ``gpu-check`` and each round of
``tune`` run; they differ only in their options. It prints nothing: what a caller shows while it runs (a
progress bar, a line per run) comes from the :class:`SweepProgress` it passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from gnnbench.atomic import write_json_atomic
from gnnbench.measure.compare.calibration import BUDGET_FACTOR, DEFAULT_CALIBRATION_RUNS, Calibration
from gnnbench.measure.compare.comparison import Comparison, compare, measured_best, tradeoffs
from gnnbench.measure.compare.factors import DEFAULT_EQUIVALENCE_MARGIN
from gnnbench.measure.run.launch import DEFAULT_TIMEOUT
from gnnbench.measure.stats.intervals import DEFAULT_REPEATS
from gnnbench.measure.stats.sequential import StoppingRule
from gnnbench.measure.sweep.best_set import BestSetChoice, BestSetOutcome, choose, set_base, store_dir
from gnnbench.measure.sweep.executors import RoundExecutor
from gnnbench.measure.sweep.plan import Entry, check_also_measured, sweep_entries
from gnnbench.measure.sweep.rounds import MANIFEST, SweepResults, run_calibration, run_sweep
from gnnbench.training import RunConfig

__all__ = ["SweepProgress", "MeasuredSweep", "measure_sweep", "store_outcome"]


class SweepProgress:
    """What :func:`measure_sweep` reports while it runs. Every method does nothing here: a caller overrides
    those it shows (the command line's progress bar: :mod:`gnnbench.cli.progress`)."""

    def calibration_started(self, runs: int) -> None:
        """Before the calibration: ``runs`` baseline runs on seeds of their own (0: no calibration)."""

    def calibration_run(self, done: int, total: int, entry: Entry, status: str) -> None:
        """A calibration run started (``status == "running"``) or ended (its status)."""

    def calibrated(self, calibration: Calibration | None) -> None:
        """The calibration is fixed (``None``: none ran)."""

    def sweep_started(self, entries: list[Entry], calibration_runs: list[dict]) -> None:
        """Before the sweep's first run: every entry it may run, and the calibration's runs (their durations are
        a first guess of a run's)."""

    def sweep_run(self, done: int, total: int, entry: Entry, status: str) -> None:
        """A sweep run started (``status == "running"``) or ended (its status, or ``kept``, ``settled``)."""

    def sweep_ended(self) -> None:
        """After the sweep's last run, or when it stopped on an error."""

    def best_set_chosen(self, choice: BestSetChoice, measured: bool) -> None:
        """After the single-entry rounds: the best set chosen (``measured``: its own rounds follow, reported
        through :meth:`sweep_started` and :meth:`sweep_run` like the sweep's)."""


@dataclass
class MeasuredSweep:
    """What :func:`measure_sweep` measured."""

    comparison: Comparison
    results: SweepResults  # the sweep's runs (calibration runs apart): what ran, was kept or was skipped
    entries: list[Entry]  # every entry the sweep could run, extra entries included
    base: RunConfig  # the base configuration as measured (with the calibrated cadence and budgets)
    calibration: Calibration | None = None  # the target's calibration, made here or given
    calibration_runs: list[dict] = field(default_factory=list)  # the calibration's runs, when made here
    best_set: BestSetOutcome | None = None  # the measured best set (docs/best-set.md), when asked for


def measure_sweep(
    base: RunConfig,
    names: Iterable[str] | None,
    out_dir: str | Path,
    *,
    repeats: int = DEFAULT_REPEATS,
    calibration_runs: int = DEFAULT_CALIBRATION_RUNS,
    target_acc: float | None = None,
    budget_factor: float = BUDGET_FACTOR,
    calibration: Calibration | None = None,
    aa: bool = False,
    include_all_recommended: bool = True,
    derive: bool = False,
    also_measured: Iterable[str] = (),
    accuracy_rounds: int | None = None,
    stop_when_settled: bool = False,
    equivalence_margin: float | None = DEFAULT_EQUIVALENCE_MARGIN,
    extra_entries: Sequence[Entry] = (),
    order_seed: int = 0,
    isolate: bool = True,
    resume: bool = True,
    dist_timeout: float = DEFAULT_TIMEOUT,
    executor: RoundExecutor | None = None,
    record_outcome: bool = False,
    best_set: bool = False,
    progress: SweepProgress | None = None,
) -> MeasuredSweep:
    """Calibrate, sweep and compare: the baseline against each of ``names`` in interleaved rounds.

    Args:
        base: The baseline configuration.
        names: Entries to measure against it (``"a+b"``: together; ``None``: every registered one).
        out_dir: The sweep's folder: the calibration's runs, each run's result and the manifest.
        repeats: Rounds at most (processes per configuration).
        calibration_runs: Baseline runs on seeds no round uses that fix the target, the validation cadence and
            the budgets before the rounds (:func:`gnnbench.measure.sweep.rounds.run_calibration`); 0: none, the
            target is then read off the measured baseline. Default 3.
        target_acc: A validation target fixed by the caller, replacing the calibrated one.
        budget_factor: Each run's time budget, in multiples of the calibrated time to the target. Default 4.
        calibration: A calibration made elsewhere (``tune`` makes one for all its rounds): no calibration runs
            here, ``base`` is taken as already calibrated, and the rows are judged against its target. The
            manifest records only a calibration whose runs are in ``out_dir``.
        aa: Also run the baseline against itself (the A/A noise check).
        include_all_recommended: Add the registry's recommended entries together as one row.
        derive: Run entries proven to keep the baseline's trajectory short and derive their time to accuracy
            (only with a calibration that reached its target).
        also_measured: Derived entries also trained to the target (rows ``"<name> (measured)"``).
        accuracy_rounds: With a fixed target, rounds from this one on stop at the target (time to accuracy
            only); ``None`` or ``>= repeats``: every round trains to the plateau.
        stop_when_settled: Stop giving rounds to a row once its verdict is settled, under
            :meth:`StoppingRule.for_repeats` (needs 2 rounds or more and a target fixed before the rounds).
        equivalence_margin: Declared in the manifest before the rounds: a row that keeps the work per step and
            whose steps to the target are shown equivalent to the baseline's within it is judged by its time per
            step x the baseline's steps to the target (:func:`gnnbench.measure.compare.comparison.compare`); ``None``:
            every row by its measured time to accuracy.
        extra_entries: Entries of the caller's own, measured in the same rounds (``tune``'s swap moves).
        order_seed: Seed of the per-round run order (recorded).
        isolate: Run each configuration in its own process.
        resume: Keep a stored result whose config, code and environment match.
        dist_timeout: Seconds a multi-rank run's collective may wait.
        executor: Run the rounds as jobs on identical machines (:class:`RoundExecutor`).
        record_outcome: Record the measured best row and the trade-offs in the manifest (:func:`store_outcome`).
        best_set: After the single-entry rounds, switch on together the entries that paid at no accuracy cost
            (conflicts resolved as ``tune`` resolves them) and measure that set against the baseline in rounds
            of its own, on seeds of its own, in ``out_dir/best-set`` (:mod:`gnnbench.measure.sweep.best_set`); the
            choice is recorded in the manifest (``best_set``) before those rounds run.
        progress: Receives the runs as they start and end (default: nothing is reported).

    Raises:
        ValueError: for an ``also_measured`` name this sweep cannot derive (before anything runs), or a base
            configuration or options the sweep refuses.
    """
    progress = progress or SweepProgress()
    names = list(names) if names is not None else None
    also_measured = list(also_measured)
    check_also_measured(base, names, also_measured)  # refused before the calibration's minutes, not after
    own: Calibration | None = None
    own_runs: list[dict] = []
    if calibration is None:
        progress.calibration_started(calibration_runs)
        own, found = run_calibration(
            base,
            out_dir,
            runs=calibration_runs,
            target_acc=target_acc,
            budget_factor=budget_factor,
            isolate=isolate,
            resume=resume,
            progress=progress.calibration_run,
            dist_timeout=dist_timeout,
            executor=executor,
        )
        own_runs = list(found)
        progress.calibrated(own)
        if own is not None:
            base = own.apply(base)
    cal = calibration or own
    # the rule needs a target fixed before the rounds (an uncalibrated one moves with every baseline round)
    fixed_target = target_acc is not None or (cal is not None and cal.target is not None)
    target = target_acc if target_acc is not None else cal.target if fixed_target else None
    derivable = derive and cal is not None and cal.steps_per_epoch and cal.median_steps_to_target is not None
    entries = sweep_entries(
        base,
        names,
        repeats=repeats,
        aa=aa,
        include_all_recommended=include_all_recommended,
        derive_per_epoch=cal.steps_per_epoch if derivable else None,
        also_measured=also_measured,
        target=target,
        accuracy_rounds=(
            accuracy_rounds if fixed_target and accuracy_rounds is not None and accuracy_rounds < repeats else None
        ),
    )
    entries += extra_entries
    rule = StoppingRule.for_repeats(repeats) if stop_when_settled and repeats >= 2 and fixed_target else None

    def judge(results: list[dict]) -> Comparison:
        return compare(
            own_runs + results,
            target_acc=target_acc,
            calibration=calibration,
            rule=rule,
            equivalence_margin=equivalence_margin,
        )

    results = _rounds(
        entries,
        out_dir,
        progress,
        own_runs,
        judge,
        rule,
        calibration=own,
        isolate=isolate,
        resume=resume,
        order_seed=order_seed,
        equivalence_margin=equivalence_margin,
        dist_timeout=dist_timeout,
        executor=executor,
    )
    comparison = judge(list(results))
    best = None
    if best_set:
        accuracy_after = (
            accuracy_rounds if fixed_target and accuracy_rounds is not None and accuracy_rounds < repeats else None
        )
        best = _measure_best_set(
            comparison,
            base,
            out_dir,
            cal,
            target if fixed_target else None,
            target_acc=target_acc,
            repeats=repeats,
            accuracy_rounds=accuracy_after,
            stop_when_settled=stop_when_settled,
            equivalence_margin=equivalence_margin,
            order_seed=order_seed,
            isolate=isolate,
            resume=resume,
            dist_timeout=dist_timeout,
            executor=executor,
            progress=progress,
        )
    if record_outcome:
        store_outcome(out_dir, comparison, best)
    return MeasuredSweep(comparison, results, entries, base, cal, own_runs, best)


def _rounds(
    entries: list[Entry],
    folder: str | Path,
    progress: SweepProgress,
    seed_runs: list[dict],
    judge,
    rule: StoppingRule | None,
    **options,
) -> SweepResults:
    """``entries`` measured in interleaved rounds in ``folder`` (:func:`run_sweep` with ``options``), reported
    through ``progress`` (``seed_runs``: the runs whose durations seed its estimate), stopping settled rows by
    ``judge`` under ``rule``."""
    progress.sweep_started(entries, seed_runs)
    try:
        return run_sweep(
            entries,
            folder,
            progress=progress.sweep_run,
            rule=rule,
            after_round=_settled_after_round(judge) if rule is not None else None,
            **options,
        )
    finally:
        progress.sweep_ended()


def _settled_after_round(judge):
    """The stopping rule's hook of :func:`run_sweep`: the rows whose verdict is settled after a round (by
    ``judge``, the sweep's comparison of the results so far), and whether every row's is."""

    def after_round(done: list[dict]) -> tuple[set[str], bool]:
        try:
            c = judge(done)
        except ValueError:  # no measured baseline yet: nothing is settled
            return set(), False
        stopped = {label for label, stop in c.stops.items() if stop is not None}
        return stopped, bool(c.stops) and len(stopped) == len(c.stops)

    return after_round


def _record_choice(out_dir: str | Path, choice: BestSetChoice) -> None:
    """The set chosen, in the sweep's manifest before its rounds run (a resumed sweep and the report read it)."""
    path = Path(out_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    manifest["best_set"] = choice.to_dict()
    write_json_atomic(path, manifest)


def _measure_best_set(
    comparison: Comparison,
    base: RunConfig,
    out_dir: str | Path,
    cal: Calibration | None,
    target: float | None,
    *,
    target_acc: float | None,
    repeats: int,
    accuracy_rounds: int | None,
    stop_when_settled: bool,
    equivalence_margin: float | None,
    order_seed: int,
    isolate: bool,
    resume: bool,
    dist_timeout: float,
    executor: RoundExecutor | None,
    progress: SweepProgress,
) -> BestSetOutcome:
    """The best set chosen from ``comparison`` and measured against the baseline in rounds of its own, on the
    set's seed stream, under a stopping rule of its own (a family of one row), in ``out_dir/best-set``."""
    choice = choose(comparison, base)
    _record_choice(out_dir, choice)
    if not choice.measurable:
        progress.best_set_chosen(choice, False)
        return BestSetOutcome(choice)
    if target is None:
        progress.best_set_chosen(choice, False)
        return BestSetOutcome(
            choice,
            reason="no target fixed before the rounds (calibration or --target-acc): "
            "the set's rounds could not be judged on the sweep's target",
        )
    progress.best_set_chosen(choice, True)
    entries = sweep_entries(
        set_base(base, choice),
        [choice.label],
        repeats=repeats,
        aa=False,
        include_all_recommended=False,
        target=target,
        accuracy_rounds=accuracy_rounds,
    )
    rule = StoppingRule.for_repeats(repeats) if stop_when_settled and repeats >= 2 else None

    def judge(results: list[dict]) -> Comparison:
        return compare(
            results, target_acc=target_acc, calibration=cal, rule=rule, equivalence_margin=equivalence_margin
        )

    results = _rounds(
        entries,
        store_dir(out_dir),
        progress,
        [],
        judge,
        rule,
        calibration=cal,
        isolate=isolate,
        resume=resume,
        order_seed=order_seed,
        equivalence_margin=equivalence_margin,
        dist_timeout=dist_timeout,
        executor=executor,
    )
    try:
        sub = judge(list(results))
    except ValueError as exc:  # no measured baseline in the set's rounds
        return BestSetOutcome(choice, reason=f"its rounds could not be compared: {exc}")
    row = next((r for r in sub.rows if r.label == choice.label), None)
    return BestSetOutcome(choice, row, sub, None if row is not None else "its row is missing from its rounds")


def store_outcome(out_dir: str | Path, comparison: Comparison, best_set: BestSetOutcome | None = None) -> None:
    """Record in the sweep's manifest what it measured best (and the trade-offs), with the target it used, and
    the measured best set when there is one."""
    path = Path(out_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    best = measured_best(comparison)
    manifest["outcome"] = {
        "measured_best": best.label if best else None,
        "tradeoffs": [r.label for r in tradeoffs(comparison)],
        "target": comparison.target,
        "target_source": comparison.target_source,
        "family": comparison.family,
    }
    if best_set is not None:
        manifest["outcome"]["best_set"] = best_set.to_dict()
    write_json_atomic(path, manifest)
