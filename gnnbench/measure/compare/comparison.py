"""The comparison of a sweep (``gnnbench compare``, the report, diagnose ``--verify``, tune): per configuration,
paired by round against the baseline of the same sweep, the speedups of the step, epoch and time-to-accuracy
clocks with run-level intervals (:func:`gnnbench.measure.stats.intervals.paired_ratio`), the setup clock, the paired
accuracy delta at convergence and the noise floor: one :class:`~gnnbench.measure.compare.rows.ComparisonRow` per
configuration.

The pieces of a row live beside this module: :mod:`~gnnbench.measure.compare.rows` (the row and its ratios),
:mod:`~gnnbench.measure.compare.paired` (runs paired by round), :mod:`~gnnbench.measure.compare.time_to_accuracy` (measured with
censoring, or derived), :mod:`~gnnbench.measure.compare.accuracy` (at convergence or at equal steps),
:mod:`~gnnbench.measure.compare.distributed` (multi-rank figures), :mod:`~gnnbench.measure.compare.family` (family-wise
verdicts, the ranking, what pays) and :mod:`~gnnbench.measure.compare.identity` (results of one sweep only). Their public
names are imported from those modules inside the room, and from :mod:`gnnbench.measure.compare` outside it.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gnnbench import registry
from gnnbench.flags import format_reasons
from gnnbench.measure.compare.accuracy import (
    acc_verdict,
    converged_test,
    paired_accuracy,
    paired_at_target,
    time_to_accuracy_run,
)
from gnnbench.measure.compare.calibration import CALIBRATION, Calibration, calibrate
from gnnbench.measure.compare.crossing import seconds_to
from gnnbench.measure.compare.distributed import compression_accuracy, distributed_summary, partition_efficiency
from gnnbench.measure.compare.factors import convergence_judged_tta, factor_judged_tta, steps_equivalence, tta_factors
from gnnbench.measure.compare.family import (
    family_wise,
    in_family,
    no_effect_verdicts,
    rank_key,
    round_log_ratios,
)
from gnnbench.measure.compare.identity import MixedSweepError, identity_problem
from gnnbench.measure.compare.interleaved import interleaved_pairs, interleaved_step, pair_design
from gnnbench.measure.compare.paired import by_round, end_to_end, epoch_time, mean_interval, ratio_over_rounds
from gnnbench.measure.compare.paired_floor import (
    clock_noise_sd,
    floor_of_sd,
    floor_primary,
    pair_sd_of,
    pair_sds,
    row_floors,
)
from gnnbench.measure.compare.rows import (
    AA_DUET_LABEL,
    AA_INPROCESS_LABEL,
    AA_LABEL,
    BASELINE,
    E2E_BASELINE,
    EPOCH_TIME,
    JUDGED_FACTORS,
    JUDGED_PER_STEP,
    MEASURED_SUFFIX,
    TIME_TO_ACCURACY,
    ComparisonRow,
    PairedRatio,
    TimeToAccuracy,
    TtaFactors,
)
from gnnbench.measure.compare.time_to_accuracy import derived_tta, measured_tta
from gnnbench.measure.run import RunResult
from gnnbench.measure.stats import Stop, StoppingRule, noise_floor, settled

__all__ = ["Comparison", "compare", "compare_rows", "sampled_summary"]


@dataclass
class Comparison:
    """A sweep's comparison: one row per configuration, the noise floor and the accuracy target."""

    rows: list[ComparisonRow]  # the baseline first, then ranked (rank_key)
    rounds: int  # baseline rounds measured
    target: float | None  # validation target for time to accuracy
    target_source: str  # how the target was chosen
    floors: dict[str, float]  # metric -> smallest resolvable factor (from the baseline's process spread)
    aa: ComparisonRow | None = None  # the A/A row, when the sweep ran one
    calibration: dict[str, Any] | None = None  # the target's calibration (Calibration.to_dict()), when one ran
    family: str = ""  # how significance is controlled across the rows, in words
    # derived rows also trained to the target: their derived and measured speedups and whether they agree
    derived_checks: list[dict[str, Any]] = field(default_factory=list)
    rule: dict[str, Any] | None = None  # the stopping rule the sweep ran under (StoppingRule.to_dict())
    stops: dict[str, dict | None] = field(default_factory=dict)  # per family row: its Stop, or None (open)
    clock_sd: float | None = None  # the clock's paired noise (log sd) no row's per-round sd is taken below
    equivalence_margin: float | None = None  # the margin the sweep declared for steps to the target (None: none)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as ``compare --json`` prints it: every field, each row as :meth:`ComparisonRow.to_dict`."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "rows":
                out[f.name] = [r.to_dict() for r in value]
            elif f.name == "aa":
                out[f.name] = value.to_dict() if value is not None else None
            else:
                out[f.name] = copy.deepcopy(value)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Comparison:
        """A comparison from :meth:`to_dict` (``compare --json``)."""
        return cls(
            **{
                **d,
                "rows": [ComparisonRow.from_dict(r) for r in d["rows"]],
                "aa": ComparisonRow.from_dict(d["aa"]) if d.get("aa") is not None else None,
            }
        )


