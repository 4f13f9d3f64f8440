"""Replay a sweep's stored rounds through the verdict rules: the rule it ran under against the paired floors, the
sd floor and the equivalence margin, row by row; and measure what reading the target crossing between
evaluations removes.

Every verdict is a pure function of the stored results (``compare`` replays the stopping rule's looks from them),
so replaying the same rounds under another rule is exact up to the rounds the sweep did not run: a row the rule
that ran stopped after round 3 has 3 rounds, and where the new rule would have kept it open the replay says
"open: would receive round 4". Prints, per row of the family, the verdict then and now, the factors of its time
to accuracy (steps to the target and time per step, paired) and how it is judged.

    python scripts/verdict_replay.py results/reference/compare-small-cpu-0671164 --margin 0.1 --quantization

``--noise`` asks what the clock allows at all: the paired noise of three clocks (the epoch clock the verdicts
read, and the mean and median in-process step time), whether neighbouring processes share their noise (the
correlation of each run's residual with the run ``lag`` places later in its round: near 0, pairing closer in
time would not help, the noise is each process's own), and the rounds a row needs at that noise for a verdict:
"no effect beyond the margin" for a row with no effect (TOST, 80% of rows), and a 15% effect through Holm's
first step of the family (80% power).

``--smoothing`` asks what reading the crossing on a trailing mean of the last evaluations
(:func:`gnnbench.measure.compare.crossing.smoothed_curve`) would remove from the spread of the steps to the target:
for every row trained to its plateau beside its round's baseline (the rounds whose curves go past the target on
both sides), the sd over rounds of ``log(baseline's steps / row's steps)``, per window and pooled over the rows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import gnnbench.measure.compare.comparison as comparison_module  # noqa: E402
import gnnbench.measure.compare.time_to_accuracy as tta_module  # noqa: E402
from gnnbench.measure.compare import (  # noqa: E402
    CALIBRATION,
    clock_noise_sd,
    compare,
    in_family,
    interpolated_crossing,
    smoothed_curve,
    time_to,
)
from gnnbench.measure.run import Point, RunResult, load_result  # noqa: E402
from gnnbench.measure.stats import (  # noqa: E402
    EQUIVALENCE_FUTILITY,
    StoppingRule,
    equivalence,
    sd_floor,
    t_test_power,
)


def load(sweep: Path) -> tuple[dict, list[RunResult]]:
    """A sweep's manifest and its results (a file that is not a readable result stops the replay, naming it)."""
    manifest = json.loads((sweep / "sweep.json").read_text())
    runs = []
    for f in sorted(sweep.glob("*-r*.json")):
        r = load_result(f)
        if r is None:
            raise SystemExit(f"{f}: not a readable result")
        runs.append(r)
    return manifest, runs


@contextlib.contextmanager
def crossing_as_it_ran():
    """The time to the target read as the sweep read it: the first evaluation at or above the target."""
    saved = tta_module.seconds_to, comparison_module.seconds_to
    tta_module.seconds_to = comparison_module.seconds_to = time_to
    try:
        yield
    finally:
        tta_module.seconds_to, comparison_module.seconds_to = saved


def verdict(row, stop: dict | None, rounds: int) -> str:
    """A row's verdict in words: its stop (or that it is still open) and its family-wise significance."""
    if row is None:
        return "-"
    if stop is None or (stop["reason"] == "max rounds" and stop["rounds"] < stop["look"]):
        return f"open after round {rounds}: would receive round {rounds + 1}"
    reason = stop["reason"]
    if reason in ("significant", "max rounds"):
        if row.significant:
            return f"significant ({'faster' if row.speedup_low > 1 else 'slower'}) after round {stop['look']}"
        return f"{'no significant difference' if reason == 'max rounds' else reason} after round {stop['look']}"
    return f"{reason} after round {stop['look']}"


def _ratio(r) -> str:
    if r is None or r.ratio != r.ratio:
        return "-"
    if r.low != r.low:
        return f"{r.ratio:.3f}"
    return f"{r.ratio:.3f} [{r.low:.3f}, {r.high:.3f}]"


