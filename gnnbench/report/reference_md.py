"""The README's reference table, generated from a committed sweep folder (never typed by hand): the target, the noise
floors, the A/A row, the verdict count, the measured best set, and one line per row with its verdict, its time to
accuracy and the two factors of it, and its accuracy delta. ``tests/project/test_readme.py`` regenerates it and
requires README's block to be equal, so a published figure cannot drift from its file.

    python -m gnnbench.report.reference_md results/reference/compare-small-cpu
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from gnnbench.measure.compare import (
    AA_INPROCESS_LABEL,
    AA_LABEL,
    BASELINE,
    aa_spread_line,
    compare,
    in_family,
    verdict_summary,
    verdict_words,
)
from gnnbench.measure.sweep import BEST_SET_DIR
from gnnbench.text import noise_floor, pp, ratio_of

__all__ = ["reference_markdown", "sweep_minutes", "MARKERS"]

MARKERS = ("<!-- reference:start -->\n", "\n<!-- reference:end -->")
_STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d) ")


def sweep_minutes(log: Path) -> float | None:
    """The wall time a sweep's progress log spans (``compare.log``: one ``HH:MM:SS`` line per finished run), in
    minutes, midnight crossings included; ``None`` without two stamped lines. The first stamp is the end of the
    first calibration run, so the figure leaves out that one run."""
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return None
    seconds, total, last = [], 0, None
    for line in lines:
        m = _STAMP.match(line)
        if not m:
            continue
        t = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))
        if last is not None and t < last:
            total += 86400
        last = t
        seconds.append(t + total)
    return (seconds[-1] - seconds[0]) / 60 if len(seconds) >= 2 else None


def _factor(r, which: str) -> str:
    f = r.factors
    if f is None:
        return "-"
    if which == "steps":
        return "baseline's (derived)" if f.steps is None and r.derived else ratio_of(f.steps) if f.steps else "-"
    return ratio_of(f.per_step) if f.per_step else "-"


def reference_markdown(sweep: str | Path) -> str:
    """The README block for the sweep folder ``sweep`` (the folder ``compare --out-dir`` wrote)."""
    from gnnbench.report.inputs import load_inputs, sweep_equivalence_margin, sweep_rule

    sweep = Path(sweep)
    runs = load_inputs(runs=[sweep]).runs_of(sweep)
    c = compare(runs, rule=sweep_rule(sweep), equivalence_margin=sweep_equivalence_margin(sweep))
    lines = [
        f"Target: validation {c.target:.4f} ({c.target_source.split(':')[0]}); noise floors "
        + ", ".join(f"{k.replace('_', ' ')} {noise_floor(v)}" for k, v in c.floors.items())
        + "."
    ]
    if c.aa is not None and c.aa.status == "ok":
        lines.append(
            f"A/A (the baseline against itself, own seeds): {c.aa.primary} {ratio_of(c.aa.primary_ratio)}, "
            f"step {ratio_of(c.aa.step_speedup)}."
        )
    inprocess = next((r for r in c.rows if r.label == AA_INPROCESS_LABEL and r.status == "ok"), None)
    if inprocess is not None:
        lines.append(
            f"A/A in one process (the baseline against itself, steps interleaved): step "
            f"{ratio_of(inprocess.step_speedup)}."
        )
    spread = aa_spread_line(c.rows)
    if spread:
        lines.append(spread + ".")
    minutes = sweep_minutes(sweep / "compare.log")
    if minutes is not None:
        lines.append(f"Wall time from its log: {minutes:.0f} minutes after the first calibration run.")
    summary = verdict_summary(c.rows)
    if summary:
        lines.append(summary[0].upper() + summary[1:] + ".")
    best = _best_set_line(sweep)
    if best:
        lines.append(best)
    lines += [
        "",
        "| row | verdict | time to accuracy [95%] | judged by | steps to the target | time per step | "
        "accuracy, pp [95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in c.rows:
        if r.status != "ok" or r.label == BASELINE or not (in_family(r.label) or r.label == AA_LABEL):
            continue
        judged = r.factors.judged_by if r.factors is not None else r.primary
        lines.append(
            f"| `{r.label}` | {verdict_words(r) if r.label != AA_LABEL else 'A/A check'} | "
            f"{ratio_of(r.primary_ratio)} by {r.primary} | {judged} | {_factor(r, 'steps')} | "
            f"{_factor(r, 'per_step')} | {pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high, unit='')}: "
            f"{r.acc_verdict} |"
        )
    not_run = sorted(r.label for r in c.rows if r.status != "ok")
    if not_run:
        lines += [
            "",
            f"Not measured here ({len(not_run)}: unavailable on this machine or not applicable, each with "
            f"its reason in the report): {', '.join(not_run)}.",
        ]
    return "\n".join(lines)


def _best_set_line(sweep: Path) -> str | None:
    """The measured best set, from the sweep's manifest and its ``best-set`` folder."""
    from gnnbench.measure.sweep import outcome_line
    from gnnbench.report.inputs import load_inputs
    from gnnbench.report.sections.sweep import Sweep, best_set_outcome, load_sweeps

    if not (sweep / BEST_SET_DIR).is_dir():
        main = Sweep("", [], None, group=str(sweep))
        outcome = best_set_outcome(main, [])
    else:
        sweeps = load_sweeps(load_inputs(runs=[sweep / BEST_SET_DIR]).runs_by_sweep)
        outcome = best_set_outcome(Sweep("", [], None, group=str(sweep)), sweeps)
    line = outcome_line(
        outcome,
        lambda r: (
            f"{ratio_of(r.primary_ratio)} by {r.primary} (steps {_factor(r, 'steps')}, "
            f"per step {_factor(r, 'per_step')}), accuracy "
            f"{pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)}: {r.acc_verdict}"
        ),
    )
    return line[0].upper() + line[1:] + "." if line else None


if __name__ == "__main__":
    print(reference_markdown(sys.argv[1]))
