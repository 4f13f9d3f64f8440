"""The page's first screen, across sweeps: the A/A check (the baseline against itself) of every sweep that ran
one, and what pays here at what accuracy.
"""

from __future__ import annotations

from gnnbench.measure.compare import STATIC_LIST, TIME_TO_ACCURACY, ComparisonRow, in_family, measured_best, tradeoffs
from gnnbench.measure.sweep import outcome_line
from gnnbench.report.html import esc, figure_html
from gnnbench.report.rows import ratio_text, speedup_text
from gnnbench.report.sections.charts import tradeoff_chart
from gnnbench.report.sections.sweep import Sweep, best_set_outcome, where_measured
from gnnbench.text import absent, pp


def _aa_line(s: Sweep) -> str:
    aa = s.comparison.aa
    name = esc(s.title)
    if aa.status != "ok":
        return f"<li>{name}: the A/A row was not measured ({esc(aa.status)}: {esc(aa.reason)}).</li>"
    epoch, step, primary = aa.epoch_speedup, aa.step_speedup, aa.primary_ratio
    noisy = any(d and d.significant for d in (epoch, step, primary))
    verdict = (
        "<b class='loss'>significant: this machine is too noisy for the effects reported below; treat "
        "them with suspicion</b>"
        if noisy
        else "no significant difference, as it should be"
    )
    first = (
        f"{esc(aa.primary)} (the sweep's primary clock) {esc(ratio_text(primary))}, "
        if aa.primary != "epoch time" and primary is not None
        else ""
    )
    return (
        f"<li>{name}: {first}epoch time {esc(ratio_text(epoch))}, step time {esc(ratio_text(step))} over "
        f"{aa.rounds} rounds: {verdict}.</li>"
    )


def aa_summary(sweeps: list[Sweep]) -> str:
    """The A/A result of every sweep that ran one, or how to run one."""
    checked = [s for s in sweeps if s.comparison is not None and s.comparison.aa is not None]
    if not checked:
        return (
            "<div class='aa' id='aa-check'><b>A/A check:</b> no A/A check was run in these results, so "
            "nothing here shows how far two runs of the same configuration differ on this machine. Run one "
            "with <code>gnnbench compare --aa</code> (the baseline measured against itself, interleaved with "
            "the other configurations).</div>"
        )
    noisy = any(
        d and d.significant
        for s in checked
        if s.comparison.aa.status == "ok"
        for d in (s.comparison.aa.epoch_speedup, s.comparison.aa.step_speedup)
    )
    return (
        f"<div class='aa{' bad' if noisy else ''}' id='aa-check'><b>A/A check</b> (the baseline against "
        "itself; ratio and 95% run-level interval):<ul>" + "".join(_aa_line(s) for s in checked) + "</ul></div>"
    )


def headline(sweeps: list[Sweep]) -> str:
    """The first screen: per sweep, what pays here and at what accuracy (from measurement), and the first
    sweep's trade-off chart."""
    parts, chart = [], ""
    for i, s in enumerate(sweeps):
        c = s.comparison
        if c is None:
            continue
        base, metric = s.base_run, s.metric

        def effect(r: ComparisonRow, metric: str = metric) -> str:  # this sweep's metric, bound now
            where = (
                "at convergence"
                if r.converged is True
                else (
                    "(same trajectory as the baseline, proven by test; time to accuracy derived)"
                    if r.derived
                    else "at equal steps (some runs did not converge)"
                )
            )
            return (
                f"<b>{esc(r.label)}</b> {esc(speedup_text(r))} by {esc(r.primary)}, {metric} "
                f"{esc(pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high))} {where}: "
                f"{esc(r.acc_verdict)}"
            )

        if s.best_set_of is not None:
            continue  # a best set's rounds: shown in the line of the sweep that chose it
        best = measured_best(c)
        items = []
        chosen = best_set_outcome(s, sweeps)
        line = outcome_line(
            chosen,
            lambda r, metric=metric: (
                f"{speedup_text(r)} by {r.primary}, {metric} "
                f"{pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)}: {r.acc_verdict}"
            ),
        )
        if line:
            items.append(f"<li class='{'gain' if chosen.pays else 'muted'}'>{esc(line[0].upper() + line[1:])}</li>")
        items += [
            f"<li class='gain'>Measured best single row here: {effect(best)}</li>"
            if best
            else "<li>Nothing measured pays at no accuracy cost on this machine.</li>"
        ]
        items += [f"<li class='tradeoff'>Trade-off: {effect(r)}</li>" for r in tradeoffs(c)]
        static = next((r for r in c.rows if r.label == STATIC_LIST and r.status == "ok"), None)
        if static is not None and static is not best:
            items.append(
                f"<li class='muted'>The registry's static list ({effect(static)}) is a guess, not a "
                "recommendation.</li>"
            )
        parts.append(
            f"<p><a href='#sweep-{i}'>{esc(s.title)}</a> ({esc(where_measured(s, base))}):</p><ul>{''.join(items)}</ul>"
        )
        if not chart:
            ranked = [
                r
                for r in c.rows
                if r.status == "ok" and in_family(r.label) and r.primary == TIME_TO_ACCURACY and not absent(r.acc_delta)
            ]
            if ranked:
                chart = figure_html(tradeoff_chart(ranked, c.floors, metric), "tradeoff-top")
    if not parts:
        return ""
    return (
        "<section id='what-pays'><h2>What pays here, at what accuracy</h2>"
        + "".join(parts)
        + chart
        + "<p class='muted'>Measured on this machine: a gain is significant after Holm's family-wise "
        "correction, reached the target in every round and costs no accuracy at convergence; the dotted "
        "line is the Pareto front (no row beats it in both speed and accuracy).</p></section>"
    )