def replay(sweep: Path, margin: float) -> str:
    manifest, runs = load(sweep)
    ran = manifest.get("rule")
    if not ran:
        raise SystemExit(f"{sweep}: its sweep.json records no stopping rule (it ran every round): nothing to replay")
    then_rule = StoppingRule.from_dict(ran)
    now_rule = StoppingRule.from_dict({**ran, "paired_floor": True, "equivalence_futility": EQUIVALENCE_FUTILITY})
    with crossing_as_it_ran():
        then = compare(runs, rule=then_rule)
    now = compare(runs, rule=now_rule, equivalence_margin=margin)
    rows_then = {r.label: r for r in then.rows}
    lines = [
        f"{sweep}: {then.rounds} baseline rounds; the clock's paired noise (pooled sd of the epoch clock's "
        f"per-round log ratios) {now.clock_sd:.4f}; equivalence margin +-{margin:.0%}",
        "",
        "| row | verdict as it ran | verdict now | judged by (now) | steps to target, ratio | time per step, "
        "ratio | time to accuracy now |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in now.rows:
        if r.status != "ok" or not in_family(r.label):
            continue
        old = rows_then.get(r.label)
        rounds = len([x for x in (r.primary_ratio.log_ratios if r.primary_ratio else []) if x == x])
        f = r.factors
        judged = f.judged_by if f else "epoch time"
        if f and f.equivalence:
            judged += f" (TOST p {f.equivalence['p_value']:.2g})"
        lines.append(
            f"| {r.label} | {verdict(old, then.stops.get(r.label), rounds)} | "
            f"{verdict(r, now.stops.get(r.label), rounds)} | {judged} | "
            f"{_ratio(f.steps) if f else '-'} | {_ratio(f.per_step) if f else '-'} | "
            f"{_ratio(r.tta_speedup)} |"
        )
    return "\n".join(lines) + "\n"


def _thinned(curve: list[Point], keep: int) -> list[Point]:
    """Every ``keep``-th point of a curve (the last of each group): the curve at ``keep`` times the cadence."""
    return [p for i, p in enumerate(curve) if (i + 1) % keep == 0]


def quantization(sweep: Path, keep: int = 2) -> str:
    """What interpolation removes: each stored curve thinned to ``keep`` times its cadence, its crossing read
    as the first evaluation at or above the target and interpolated, each against the interpolated crossing
    at the full cadence (the best reading the run has)."""
    manifest, runs = load(sweep)
    target = (manifest.get("calibration") or {}).get("target")
    if target is None:
        raise SystemExit(f"{sweep}: its sweep.json records no calibrated target")
    first_err, interp_err, steps = [], [], []
    for r in runs:
        if not r.ok or r.label == CALIBRATION or not r.curve:
            continue
        full = interpolated_crossing(r.curve, target)
        coarse = _thinned(r.curve, keep)
        c = interpolated_crossing(coarse, target)
        if full is None or c is None or c["fraction"] == 1.0 and coarse and coarse[0].val >= target:
            continue
        first = next(float(p.step) for p in coarse if p.val >= target - 1e-12)
        first_err.append(first - full["step"])
        interp_err.append(c["step"] - full["step"])
        steps.append(full["step"])
    cadence = statistics.median(
        float(r.curve[1].step - r.curve[0].step) for r in runs if r.ok and len(r.curve) > 1 and r.label != CALIBRATION
    )

    def rms(xs):
        return math.sqrt(sum(x * x for x in xs) / len(xs))

    med = statistics.median(steps)
    return (
        f"{len(steps)} curves that reach the target {target:g}, thinned from every {cadence:g} to every "
        f"{keep * cadence:g} steps (median steps to the target {med:.1f}); error against the crossing "
        f"interpolated at the full cadence:\n"
        f"  first evaluation at or above: mean {statistics.mean(first_err):+.2f} steps, rms {rms(first_err):.2f} "
        f"({100 * rms(first_err) / med:.1f}% of the steps to the target)\n"
        f"  interpolated:                 mean {statistics.mean(interp_err):+.2f} steps, rms "
        f"{rms(interp_err):.2f} ({100 * rms(interp_err) / med:.1f}%)\n"
    )


PLATEAU_STOPS = ("plateau", "max_steps")  # runs whose curves go on past the target


def smoothing(sweep: Path, windows=(1, 2, 3, 4)) -> str:
    """The spread of each row's steps to the target against its round's baseline, the crossing read on the curve
    and on trailing means of its last ``windows`` evaluations (module docstring), as a markdown table."""
    manifest, runs = load(sweep)
    target = (manifest.get("calibration") or {}).get("target")
    if target is None:
        raise SystemExit(f"{sweep}: its sweep.json records no calibrated target")
    full = {(r.label, r.round): r for r in runs if r.ok and r.curve and r.stop_reason in PLATEAU_STOPS}
    rows = sorted({label for label, _ in full if label != "baseline" and label != CALIBRATION})
    per_row: dict[str, dict[int, list[float]]] = {}
    delay: dict[int, list[float]] = {w: [] for w in windows}
    for w in windows:

        def steps(r, w=w):
            point = interpolated_crossing(smoothed_curve(r.curve, w), target)
            return point["step"] if point else None

        for (label, _), r in full.items():
            if label == "baseline" and steps(r) is not None:
                delay[w].append(steps(r) - interpolated_crossing(r.curve, target)["step"])
        for label in rows:
            logs = []
            for (lab, k), r in full.items():
                base = full.get(("baseline", k))
                if lab != label or base is None or r.derived:
                    continue
                a, b = steps(base), steps(r)
                if a and b:
                    logs.append(math.log(a / b))
            if len(logs) >= 2:
                per_row.setdefault(label, {})[w] = logs
    lines = [
        f"| row | rounds | {' | '.join(f'sd, window {w}' for w in windows)} |",
        "|---|---:|" + "---:|" * len(windows),
    ]
    pooled = {w: [0.0, 0] for w in windows}
    for label, by_w in per_row.items():
        cells = []
        for w in windows:
            xs = by_w.get(w)
            if not xs or len(xs) < 2:
                cells.append("-")
                continue
            m = statistics.fmean(xs)
            pooled[w][0] += sum((x - m) ** 2 for x in xs)
            pooled[w][1] += len(xs) - 1
            cells.append(f"{statistics.stdev(xs):.3f}")
        lines.append(f"| `{label}` | {len(next(iter(by_w.values())))} | {' | '.join(cells)} |")
    lines.append(
        "| pooled | "
        + f"{sum(len(next(iter(b.values()))) for b in per_row.values())} | "
        + " | ".join(f"{math.sqrt(s / df):.3f}" if df else "-" for s, df in (pooled[w] for w in windows))
        + " |"
    )
    lines.append(
        "| the baseline's crossing later than the curve's, median steps | - | "
        + " | ".join(f"{statistics.median(delay[w]):+.1f}" if delay[w] else "-" for w in windows)
        + " |"
    )
    return (
        f"Steps to the target {target:g} against the round's baseline, per row trained to its plateau: the sd over "
        f"rounds of log(baseline's steps / row's steps), the crossing read on a trailing mean of the last w "
        f"evaluations (w 1: the curve itself):\n\n" + "\n".join(lines) + "\n"
    )


def _step_clock(run: RunResult, how) -> float:
    """A run's in-process step time (its first 3 steps, warm-up, left out when it has more than 5)."""
    s = run.step_seconds_all
    s = s[3:] if len(s) > 5 else s
    return how(s) if s else float("nan")


CLOCKS = {"step mean": statistics.fmean, "step median": statistics.median}


def pooled_sd(by: dict[str, dict[int, RunResult]], clock) -> tuple[float, int]:
    """The pooled within-row sd of ``log(baseline / row)`` per round under ``clock`` (each row's deviations from
    its own mean, as :func:`~gnnbench.measure.compare.paired_floor.clock_noise_sd`), and its degrees of freedom."""
    base = by.get("baseline", {})
    ss, df = 0.0, 0
    for label, rounds in by.items():
        if label == "baseline" or not in_family(label) and label != "baseline (A/A)":
            continue
        xs = [math.log(clock(base[k]) / clock(r)) for k, r in rounds.items() if k in base]
        xs = [x for x in xs if x == x]
        if len(xs) < 2:
            continue
        m = statistics.fmean(xs)
        ss += sum((x - m) ** 2 for x in xs)
        df += len(xs) - 1
    return (math.sqrt(ss / df) if df else float("nan")), df


def lag_correlation(manifest: dict, by: dict[str, dict[int, RunResult]], lags=(1, 2, 5, 10)) -> dict[int, tuple]:
    """Per lag: the correlation of each run's residual (its log step mean minus its row's mean over rounds) with
    the residual of the run ``lag`` places later in the same round's order, and the number of pairs."""
    means = {}
    for label, rounds in by.items():
        logs = [math.log(_step_clock(r, statistics.fmean)) for r in rounds.values()]
        if len(logs) >= 2:
            means[label] = statistics.fmean(logs)
    out = {}
    seqs = []
    for k, order in enumerate(manifest.get("rounds") or []):
        seqs.append(
            [
                math.log(_step_clock(by[lb][k], statistics.fmean)) - means[lb]
                for lb in order
                if lb in means and k in by[lb]
            ]
        )
    for lag in lags:
        pairs = [(q[i], q[i + lag]) for q in seqs for i in range(len(q) - lag)]
        out[lag] = (statistics.correlation(*zip(*pairs)) if len(pairs) > 2 else float("nan"), len(pairs))
    return out


def rounds_for_equivalence(
    sd: float, margin: float, alpha: float, power: float = 0.8, most: int = 40, draws: int = 4000, seed: int = 0
) -> int | None:
    """The fewest rounds at which a row with no effect and per-round sd ``sd`` shows "no effect beyond
    ``margin``" (TOST at ``alpha``, its sd floored as the sweep floors it) in ``power`` of ``draws`` simulated
    rows; None beyond ``most``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for n in range(2, most + 1):
        xs = rng.normal(0.0, sd, size=(draws, n))
        floor = sd_floor(sd, n)
        shown = sum(equivalence(row, margin, alpha=alpha, min_sd=floor).equivalent for row in xs)
        if shown >= power * draws:
            return n
    return None


def rounds_for_effect(sd: float, effect: float, alpha: float, power: float = 0.8, most: int = 40) -> int | None:
    """The fewest rounds at which a paired t test at ``alpha`` (two-sided) sees a ratio ``effect`` with
    ``power`` at per-round sd ``sd`` (:func:`~gnnbench.measure.stats.intervals.t_test_power`); None beyond ``most``."""
    for n in range(2, most + 1):
        if t_test_power(math.log(effect) / (sd / math.sqrt(n)), n - 1, alpha) >= power:
            return n
    return None


def noise(sweep: Path, margin: float) -> str:
    """What the sweep's clock allows: the paired noise of three clocks, whether neighbouring runs share it, and
    the rounds a verdict needs at that noise (module docstring)."""
    manifest, runs = load(sweep)
    by: dict[str, dict[int, RunResult]] = {}
    for r in runs:
        if r.ok:
            by.setdefault(r.label, {})[r.round] = r
    rule = StoppingRule.from_dict(manifest["rule"]) if manifest.get("rule") else StoppingRule()
    cmp = compare(runs, rule=rule, equivalence_margin=margin)
    family = sum(1 for r in cmp.rows if r.status == "ok" and in_family(r.label))
    epoch_sd = clock_noise_sd(cmp.rows, sorted(by.get("baseline", {})))
    clocks = {"epoch (the verdicts' clock)": (epoch_sd, None)}
    for name, how in CLOCKS.items():
        clocks[name] = pooled_sd(by, lambda run, how=how: _step_clock(run, how))
    lines = [
        f"{sweep}: {family} rows in the family, rule alpha {rule.alpha:g}, at most {rule.max_rounds} rounds;"
        f" margin +-{margin:.0%}",
        "",
        '| clock | paired noise (pooled sd per round) | rounds for "no effect beyond the margin" (80% of '
        f"null rows, TOST at {rule.alpha:g}) | rounds to see 15% family-wise (80%, Holm's first step "
        f"{rule.alpha:g}/{family}) |",
        "|---|---|---|---|",
    ]
    for name, (sd, _df) in clocks.items():
        eq = rounds_for_equivalence(sd, margin, rule.alpha)
        eff = rounds_for_effect(sd, 1.15, rule.alpha / max(family, 1))
        lines.append(f"| {name} | {sd:.4f} | {eq if eq else '> 40'} | {eff if eff else '> 40'} |")
    corr = lag_correlation(manifest, by)
    lines += [
        "",
        "Residual correlation with the run `lag` places later in the same round (step mean): "
        + ", ".join(f"lag {k}: {c:+.2f} ({n} pairs)" for k, (c, n) in corr.items()),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path, help="a sweep's folder (its sweep.json records the rule it ran under)")
    ap.add_argument("--margin", type=float, default=0.10, help="the equivalence margin to judge under (0.1: 10%%)")
    ap.add_argument("--quantization", action="store_true", help="also measure what interpolation removes")
    ap.add_argument(
        "--smoothing",
        action="store_true",
        help="only what a trailing mean of the evaluations would remove from the spread of the steps to the target",
    )
    ap.add_argument(
        "--noise",
        action="store_true",
        help="only what the clock allows: its paired noise, whether "
        "neighbouring runs share it, and the rounds a verdict needs at it",
    )
    args = ap.parse_args(argv)
    if args.noise:
        print(noise(args.sweep, args.margin))
        return 0
    if args.smoothing:
        print(smoothing(args.sweep))
        return 0
    print(replay(args.sweep, args.margin))
    if args.quantization:
        print(quantization(args.sweep))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