def sampled_summary(runs: list[RunResult]) -> dict[str, float] | None:
    """What a row's batches sampled (the neighbour explosion), medians over its runs: ``nodes_per_batch``,
    ``edges_per_batch`` and ``coverage`` (the share of the graph's nodes a batch's neighbourhood holds);
    ``None`` for runs that record none (full batch, subgraph sources)."""
    blocks = [r.sampled for r in runs if r.sampled]
    if not blocks:
        return None
    return {
        k: statistics.median(float(b[k]) for b in blocks) for k in ("nodes_per_batch", "edges_per_batch", "coverage")
    }


def compare(
    results: list[RunResult],
    *,
    target_acc: float | None = None,
    calibration: Calibration | None = None,
    rule: StoppingRule | None = None,
    equivalence_margin: float | None = None,
) -> Comparison:
    """Per configuration, paired by round against the sweep's baseline: speedups of the step, epoch and
    time-to-accuracy clocks with run-level intervals, the setup clock, and the paired accuracy delta at convergence.

    Args:
        results: Sweep results (placed: ``label`` and ``round`` set); calibration runs (label ``calibration``)
            fix the target (:func:`gnnbench.measure.compare.calibration.calibrate`) and are not rows.
        target_acc: Validation target for time to accuracy, replacing the calibrated one (without either, the
            baseline's own plateau minus 1 pp: :func:`_target`).
        calibration: A calibration made elsewhere (tune calibrates once for all its rounds); it replaces the
            calibration runs among ``results``.
        rule: The stopping rule the sweep ran under: its stops are replayed from the results (:func:`_stops`)
            into :attr:`Comparison.stops` and the final significance is the rule's. Under ``paired_floor`` (or,
            without a rule, with a margin declared) rows are judged against floors of the sweep's own statistics
            (:func:`_paired_floors`).
        equivalence_margin: The margin the sweep declared before its rounds (``sweep.json``, e.g. 0.10): a row
            whose steps to the target are shown equivalent to the baseline's within it is judged by its time
            per step (:func:`_judged`). ``None``: every row keeps its measured (or derived) time to accuracy.

    Raises:
        MixedSweepError: when the results are not one sweep (:func:`identity_problem` names what differs).
        ValueError: when there is no measured baseline.
    """
    by_label = _runs_by_label(results)
    calibration_runs = by_label.pop(CALIBRATION, [])
    base = _measured_baseline(by_label.get(BASELINE, []))
    meaningless = any(r.graph is not None and r.graph.labels_substituted for r in base.values())
    if calibration is None and calibration_runs:
        calibration = calibrate(calibration_runs, target_acc=target_acc)
    target, source = _target(base, target_acc, calibration, meaningless)
    rounds = sorted(base)
    floors, base_tta = _baseline_floors(base, rounds, target)
    rows = _rows(by_label, base, target, _steps_to_target(calibration, target), equivalence_margin, meaningless)
    paired = rule.paired_floor if rule is not None else equivalence_margin is not None
    clock_sd, pair_sd = _paired_floors(rows, rounds, floors) if paired else (None, None)
    stops = _stops(rule, paired, rows, rounds, base, base_tta, target, equivalence_margin)
    family = family_wise(rows, rule, stops)
    no_effect_verdicts(rows, equivalence_margin, clock_sd, pair_sd=pair_sd)
    return Comparison(
        _ranked(rows),
        len(rounds),
        target,
        source,
        floors,
        next((r for r in rows if r.label == AA_LABEL), None),
        calibration.to_dict() if calibration is not None else None,
        family,
        _derived_checks(rows),
        rule.to_dict() if rule is not None else None,
        {k: (v.to_dict() if v is not None else None) for k, v in (stops or {}).items()},
        clock_sd,
        equivalence_margin,
    )


