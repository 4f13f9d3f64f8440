"""The reference's published text, generated from committed sweep folders (never typed by hand):

* :func:`reference_markdown`, docs/reference.md's block: the target, the noise floors, the A/A row, the verdict
  count, the measured best set, and one line per row with its verdict, its time to accuracy (a censored one as
  the bound it is) and the two factors of it, and its accuracy delta;
* :func:`headline_markdown`, README's headline: the measured best set, the verdict count, the wall time and the
  A/A spread, the same lines as the full block's;
* :func:`sampling_markdown`, docs/reference.md's table of the LABOR sweep: time to accuracy, accuracy, steps
  to the target, the nodes a batch samples and the step's phases, per row;
* :func:`compression_markdown`, docs/distributed.md's compression table: bytes on the wire, communication share
  and each compression's test accuracy against dense data parallel, at the best validation point.

``tests/project/test_readme.py`` regenerates each and requires the page's block to be equal, so a published
figure cannot drift from its file.

    python -m gnnbench.report.reference_md results/reference/compare-small-cpu              # the full block
    python -m gnnbench.report.reference_md --headline results/reference/compare-small-cpu   # README's headline
    python -m gnnbench.report.reference_md --sampling results/reference/compare-small-labor-cpu
    python -m gnnbench.report.reference_md --compression results/reference/compression-small-cpu
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gnnbench.measure.compare import (
    AA_DUET_LABEL,
    AA_INPROCESS_LABEL,
    AA_LABEL,
    BASELINE,
    Comparison,
    aa_spread_line,
    compare,
    in_family,
    verdict_summary,
    verdict_words,
)
from gnnbench.measure.sweep import BEST_SET_DIR
from gnnbench.report.sweep_time import sweep_time
from gnnbench.text import noise_floor, pp, ratio_of

__all__ = [
    "reference_markdown",
    "headline_markdown",
    "compression_markdown",
    "sampling_markdown",
    "SAMPLING_MARKERS",
    "sweep_minutes",
    "MARKERS",
    "HEADLINE_MARKERS",
    "COMPRESSION_MARKERS",
]

MARKERS = ("<!-- reference:start -->\n", "\n<!-- reference:end -->")
HEADLINE_MARKERS = ("<!-- headline:start -->\n", "\n<!-- headline:end -->")
SAMPLING_MARKERS = ("<!-- sampling:start -->\n", "\n<!-- sampling:end -->")
COMPRESSION_MARKERS = ("<!-- compression:start -->\n", "\n<!-- compression:end -->")


def sweep_minutes(log: Path) -> float | None:
    """The wall time of the runs a sweep's progress log times (``compare.log``), in minutes
    (:func:`gnnbench.report.sweep_time.sweep_time`: midnight crossings counted, the gaps between invocations of
    a resumed sweep left out); ``None`` without a timed run."""
    t = sweep_time(log)
    return None if t is None else t.minutes


def _factor(r, which: str) -> str:
    f = r.factors
    if f is None:
        return "-"
    if which == "steps":
        return "baseline's (derived)" if f.steps is None and r.derived else ratio_of(f.steps) if f.steps else "-"
    return ratio_of(f.per_step) if f.per_step else "-"


def _comparison(sweep: Path) -> Comparison:
    """The sweep folder compared as the report compares it: its own stopping rule and declared margin."""
    from gnnbench.report.inputs import load_inputs, sweep_equivalence_margin, sweep_rule

    runs = load_inputs(runs=[sweep]).runs_of(sweep)
    return compare(runs, rule=sweep_rule(sweep), equivalence_margin=sweep_equivalence_margin(sweep))


def _spread_line(c: Comparison) -> str | None:
    spread = aa_spread_line(c.rows)
    return spread + "." if spread else None


def _wall_line(sweep: Path) -> str | None:
    t = sweep_time(sweep / "compare.log")
    return None if t is None else f"Wall time from its log: {t.text()}."


def _verdict_line(c: Comparison) -> str | None:
    summary = verdict_summary(c.rows)
    return summary[0].upper() + summary[1:] + "." if summary else None


def _time_to_accuracy(r) -> str:
    """A row's primary ratio, a censored one as the bound it is with the rounds that reached the target."""
    from gnnbench.report.rows import reached_text, speedup_text

    reached = f", reached {reached_text(r)}" if r.censored else ""
    return f"{speedup_text(r)} by {r.primary}{reached}"


