"""A sweep measured from start to finish in one call: the calibration that fixes its target, the entries, the
interleaved rounds (stopping rows whose verdict is settled), the comparison, and the outcome in the manifest.

:func:`sweep_and_compare` is what ``gnnbench compare``, ``diagnose --verify``, ``gpu-check`` and each round of
``tune`` run; they differ only in their options. It prints nothing: what a caller shows while it runs (a
progress bar, a line per run) comes from the :class:`SweepProgress` it passes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from gnnbench.atomic import write_json_atomic
from gnnbench.measure.compare import Calibration, Comparison, compare, measured_best, tradeoffs
from gnnbench.measure.run import RunResult
from gnnbench.measure.stats import StoppingRule
from gnnbench.measure.sweep.best_set import BestSetChoice, BestSetOutcome, choose, set_base, store_dir
from gnnbench.measure.sweep.options import SweepOptions
from gnnbench.measure.sweep.plan import Entry, check_also_measured, sweep_entries
from gnnbench.measure.sweep.rounds import MANIFEST, SweepResults, run_calibration, run_sweep
from gnnbench.training import RunConfig

__all__ = ["SweepProgress", "MeasuredSweep", "sweep_and_compare", "store_outcome"]


class SweepProgress:
    """What :func:`sweep_and_compare` reports while it runs. Every method does nothing here: a caller overrides
    those it shows (the command line's progress bar: :mod:`gnnbench.cli.progress`)."""

    def calibration_started(self, runs: int) -> None:
        """Before the calibration: ``runs`` baseline runs on seeds of their own (0: no calibration)."""

    def calibration_run(self, done: int, total: int, entry: Entry, status: str, seconds: float | None = None) -> None:
        """A calibration run started (``status == "running"``) or ended (its status; ``kept`` with the stored
        run's ``seconds``)."""

    def calibrated(self, calibration: Calibration | None) -> None:
        """The calibration is fixed (``None``: none ran)."""

    def sweep_started(self, entries: list[Entry], calibration_runs: list[RunResult]) -> None:
        """Before the sweep's first run: every entry it may run, and the calibration's runs (their durations are
        a first guess of a run's)."""

    def sweep_run(self, done: int, total: int, entry: Entry, status: str, seconds: float | None = None) -> None:
        """A sweep run started (``status == "running"``) or ended (its status, or ``settled``, or ``kept`` with
        the stored run's duration by its clocks in ``seconds``: what a resumed sweep's estimate starts from)."""

    def sweep_ended(self) -> None:
        """After the sweep's last run, or when it stopped on an error."""

    def best_set_chosen(self, choice: BestSetChoice, measured: bool) -> None:
        """After the single-entry rounds: the best set chosen (``measured``: its own rounds follow, reported
        through :meth:`sweep_started` and :meth:`sweep_run` like the sweep's)."""


@dataclass
class MeasuredSweep:
    """What :func:`sweep_and_compare` measured."""

    comparison: Comparison
    results: SweepResults  # the sweep's runs (calibration runs apart): what ran, was kept or was skipped
    entries: list[Entry]  # every entry the sweep could run, extra entries included
    base: RunConfig  # the base configuration as measured (with the calibrated cadence and budgets)
    calibration: Calibration | None = None  # the target's calibration, made here or given
    calibration_runs: list[RunResult] = field(default_factory=list)  # the calibration's runs, when made here
    best_set: BestSetOutcome | None = None  # the measured best set (docs/best-set.md), when asked for


def sweep_and_compare(
    base: RunConfig,
    names: Iterable[str] | None,
    out_dir: str | Path,
    options: SweepOptions = SweepOptions(),
    *,
    calibration: Calibration | None = None,
    extra_entries: Sequence[Entry] = (),
    progress: SweepProgress | None = None,
) -> MeasuredSweep:
    """Calibrate, sweep and compare: the baseline against each of ``names`` in interleaved rounds, measured as
    ``options`` say (:class:`~gnnbench.measure.sweep.options.SweepOptions`).

    Args:
        base: The baseline configuration.
        names: Entries to measure against it (``"a+b"``: together; ``None``: every registered one).
        out_dir: The sweep's folder: the calibration's runs, each run's result and the manifest.
        options: How the sweep measures: rounds, stopping rule, calibration and budgets, derivation, processes,
            resuming, executor, what the manifest records.
        calibration: A calibration made elsewhere (``tune`` makes one for all its rounds): no calibration runs
            here, ``base`` is taken as already calibrated, and the rows are judged against its target. The
            manifest records only a calibration whose runs are in ``out_dir``.
        extra_entries: Entries of the caller's own, measured in the same rounds (``tune``'s swap moves).
        progress: Receives the runs as they start and end (default: nothing is reported).

    Raises:
        ValueError: for an ``also_measured`` name this sweep cannot derive (before anything runs), or a base
            configuration or options the sweep refuses.
    """
    progress = progress or SweepProgress()
    names = list(names) if names is not None else None
    check_also_measured(base, names, list(options.also_measured))  # refused before the calibration's minutes
    own, own_runs = None, []
    if calibration is None:
        progress.calibration_started(options.calibration_runs)
        own, found = run_calibration(base, out_dir, options, progress=progress.calibration_run)
        own_runs = list(found)
        progress.calibrated(own)
        if own is not None:
            base = own.apply(base)
    sweep = _Plan.of(base, names, options, calibration or own, extra_entries)

    def judge(results: list[RunResult]) -> Comparison:
        return compare(
            own_runs + results,
            target_acc=options.target_acc,
            calibration=calibration,
            rule=sweep.rule,
            equivalence_margin=options.equivalence_margin,
        )

    results = _rounds(sweep.entries, out_dir, options, progress, own_runs, judge, sweep.rule, calibration=own)
    comparison = judge(list(results))
    best = None
    if options.best_set:
        best = _measure_best_set(comparison, base, out_dir, sweep, options, progress)
    if options.record_outcome:
        store_outcome(out_dir, comparison, best)
    return MeasuredSweep(comparison, results, sweep.entries, base, sweep.calibration, own_runs, best)


@dataclass(frozen=True)
class _Plan:
    """What a sweep measures once its calibration is known: the entries, the calibration its rows are judged
    against, the target fixed before the rounds (``None``: none, then no stopping rule) and the rule."""

    entries: list[Entry]
    calibration: Calibration | None
    target: float | None
    rule: StoppingRule | None

    @classmethod
    def of(cls, base, names, options: SweepOptions, cal: Calibration | None, extra_entries) -> _Plan:
        # the rule needs a target fixed before the rounds (an uncalibrated one moves with every baseline round)
        if options.target_acc is not None:
            target = options.target_acc
        else:
            target = cal.target if cal is not None else None
        derivable = (
            options.derive and cal is not None and cal.steps_per_epoch and cal.median_steps_to_target is not None
        )
        entries = sweep_entries(
            base,
            names,
            repeats=options.repeats,
            aa=options.aa,
            include_all_recommended=options.include_all_recommended,
            derive_per_epoch=cal.steps_per_epoch if derivable else None,
            also_measured=list(options.also_measured),
            target=target,
            accuracy_rounds=options.fixed_accuracy_rounds(target is not None),
            interleave=options.interleave,
        )
        return cls(entries + list(extra_entries), cal, target, _rule(options, target is not None))


def _rule(options: SweepOptions, fixed_target: bool) -> StoppingRule | None:
    """The stopping rule the options ask for, where it can apply (2 rounds or more, a target fixed before)."""
    if options.stop_when_settled and options.repeats >= 2 and fixed_target:
        return StoppingRule.for_repeats(options.repeats)
    return None


def _rounds(
    entries: list[Entry],
    folder: str | Path,
    options: SweepOptions,
    progress: SweepProgress,
    seed_runs: list[RunResult],
    judge,
    rule: StoppingRule | None,
    *,
    calibration: Calibration | None,
) -> SweepResults:
    """``entries`` measured in interleaved rounds in ``folder`` (:func:`run_sweep` under ``options``), reported
    through ``progress`` (``seed_runs``: the runs whose durations seed its estimate), stopping settled rows by
    ``judge`` under ``rule``."""
    progress.sweep_started(entries, seed_runs)
    try:
        return run_sweep(
            entries,
            folder,
            options,
            calibration=calibration,
            progress=progress.sweep_run,
            rule=rule,
            after_round=_settled_after_round(judge) if rule is not None else None,
        )
    finally:
        progress.sweep_ended()


def _settled_after_round(judge):
    """The stopping rule's hook of :func:`run_sweep`: the rows whose verdict is settled after a round (by
    ``judge``, the sweep's comparison of the results so far), and whether every row's is."""

    def after_round(done: list[RunResult]) -> tuple[set[str], bool]:
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
    sweep: _Plan,
    options: SweepOptions,
    progress: SweepProgress,
) -> BestSetOutcome:
    """The best set chosen from ``comparison`` and measured against the baseline in rounds of its own, on the
    set's seed stream, under a stopping rule of its own (a family of one row), in ``out_dir/best-set``."""
    choice = choose(comparison, base)
    _record_choice(out_dir, choice)
    if not choice.measurable:
        progress.best_set_chosen(choice, False)
        return BestSetOutcome(choice)
    if sweep.target is None:
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
        repeats=options.repeats,
        aa=False,
        include_all_recommended=False,
        target=sweep.target,
        accuracy_rounds=options.fixed_accuracy_rounds(True),
    )
    rule = _rule(options, True)

    def judge(results: list[RunResult]) -> Comparison:
        return compare(
            results,
            target_acc=options.target_acc,
            calibration=sweep.calibration,
            rule=rule,
            equivalence_margin=options.equivalence_margin,
        )

    results = _rounds(entries, store_dir(out_dir), options, progress, [], judge, rule, calibration=sweep.calibration)
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
