"""The comparison of a sweep (``gnnbench compare``, the report, diagnose ``--verify``, tune): per configuration,
paired by round against the baseline of the same sweep, the speedups of the step, epoch and time-to-accuracy
clocks with run-level intervals (:func:`gnnbench.measure.stats.paired_ratio`), the setup clock, the paired
accuracy delta at convergence and the noise floor.

Time to accuracy is read against a target fixed before the comparison (:mod:`gnnbench.measure.calibration`).
A round that never reached it is censored at its budget: the row says "reached in k of R", its ratio is a
bound, and it keeps time to accuracy as its metric. Accuracy is each run's test metric at its best validation
point (accuracy at convergence), paired by round.

Multi-rank configurations also carry their ``distributed`` figures: communication share, bytes on the wire,
scaling efficiency, a partition's efficiency against single-process full-batch training and a gradient
compression's accuracy against dense data parallel. Those references are found by what they are (the flags each
result carries), never by a registry entry's name.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gnnbench import registry
from gnnbench.flags import format_reasons
from gnnbench.measure.calibration import CALIBRATION, Calibration, calibrate, censor_at, time_to
from gnnbench.measure.derived import DERIVED_LABEL, derived_seconds
from gnnbench.measure.sequential import Stop, StoppingRule, family_p_values, final_alpha, settled
from gnnbench.measure.stats import holm, noise_floor, paired_ratio, t_quantile
from gnnbench.training.stopping import CONVERGED_REASONS, TIME_TO_ACCURACY_REASONS

__all__ = ["Comparison", "compare", "compare_rows", "distributed_summary", "BASELINE", "AA_LABEL", "E2E_BASELINE",
           "MEASURED_SUFFIX", "FLOOR_KEY", "in_family",
           "identity_problem", "MixedSweepError", "IDENTITY_KEYS",
           "NO_COST_PP", "converged_test", "equal_steps_test", "time_to_accuracy_run", "sampled_summary", "mean_interval", "measured_best", "tradeoffs", "pareto_front", "STATIC_LIST"]

STATIC_LIST = "all_recommended"  # the registry's fixed list of recommended entries: a guess, never a headline

BASELINE = "baseline"
AA_LABEL = "baseline (A/A)"
E2E_BASELINE = "baseline (end-to-end)"  # the baseline timed end to end, for entries whose gain is overlap
MEASURED_SUFFIX = " (measured)"  # a derived entry also trained to the target: the check of its derived figure
NO_COST_PP = 0.5  # an accuracy delta whose paired interval lies within +-0.5 pp is "no accuracy cost"
FLOOR_KEY = {"time to accuracy": "time_to_accuracy", "epoch time": "epoch"}  # a row's primary -> its floors key


@dataclass
class Comparison:
    """A sweep's comparison: one row per configuration, the noise floor and the accuracy target."""

    rows: list[dict[str, Any]]
    rounds: int  # baseline rounds measured
    target: float | None  # validation target for time to accuracy
    target_source: str  # how the target was chosen
    floors: dict[str, float]  # metric -> smallest resolvable factor (from the baseline's process spread)
    aa: dict[str, Any] | None = None  # the A/A row, when the sweep ran one
    calibration: dict[str, Any] | None = None  # the target's calibration (Calibration.to_dict()), when one ran
    family: str = ""  # how significance is controlled across the rows, in words
    # derived rows also trained to the target: their derived and measured speedups and whether they agree
    derived_checks: list[dict[str, Any]] = field(default_factory=list)
    rule: dict[str, Any] | None = None  # the stopping rule the sweep ran under (StoppingRule.to_dict())
    stops: dict[str, dict | None] = field(default_factory=dict)  # per family row: its Stop, or None (open)


def _ok(r: dict) -> bool:
    return r.get("status") == "ok" and bool(r.get("step_seconds_all"))


def _by_round(runs: list[dict]) -> dict[int, dict]:
    return {r.get("round", i): r for i, r in enumerate(runs) if _ok(r)}


def _end_to_end(runs: list[dict]) -> bool:
    """Whether these runs were timed end to end (entries whose gain is overlap)."""
    return any(r.get("timing_mode") == "end_to_end" for r in runs)


def _epoch_time(r: dict) -> float:
    e = r.get("epoch_seconds") or []
    return statistics.mean(e) if e else float("nan")


def converged_test(r: dict) -> float:
    """Test metric at convergence: at the run's best validation point (its ``converged`` block, else read off
    its curve; the final evaluation for a run without a curve). Runs of any length and any number of
    optimizer steps per epoch (full batch, partitions) are compared where each converged."""
    best = r.get("converged")
    if best:
        return float(best["test"])
    curve = r.get("curve") or []
    if curve:
        return float(max(curve, key=lambda p: p["val"])["test"])
    return float(r["accuracy"]["test"])