def _runs_by_label(results: list[RunResult]) -> dict[str, list[RunResult]]:
    """The sweep's results by label, labels in the order they first come.

    Raises:
        MixedSweepError: when the results are not one sweep (:func:`identity_problem` names what differs).
        ValueError: for a result without a sweep label.
    """
    problem = identity_problem(results)
    if problem:
        raise MixedSweepError(
            f"these results are not one sweep, so they are not compared: {problem}; compare "
            "each sweep's folder on its own"
        )
    by_label: dict[str, list[RunResult]] = {}
    for r in results:
        if r.label is None:
            raise ValueError(f"a result without a sweep label cannot be compared (config seed {r.config.get('seed')})")
        by_label.setdefault(r.label, []).append(r)
    return by_label


def _measured_baseline(base_runs: list[RunResult]) -> dict[int, RunResult]:
    """The baseline's measured runs by round (:func:`by_round`), what every row is paired with.

    Raises:
        ValueError: when no baseline run was measured, with the runs' warnings (or why they did not run).
    """
    base = by_round(base_runs)
    if not base:
        why = [w for r in base_runs for w in r.warnings] or [str(r.unavailable or r.error) for r in base_runs]
        raise ValueError(
            "the sweep has no measured baseline run to compare against" + (f": {'; '.join(why)}" if why else "")
        )
    return base


def _target(
    base: dict[int, RunResult], target_acc: float | None, calibration: Calibration | None, meaningless: bool
) -> tuple[float | None, str]:
    """The validation target for time to accuracy and how it was chosen: none when the graph's labels were
    substituted (``meaningless``: only the clocks mean anything), else ``target_acc`` when given, else the
    calibration's. Without either the target falls back to the measured baseline's own plateau minus 1 pp, and
    the source says that the baseline then reaches it by construction."""
    if meaningless:  # a loaded graph without labels: gnnbench made some up, so only the clocks mean anything
        return None, "none: the graph's labels were substituted (accuracy is meaningless), epoch time only"
    if target_acc is not None:
        return target_acc, "given (--target-acc)"
    if calibration is not None and calibration.target is not None:
        return calibration.target, calibration.source
    target = calibrate(list(base.values())).target
    source = (
        "not calibrated: the measured baseline's own median plateau minus 1 pp, read from the runs it "
        "judges (run compare with --calibration-runs >= 1 for a target fixed in advance)"
        if target is not None
        else "no validation curve in these results"
    )
    return target, source


def _baseline_floors(
    base: dict[int, RunResult], rounds: list[int], target: float | None
) -> tuple[dict[str, float], list[float | None]]:
    """The noise floors of the baseline's clocks across its ``rounds`` (metric -> smallest resolvable factor:
    ``step``, ``epoch``, and ``time_to_accuracy`` when every round reached the target), and its seconds to the
    target per round (``None`` where not reached)."""
    floors = {
        "step": noise_floor([base[k].step_seconds.median for k in rounds]),
        "epoch": noise_floor([epoch_time(base[k]) for k in rounds]),
    }
    base_tta = [seconds_to(base[k], target) for k in rounds]
    if target is not None and all(t is not None for t in base_tta):
        floors["time_to_accuracy"] = noise_floor(base_tta)
    return floors, base_tta


def _steps_to_target(calibration: Calibration | None, target: float | None) -> float | None:
    """A derived row's steps to the target: the calibration's, for the target this comparison reads (else
    ``None``)."""
    if calibration is not None and target is not None and calibration.target == target:
        return calibration.median_steps_to_target
    return None


def _rows(
    by_label: dict[str, list[RunResult]],
    base: dict[int, RunResult],
    target: float | None,
    steps_to_target: float | None,
    margin: float | None,
    meaningless: bool,
) -> list[ComparisonRow]:
    """One row per label (:func:`_row`), in the order the labels came, paired by round against the baseline
    ``base``. An overlap entry (end-to-end timing) is paired with the end-to-end copy of the baseline; that copy
    with the baseline itself (what per-phase synchronization costs), never with itself. With the graph's labels
    substituted (``meaningless``) no accuracy verdict stands. The distributed rows' partition efficiency and the
    compression rows' accuracy against dense data parallel are set last (they read other rows)."""
    e2e_base = by_round(by_label.get(E2E_BASELINE, []))
    rows = [
        _row(
            label,
            runs,
            e2e_base if end_to_end(runs) and e2e_base and label != E2E_BASELINE else base,
            target,
            steps_to_target,
            margin,
        )
        for label, runs in by_label.items()
    ]
    if meaningless:
        for row in rows:
            if row.acc_verdict:
                row.acc_verdict = "n/a: labels substituted"
    partition_efficiency(rows, by_label)
    compression_accuracy(rows, by_label)
    return rows