def reference_markdown(sweep: str | Path) -> str:
    """docs/reference.md's block for the sweep folder ``sweep`` (the folder ``compare --out-dir`` wrote)."""
    sweep = Path(sweep)
    c = _comparison(sweep)
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
    duet = next((r for r in c.rows if r.label == AA_DUET_LABEL and r.status == "ok"), None)
    if duet is not None:
        lines.append(
            f"A/A in duet (the baseline against itself, two processes at once, one core each): step "
            f"{ratio_of(duet.step_speedup)}."
        )
    lines += [line for line in (_spread_line(c), _wall_line(sweep), _verdict_line(c), _best_set_line(sweep)) if line]
    lines += [
        "",
        "Ratios are the baseline's over the row's, so > 1 is better in every column: time to accuracy and time per "
        "step > 1 is faster; steps to the target < 1 means more steps than the baseline (0.50x: twice as many).",
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
            f"{_time_to_accuracy(r)} | {judged} | {_factor(r, 'steps')} | "
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


def headline_markdown(sweep: str | Path) -> str:
    """README's headline of the sweep folder ``sweep``, one bullet a line: the measured best set, the verdict
    count, the wall time and the A/A spread (the full block's own lines, those the sweep has)."""
    sweep = Path(sweep)
    c = _comparison(sweep)
    lines = (_best_set_line(sweep), _verdict_line(c), _wall_line(sweep), _spread_line(c))
    return "\n".join(f"- {line}" for line in lines if line)


def sampling_markdown(sweep: str | Path) -> str:
    """docs/reference.md's table of a sweep of entries that change what a batch samples (the LABOR sweep): per
    row its time to accuracy with the rounds that reached the target, its accuracy against the baseline, its
    steps (epochs) to the target, the nodes a batch samples and the step with its sampling and forward phases;
    the baseline's row gives its own time to the target and test accuracy."""
    from gnnbench.report.rows import reached_text, speedup_text

    lines = [
        "| row | time to accuracy [95%] | accuracy, pp [95%] | steps (epochs) to the target, baseline / row | "
        "nodes per batch (share of the graph) | step ms | sample ms | forward ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in _comparison(Path(sweep)).rows:
        if r.status != "ok":
            continue
        if r.label == BASELINE:
            tta, accuracy = f"{r.tta_s:.1f} s, reached {reached_text(r)}", f"{r.test_acc:.4f} test"
        else:
            tta = f"{speedup_text(r)}, reached {reached_text(r)}"
            accuracy = f"{pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high, unit='')}: {r.acc_verdict}"
        sampled = r.sampled
        nodes = "-" if not sampled else f"{sampled['nodes_per_batch']:,.0f} ({100 * sampled['coverage']:.0f}%)"
        phase = {k: "-" if k not in r.phases else f"{1e3 * r.phases[k]:.0f}" for k in ("sample", "forward")}
        steps = "-" if r.label == BASELINE else _factor(r, "steps")
        lines.append(
            f"| `{r.label}` | {tta} | {accuracy} | {steps} | {nodes} | {r.step_ms:.0f} | {phase['sample']} | "
            f"{phase['forward']} |"
        )
    return "\n".join(lines)


def compression_markdown(sweep: str | Path) -> str:
    """docs/distributed.md's table of the compression sweep ``sweep``: per multi-rank configuration its bytes
    on the wire per step and rank, its communication share and, for a compression, its test accuracy against
    dense data parallel, each at its best validation point, paired by round (the report's figures)."""
    from gnnbench.report.distributed_text import share_text, wire_text

    c = _comparison(Path(sweep))
    lines = [
        "| entry | bytes per step and rank | communication share | test accuracy against dense data parallel |",
        "|---|---|---|---|",
    ]
    rows = [r for r in c.rows if r.status == "ok" and r.distributed]
    dense = next((r.distributed["accuracy_vs_dense"] for r in rows if r.distributed.get("accuracy_vs_dense")), None)
    for r in rows:
        d, a = r.distributed, r.distributed.get("accuracy_vs_dense")
        if a:
            accuracy = f"{pp(a['delta'], a['low'], a['high'])} over {a['rounds']} rounds: {a['verdict']}"
        elif dense is not None and r.label == dense["against"]:
            accuracy = f"{100 * dense['dense_test']:.2f}% (its test accuracy, mean over the paired rounds)"
        else:
            accuracy = "-"
        lines.append(f"| `{r.label}` | {wire_text(d)} | {share_text(d)} | {accuracy} |")
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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Print a published block generated from a committed sweep folder.")
    p.add_argument("sweep", help="the sweep folder (compare --out-dir)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--headline", action="store_true", help="README's headline instead of the full block")
    which.add_argument("--compression", action="store_true", help="the compression table of a multi-rank sweep")
    which.add_argument("--sampling", action="store_true", help="the table of a sweep of sampling entries (LABOR)")
    a = p.parse_args(argv)
    make = (
        headline_markdown
        if a.headline
        else compression_markdown
        if a.compression
        else sampling_markdown
        if a.sampling
        else reference_markdown
    )
    print(make(a.sweep))


if __name__ == "__main__":
    main()