def _test_at_steps(r: dict, steps: int, only: set[int] | None = None) -> float:
    """Test metric at the best validation point among the first ``steps`` steps of a run's curve (early
    stopping's choice within an equal step count), among the points at the steps ``only`` when given."""
    points = [p for p in r.get("curve") or [] if p["step"] <= steps and (only is None or p["step"] in only)]
    if not points:
        return float("nan")
    return float(max(points, key=lambda p: (p["val"], -p["step"]))["test"])


def equal_steps_test(b: dict, m: dict) -> tuple[float, float, int]:
    """``(baseline test, other test, steps)``: both runs read at their best validation point within the steps
    both trained (the smaller of their last validation steps), among the validation steps both have (a run to
    a plateau also evaluates at its first epoch's end): the accuracy comparison of a pair of runs that did not
    both converge, or of a derived entry's short run against the same-seed baseline."""
    curves = [r.get("curve") or [] for r in (b, m)]
    steps = min(max((p["step"] for p in c), default=0) for c in curves)
    common = {p["step"] for p in curves[0]} & {p["step"] for p in curves[1]}
    only = common if any(s <= steps for s in common) else None
    return _test_at_steps(b, steps, only), _test_at_steps(m, steps, only), steps


def _converged(r: dict) -> bool:
    """Whether a run was measured to its end (its plateau or its fixed length), not cut by a budget; a result
    that records no stop reason (built by hand, or before stop reasons were recorded) is read as measured to
    its end."""
    return r.get("stop_reason") is None or r.get("stop_reason") in CONVERGED_REASONS


def sampled_summary(runs: list[dict]) -> dict[str, float] | None:
    """What a row's batches sampled (the neighbour explosion), medians over its runs: ``nodes_per_batch``,
    ``edges_per_batch`` and ``coverage`` (the share of the graph's nodes a batch's neighbourhood holds);
    ``None`` for runs that record none (full batch, subgraph sources)."""
    blocks = [r["sampled"] for r in runs if r.get("sampled")]
    if not blocks:
        return None
    return {k: statistics.median(float(b[k]) for b in blocks) for k in ("nodes_per_batch", "edges_per_batch",
                                                                         "coverage")}


def time_to_accuracy_run(r: dict) -> bool:
    """Whether a run measured time to accuracy only (``RunConfig.stop_at``: a sweep's round after its accuracy
    rounds), so its accuracy is not read."""
    return (r.get("config") or {}).get("stop_at") is not None or r.get("stop_reason") in TIME_TO_ACCURACY_REASONS


def _not_converged_text(runs: list[dict]) -> str:
    """Why some of ``runs`` did not converge, in words: ``not converged within 480 steps (2 of 5 rounds)``."""
    cut = [r for r in runs if not _converged(r)]
    reasons = Counter(r.get("stop_reason") or "?" for r in cut)
    parts = []
    for reason, n in reasons.most_common():
        cfg = next(r.get("config") or {} for r in cut if (r.get("stop_reason") or "?") == reason)
        within = {"max_steps": f"within {cfg.get('max_steps')} steps", "max_epochs":
                  f"within {cfg.get('max_epochs')} epochs", "max_seconds": f"within the {cfg.get('max_seconds')} s "
                  "hard stop"}.get(reason, f"({reason})")
        parts.append(f"not converged {within} ({n} of {len(runs)} rounds)")
    return "; ".join(parts)


def mean_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean with a t-interval (nan bounds for fewer than 2 values)."""
    if not values:
        return float("nan"), float("nan"), float("nan")
    mean = statistics.mean(values)
    if len(values) < 2:
        return mean, float("nan"), float("nan")
    half = t_quantile((1 + level) / 2, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def _ratio_dict(base: list[float], other: list[float]) -> dict[str, Any] | None:
    """The paired ratio of two clocks over rounds, with each round's ``log(base / other)`` (``log_ratios``,
    aligned with the inputs; nan where a pair is missing), which the stopping rule reads."""
    pairs = [(b, o) for b, o in zip(base, other) if b == b and o == o and b > 0 and o > 0]
    if not pairs:
        return None
    ri = paired_ratio([b for b, _ in pairs], [o for _, o in pairs])
    logs = [math.log(b / o) if b == b and o == o and b > 0 and o > 0 else float("nan") for b, o in zip(base, other)]
    return {"ratio": ri.ratio, "low": ri.low, "high": ri.high, "significant": ri.significant, "rounds": ri.rounds,
            "p": ri.p_value, "log_ratios": logs}


def _changes_work(optimizations: list[str]) -> bool:
    return any(registry.REGISTRY[n].changes_work for n in optimizations if n in registry.REGISTRY)


def _flags(run: dict) -> dict[str, Any]:
    """The flags a run trained with: those its config carries; a result without them (built by hand) is read as
    the default flags with its registered ``optimizations`` switched on."""
    stored = (run.get("config") or {}).get("flags")
    if stored:
        return stored
    return registry.flags_for([n for n in run.get("optimizations") or [] if n in registry.REGISTRY]).to_dict()


def _reference(by_label: dict[str, list[dict]], label: str, **what: Any) -> str | None:
    """The measured configuration of the sweep whose flags are ``what`` (field -> value), other than ``label``;
    where several are, the one whose flags differ from ``label``'s in the fewest fields (then by label)."""
    mine = _flags(by_label[label][0])
    found = []
    for other, runs in by_label.items():
        flags = _flags(runs[0])
        if other != label and _by_round(runs) and all(flags.get(k) == v for k, v in what.items()):
            found.append((sum(flags.get(k) != v for k, v in mine.items()), other))
    return min(found)[1] if found else None


