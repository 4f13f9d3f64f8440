"""History across commits: asv's step time per optimization with its intervals, the stored gate runs' head step
times, and the change points asv's step detection finds in both (:mod:`gnnbench.measure.gate.history`).
"""

from __future__ import annotations

import datetime as _dt

from gnnbench.env import commits_since, head_commit
from gnnbench.report.html import error_bars, esc, figure_html
from gnnbench.report.inputs import ReportInputs, asv_series, env_label
from gnnbench.text import ratio


def _series_name(key: str) -> str:
    """A series' name without its module path (``time_step(int32)``), its ``[machine/environment]`` kept."""
    base, sep, env = key.partition(" [")
    return base.split(".")[-1] + (" [" + env if sep else "")


def _machine_of(key: str) -> str:
    """The ``machine/environment`` a series was measured in (``""`` when all results share one)."""
    _, sep, env = key.partition(" [")
    return env.rstrip("]") if sep else ""


def _when(date_ms: int) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(int(date_ms) / 1e3, _dt.timezone.utc)


def _machine_chart(keys: list[str], series: dict, machine: str, index: int) -> str:
    """One machine's history: each benchmark's step time against its commit's date (the commit in the hover
    text), asv's 99% interval as error bars."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for key in keys:
        pts = series[key]
        ms = [1e3 * p[2] for p in pts]
        fig.add_scatter(
            x=[_when(p[0]) for p in pts],
            y=ms,
            mode="lines+markers",
            name=_series_name(key).split(" [")[0],
            hovertext=[f"{_series_name(key)}: {v:.2f} ms at {p[1]} ({_when(p[0]):%Y-%m-%d})" for p, v in zip(pts, ms)],
            hoverinfo="text",
            error_y=error_bars(
                ms,
                [None if p[3] is None else 1e3 * p[3] for p in pts],
                [None if p[4] is None else 1e3 * p[4] for p in pts],
            ),
        )
    fig.update_layout(
        title=f"asv on {esc(machine or 'one machine')}: step time per benchmark across commits<br><sup>ms; x: the "
        "commit's date (its hash in the hover text); error bars: asv's 99% interval</sup>",
        xaxis={"title": "commit date", "type": "date"},
        yaxis_title="ms",
        height=460,
        legend={"orientation": "h", "y": -0.25},
    )
    return figure_html(fig, "history" if index == 0 else f"history-{index}")


def asv_section(inputs: ReportInputs) -> str:
    if not inputs.asv:
        return "<h2>History across commits</h2><p class='muted'>No asv results given (run <code>asv run</code>).</p>"
    series = asv_series(inputs.asv)
    wanted = sorted(k for k in series if ".time_step(" in k or k.endswith(".time_step"))
    wanted = wanted or sorted(series)[:20]
    machines = sorted({_machine_of(k) for k in wanted}, key=lambda m: -sum(_machine_of(k) == m for k in wanted))
    charts = "".join(
        _machine_chart([k for k in wanted if _machine_of(k) == m], series, m, i) for i, m in enumerate(machines)
    )
    n_commits = len({d["commit_hash"] for d in inputs.asv["results"]})
    shown = [p for key in wanted for p in series[key]]
    with_ci = sum(p[3] is not None for p in shown)
    return (
        f"<h2>History across commits</h2><p>{n_commits} commit(s), {len(series)} series from asv, one chart per "
        f"machine ({len(machines)}). Error bars are the 99% confidence interval asv recorded for each point; "
        f"{with_ci} of {len(shown)} points shown have one (asv records none for a single repeat).</p>"
        + history_end_html(inputs.asv["results"], head_commit())
        + charts
        + _change_points_html(series, wanted)
    )


def history_end_html(docs: list[dict], built_at: str | None) -> str:
    """Where each machine's history ends, and how many first-parent commits before the commit this report is
    built at (``built_at``; ``None`` outside git): a history that stops long before the code it sits beside
    says little about that code. The figures are also data attributes, which the tests read back."""
    ends: dict[str, dict] = {}
    for doc in docs:
        label = env_label(doc)
        if label not in ends or int(doc.get("date") or 0) > int(ends[label].get("date") or 0):
            ends[label] = doc
    built = (built_at or "").removesuffix("+dirty")
    built_words = (
        f"<code>{esc(built[:8])}</code>" + (", with uncommitted changes" if built_at.endswith("+dirty") else "")
        if built_at
        else "unknown (not built in a git checkout)"
    )
    items = []
    for label, doc in sorted(ends.items()):
        last = str(doc["commit_hash"])
        behind = commits_since(last, built) if built else None
        if behind is None:
            where = "how far before this report's commit is unknown here (git cannot place it)"
        elif behind == 0:
            where = "at this report's own commit"
        else:
            where = f"{behind} first-parent commit(s) before this report's commit"
        date = _dt.datetime.fromtimestamp(int(doc.get("date") or 0) / 1e3, _dt.timezone.utc).strftime("%Y-%m-%d")
        items.append(
            f"<li class='history-end' data-series='{esc(label)}' data-last='{esc(last)}' "
            f"data-built='{esc(built)}' data-behind='{'' if behind is None else behind}'>"
            f"<code>{esc(label)}</code>: ends at <code>{esc(last[:8])}</code> (committed {date}), {where}</li>"
        )
    return f"<p>Where the history ends (this report was built at {built_words}):</p><ul>{''.join(items)}</ul>"


def gate_history_section(inputs: ReportInputs) -> str:
    """Change points over stored gate runs: each run's head step time per benchmark, in the order they ran."""
    if not inputs.gate_runs:
        return ""
    series: dict[str, list] = {}
    for doc in inputs.gate_runs:
        head = (doc.get("commits") or {}).get("head") or doc.get("head")
        for b in doc["benches"]:
            if b.get("status") == "ok" and b.get("head_ms"):
                series.setdefault(f"gate.{b['name']}", []).append(
                    (doc["finished"], str(head)[:12], 1e-3 * b["head_ms"], None, None)
                )
    return (
        f"<h3>Stored gate runs</h3><p>{len(inputs.gate_runs)} run(s) of <code>gnnbench regress --out</code>, "
        f"oldest first; the series are each benchmark's head step time.</p>"
        + _change_points_html(series, sorted(series), anchor="gate-change-points")
    )


