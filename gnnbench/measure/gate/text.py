"""The gate's table: one line per benchmark (and per setup or epoch figure that moved), its rule and its verdict."""

from __future__ import annotations

import math

from gnnbench import text
from gnnbench.measure.gate.verdicts import (
    ACC_BOUND_PP,
    MIN_THRESHOLD,
    NOT_WORK,
    POWER,
    BenchVerdict,
    GateResult,
    MetricVerdict,
)

__all__ = ["format_gate"]


def format_gate(r: GateResult) -> str:
    """The gate's table, its rule and its verdict.

    In order: what ran and the rule (:func:`_header_lines`), one line per benchmark and per setup or epoch
    figure that moved (:func:`_bench_lines`), the counted instructions (:func:`_count_lines`), what was not run
    or failed (:func:`_failure_lines`), and the verdict (:func:`_verdict_lines`).
    """
    lines = _header_lines(r)
    for b in r.benches:
        lines += _bench_lines(b)
    judged = [m for b in r.benches for m in b.metrics()]
    if judged and not any(m.significant for m in judged):
        lines.append(f"setup and epoch time: no significant change in any of {len(judged)} figures")
    lines += _count_lines(r)
    lines.append("")
    lines += _failure_lines(r)
    lines += _verdict_lines(r)
    return "\n".join(lines)


def _design(r: GateResult) -> str:
    """How the rounds timed the two trees, in words (and why they alternate where a duet was asked for)."""
    if r.design == "duet":
        return "duet processes (both trees at once, each pinned to its own core, cores swapped every round)"
    return "alternating processes" + (f" ({r.design_note})" if r.design_note else "")


def _header_lines(r: GateResult) -> list[str]:
    """What ran (the trees, rounds, threads, seconds, environments and rounds added), the rule, and the table's
    column heads."""
    envs = f"; environments: base {r.pythons['base']}, head {r.pythons['head']}" if r.pythons else ""
    extra = (
        f"; up to {max(r.extra_rounds.values())} rounds added to {len(r.extra_rounds)} benchmark(s) whose "
        f"spread could not see {r.sensitivity:.0%}, within the {r.budget_seconds:.0f} s budget"
        if r.extra_rounds
        else ""
    )
    first = r.rounds - (max(r.extra_rounds.values()) if r.extra_rounds else 0)
    lines = [
        f"regression gate: {r.base} (base) against {r.head} (head), {first} rounds of {_design(r)} "
        f"({r.threads} thread each), {r.seconds:.0f} s{envs}{extra}",
        f"ratio = base / head step time (below 1: head is slower); {r.family}; a regression is a Holm-"
        f"significant slowdown beyond {MIN_THRESHOLD:g}x, an accuracy "
        f"drop beyond {ACC_BOUND_PP:g} pp on the same seeds, or a benchmark fine in base that head lost; "
        f"'detects' is the smallest slowdown this run flags {POWER:.0%} of the time (above "
        f"{1 + r.sensitivity:.2f}x: inconclusive here)",
        "",
    ]
    head = (
        f"{'benchmark':<22}{'base ms':>9}{'head ms':>9}  {'ratio [95% CI]':<24}{'threshold':>10}"
        f"{'detects':>9}  {'phase that moved':<30}{'acc pp':>8}  verdict"
    )
    return lines + [head, "-" * len(head)]


def _bench_lines(b: BenchVerdict) -> list[str]:
    """A benchmark's line (dashes and why, when it did not run in both trees), then one line per setup or
    epoch figure of it that moved (significant or a regression)."""
    if b.status != "ok":
        verdict = f"LOST: {b.reason}" if b.lost else f"{b.status}: {b.reason}"
        return [f"{b.name:<22}{'-':>9}{'-':>9}  {'-':<24}{'-':>10}{'-':>9}  {'-':<30}{'-':>8}  {verdict}"]
    ratio = text.ratio(b.ratio, b.low, b.high, digits=3)
    phase = f"{b.phase} {text.ratio_of(b.phase_ratio, digits=2)}" if b.phase else "-"
    lines = [
        f"{b.name:<22}{b.base_ms:>9.2f}{b.head_ms:>9.2f}  {ratio:<24}{b.threshold:>9.3f}x"
        f"{_factor(b.detectable):>9}  {phase:<30}"
        f"{'-' if b.acc_delta_pp is None else f'{b.acc_delta_pp:+.2f}':>8}  {_verdict_text(b)}"
    ]
    return lines + [_metric_line(m) for m in b.metrics() if m.significant or m.regression]