# What one sweep shares: the environment (threads excepted: multi-rank entries run 1-thread ranks) and the
# base configuration (every config field but those an entry or a round sets).
IDENTITY_KEYS = ("code_fingerprint", "hardware_class", "device_name", "torch", "torch_geometric", "python")
PER_ENTRY_FIELDS = ("flags", "seed", "sync_phases", "nproc", "num_layers")
SHORT_RUN_FIELDS = ("epochs", "max_steps", "min_steps")  # what a derived entry's short run sets apart
TIME_TO_ACCURACY_FIELDS = ("stop_at", "min_steps")  # what a time-to-accuracy round sets apart


class MixedSweepError(ValueError):
    """Results that are not one sweep (different code, machine, environment or base configuration)."""


def identity_problem(results: list[dict]) -> str | None:
    """What makes ``results`` more than one sweep, naming each field that differs and its values (with how
    many results carry each), or ``None`` when they share one identity."""
    problems = []
    for key in IDENTITY_KEYS:
        seen = Counter(str(r["environment"].get(key)) for r in results if r.get("environment"))
        if len(seen) > 1:
            problems.append(f"{key} differs ({', '.join(f'{v} in {n}' for v, n in seen.most_common())})")
    # calibration runs train the base configuration before its cadence and budget were fixed
    bases = [{k: v for k, v in r["config"].items()
              if k not in PER_ENTRY_FIELDS and not (r.get("derived") and k in SHORT_RUN_FIELDS)
              and not (k in TIME_TO_ACCURACY_FIELDS and (r.get("derived") or time_to_accuracy_run(r)))}
             for r in results if r.get("config") and r.get("label") != CALIBRATION]
    fields = sorted({k for b in bases for k in b
                     if len({json.dumps(x[k], sort_keys=True) for x in bases if k in x}) > 1})
    for k in fields:
        seen = Counter(json.dumps(b[k], sort_keys=True) for b in bases if k in b)
        problems.append(f"the base configuration's {k} differs ({', '.join(f'{v} in {n}' for v, n in seen.most_common(3))})")
    return "; ".join(problems) or None


def compare(results: list[dict], *, target_acc: float | None = None,
            calibration: Calibration | None = None, rule: StoppingRule | None = None) -> Comparison:
    """Per configuration, paired by round against the baseline of the same sweep: speedups of the step,
    epoch and time-to-accuracy clocks with run-level intervals, the setup clock, and the paired accuracy delta
    at convergence.

    Args:
        results: Sweep results (dicts with ``label`` and ``round``); calibration runs (label ``calibration``)
            fix the target (:func:`gnnbench.measure.calibration.calibrate`) and are not rows.
        target_acc: Validation target for time to accuracy, replacing the calibrated one.
        calibration: A calibration made elsewhere (tune calibrates once for all its rounds); it replaces the
            calibration runs among ``results``.
        rule: The stopping rule the sweep ran under (rounds that stop when decided): its stops are replayed
            from the results (:func:`gnnbench.measure.sequential.settled`) into :attr:`Comparison.stops` and the
            final significance is the rule's.

    Without calibration or ``target_acc`` the target falls back to the measured baseline's own plateau minus
    1 pp, and :attr:`Comparison.target_source` says that the baseline then reaches it by construction.

    Raises:
        MixedSweepError: when the results are not one sweep (:func:`identity_problem` names what differs).
        ValueError: when there is no measured baseline.
    """
    problem = identity_problem(results)
    if problem:
        raise MixedSweepError(f"these results are not one sweep, so they are not compared: {problem}; compare "
                              "each sweep's folder on its own")
    by_label: dict[str, list[dict]] = {}
    for r in results:
        by_label.setdefault(r["label"], []).append(r)
    calibration_runs = by_label.pop(CALIBRATION, [])
    base_runs = by_label.get(BASELINE, [])
    base = _by_round(base_runs)
    e2e_base = _by_round(by_label.get(E2E_BASELINE, []))
    if not base:
        why = [w for r in base_runs for w in r.get("warnings", [])] or \
              [str(r.get("unavailable") or r.get("error")) for r in base_runs]
        raise ValueError("the sweep has no measured baseline run to compare against"
                         + (f": {'; '.join(why)}" if why else ""))
    meaningless = any(r.get("graph", {}).get("labels_substituted") for r in base.values())
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
        source = ("not calibrated: the measured baseline's own median plateau minus 1 pp, read from the runs it "
                  "judges (run compare with --calibration-runs >= 1 for a target fixed in advance)"
                  if target is not None else "no validation curve in these results")
    rounds = sorted(base)
    floors = {"step": noise_floor([base[k]["step_seconds"]["median"] for k in rounds]),
              "epoch": noise_floor([_epoch_time(base[k]) for k in rounds])}
    base_tta = [time_to(base[k], target) for k in rounds]
    if target is not None and all(t is not None for t in base_tta):
        floors["time_to_accuracy"] = noise_floor(base_tta)
    # a derived row's steps to the target: the calibration's, for the target this comparison reads
    steps_to_target = (calibration.median_steps_to_target if calibration is not None and target is not None
                       and calibration.target == target else None)
    rows = [_row(label, runs, e2e_base if _end_to_end(runs) and e2e_base else base, target, steps_to_target)
            for label, runs in by_label.items()]
    if meaningless:
        for row in rows:
            if row.get("acc_verdict"):
                row["acc_verdict"] = "n/a: labels substituted"
    _partition_efficiency(rows, by_label)
    _compression_accuracy(rows, by_label)
    stops = None
    if rule is not None:
        floor_by_look = {}  # each look's floor from the baseline rounds up to it: what the sweep saw then
        for k in rule.looks:
            if k > len(rounds):
                break
            tta_k = base_tta[:k]
            primary_base = tta_k if all(t is not None for t in tta_k) and target is not None else \
                [_epoch_time(base[j]) for j in rounds[:k]]
            floor_by_look[k] = noise_floor(primary_base, rounds=rule.max_rounds)
        stops = settled(rule, round_log_ratios(rows, rounds), floor_by_look)
    family = _family_wise(rows, rule, stops)
    aa = next((r for r in rows if r["label"] == AA_LABEL), None)
    head = [r for r in rows if r["label"] == BASELINE]
    rest = sorted((r for r in rows if r["label"] != BASELINE), key=rank_key)
    return Comparison(head + rest, len(rounds), target, source, floors, aa,
                      calibration.to_dict() if calibration is not None else None, family, _derived_checks(rows),
                      rule.to_dict() if rule is not None else None,
                      {k: (v.to_dict() if v is not None else None) for k, v in (stops or {}).items()})