def _paired_floors(
    rows: list[ComparisonRow], rounds: list[int], floors: dict[str, float]
) -> tuple[float | None, dict[str, float] | None]:
    """Judge the rows against floors of the sweep's own statistics (:mod:`gnnbench.measure.compare.paired_floor`),
    in place: no family or A/A row's per-round sd is taken below the clock's paired noise (a paired row's below
    its pair design's noise, where known), and their per-row significance follows. ``floors["paired_clock"]``
    (and ``floors["paired_clock_one_process"]``, ``floors["paired_clock_duet"]``) is that noise's floor at the
    sweep's rounds.

    Returns:
        ``(clock_sd, pair_sds)``: the clock's paired noise (log sd) across processes (``None`` where not known),
        and per pair design the paired noise of its rows (:func:`pair_sds`; ``None``: no pairs).
    """
    clock_sd = clock_noise_sd(rows, rounds)
    sds = pair_sds(rows, rounds)
    for row in rows:
        if in_family(row.label) or row.label in (AA_LABEL, AA_INPROCESS_LABEL, AA_DUET_LABEL):
            own = pair_sd_of(row, sds)
            floor_primary(row, own if own is not None else clock_sd)
            row.significant = _significant(row.primary_ratio, row.tta_speedup)
    floors["paired_clock"] = floor_of_sd(clock_sd, len(rounds))
    if "interleaved" in sds:
        floors["paired_clock_one_process"] = floor_of_sd(sds["interleaved"], len(rounds))
    if "duet" in sds:
        floors["paired_clock_duet"] = floor_of_sd(sds["duet"], len(rounds))
    return _known(clock_sd), sds or None


def _known(sd: float) -> float | None:
    """``sd``, or ``None`` for nan (not known)."""
    return sd if sd == sd else None


def _stops(
    rule: StoppingRule | None,
    paired: bool,
    rows: list[ComparisonRow],
    rounds: list[int],
    base: dict[int, RunResult],
    base_tta: list[float | None],
    target: float | None,
    margin: float | None,
) -> dict[str, Stop | None] | None:
    """The stops of ``rule`` replayed from the rows' paired log ratios per round
    (:func:`gnnbench.measure.stats.sequential.settled`): per family row its Stop, or ``None`` while open; ``None``
    without a rule. Under a ``paired`` floor each row is judged against the floor of its own statistic
    (:func:`row_floors`), and futility waits for equivalence within ``margin`` only where "no effect beyond the
    margin" can be tested (:func:`no_effect_verdicts`); under the rule before, every row against the baseline's
    floor at each look (:func:`_floor_by_look`)."""
    if rule is None:
        return None
    if not paired:
        floor_by_look = _floor_by_look(rule, base, rounds, base_tta, target)
        return settled(rule, round_log_ratios(rows, rounds), floor_by_look)
    min_sd, per_row, row_min_sd = row_floors(rows, rounds, rule.looks, rule.max_rounds, base_tta)
    untested = [r.label for r in rows if r.censored or r.primary_ratio is None]
    return settled(
        rule,
        round_log_ratios(rows, rounds),
        None,
        row_floors=per_row,
        min_sd=min_sd,
        margin=margin,
        untested=untested,
        row_min_sd=row_min_sd,
    )


def _floor_by_look(
    rule: StoppingRule,
    base: dict[int, RunResult],
    rounds: list[int],
    base_tta: list[float | None],
    target: float | None,
) -> dict[int, float]:
    """Each look's noise floor from the baseline rounds up to it (what the sweep saw then): of its time to
    accuracy when those rounds all reached the target, else of its epoch time."""
    floor_by_look = {}
    for k in rule.looks:
        if k > len(rounds):
            break
        tta_k = base_tta[:k]
        primary_base = (
            tta_k
            if all(t is not None for t in tta_k) and target is not None
            else [epoch_time(base[j]) for j in rounds[:k]]
        )
        floor_by_look[k] = noise_floor(primary_base, rounds=rule.max_rounds)
    return floor_by_look