def _metric_line(m: MetricVerdict) -> str:
    """The indented line of a setup or epoch figure that moved."""
    mphase = f"{m.phase} {text.ratio_of(m.phase_ratio, digits=2)}" if m.phase else "-"
    return (
        f"{'  ' + m.metric:<22}{m.base_ms:>9.1f}{m.head_ms:>9.1f}  "
        f"{text.ratio(m.ratio, m.low, m.high, digits=3):<24}{m.threshold:>9.3f}x"
        f"{_factor(m.detectable):>9}  {mphase:<30}{'':>8}  {_verdict_text(m)}"
    )


def _failure_lines(r: GateResult) -> list[str]:
    """The benchmarks not run here (and why), and a failed benchmark process with the end of its stderr."""
    lines = []
    if r.skipped:
        lines.append("not run here: " + "; ".join(f"{k} ({v})" for k, v in r.skipped.items()))
    if r.failure is not None:
        f = r.failure
        code = f" (exit {f.returncode})" if f.returncode is not None else ""
        tail = "\n".join("    " + line for line in (f.stderr_tail or "(no output)").splitlines()[-15:])
        lines.append(
            f"GATE FAILED: {f.side}'s benchmark process {f.kind} in round {f.round + 1}{code}; the end "
            f"of its stderr:\n{tail}"
        )
    return lines


def _verdict_lines(r: GateResult) -> list[str]:
    """The verdict: the counted instructions' regressions, then the wall clock's regressions and losses, or
    (with none) why the run is clean, inconclusive or judged nothing (:func:`_clean_lines`)."""
    bad = r.regressed
    lines = []
    if r.count_regressions:
        lines.append(
            "REGRESSION in counted instructions: "
            + ", ".join(
                f"{c.name} {c.ratio:.3f}x the instructions per {c.unit} (threshold {1 + c.threshold:.3f}x)"
                for c in r.count_regressions
            )
        )
    if bad:
        lost = [b.name for b in bad if b.lost]
        slow = [b.name for b in bad if not b.lost]
        if slow:
            lines.append(f"REGRESSION in {len(slow)} benchmark(s): {', '.join(slow)}")
        if lost:
            lines.append(f"LOST in head: {', '.join(lost)} (fine in base)")
    elif r.count_regressions:
        lines.append("the wall clock flagged no regression; the counted instructions did (exit 1)")
    elif r.failure is None:
        lines += _clean_lines(r)
    return lines


def _clean_lines(r: GateResult) -> list[str]:
    """The verdict of a run that flagged no regression and did not fail: inconclusive where a benchmark every
    configuration runs through could not see the sensitivity by either measure (with what would resolve it), or
    by the one that sees what is not work (its instructions counted, its wall clock too noisy), inconclusive for
    the other benchmarks' own paths, nothing judged, or no regression."""
    lines = []
    if r.blind:
        worst = max(b.detectable for b in r.blind)
        lines += [
            f"no regression seen, but inconclusive here: {len(r.blind)} benchmark(s) that every "
            f"configuration's code runs through could not have seen a {r.sensitivity:.0%} slowdown on this "
            f"machine (they detect {_factor(worst)} at worst): {', '.join(b.name for b in r.blind)} (exit 3)",
        ]
    if r.time_blind:
        worst = max(b.detectable for b in r.time_blind)
        names = [b.name for b in r.time_blind]
        lines += [
            f"inconclusive here (exit 3) for a slowdown that is not work: the counted instructions of "
            f"{', '.join(names)} did not grow beyond their threshold{'s' * (len(names) > 1)}, but "
            f"{'their' if len(names) > 1 else 'its'} wall clock could not have seen a {r.sensitivity:.0%} "
            f"slowdown on this machine ({'they detect' if len(names) > 1 else 'it detects'} {_factor(worst)} at "
            f"worst), and counts cannot see {NOT_WORK}",
        ]
    if lines:
        return [*lines, resolution_line(r, [*r.blind, *r.time_blind]), *_entry_lines(r, named=False)]
    if r.inconclusive:
        return _entry_lines(r, named=True)
    if not r.judged:
        return ["nothing was judged: no benchmark ran in both trees over 2 paired rounds (exit 3)"]
    unjudged = len(r.benches) - len(r.judged)
    return [
        f"no regression (every benchmark could see a {r.sensitivity:.0%} slowdown)"
        if not unjudged
        else f"no regression in the {len(r.judged)} judged benchmarks (each could see a {r.sensitivity:.0%} "
        f"slowdown); {unjudged} could not run in both trees (listed above)"
    ]