def _derived_checks(rows: list[dict]) -> list[dict[str, Any]]:
    """Each derived row that was also trained to the target (``"<label> (measured)"``): both speedups, and
    whether they agree (the measured point estimate inside the derived interval, or the two intervals
    overlapping)."""
    by = {r["label"]: r for r in rows if r.get("status") == "ok"}
    checks = []
    for label, measured in by.items():
        if not label.endswith(MEASURED_SUFFIX) or label[:-len(MEASURED_SUFFIX)] not in by:
            continue
        derived = by[label[:-len(MEASURED_SUFFIX)]]
        d, m = derived.get("tta_speedup"), measured.get("tta_speedup")
        if not derived.get("derived") or not d or not m:
            continue
        if d["low"] != d["low"] or m["low"] != m["low"]:  # one round: no interval to agree within
            inside = agrees = None
        else:
            inside = d["low"] <= m["ratio"] <= d["high"]
            agrees = inside or not (m["high"] < d["low"] or d["high"] < m["low"])
        checks.append({"label": derived["label"], "derived": {k: d[k] for k in ("ratio", "low", "high")},
                       "measured": {k: m[k] for k in ("ratio", "low", "high")}, "measured_inside": inside,
                       "agrees": agrees, "measured_reached": measured.get("tta_reached")})
    return checks


def _pays(r: dict) -> bool:
    """A row that pays: significant (family-wise), faster, reached the target in every round."""
    return (r.get("status") == "ok" and in_family(r["label"]) and bool(r.get("significant"))
            and (r.get("speedup_low") or 0) > 1 and not r.get("censored"))


def measured_best(c: Comparison) -> dict | None:
    """The configuration this sweep measured best on this machine: the top-ranked row that pays (significant
    after Holm, faster, reached the target in every round) at no accuracy cost; ``None`` when nothing does.
    Chosen from measurement only: the registry's static list competes as one measured row like any other."""
    return next((r for r in c.rows if _pays(r) and r.get("acc_verdict") in ("no accuracy cost", "gains accuracy")),
                None)


def tradeoffs(c: Comparison) -> list[dict]:
    """Rows that pay in time but not in accuracy: significantly faster, yet their accuracy at convergence is
    significantly lower or not shown to be within the no-cost band."""
    return [r for r in c.rows if _pays(r) and r.get("acc_verdict") not in ("no accuracy cost", "gains accuracy")]


