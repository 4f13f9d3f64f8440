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
names are importable from here too.
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
    NO_COST_PP,
    acc_verdict,
    converged_test,
    equal_steps_test,
    paired_accuracy,
    paired_at_target,
    time_to_accuracy_run,
)
from gnnbench.measure.compare.calibration import CALIBRATION, Calibration, calibrate
from gnnbench.measure.compare.crossing import seconds_to
from gnnbench.measure.compare.distributed import compression_accuracy, distributed_summary, partition_efficiency
from gnnbench.measure.compare.factors import convergence_judged_tta, steps_equivalence, tta_factors
from gnnbench.measure.compare.family import (
    family_wise,
    in_family,
    measured_best,
    no_effect_text,
    no_effect_verdicts,
    pareto_front,
    rank_key,
    round_log_ratios,
    tradeoffs,
    verdict_summary,
)
from gnnbench.measure.compare.identity import IDENTITY_KEYS, MixedSweepError, identity_problem
from gnnbench.measure.compare.interleaved import interleaved_pairs, interleaved_step
from gnnbench.measure.compare.paired import by_round, end_to_end, epoch_time, mean_interval, ratio_over_rounds
from gnnbench.measure.compare.paired_floor import clock_noise_sd, floor_of_sd, floor_primary, reads_pairs, row_floors
from gnnbench.measure.compare.rows import (
    AA_INPROCESS_LABEL,
    AA_LABEL,
    BASELINE,
    E2E_BASELINE,
    EPOCH_TIME,
    FLOOR_KEY,
    JUDGED_PER_STEP,
    MEASURED_SUFFIX,
    STATIC_LIST,
    TIME_TO_ACCURACY,
    ComparisonRow,
    PairedRatio,
    TimeToAccuracy,
)
from gnnbench.measure.compare.time_to_accuracy import derived_tta, measured_tta
from gnnbench.measure.run.results import RunResult
from gnnbench.measure.stats.intervals import noise_floor
from gnnbench.measure.stats.sequential import StoppingRule, settled