def _ranked(rows: list[ComparisonRow]) -> list[ComparisonRow]:
    """The baseline's row first, then the others ranked (:func:`rank_key`)."""
    head = [r for r in rows if r.label == BASELINE]
    return head + sorted((r for r in rows if r.label != BASELINE), key=rank_key)


def _derived_checks(rows: list[ComparisonRow]) -> list[dict[str, Any]]:
    """Each derived row that was also trained to the target (``"<label> (measured)"``): both speedups, and
    whether they agree (the measured point estimate inside the derived interval, or the two intervals
    overlapping)."""
    by = {r.label: r for r in rows if r.status == "ok"}
    checks = []
    for label, measured in by.items():
        if not label.endswith(MEASURED_SUFFIX) or label[: -len(MEASURED_SUFFIX)] not in by:
            continue
        derived = by[label[: -len(MEASURED_SUFFIX)]]
        d, m = derived.tta_speedup, measured.tta_speedup
        if not derived.derived or not d or not m:
            continue
        if d.low != d.low or m.low != m.low:  # one round: no interval to agree within
            inside = agrees = None
        else:
            inside = d.low <= m.ratio <= d.high
            agrees = inside or not (m.high < d.low or d.high < m.low)
        checks.append(
            {
                "label": derived.label,
                "derived": {"ratio": d.ratio, "low": d.low, "high": d.high},
                "measured": {"ratio": m.ratio, "low": m.low, "high": m.high},
                "measured_inside": inside,
                "agrees": agrees,
                "measured_reached": measured.tta_reached,
            }
        )
    return checks


def _changes_work(optimizations: list[str]) -> bool:
    return any(registry.REGISTRY[n].changes_work for n in optimizations if n in registry.REGISTRY)


def _significant(primary: PairedRatio | None, tta: TimeToAccuracy | None) -> bool:
    """Whether the primary ratio is significant (per row): a bound only in the direction it bounds (an upper
    bound on a speedup can show a slowdown), a bound of unknown direction never."""
    significant = bool(primary and primary.significant)
    if tta is not None and tta.bound == "at most":
        return significant and primary.high < 1
    if tta is not None and tta.bound == "at least":
        return significant and primary.low > 1
    if tta is not None and tta.bound == "unknown":
        return False
    return significant


def _judged(
    label: str,
    b: list[RunResult],
    m: list[RunResult],
    target: float | None,
    tta: TimeToAccuracy | None,
    same_work: bool,
    derived: bool,
    margin: float | None,
):
    """A row's time-to-accuracy factors, and the ratio it is judged by: ``(factors, judged, measured)`` where
    ``measured`` is its measured ratio when ``judged`` replaced it (steps shown equivalent), else ``None``.

    With a declared ``margin`` (the sweep's equivalence margin), a family row that does not change the work per
    step, is not derived and reached the target in every round, and whose paired steps to the target are shown
    equivalent to the baseline's within the margin (TOST, :func:`steps_equivalence`), is judged by its time per
    step times the baseline's steps to the target (:func:`convergence_judged_tta`). Such a row whose steps are not
    shown equivalent (or with no margin declared) but whose every round has a pair is judged by its factors: its
    own steps to the target times its paired time per step, against the baseline's read the same way
    (:func:`factor_judged_tta`). Either way its measured time to accuracy stays in ``measured_tta_speedup``; a
    row without pairs keeps its measured (or derived) one."""
    factors = tta_factors(b, m, target, changes_work=not same_work, derived=derived) if tta is not None else None
    if factors is None or derived or not same_work or tta.bound is not None or not in_family(label):
        return factors, tta, None
    eq = steps_equivalence(factors, margin) if margin is not None else None
    if eq is not None:
        factors.equivalence = eq.to_dict()
        judged = convergence_judged_tta(b, m, target, eq) if eq.equivalent else None
        if judged is not None:
            factors.judged_by = JUDGED_PER_STEP
            return factors, judged, tta
    judged = factor_judged_tta(b, m, target)
    if judged is None:
        return factors, tta, None
    factors.judged_by = JUDGED_FACTORS
    return factors, judged, tta