def pareto_front(rows: list[dict]) -> list[str]:
    """Labels of the rows no other row beats in both time-to-accuracy speedup and accuracy delta (rows censored
    in some round are left out: their speedup is only a bound); the baseline (1x, 0 pp) competes too."""
    pts = [(r["label"], r["tta_speedup"]["ratio"], r["acc_delta"]) for r in rows
           if r.get("status") == "ok" and r.get("tta_speedup") and not r.get("censored")
           and r.get("acc_delta") == r.get("acc_delta") and in_family(r["label"])]
    pts.append((BASELINE, 1.0, 0.0))
    front = [a for a in pts if not any(b[1] >= a[1] and b[2] >= a[2] and (b[1] > a[1] or b[2] > a[2]) for b in pts)]
    return [label for label, _, _ in sorted(front, key=lambda p: p[1])]


FAMILY_ALPHA = 0.05  # the family-wise error rate of a sweep's significance calls
NOT_IN_FAMILY = (BASELINE, AA_LABEL, E2E_BASELINE)  # the reference rows and the noise check


def in_family(label: str) -> bool:
    """Whether a row is a verdict of the sweep's family: not a reference, the noise check, or a derived
    entry's measured check (which repeats its entry's verdict)."""
    return label not in NOT_IN_FAMILY and not label.endswith(MEASURED_SUFFIX)


def _primary(r: dict) -> dict | None:
    return r["tta_speedup"] if r.get("primary") == "time to accuracy" else r.get("epoch_speedup")


def round_log_ratios(rows: list[dict], rounds: list[int]) -> dict[str, list[float]]:
    """Per family row, its primary clock's ``log(baseline / row)`` per round of ``rounds`` (the baseline's, in
    order; nan where the row has no pair), up to its last measured round: the stopping rule's input
    (:func:`gnnbench.measure.sequential.settled`)."""
    out = {}
    for r in rows:
        primary = _primary(r)
        if r.get("status") != "ok" or not in_family(r["label"]) or not primary:
            continue
        by_round = dict(zip(r.get("primary_rounds") or [], primary.get("log_ratios") or []))
        last = max((i for i, k in enumerate(rounds) if k in by_round), default=-1)
        out[r["label"]] = [by_round.get(k, float("nan")) for k in rounds[:last + 1]]
    return out


def _family_wise(rows: list[dict], rule: StoppingRule | None = None,
                 stops: dict[str, Stop | None] | None = None) -> str:
    """Holm's procedure over the primary p-values of every measured row but the baseline and the A/A check: a
    row stays ``significant`` only when Holm rejects it too, so with 25 rows sharing a baseline the chance that
    any "significant" row is noise stays at 5% (per-row tests alone: about 72% for 25 independent nulls).
    Under a stopping rule (rounds that stop when decided) Holm runs at the rule's final level over
    :func:`gnnbench.measure.sequential.family_p_values` (a row stopped as significant enters with 0, one stopped
    below the floor with 1), so the verdicts are the stops' and the rate stays at 5% over rows and looks.
    Each row keeps its 95% interval, ``p_value`` and ``significant_per_row``; returns the rule in words."""
    family = [r for r in rows if r.get("status") == "ok" and in_family(r["label"])]
    ps = []
    for r in family:
        primary = _primary(r)
        ps.append(float(primary["p"]) if primary and primary.get("p") is not None else float("nan"))
    if rule is None or stops is None:
        keep = holm(ps, FAMILY_ALPHA)
    else:
        fam = family_p_values({r["label"]: stops.get(r["label"]) for r in family},
                              {r["label"]: p for r, p in zip(family, ps)})
        keep = holm(list(fam.values()), final_alpha(rule) or FAMILY_ALPHA)  # one round: no look, no significance
    for r, p, k in zip(family, ps, keep):
        r["p_value"], r["significant_per_row"] = p, r["significant"]
        r["significant"] = bool(r["significant"] and k)
        if stops is not None and stops.get(r["label"]) is not None:
            r["stop"] = stops[r["label"]].to_dict()
    if rule is not None and stops is not None:
        looks = ", ".join(f"{100 * a:.3g}% after round {k}" for k, a in rule.to_dict()["look_alpha"].items())
        return (f"significance is family-wise over the {len(family)} rows and every look of the stopping rule: a "
                f"row stops after round {rule.min_rounds} or later once decided (Holm at {looks}; or its interval "
                f"lies inside the noise floor), at most {rule.max_rounds} rounds; the chance that any row called "
                f"significant is noise stays at or below {rule.alpha:.0%}; intervals are per row (95%)")
    return (f"significance is family-wise: Holm's procedure over the {len(family)} rows' p-values keeps the chance "
            f"that any row called significant is noise at or below {FAMILY_ALPHA:.0%}; intervals are per row (95%)")


def rank_key(row: dict) -> tuple:
    """The ranking: measured rows first; among them, rows that reached the target in every round before rows
    that missed it in some; then significant speedups, then no significant difference, then significant
    slowdowns; within each class by the speedup. A significant slowdown never ranks above a significant
    speedup, nor a row that misses above one that reaches."""
    if row["status"] != "ok":
        return (1, 0, 0, 0.0)
    low, high = row.get("speedup_low"), row.get("speedup_high")
    cls = 1  # both directions on the family-wise verdict (Holm), never on a per-row interval alone
    if row.get("significant") and low is not None and low > 1:
        cls = 0
    elif row.get("significant") and high is not None and high < 1:
        cls = 2
    return (0, 1 if row.get("censored") else 0, cls, -(row.get("speedup") or 0.0))


