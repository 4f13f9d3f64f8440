"""How often the regression gate (``gnnbench regress``) is wrong: the error rates measured on throwaway commits
(:mod:`gnnbench.measure.gate.rates`) against their targets, overall and per slowed code path.
"""

from __future__ import annotations

from gnnbench.report.html import esc
from gnnbench.report.inputs import ReportInputs
from gnnbench.text import percent


def gate_rates_section(inputs: ReportInputs) -> str:
    """How often the regression gate (``gnnbench regress``) is wrong, as measured on throwaway commits."""

    head = "<h2 id='gate-rates'>How often the regression gate is wrong</h2>"
    if not inputs.gate_rates:
        return (
            head + "<p class='muted'>No measured error rates given (<code>python scripts/gate_error_rates.py"
            "</code>, then <code>gnnbench report --gate-rates FILE</code>).</p>"
        )
    return head + "".join(_rates_tables(g) for g in inputs.gate_rates)


def _rates_tables(g: dict) -> str:
    """One measurement's rates: its tables and where, how and under what load it ran."""
    from gnnbench.measure.gate import TARGETS

    def cell(r: dict) -> str:
        if not r["n"]:
            return "<td class='na'>n/a</td>"
        return (
            f"<td class='num'>{r['k']}/{r['n']} = {percent(r['rate'], digits=0)} "
            f"[{percent(r['low'], digits=0)}, {percent(r['high'], digits=0)}]</td>"
        )

    settings = g.get("settings") or {}
    rows = [
        f"<tr><td>false alarm per default gate run ({g['default_set']} benchmarks, Holm; null commits)</td>"
        f"{cell(g['false_alarm'])}<td>at most {percent(TARGETS['false_alarm'], digits=0)}</td></tr>",
        f"<tr><td>false alarm per benchmark (null commits)</td>{cell(g['false_alarm_per_bench'])}<td>-</td></tr>",
    ]
    counted = bool(g.get("counted"))
    if counted:
        rows += [
            f"<tr><td>&nbsp;&nbsp;false alarm per default run, by wall time</td>{cell(g['false_alarm_wall'])}"
            "<td>-</td></tr>",
            f"<tr><td>&nbsp;&nbsp;false alarm per default run, by counted instructions</td>"
            f"{cell(g['false_alarm_counts'])}<td>-</td></tr>",
        ]
    for pct, r in g["sizes"].items():
        target = {10: TARGETS["detect_10"], 5: TARGETS["detect_5"]}.get(pct)
        rows.append(
            f"<tr><td>step {pct}% slower: detected</td>{cell(r['detect'])}"
            f"<td>{'at least ' + percent(target, digits=0) if target else '-'}</td></tr>"
        )
        if counted:
            rows += [
                f"<tr><td>&nbsp;&nbsp;step {pct}% slower: detected by {what}</td>{cell(r[key])}<td>-</td></tr>"
                for what, key in (("wall time", "detect_wall"), ("counted instructions", "detect_counts"))
            ]
        elif not g.get("slow_runs_default_set"):
            rows.append(
                f"<tr><td>step {pct}% slower: detected at a default run's strictest Holm step</td>"
                f"{cell(r['detect_in_default_set'])}<td>-</td></tr>"
            )
        rows.append(
            f"<tr><td>step {pct}% slower: the right phase named</td>{cell(r['right_phase'])}"
            f"<td>at least {percent(TARGETS['right_phase'], digits=0)}</td></tr>"
        )
    paths = "".join(
        f"<tr><td>{esc(path)}</td><td class='num'>{percent(g['shares'].get(path), digits=0)}</td>"
        + "".join(
            f"<td class='num'>{sizes[pct]['detect']['k']}/{sizes[pct]['detect']['n']} "
            f"({sizes[pct]['right_phase']['k']} right phase)</td>"
            if pct in sizes
            else "<td>-</td>"
            for pct in g["sizes"]
        )
        + "</tr>"
        for path, sizes in g["paths"].items()
    )
    minutes = (g.get("wall_seconds") or 0) / 60
    note = (
        f"Measured on {esc(str(g.get('machine')))} against commit <code>{esc(str(g.get('base'))[:10])}</code> "
        f"in {minutes:.0f} minutes{'' if g.get('complete') else ' (incomplete: the run was interrupted)'}: "
        f"{settings.get('rounds')} rounds of {settings.get('steps')} measured steps per gate run"
        + (f", {esc(g['condition'])}" if g.get("condition") else "")
        + "; a slow commit makes the step that much slower, all of it in one code path ("
        + (
            "the path's own work done again, sized by its share of the step"
            if settings.get("injection") == "work"
            else "a busy-wait sized by the path's share of the step"
        )
        + ")"
        + (
            f"; every run also counted the primary tier's instructions ({settings['counts']} callgrind process "
            "per tree)"
            if counted
            else "; wall time only"
        )
        + ". Counts with 95% Wilson intervals. Method and what it takes to go lower: "
        "<code>docs/regression-gate.md</code>."
    )
    return (
        f"<p class='muted'>{note}</p><table><tr><th>rate</th><th>measured</th><th>target</th></tr>"
        + "".join(rows)
        + "</table>"
        + "<table><tr><th>slowed path</th><th>share of the step</th>"
        + "".join(f"<th>{pct}%</th>" for pct in g["sizes"])
        + "</tr>"
        + paths
        + "</table>"
    )
