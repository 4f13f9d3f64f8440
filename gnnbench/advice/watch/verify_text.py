"""The text of ``diagnose --verify --script`` (:func:`format_verification`): the table of variants against the
script as it is, their verdicts, what was refused, the combination and the lines to edit."""

from __future__ import annotations

import math
import statistics
from typing import Any

from gnnbench.advice.watch.verify import COMPILE_WARMUP, Outcome, Verification
from gnnbench.measure.stats import FUTILE, SIGNIFICANT


def _verdict(o: Outcome, floor: float) -> str:
    if o.error:
        return f"not measured: {o.error}"
    r = o.ratio
    if r is None or not math.isfinite(r.low):
        return "not resolved (too few rounds)"
    after = _after(o)
    if o.significant:
        return ("pays here" if r.ratio > 1 else "slower here: does not pay") + after
    if o.stop and o.stop.get("reason") == FUTILE:
        return (
            f"no difference resolved: stopped after {o.stop['look']} rounds, more rounds would almost surely "
            "not resolve one (futility)"
        )
    if r.significant:
        return "an interval excluding 1, not significant across the variants (Holm)" + after
    if math.isfinite(floor) and max(r.high, 1 / r.low) <= floor:
        return f"no difference resolved (within the noise floor {floor:.3f}x)" + after
    return "not resolved: the interval contains 1" + after


def _after(o: Outcome) -> str:
    """When the rounds ended before the rule's last look: said with the verdict."""
    if o.stop and o.stop.get("reason") == "budget":
        return f" (the budget ended its rounds after {o.stop['look']}; judged at that look's level)"
    if o.stop and o.stop.get("reason") == SIGNIFICANT:
        return f" (decided after {o.stop['look']} rounds)"
    return ""


def _rounds_text(v: Verification) -> str:
    if v.max_rounds <= v.min_rounds:
        return f"{v.rounds} alternating rounds"
    budget = f", within {v.budget_s / 60:.0f} min" if v.budget_s else ""
    return (
        f"{v.rounds} alternating rounds ({v.min_rounds} to {v.max_rounds}{budget}: a variant stops once decided "
        "by compare's stopping rule, its level split over the looks)"
    )


def _loss_text(loss: dict[str, Any] | None) -> str:
    if not loss:
        return ""
    if loss["identical"]:
        return f"loss identical to the baseline's at every one of {loss['steps']} steps"
    ci = f" [{loss['low']:+.4f}, {loss['high']:+.4f}]" if math.isfinite(loss["low"]) else ""
    return (
        f"loss at equal steps (first {loss['steps']}, same seeds): {loss['diff']:+.4f}{ci} against the "
        f"baseline's {loss['base_loss']:.4f}"
    )


def _process_spread(v: Verification) -> str:
    """Why the script's variants alternate processes, and the spread that costs (sd of the log step per run)."""
    xs = [math.log(x) for x in v.base_ms if x and x > 0]
    sd = f"sd {statistics.stdev(xs):.3f} of the log step from one run to the next" if len(xs) > 1 else "one run"
    return (
        "a script cannot share a process with a modified copy of itself (each change patches the process: its "
        f"loader, its model, its allocator), so the rounds alternate processes: {sd} here (gnnbench's own "
        "pipeline, timed in one process with steps interleaved, measured about 0.02: docs/statistics.md)"
    )


def format_verification(v: Verification) -> str:
    """The table, the verdicts, the refusals, the combination and the lines to edit."""
    lines = [
        f"--verify in your script: baseline and each variant in separate processes, {_rounds_text(v)}, "
        f"{v.steps} measured steps a run after {v.warmup} warm-up; ratio = baseline / variant step "
        "(above 1: faster), paired-t over rounds, Holm across the variants",
        f"baseline: {statistics.median(v.base_ms):.1f} ms/step (median of the rounds' run medians); noise "
        f"floor {v.floor:.3f}x (A/A, from the baseline's spread over {len(v.base_ms)} runs)",
        _process_spread(v),
        "",
    ]
    width = max([len(o.change.label) for o in v.outcomes] + [12])
    lines.append(f"{'variant':<{width}}  {'ms/step':>9}  {'speedup [95%]':<24} verdict")
    for o in v.outcomes:
        lines.append(_row(o, width, v.floor))
        for extra in (
            _loss_text(o.loss),
            _compile_text(o, v),
            *(f"applied: {e}" for e in o.change.edit if not o.error),
        ):
            if extra:
                lines.append(f"{'':<{width}}  {extra}")
    if v.refused:
        lines.append("")
        lines.append("not applied to this script (refused, not measured):")
        lines += [f"  {name}: {why}" for name, why in v.refused.items()]
    lines.append("")
    chosen = [o for o in v.outcomes if o.pays]
    if v.combination is not None:
        c = v.combination
        lines.append(
            f"combined ({', '.join(c.change.entries)}), measured in {len(v.combination_base_ms)} rounds "
            f"of its own against the baseline ({statistics.median(v.combination_base_ms):.1f} ms/step there):"
        )
        lines.append(_row(c, width, v.floor))
        if c.loss:
            lines.append(f"{'':<{width}}  {_loss_text(c.loss)}")
        best = c.change if c.pays else None
        if best is None:
            single = max(chosen, key=lambda o: o.ratio.ratio)
            lines.append(f"the combination does not pay significantly: the best single change is {single.change.label}")
            best = single.change
    elif chosen:
        best = max(chosen, key=lambda o: o.ratio.ratio).change
    else:
        best = None
    if best is not None:
        lines.append("")
        lines.append("the change to make in your script:")
        lines += [f"  {e}" for e in best.edit]
    else:
        lines.append("no variant pays significantly in this script: leave it as it is (or measure more rounds)")
    lines += [f"note: {n}" for n in v.notes]
    lines.append(f"--verify took {v.wall_s / 60:.1f} min")
    return "\n".join(lines)


def _compile_text(o: Outcome, v: Verification) -> str:
    """A compiled variant's warm-up (its compilation in it) beside the baseline's, apart from the step ratio."""
    if not o.change.compile or not o.warmup_s or not v.base_warmup_s:
        return ""
    return (
        f"warm-up with compilation {statistics.median(o.warmup_s):.1f} s ({max(v.warmup, COMPILE_WARMUP)} "
        f"steps) against the baseline's {statistics.median(v.base_warmup_s):.1f} s ({v.warmup} steps), "
        "median over runs; not in the ratio"
    )


def _row(o: Outcome, width: int, floor: float) -> str:
    if o.error or o.ratio is None:
        return f"{o.change.label:<{width}}  {'-':>9}  {'-':<24} {_verdict(o, floor)}"
    r = o.ratio
    ci = f"{r.ratio:.3f}x [{r.low:.3f}, {r.high:.3f}]" if math.isfinite(r.low) else f"{r.ratio:.3f}x"
    return f"{o.change.label:<{width}}  {statistics.median(o.step_ms):>9.1f}  {ci:<24} {_verdict(o, floor)}"