def _partition_efficiency(rows: list[dict], by_label: dict[str, list[dict]]) -> None:
    """Partition-parallel steps are full-graph steps: their scaling efficiency is against the sweep's
    single-process full-batch configuration (paired by round), not the sampled baseline; set in place, with
    ``efficiency_against`` naming that configuration (``None``: the sweep has none, so no efficiency)."""
    for row in rows:
        d = row.get("distributed")
        if not d or d.get("parallel") != "partition":
            continue
        ref = _reference(by_label, row["label"], batch_source="full", parallel="none")
        d["efficiency_against"] = ref
        if ref is None or not d.get("world_size"):
            continue
        full, mine = _by_round(by_label[ref]), _by_round(by_label[row["label"]])
        ks = [k for k in sorted(mine) if k in full]
        if not ks:
            continue
        step = _ratio_dict([full[k]["step_seconds"]["median"] for k in ks],
                           [mine[k]["step_seconds"]["median"] for k in ks])
        n = d["world_size"]
        d["scaling_efficiency"] = {"ratio": step["ratio"] / n, "low": step["low"] / n, "high": step["high"] / n}


def _acc_verdict(low: float, high: float) -> str:
    """The verdict on a paired accuracy delta's interval (fractions, not pp)."""
    if low != low:
        return "one round: no interval"
    if -NO_COST_PP / 100 <= low and high <= NO_COST_PP / 100:
        return "no accuracy cost"
    if high < 0:
        return "costs accuracy"
    if low > 0:
        return "gains accuracy"
    return f"inconclusive (interval wider than +-{NO_COST_PP} pp)"


def _compression_accuracy(rows: list[dict], by_label: dict[str, list[dict]]) -> None:
    """A gradient-compression configuration's test accuracy against dense data parallel (the sweep's data-parallel
    configuration without compression, paired by round, each at convergence): ``distributed["accuracy_vs_dense"]``,
    set in place."""
    for row in rows:
        d = row.get("distributed")
        if not d or d.get("grad_compression") in (None, "none"):
            continue
        ref = _reference(by_label, row["label"], parallel="data", grad_compression="none")
        if ref is None:
            continue
        dense, mine = _by_round(by_label[ref]), _by_round(by_label[row["label"]])
        ks = [k for k in sorted(mine) if k in dense]
        if not ks:
            continue
        deltas = [converged_test(mine[k]) - converged_test(dense[k]) for k in ks]
        mean, low, high = mean_interval(deltas)
        d["accuracy_vs_dense"] = {"against": ref, "delta": mean, "low": low, "high": high,
                                  "rounds": len(ks), "verdict": _acc_verdict(low, high),
                                  "test": statistics.mean(converged_test(mine[k]) for k in ks),
                                  "dense_test": statistics.mean(converged_test(dense[k]) for k in ks)}