def _row(
    label: str,
    runs: list[RunResult],
    base: dict[int, RunResult],
    target: float | None,
    steps_to_target: float | None = None,
    margin: float | None = None,
) -> ComparisonRow:
    """The row of the configuration ``label`` (its ``runs``) against the baseline runs ``base`` (by round): over
    the rounds both measured, its clocks' ratios (the step, the epoch, and time to accuracy as judged by
    :func:`_judged`) and its accuracy (:func:`_accuracy_fields`), with what its runs recorded
    (:func:`_record_fields`). A row with no measured run, no round shared with the baseline or no round that
    trained to the plateau keeps only its status and the reason."""
    derived = bool(runs[0].derived)
    row = ComparisonRow(
        label=label,
        optimizations=list(runs[0].optimizations or []),
        derived=derived,
        timing_mode="end_to_end" if end_to_end(runs) else "sync",
    )
    mine = by_round(runs)
    if not mine:
        return _unmeasured(row, runs)
    rounds = [k for k in sorted(mine) if k in base]
    if not rounds:
        row.status, row.reason = "not measured", "no round shared with a measured baseline run"
        return row
    b = [base[k] for k in rounds]
    m = [mine[k] for k in rounds]
    same_work = not _changes_work(row.optimizations)
    step = interleaved_step(m) or ratio_over_rounds(
        [r.step_seconds.median for r in b], [r.step_seconds.median for r in m]
    )
    epoch = ratio_over_rounds([epoch_time(r) for r in b], [epoch_time(r) for r in m])
    tta = derived_tta(b, m, steps_to_target) if derived else measured_tta(b, m, target)
    factors, tta, measured_ratio = _judged(label, b, m, target, tta, same_work, derived, margin)
    acc, check = _accuracy_rounds(label, b, m, derived)
    if not acc:
        row.status, row.reason = "not measured", "no round trained to the plateau: accuracy cannot be read"
        return row
    return dataclasses.replace(
        row,
        status="ok",
        rounds=len(rounds),
        **_accuracy_fields(b, m, acc, check, derived),
        **_clock_fields(m, step, epoch, same_work),
        **_tta_fields(tta, factors, measured_ratio),
        **_primary_fields(tta, epoch),
        primary_rounds=rounds,  # the rounds primary.log_ratios are aligned with (the stopping rule's input)
        **_record_fields(m),
    )


def _unmeasured(row: ComparisonRow, runs: list[RunResult]) -> ComparisonRow:
    """``row`` for a configuration none of whose runs measured a step: ``not measured`` with the runs' warnings
    when some run finished, else the first run's status (unavailable, failed) with its reasons."""
    if any(r.ok for r in runs):
        warnings = [w for r in runs for w in r.warnings]
        row.status, row.reason = "not measured", "; ".join(warnings) or "no measured steps"
    else:
        reasons = runs[0].unavailable or {"error": runs[0].error or "failed"}
        row.status, row.reason = runs[0].status, format_reasons(reasons)
    return row


def _accuracy_rounds(label: str, b: list[RunResult], m: list[RunResult], derived: bool) -> tuple[list[int], bool]:
    """Which of the paired rounds (baseline ``b``, row ``m``) a row's accuracy is read from, and whether the row is
    a derived row's check. Accuracy is read from the rounds that trained to the plateau (time-to-accuracy rounds
    stop at the target); a derived row's from every round; a derived row's check (``"<label> (measured)"``,
    whose runs all train to the target only) from every round too, at equal steps."""
    check = label.endswith(MEASURED_SUFFIX) and all(time_to_accuracy_run(r) for r in m)
    if derived or check:
        return list(range(len(m))), check
    return [i for i in range(len(m)) if not (time_to_accuracy_run(b[i]) or time_to_accuracy_run(m[i]))], check