def _entry_lines(r: GateResult, *, named: bool) -> list[str]:
    """The inconclusive benchmarks that do not decide the run (their own code paths only); ``named``: the run's
    verdict line, said as "no regression in the paths every configuration runs"."""
    deciding = {b.name for b in [*r.blind, *r.time_blind]}
    rest = [b for b in r.inconclusive if b.name not in deciding]
    if not rest:
        return []
    worst = max(b.detectable for b in rest)
    own = (
        f"inconclusive here: {', '.join(b.name for b in rest)}, whose spread could not show {r.sensitivity:.0%} "
        f"within the rounds and budget (they detect {_factor(worst)} at worst): a slowdown of their own code "
        "paths of less than that may have gone unseen"
    )
    if not named:
        return [own]
    return [
        f"no regression in the paths every configuration runs (the baseline and the micro-benchmarks could each "
        f"see a {r.sensitivity:.0%} slowdown); {own}"
    ]


def _count_lines(r: GateResult) -> list[str]:
    """The counted instructions beside the wall clock: one line per benchmark, or why none were taken."""
    if r.counts_unavailable:
        return [
            "",
            f"counted instructions: not taken here ({r.counts_unavailable}); the wall clock is the only measure",
        ]
    if not r.counts:
        return []
    n = max(len(c.base) + len(c.head) for c in r.counts) // 2
    out = [
        "",
        f"counted instructions (callgrind, {n} process(es) per tree, {r.counts_seconds:.0f} s): ratio = head "
        "/ base instructions per unit (above 1: head does more work); they do not move with the machine's "
        "load, and cannot see memory stalls, waiting, other threads or the GPU (the wall clock judges those)",
        f"{'benchmark':<22}{'unit':>6}{'base':>14}{'head':>14}{'ratio':>9}{'spread':>9}{'threshold':>11}  verdict",
    ]
    for c in r.counts:
        if c.status != "ok":
            out.append(f"{c.name:<22}{c.unit:>6}{'-':>14}{'-':>14}{'-':>9}{'-':>9}{'-':>11}  {c.status}: {c.reason}")
            continue
        import statistics

        verdict = "REGRESSION" if c.regression else "improvement" if c.improvement else "no change beyond the threshold"
        out.append(
            f"{c.name:<22}{c.unit:>6}{statistics.median(c.base):>14,.0f}{statistics.median(c.head):>14,.0f}"
            f"{c.ratio:>8.4f}x{c.spread:>8.2%}{1 + c.threshold:>10.3f}x  {verdict}"
        )
    return out


def resolution_line(r: GateResult, benches: list | None = None) -> str:
    """What the primary tier could resolve on this machine in this run, and the budget that would resolve the
    sensitivity at the spread it measured (the rounds it needs at that spread, at this run's pace per round);
    ``benches``: the inconclusive benchmarks it speaks of (default :attr:`GateResult.blind`). Counted instructions
    are offered as a way to see work only where none were taken; they cannot clear a slowdown that is not work."""
    from gnnbench.measure.gate.verdicts import detectable_at

    worst = max(r.blind if benches is None else benches, key=lambda b: b.detectable)
    need = next((k for k in range(max(r.rounds, 2), 201) if detectable_at(worst, k) <= 1 + r.sensitivity + 1e-12), None)
    wall = max(r.seconds - r.counts_seconds, 0.0)
    per_round = wall / max(r.rounds, 1)
    where = f"this machine resolves {_factor(worst.detectable)} on {worst.name} in {r.rounds} rounds ({wall:.0f} s)"
    if need is None:
        what = (
            "a quieter machine, or counted instructions (--counts), which do not move with its load"
            if not r.counts
            else "a quieter machine (the counts taken see work only)"
        )
        return f"{where}; at its spread no budget within 200 rounds would see {r.sensitivity:.0%}: {what}"
    return (
        f"{where}; at its spread, {need} rounds would see {r.sensitivity:.0%}: run with --max-rounds {need} "
        f"--budget {math.ceil(need * per_round / 60) * 60:.0f}"
        + (", or count instructions (--counts)" if not r.counts else "")
    )


def _factor(x: float | None) -> str:
    return "-" if x is None else "none" if math.isinf(x) else f"{x:.2f}x"


def _verdict_text(v: BenchVerdict | MetricVerdict) -> str:
    if v.regression:
        text_ = "REGRESSION"
    elif v.improvement:
        text_ = "improvement"
    elif v.significant:
        text_ = "significant, within the threshold"
    elif getattr(v, "inconclusive", False):
        text_ = "inconclusive here"
    else:
        text_ = "no significant difference"
    if getattr(v, "acc_regression", False):
        text_ += "; ACCURACY REGRESSION"
    return text_