def _row(label: str, runs: list[dict], base: dict[int, dict], target: float | None,
         steps_to_target: float | None = None) -> dict[str, Any]:
    optimizations = runs[0].get("optimizations", [])
    derived = bool(runs[0].get("derived"))
    row: dict[str, Any] = {"label": label, "optimizations": optimizations, "derived": derived,
                           "timing_mode": "end_to_end" if _end_to_end(runs) else "sync"}
    mine = _by_round(runs)
    if not mine:
        if any(r.get("status") == "ok" for r in runs):
            warnings = [w for r in runs for w in r.get("warnings", [])]
            row.update(status="not measured", reason="; ".join(warnings) or "no measured steps")
        else:
            reasons = runs[0].get("unavailable") or {"error": runs[0].get("error", "failed")}
            row.update(status=runs[0].get("status"), reason=format_reasons(reasons))
        return row
    rounds = [k for k in sorted(mine) if k in base]
    if not rounds:
        row.update(status="not measured", reason="no round shared with a measured baseline run")
        return row
    b = [base[k] for k in rounds]
    m = [mine[k] for k in rounds]
    same_work = not _changes_work(optimizations)
    step = _ratio_dict([r["step_seconds"]["median"] for r in b], [r["step_seconds"]["median"] for r in m])
    epoch = _ratio_dict([_epoch_time(r) for r in b], [_epoch_time(r) for r in m])
    tta = _derived_tta(b, m, steps_to_target) if derived else _tta(b, m, target)
    # accuracy is read from the rounds that trained to the plateau; time-to-accuracy rounds stop at the target
    acc = list(range(len(rounds))) if derived else [i for i in range(len(rounds))
                                                    if not (time_to_accuracy_run(b[i]) or time_to_accuracy_run(m[i]))]
    if not acc:
        row.update(status="not measured", reason="no round trained to the plateau: accuracy cannot be read")
        return row
    later = len(rounds) - len(acc)
    ba, ma = [b[i] for i in acc], [m[i] for i in acc]
    converged = all(_converged(r) for r in ba + ma) if not derived else None
    if derived:  # the proof checked again: the short run against the same-seed baseline at equal steps
        pairs = [equal_steps_test(x, y) for x, y in zip(ba, ma)]
        deltas = [t_m - t_b for t_b, t_m, _ in pairs]
        convergence = None
        acc_point = (f"{DERIVED_LABEL}; test at equal steps ({min(p[2] for p in pairs)}) against the same-seed "
                     "baseline")
    elif converged:  # every run of the pair measured to its end: accuracy at convergence
        deltas = [converged_test(y) - converged_test(x) for x, y in zip(ba, ma)]
        acc_point, convergence = "at convergence (test at the best validation point)", None
    else:  # a budget cut some run short: both read within the steps both trained, never "at convergence"
        pairs = [equal_steps_test(x, y) for x, y in zip(ba, ma)]
        deltas = [t_m - t_b for t_b, t_m, _ in pairs]
        convergence = "; ".join(t for t in (_not_converged_text(ma), _not_converged_text(ba) and
                                            f"baseline {_not_converged_text(ba)}") if t)
        acc_point = (f"at equal steps ({min(p[2] for p in pairs)}-{max(p[2] for p in pairs)}; test at the best "
                     f"validation point within them): {convergence}")
    if later:
        acc_point += (f" (over the {len(acc)} rounds trained to the plateau; {later} later round(s) stopped at the "
                      "target and measured time to accuracy only)")
    d_mean, d_low, d_high = mean_interval(deltas)
    verdict = _acc_verdict(d_low, d_high)
    primary, primary_name = (tta, "time to accuracy") if tta is not None else (epoch, "epoch time")
    # a bound is significant only in the direction it bounds: an upper bound on a speedup can show a slowdown
    significant = bool(primary and primary["significant"])
    if tta is not None and tta["bound"] == "at most":
        significant = significant and primary["high"] < 1
    elif tta is not None and tta["bound"] == "at least":
        significant = significant and primary["low"] > 1
    elif tta is not None and tta["bound"] == "unknown":
        significant = False
    row.update(
        status="ok", rounds=len(rounds), same_work=same_work,
        step_ms=1e3 * statistics.median(r["step_seconds"]["median"] for r in m),
        step_speedup=step if same_work else None,
        epoch_s=statistics.median(_epoch_time(r) for r in m), epoch_speedup=epoch,
        setup_s=statistics.median(r.get("setup_seconds") or r["graph"].get("setup_seconds", 0.0) for r in m),
        tta_s=tta["seconds"] if tta else None, tta_reached=tta["reached_text"] if tta else None,
        tta_speedup=tta, censored=bool(tta and tta["censored"]), tta_note=tta["note"] if tta else None,
        primary=primary_name, speedup=primary["ratio"] if primary else None,
        speedup_low=primary["low"] if primary else None, speedup_high=primary["high"] if primary else None,
        significant=significant, acc_point=acc_point, converged=converged, convergence=convergence,
        primary_rounds=rounds,  # the rounds primary["log_ratios"] are aligned with (the stopping rule's input)
        stop_reasons=dict(Counter(r.get("stop_reason") or "?" for r in m)), accuracy_rounds=len(acc),
        sampled=sampled_summary(m),
        test_acc=statistics.mean(converged_test(y) for y in ma),
        acc_delta=d_mean, acc_delta_low=d_low, acc_delta_high=d_high,
        acc_delta_spread=(max(deltas) - min(deltas)) if len(deltas) > 1 else 0.0, acc_verdict=verdict,
        seeds=len(m), phases={p: v["median"] for p, v in m[0]["phases"].items()},
        compile=m[0].get("compile"),
        device_busy=(statistics.mean(r["device_busy_fraction"] for r in m)
                     if all(r.get("device_busy_fraction") is not None for r in m) else None),
        h2d_bytes_per_batch=m[0]["transfer"]["bytes_h2d_per_batch"],
        device_phase_ms=({p: statistics.median(r["device_phase_ms"][p]["median"] for r in m)
                          for p in m[0]["device_phase_ms"]}
                         if all(r.get("device_phase_ms") for r in m) else None),
        distributed=distributed_summary(m, step if same_work else None),  # efficiency needs the same work
    )
    return row