def _accuracy_fields(
    b: list[RunResult], m: list[RunResult], acc: list[int], check: bool, derived: bool
) -> dict[str, Any]:
    """A row's accuracy fields over the paired rounds ``acc`` (:func:`_accuracy_rounds`): at convergence
    (:func:`paired_accuracy`), or at the target for a derived row's ``check`` (:func:`paired_at_target`); the
    point estimate says how many later rounds stopped at the target and measured time to accuracy only."""
    later = 0 if check else len(m) - len(acc)
    ma = [m[i] for i in acc]
    accuracy = (
        paired_at_target([b[i] for i in acc], ma)
        if check
        else paired_accuracy([b[i] for i in acc], ma, derived=derived)
    )
    acc_point = accuracy.point
    if later:
        acc_point += (
            f" (over the {len(acc)} rounds trained to the plateau; {later} later round(s) stopped at the "
            "target and measured time to accuracy only)"
        )
    deltas = accuracy.deltas
    d_mean, d_low, d_high = mean_interval(deltas)
    return {
        "acc_point": acc_point,
        "converged": accuracy.converged,
        "convergence": accuracy.convergence,
        "accuracy_rounds": len(acc),
        "test_acc": statistics.mean(converged_test(y) for y in ma),
        "acc_delta": d_mean,
        "acc_delta_low": d_low,
        "acc_delta_high": d_high,
        "acc_delta_spread": (max(deltas) - min(deltas)) if len(deltas) > 1 else 0.0,
        "acc_verdict": acc_verdict(d_low, d_high),
    }


def _clock_fields(
    m: list[RunResult], step: PairedRatio | None, epoch: PairedRatio | None, same_work: bool
) -> dict[str, Any]:
    """A row's step, epoch and setup clocks (medians over its runs ``m``) and their paired ratios: the step's
    only where the work per step is the same, and so its multi-rank efficiency (:func:`distributed_summary`)."""
    return {
        "interleaved": interleaved_pairs(m) is not None,
        "pair_design": pair_design(m),
        "same_work": same_work,
        "step_ms": 1e3 * statistics.median(r.step_seconds.median for r in m),
        "step_speedup": step if same_work else None,
        "epoch_s": statistics.median(epoch_time(r) for r in m),
        "epoch_speedup": epoch,
        "setup_s": statistics.median(r.setup_clock for r in m),
        "distributed": distributed_summary(m, step if same_work else None),  # efficiency needs the same work
    }


def _tta_fields(
    tta: TimeToAccuracy | None, factors: TtaFactors | None, measured_ratio: TimeToAccuracy | None
) -> dict[str, Any]:
    """A row's time to accuracy as judged (:func:`_judged`), its factors, and its measured ratio where the judged
    one replaced it."""
    return {
        "tta_s": tta.seconds if tta else None,
        "tta_reached": tta.reached_text if tta else None,
        "tta_speedup": tta,
        "censored": bool(tta and tta.censored),
        "tta_note": tta.note if tta else None,
        "factors": factors,
        "measured_tta_speedup": measured_ratio,
    }


def _primary_fields(tta: TimeToAccuracy | None, epoch: PairedRatio | None) -> dict[str, Any]:
    """A row's primary speedup: time to accuracy where there is one, else the epoch time; with its interval and
    per-row significance (:func:`_significant`)."""
    primary, primary_name = (tta, TIME_TO_ACCURACY) if tta is not None else (epoch, EPOCH_TIME)
    return {
        "primary": primary_name,
        "speedup": primary.ratio if primary else None,
        "speedup_low": primary.low if primary else None,
        "speedup_high": primary.high if primary else None,
        "significant": _significant(primary, tta),
    }


def _record_fields(m: list[RunResult]) -> dict[str, Any]:
    """What a row's runs ``m`` recorded besides the clocks: why they stopped, what their batches sampled, the
    phases, compilation, device busy share, host-to-device bytes and per-phase device times."""
    return {
        "stop_reasons": dict(Counter(r.stop_reason or "?" for r in m)),
        "sampled": sampled_summary(m),
        "seeds": len(m),
        "phases": {p: v.median for p, v in (m[0].phases or {}).items()},
        "compile": m[0].compile.to_dict() if m[0].compile is not None else None,
        "device_busy": (
            statistics.mean(r.device_busy_fraction for r in m)
            if all(r.device_busy_fraction is not None for r in m)
            else None
        ),
        "h2d_bytes_per_batch": m[0].transfer.bytes_h2d_per_batch if m[0].transfer is not None else None,
        "device_phase_ms": (
            {p: statistics.median(r.device_phase_ms[p].median for r in m) for p in m[0].device_phase_ms}
            if all(r.device_phase_ms for r in m)
            else None
        ),
    }


def compare_rows(results: list[RunResult], *, target_acc: float | None = None) -> list[ComparisonRow]:
    """The rows of :func:`compare` (baseline first, then ranked by the primary speedup)."""
    return compare(results, target_acc=target_acc).rows