__all__ = [
    "Comparison",
    "ComparisonRow",
    "PairedRatio",
    "TimeToAccuracy",
    "compare",
    "compare_rows",
    "distributed_summary",
    "BASELINE",
    "AA_LABEL",
    "E2E_BASELINE",
    "MEASURED_SUFFIX",
    "FLOOR_KEY",
    "in_family",
    "identity_problem",
    "MixedSweepError",
    "IDENTITY_KEYS",
    "NO_COST_PP",
    "converged_test",
    "equal_steps_test",
    "time_to_accuracy_run",
    "sampled_summary",
    "mean_interval",
    "measured_best",
    "tradeoffs",
    "pareto_front",
    "rank_key",
    "STATIC_LIST",
    "no_effect_text",
    "verdict_summary",
]


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
    """Per configuration, paired by round against the baseline of the same sweep: speedups of the step,
    epoch and time-to-accuracy clocks with run-level intervals, the setup clock, and the paired accuracy delta
    at convergence.

    Args:
        results: Sweep results (placed: ``label`` and ``round`` set); calibration runs (label ``calibration``)
            fix the target (:func:`gnnbench.measure.compare.calibration.calibrate`) and are not rows.
        target_acc: Validation target for time to accuracy, replacing the calibrated one.
        calibration: A calibration made elsewhere (tune calibrates once for all its rounds); it replaces the
            calibration runs among ``results``.
        rule: The stopping rule the sweep ran under (rounds that stop when decided): its stops are replayed
            from the results (:func:`gnnbench.measure.stats.sequential.settled`) into :attr:`Comparison.stops` and the
            final significance is the rule's.
        equivalence_margin: The margin the sweep declared before its rounds (``sweep.json``, e.g. 0.10): a row
            that does not change the work per step, is not derived and reached the target in every round, and
            whose paired steps to the target are shown equivalent to the baseline's within it (TOST,
            :func:`gnnbench.measure.compare.factors.steps_equivalence`), is judged by its time per step times the
            baseline's steps to the target (:func:`gnnbench.measure.compare.factors.convergence_judged_tta`); its
            measured time to accuracy stays in ``measured_tta_speedup``. ``None``: no margin was declared, every
            row keeps its measured (or derived) time to accuracy.

    A sweep under a rule with ``paired_floor`` (or, without a rule, one that declared a margin) is judged against
    floors of its own statistics (:mod:`gnnbench.measure.compare.paired_floor`): no row's per-round sd is taken below the
    clock's paired noise (:attr:`Comparison.clock_sd`; ``floors["paired_clock"]`` is its floor at the sweep's
    rounds), and the rule's "below the floor" reads each row's own paired floor.

    Without calibration or ``target_acc`` the target falls back to the measured baseline's own plateau minus
    1 pp, and :attr:`Comparison.target_source` says that the baseline then reaches it by construction.

    Raises:
        MixedSweepError: when the results are not one sweep (:func:`identity_problem` names what differs).
        ValueError: when there is no measured baseline.
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
    calibration_runs = by_label.pop(CALIBRATION, [])
    base_runs = by_label.get(BASELINE, [])
    base = by_round(base_runs)
    e2e_base = by_round(by_label.get(E2E_BASELINE, []))
    if not base:
        why = [w for r in base_runs for w in r.warnings] or [str(r.unavailable or r.error) for r in base_runs]
        raise ValueError(
            "the sweep has no measured baseline run to compare against" + (f": {'; '.join(why)}" if why else "")
        )
    meaningless = any(r.graph is not None and r.graph.labels_substituted for r in base.values())
    if calibration is None and calibration_runs:
        calibration = calibrate(calibration_runs, target_acc=target_acc)
    if meaningless:  # a loaded graph without labels: gnnbench made some up, so only the clocks mean anything
        target, source = None, "none: the graph's labels were substituted (accuracy is meaningless), epoch time only"
    elif target_acc is not None:
        target, source = target_acc, "given (--target-acc)"
    elif calibration is not None and calibration.target is not None:
        target, source = calibration.target, calibration.source
    else:
        fallback = calibrate(list(base.values()))
        target = fallback.target
        source = (
            "not calibrated: the measured baseline's own median plateau minus 1 pp, read from the runs it "
            "judges (run compare with --calibration-runs >= 1 for a target fixed in advance)"
            if target is not None
            else "no validation curve in these results"
        )
    rounds = sorted(base)
    floors = {
        "step": noise_floor([base[k].step_seconds.median for k in rounds]),
        "epoch": noise_floor([epoch_time(base[k]) for k in rounds]),
    }
    base_tta = [seconds_to(base[k], target) for k in rounds]
    if target is not None and all(t is not None for t in base_tta):
        floors["time_to_accuracy"] = noise_floor(base_tta)
    # a derived row's steps to the target: the calibration's, for the target this comparison reads
    steps_to_target = (
        calibration.median_steps_to_target
        if calibration is not None and target is not None and calibration.target == target
        else None
    )
    # an overlap entry is paired with the end-to-end copy of the baseline; that copy with the baseline itself
    # (what per-phase synchronization costs), never with itself
    rows = [
        _row(
            label,
            runs,
            e2e_base if end_to_end(runs) and e2e_base and label != E2E_BASELINE else base,
            target,
            steps_to_target,
            equivalence_margin,
        )
        for label, runs in by_label.items()
    ]
    if meaningless:
        for row in rows:
            if row.acc_verdict:
                row.acc_verdict = "n/a: labels substituted"
    partition_efficiency(rows, by_label)
    compression_accuracy(rows, by_label)
    stops = None
    paired = rule.paired_floor if rule is not None else equivalence_margin is not None
    clock_sd = clock_noise_sd(rows, rounds) if paired else float("nan")
    pair_sd = clock_noise_sd(rows, rounds, interleaved=True) if paired else float("nan")
    if paired:
        for row in rows:
            if in_family(row.label) or row.label in (AA_LABEL, AA_INPROCESS_LABEL):
                floor_primary(row, pair_sd if reads_pairs(row) and pair_sd == pair_sd else clock_sd)
                row.significant = _significant(row.primary_ratio, row.tta_speedup)
        floors["paired_clock"] = floor_of_sd(clock_sd, len(rounds))
        if pair_sd == pair_sd:
            floors["paired_clock_one_process"] = floor_of_sd(pair_sd, len(rounds))
    if rule is not None and paired:
        min_sd, per_row, row_min_sd = row_floors(rows, rounds, rule.looks, rule.max_rounds, base_tta)
        # futility waits for equivalence only where "no effect beyond the margin" can be tested (no_effect_verdicts)
        untested = [r.label for r in rows if r.censored or r.primary_ratio is None]
        stops = settled(
            rule,
            round_log_ratios(rows, rounds),
            None,
            row_floors=per_row,
            min_sd=min_sd,
            margin=equivalence_margin,
            untested=untested,
            row_min_sd=row_min_sd,
        )
    elif rule is not None:
        floor_by_look = {}  # each look's floor from the baseline rounds up to it: what the sweep saw then
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
        stops = settled(rule, round_log_ratios(rows, rounds), floor_by_look)
    family = family_wise(rows, rule, stops)
    no_effect_verdicts(
        rows,
        equivalence_margin,
        clock_sd if clock_sd == clock_sd else None,
        pair_sd=pair_sd if pair_sd == pair_sd else None,
    )
    aa = next((r for r in rows if r.label == AA_LABEL), None)
    head = [r for r in rows if r.label == BASELINE]
    rest = sorted((r for r in rows if r.label != BASELINE), key=rank_key)
    return Comparison(
        head + rest,
        len(rounds),
        target,
        source,
        floors,
        aa,
        calibration.to_dict() if calibration is not None else None,
        family,
        _derived_checks(rows),
        rule.to_dict() if rule is not None else None,
        {k: (v.to_dict() if v is not None else None) for k, v in (stops or {}).items()},
        clock_sd if clock_sd == clock_sd else None,
        equivalence_margin,
    )


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
    ``measured`` is its measured ratio when ``judged`` replaced it (steps shown equivalent), else ``None``."""
    factors = tta_factors(b, m, target, changes_work=not same_work, derived=derived) if tta is not None else None
    if factors is None or margin is None or derived or not same_work or tta.bound is not None or not in_family(label):
        return factors, tta, None
    eq = steps_equivalence(factors, margin)
    if eq is None:
        return factors, tta, None
    factors.equivalence = eq.to_dict()
    judged = convergence_judged_tta(b, m, target, eq) if eq.equivalent else None
    if judged is None:
        return factors, tta, None
    factors.judged_by = JUDGED_PER_STEP
    return factors, judged, tta