def _tta(b: list[dict], m: list[dict], target: float | None) -> dict[str, Any] | None:
    """Time to the target, paired by round, with censoring: a round that never reached the target counts at its
    budget (:func:`gnnbench.measure.calibration.censor_at`), which makes the ratio a bound: ``"at most"`` when
    only this configuration missed rounds (its true time is longer), ``"at least"`` when only the baseline did,
    ``"unknown"`` when both did (``None`` without a target)."""
    if target is None:
        return None
    tb, tm = [time_to(r, target) for r in b], [time_to(r, target) for r in m]
    cb = [t if t is not None else censor_at(r) for t, r in zip(tb, b)]
    cm = [t if t is not None else censor_at(r) for t, r in zip(tm, m)]
    ratio = _ratio_dict(cb, cm)
    if ratio is None:
        return None
    missed_m, missed_b = sum(t is None for t in tm), sum(t is None for t in tb)
    bound = ("unknown" if missed_m and missed_b else "at most" if missed_m else "at least" if missed_b else None)
    reached = len(m) - missed_m
    notes = []
    if missed_m:
        notes.append(f"reached the target in {reached} of {len(m)} rounds; the others are censored at their budget, "
                     f"so the speedup is {bound} this")
    if missed_b:
        notes.append(f"the baseline missed the target in {missed_b} of {len(b)} rounds (censored at its budget)")
    reached_times = [t for t in tm if t is not None]
    return {**ratio, "bound": bound, "censored": bool(missed_m), "reached": reached, "rounds": len(m),
            "reached_text": f"{reached}/{len(m)}", "seconds": statistics.median(reached_times) if reached_times else None,
            "note": "; ".join(notes) or None}


def _derived_tta(b: list[dict], m: list[dict], steps_to_target: float | None) -> dict[str, Any] | None:
    """A same-trajectory entry's time to accuracy, derived per round (:mod:`gnnbench.measure.derived`): its
    setup plus the calibrated steps to the target times its training clock per step, against the same-round
    baseline read the same way over as many epochs; ``None`` without calibrated steps to the target."""
    if steps_to_target is None:
        return None
    epochs = [len(r.get("epoch_seconds") or []) for r in m]
    tm = [derived_seconds(r, steps_to_target) for r in m]
    tb = [derived_seconds(r, steps_to_target, e) for r, e in zip(b, epochs)]
    ratio = _ratio_dict([t if t is not None else float("nan") for t in tb],
                        [t if t is not None else float("nan") for t in tm])
    if ratio is None:
        return None
    reached = [t for t in tm if t is not None]
    return {**ratio, "bound": None, "censored": False, "reached": len(reached), "rounds": len(m),
            "reached_text": "derived", "seconds": statistics.median(reached) if reached else None,
            "note": f"{DERIVED_LABEL}: setup + {steps_to_target:g} calibrated steps to the target x its training "
                    f"clock per step over {statistics.median(epochs):g} epochs (the baseline's read the same way)"}


def distributed_summary(runs: list[dict], step: dict | None) -> dict[str, Any] | None:
    """A multi-rank configuration's figures over its rounds (``None`` for a single-process one).

    Args:
        runs: Its results (one, for a single run): world size, backend, compression, the communication share
            of the step and bytes on the wire are read from their ``distributed`` blocks (means over rounds).
        step: The paired step ratio against the single-process baseline on the same global batch, from which
            the scaling efficiency ``T1 / (N x TN)`` follows; ``None``: no efficiency.
    """
    blocks = [r["distributed"] for r in runs if r.get("distributed")]
    if not blocks:
        return None

    def mean(key: str) -> float | None:
        vals = [b[key] for b in blocks if b.get(key) is not None]
        return statistics.mean(vals) if vals else None

    n = blocks[0]["world_size"]
    g, spec = runs[0].get("graph", {}), (runs[0].get("config") or {}).get("spec") or {}
    features = g.get("feature_bytes")
    if features is None and spec.get("feature_dim"):
        features = g["num_nodes"] * spec["feature_dim"] * 4  # fp32 features of a generated graph
    eff = None
    if step is not None and n:
        eff = {"ratio": step["ratio"] / n, "low": step["low"] / n, "high": step["high"] / n}
    parts = [b["partition"] for b in blocks if b.get("partition")]
    partition = None
    if parts:  # numbers: mean over rounds (the partition itself is the same in every round)
        partition = {}
        for k, v in parts[0].items():
            vals = [p[k] for p in parts if isinstance(p.get(k), (int, float)) and not isinstance(p.get(k), bool)]
            partition[k] = statistics.mean(vals) if vals and not isinstance(v, str) else v
    return {"world_size": n, "backend": blocks[0].get("backend"), "parallel": blocks[0].get("parallel"),
            "grad_compression": blocks[0].get("grad_compression"), "comm_share": mean("comm_share"),
            "bytes_per_step": mean("bytes_per_step"), "dense_bytes_per_step": mean("dense_bytes_per_step"),
            "compression_ratio": mean("compression_ratio"), "scaling_efficiency": eff, "partition": partition,
            "graph_bytes": (g.get("index_bytes") or 0) + features if features is not None else None,
            "device": (runs[0].get("environment") or {}).get("device") or "cpu"}


def compare_rows(results: list[dict], *, target_acc: float | None = None) -> list[dict]:
    """The rows of :func:`compare` (baseline first, then ranked by the primary speedup)."""
    return compare(results, target_acc=target_acc).rows
