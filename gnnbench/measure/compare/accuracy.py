"""A comparison row's accuracy: where a run's test metric is read (at convergence, or within an equal number of
steps when a budget cut a run short), which runs measured accuracy at all, and the verdict on a paired delta.

Accuracy is each run's test metric at its best validation point, paired by round (same seed). An effect "at
convergence" comes only from runs measured to their end (plateau or their fixed length); a run a budget cut short
says so and the pair is compared at equal steps.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gnnbench.measure.compare.derived import DERIVED_LABEL
from gnnbench.measure.run import RunResult
from gnnbench.training.stopping import CONVERGED_REASONS, TIME_TO_ACCURACY_REASONS

__all__ = [
    "NO_COST_PP",
    "converged_test",
    "equal_steps_test",
    "paired_at_target",
    "converged",
    "not_converged_text",
    "time_to_accuracy_run",
    "acc_verdict",
    "PairedAccuracy",
    "paired_accuracy",
]

NO_COST_PP = 0.5  # an accuracy delta whose paired interval lies within +-0.5 pp is "no accuracy cost"


def converged_test(r: RunResult) -> float:
    """Test metric at convergence: at the run's best validation point (its ``converged`` block, else read off
    its curve; the final evaluation for a run without a curve). Runs of any length and any number of
    optimizer steps per epoch (full batch, partitions) are compared where each converged."""
    if r.converged is not None:
        return float(r.converged.test)
    if r.curve:
        return float(max(r.curve, key=lambda p: p.val).test)
    if r.accuracy is None:
        raise ValueError(f"{r.label or 'a result'} ({r.status}) has no accuracy to read")
    return float(r.accuracy.test)


def _test_at_steps(r: RunResult, steps: int, only: set[int] | None = None) -> float:
    """Test metric at the best validation point among the first ``steps`` steps of a run's curve (early
    stopping's choice within an equal step count), among the points at the steps ``only`` when given."""
    points = [p for p in r.curve if p.step <= steps and (only is None or p.step in only)]
    if not points:
        return float("nan")
    return float(max(points, key=lambda p: (p.val, -p.step)).test)


def equal_steps_test(b: RunResult, m: RunResult) -> tuple[float, float, int]:
    """``(baseline test, other test, steps)``: both runs read at their best validation point within the steps
    both trained (the smaller of their last validation steps), among the validation steps both have (a run to
    a plateau also evaluates at its first epoch's end): the accuracy comparison of a pair of runs that did not
    both converge, or of a derived entry's short run against the same-seed baseline."""
    curves = [r.curve for r in (b, m)]
    steps = min(max((p.step for p in c), default=0) for c in curves)
    common = {p.step for p in curves[0]} & {p.step for p in curves[1]}
    only = common if any(s <= steps for s in common) else None
    return _test_at_steps(b, steps, only), _test_at_steps(m, steps, only), steps


def converged(r: RunResult) -> bool:
    """Whether a run was measured to its end (its plateau or its fixed length), not cut by a budget; a result
    that records no stop reason (built by hand, or before stop reasons were recorded) is read as measured to
    its end."""
    return r.stop_reason is None or r.stop_reason in CONVERGED_REASONS


def not_converged_text(runs: list[RunResult]) -> str:
    """Why some of ``runs`` did not converge, in words: ``not converged within 480 steps (2 of 5 rounds)``."""
    cut = [r for r in runs if not converged(r)]
    reasons = Counter(r.stop_reason or "?" for r in cut)
    parts = []
    for reason, n in reasons.most_common():
        cfg = next(r.config for r in cut if (r.stop_reason or "?") == reason)
        within = {
            "max_steps": f"within {cfg.get('max_steps')} steps",
            "max_epochs": f"within {cfg.get('max_epochs')} epochs",
            "max_seconds": f"within the {cfg.get('max_seconds')} s hard stop",
        }.get(reason, f"({reason})")
        parts.append(f"not converged {within} ({n} of {len(runs)} rounds)")
    return "; ".join(parts)


@dataclass
class PairedAccuracy:
    """A configuration's test metric against the baseline's, paired by round, and where it was read."""

    deltas: list[float]  # per round, the configuration's test metric minus the same-round baseline's
    point: str  # where both were read (at convergence, or at equal steps and why), in words
    converged: bool | None  # every run of the pairs measured to its end (None: a derived row's short runs)
    convergence: str | None  # which runs a budget cut short, in words (None: none, or a derived row)


def paired_accuracy(b: list[RunResult], m: list[RunResult], *, derived: bool) -> PairedAccuracy:
    """The accuracy deltas of runs ``m`` against the same-round baseline runs ``b``: at convergence where every
    run of the pairs converged; else within the steps both trained, never "at convergence"; a derived entry's
    short runs at equal steps against the same-seed baseline (the proof of its trajectory checked again)."""
    if derived:
        pairs = [equal_steps_test(x, y) for x, y in zip(b, m)]
        point = f"{DERIVED_LABEL}; test at equal steps ({min(p[2] for p in pairs)}) against the same-seed baseline"
        return PairedAccuracy([t_m - t_b for t_b, t_m, _ in pairs], point, None, None)
    if all(converged(r) for r in b + m):
        return PairedAccuracy(
            [converged_test(y) - converged_test(x) for x, y in zip(b, m)],
            "at convergence (test at the best validation point)",
            True,
            None,
        )
    pairs = [equal_steps_test(x, y) for x, y in zip(b, m)]
    convergence = "; ".join(
        t for t in (not_converged_text(m), not_converged_text(b) and f"baseline {not_converged_text(b)}") if t
    )
    point = (
        f"at equal steps ({min(p[2] for p in pairs)}-{max(p[2] for p in pairs)}; test at the best validation "
        f"point within them): {convergence}"
    )
    return PairedAccuracy([t_m - t_b for t_b, t_m, _ in pairs], point, False, convergence)


def paired_at_target(b: list[RunResult], m: list[RunResult]) -> PairedAccuracy:
    """The accuracy deltas of a derived entry's time-to-accuracy check (runs ``m`` that stopped at the target,
    ``"<name> (measured)"``) against the same-round baseline runs ``b``: at equal steps, never "at convergence"
    (its same trajectory is proven by test, so it trains no plateau run)."""
    pairs = [equal_steps_test(x, y) for x, y in zip(b, m)]
    point = (
        f"time to accuracy only (a check of the derived figure; it stopped at the target): test at equal steps "
        f"({min(p[2] for p in pairs)}-{max(p[2] for p in pairs)}) against the same-seed baseline"
    )
    return PairedAccuracy([t_m - t_b for t_b, t_m, _ in pairs], point, False, None)


def time_to_accuracy_run(r: RunResult) -> bool:
    """Whether a run measured time to accuracy only (``RunConfig.stop_at``: a sweep's round after its accuracy
    rounds), so its accuracy is not read."""
    return r.config.get("stop_at") is not None or r.stop_reason in TIME_TO_ACCURACY_REASONS


def acc_verdict(low: float, high: float) -> str:
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