def _row(
    label: str,
    runs: list[RunResult],
    base: dict[int, RunResult],
    target: float | None,
    steps_to_target: float | None = None,
    margin: float | None = None,
) -> ComparisonRow:
    """The row of the configuration ``label`` (its ``runs``) against the baseline runs ``base`` (by round)."""
    derived = bool(runs[0].derived)
    row = ComparisonRow(
        label=label,
        optimizations=list(runs[0].optimizations or []),
        derived=derived,
        timing_mode="end_to_end" if end_to_end(runs) else "sync",
    )
    mine = by_round(runs)
    if not mine:
        if any(r.ok for r in runs):
            warnings = [w for r in runs for w in r.warnings]
            row.status, row.reason = "not measured", "; ".join(warnings) or "no measured steps"
        else:
            reasons = runs[0].unavailable or {"error": runs[0].error or "failed"}
            row.status, row.reason = runs[0].status, format_reasons(reasons)
        return row
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
    # accuracy is read from the rounds that trained to the plateau; time-to-accuracy rounds stop at the target
    acc = (
        list(range(len(rounds)))
        if derived
        else [i for i in range(len(rounds)) if not (time_to_accuracy_run(b[i]) or time_to_accuracy_run(m[i]))]
    )
    check = label.endswith(MEASURED_SUFFIX) and all(time_to_accuracy_run(r) for r in m)
    if check:  # a derived row's check trains to the target only: its accuracy at equal steps
        acc = list(range(len(rounds)))
    if not acc:
        row.status, row.reason = "not measured", "no round trained to the plateau: accuracy cannot be read"
        return row
    later = 0 if check else len(rounds) - len(acc)
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
    primary, primary_name = (tta, TIME_TO_ACCURACY) if tta is not None else (epoch, EPOCH_TIME)
    return dataclasses.replace(
        row,
        status="ok",
        rounds=len(rounds),
        interleaved=interleaved_pairs(m) is not None,
        same_work=same_work,
        step_ms=1e3 * statistics.median(r.step_seconds.median for r in m),
        step_speedup=step if same_work else None,
        epoch_s=statistics.median(epoch_time(r) for r in m),
        epoch_speedup=epoch,
        setup_s=statistics.median(r.setup_clock for r in m),
        tta_s=tta.seconds if tta else None,
        tta_reached=tta.reached_text if tta else None,
        tta_speedup=tta,
        censored=bool(tta and tta.censored),
        tta_note=tta.note if tta else None,
        factors=factors,
        measured_tta_speedup=measured_ratio,
        primary=primary_name,
        speedup=primary.ratio if primary else None,
        speedup_low=primary.low if primary else None,
        speedup_high=primary.high if primary else None,
        significant=_significant(primary, tta),
        acc_point=acc_point,
        converged=accuracy.converged,
        convergence=accuracy.convergence,
        primary_rounds=rounds,  # the rounds primary.log_ratios are aligned with (the stopping rule's input)
        stop_reasons=dict(Counter(r.stop_reason or "?" for r in m)),
        accuracy_rounds=len(acc),
        sampled=sampled_summary(m),
        test_acc=statistics.mean(converged_test(y) for y in ma),
        acc_delta=d_mean,
        acc_delta_low=d_low,
        acc_delta_high=d_high,
        acc_delta_spread=(max(deltas) - min(deltas)) if len(deltas) > 1 else 0.0,
        acc_verdict=acc_verdict(d_low, d_high),
        seeds=len(m),
        phases={p: v.median for p, v in (m[0].phases or {}).items()},
        compile=m[0].compile.to_dict() if m[0].compile is not None else None,
        device_busy=(
            statistics.mean(r.device_busy_fraction for r in m)
            if all(r.device_busy_fraction is not None for r in m)
            else None
        ),
        h2d_bytes_per_batch=m[0].transfer.bytes_h2d_per_batch if m[0].transfer is not None else None,
        device_phase_ms=(
            {p: statistics.median(r.device_phase_ms[p].median for r in m) for p in m[0].device_phase_ms}
            if all(r.device_phase_ms for r in m)
            else None
        ),
        distributed=distributed_summary(m, step if same_work else None),  # efficiency needs the same work
    )


def compare_rows(results: list[RunResult], *, target_acc: float | None = None) -> list[ComparisonRow]:
    """The rows of :func:`compare` (baseline first, then ranked by the primary speedup)."""
    return compare(results, target_acc=target_acc).rows