def _change_points_html(series: dict, wanted: list[str], *, anchor: str = "change-points") -> str:
    """The steps asv's step detection finds in each shown series (:mod:`gnnbench.measure.gate.history`)."""
    from gnnbench.measure.gate import available, change_points

    why = available()
    if why:
        return f"<p class='muted' id='{anchor}'>Change points not computed: {esc(why)}.</p>"
    rows = []
    for key in wanted:
        pts = series[key]
        for cp in change_points([p[2] for p in pts], [p[1] for p in pts]):
            kind = "loss" if cp.ratio > 1 else "gain"
            rows.append(
                f"<tr><td>{esc(_series_name(key))}</td><td><code>{esc(cp.commit)}</code></td>"
                f"<td class='num'>{1e3 * cp.before:.2f} &rarr; {1e3 * cp.after:.2f}</td>"
                f"<td class='num {kind}'>{ratio(cp.ratio, cp.low, cp.high, digits=3)}</td></tr>"
            )
    if not rows:
        return (
            f"<p id='{anchor}'>Change points (asv's step detection, steps of 5% or more): none in the series shown.</p>"
        )
    return (
        f"<p id='{anchor}'>Change points (asv's step detection, steps of 5% or more; ratio = after / "
        "before, above 1 is slower, 95% Welch interval over the two segments' points):</p><table><tr>"
        "<th>series</th><th>from commit</th><th>ms</th><th>ratio</th></tr>" + "".join(rows) + "</table>"
    )
