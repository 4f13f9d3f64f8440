"""The report's plotly figures: a sweep's speedup, trade-off, accuracy and phase charts, their error bars, and how
a figure is embedded in the page (plotly.js itself is inlined once, by :func:`gnnbench.report.build.build_report`).
"""

from __future__ import annotations

import math

from gnnbench.measure.compare import (
    BASELINE,
    E2E_BASELINE,
    EPOCH_TIME,
    NO_COST_PP,
    TIME_TO_ACCURACY,
    Comparison,
    ComparisonRow,
    in_family,
    pareto_front,
)
from gnnbench.report.html import error_bars, esc, figure_html
from gnnbench.report.rows import effect_kind, reached_text, speedup_text
from gnnbench.text import absent, pp
from gnnbench.timing import PHASES

__all__ = [
    "phases_present",
    "COLOR_WORDS",
    "VERDICT_COLORS",
    "EFFECT_WORDS",
    "accuracy_scale",
    "label_column",
    "tradeoff_chart",
    "curves_chart",
]

_CHART_COLOR = {"gain": "#2a9d5b", "tradeoff": "#e08e0b", "loss": "#c0392b", "na": "#c9b458", "muted": "#9aa5b1"}
VERDICT_COLORS = dict(_CHART_COLOR)
"""One colour per verdict (:func:`gnnbench.report.rows.effect_kind`): the charts' markers and bars and the tables'
verdict text (the page's style reads this)."""
_ACCURACY_COLOR = {"converged": "#4a6fa5", "elsewhere": "#a7b8d1"}

COLOR_WORDS = {
    _CHART_COLOR["gain"]: "green",
    _CHART_COLOR["tradeoff"]: "amber",
    _CHART_COLOR["loss"]: "red",
    _CHART_COLOR["na"]: "olive",
    _CHART_COLOR["muted"]: "grey",
    _ACCURACY_COLOR["converged"]: "dark",
    _ACCURACY_COLOR["elsewhere"]: "light",
}
"""The word each colour of a chart without a legend goes by in that chart's title (its legend): a test renders the
report and requires every drawn colour's word there."""


def _speedup_chart(ranked: list[ComparisonRow], floors: dict, primary: str):
    """The speedups of the rows ranked by ``primary`` (one metric per chart: never two on one axis); censored
    bars are faded and outlined, their bound in the hover text."""
    import plotly.graph_objects as go

    fig = go.Figure(
        go.Bar(
            x=[r.speedup for r in ranked],
            y=[r.label for r in ranked],
            orientation="h",
            marker={
                "color": [_CHART_COLOR[effect_kind(r, floors)] for r in ranked],
                "opacity": [0.45 if r.bound else 1.0 for r in ranked],
                "line": {"color": "#333", "width": [2 if r.bound else 0 for r in ranked]},
            },
            error_x=error_bars(
                [r.speedup for r in ranked], [r.speedup_low for r in ranked], [r.speedup_high for r in ranked]
            ),
            hovertext=[esc(f"{r.label}: {speedup_text(r)}") for r in ranked],
            hoverinfo="text",
        )
    )
    fig.add_vline(x=1.0, line_dash="dash", line_color="#555")
    fig.update_layout(
        title=f"{primary.capitalize()} speedup over the baseline (95% run-level interval)<br><sup>"
        "green: gain (family-wise), amber: faster, accuracy cost not ruled out, red: slower (family-wise), olive: "
        "censored or a bound without a direction, grey: no family-wise verdict; faded and "
        "outlined: censored, a bound</sup>",
        xaxis_title="speedup (x)",
        yaxis={"autorange": "reversed"},
        height=max(260, 28 * len(ranked) + 120),
        margin={"l": 160},
    )
    return fig


EFFECT_WORDS = {
    "gain": "significant gain at no accuracy cost",
    "tradeoff": "significant gain, accuracy cost not ruled out",
    "loss": "significantly slower",
    "na": "censored, or a bound without a direction",
    "muted": "no family-wise verdict",
}


def _notable(r: ComparisonRow, floors: dict) -> bool:
    """A point the trade-off chart labels: a row with a family-wise verdict (gain, trade-off, slower); the rest are
    one muted group, named in the list under the chart and in their hover text."""
    return effect_kind(r, floors) in ("gain", "tradeoff", "loss")


def _where_read(r: ComparisonRow) -> str:
    """Where a row's accuracy was read: at convergence, or (derived rows, rows stopped at the target, runs cut by
    a budget) what its cell says."""
    return "at convergence" if r.converged is True else (r.acc_point or "not at convergence")


def label_column(ys: list[float], limit: float, gap: float) -> list[float]:
    """The heights of a column of labels beside the plot, one per point at height ``ys[i]``: each as near its own
    point as the others allow, in the points' order from top to bottom (so that leader lines cross as little as
    the points' own order allows), at least ``gap`` apart, and all within ``[-limit, limit]`` (the gap shrinks when the points do
    not fit at it)."""
    n = len(ys)
    if not n:
        return []
    gap = min(gap, 2 * limit / max(n - 1, 1))
    order = sorted(range(n), key=lambda i: -ys[i])
    at = [0.0] * n
    last = None
    for i in order:  # top to bottom: each at its point, or a gap below the one above
        at[i] = min(ys[i], limit) if last is None else min(ys[i], last - gap)
        last = at[i]
    low = min(at)
    if low < -limit:  # the column ran off the bottom: push it up from there, a gap apart
        nxt = None
        for i in reversed(order):
            at[i] = max(at[i], -limit) if nxt is None else max(at[i], nxt + gap)
            nxt = at[i]
    return at


def accuracy_scale(values_pp: list[float]) -> float:
    """The half-range (pp) of an accuracy axis, chosen where the decision is made: at least 1 pp (the +-0.5 pp
    no-cost band then fills half of it), wide enough for the points within 3 pp with a fifth to spare, never
    set by an outlier beyond 3 pp (drawn at the edge instead, its value in its label)."""
    inside = [abs(v) for v in values_pp if v == v and abs(v) <= 3.0]
    return max(1.0, 1.2 * max(inside, default=0.0))


def _on_scale(y: float, limit: float) -> float:
    """``y`` clipped to the axis' half-range ``limit`` (an outlier sits at the edge)."""
    return max(-limit, min(limit, y))


def tradeoff_chart(rows: list[ComparisonRow], floors: dict, metric: str, best_set: ComparisonRow | None = None):
    """Speed against accuracy: time-to-accuracy speedup (log axis) against the paired accuracy delta (pp), with both
    intervals. Colour is the row's verdict (the table's); the marker says where accuracy was read (filled circle:
    at convergence; diamond: at equal steps or at the target) and whether time to accuracy is a bound (hollow:
    censored). Rows with a verdict are named in a column of labels right of the plot (:func:`label_column`), a
    leader line to each point; the rest are one muted group. The legend names every colour and
    marker drawn; the dotted front runs through rows with a family-wise verdict only. The accuracy axis is scaled
    where the decision is made (:func:`accuracy_scale`; the +-0.5 pp no-cost band drawn): a row beyond it sits at
    the edge as a triangle, its value in its label. ``best_set``: the measured best set's row (its own rounds),
    drawn as a star."""
    import plotly.graph_objects as go

    fig = go.Figure()
    limit = accuracy_scale([100 * r.acc_delta for r in rows] + ([100 * best_set.acc_delta] if best_set else []))
    verdict = [r for r in rows if _notable(r, floors)]
    muted = [r for r in rows if not _notable(r, floors)]
    star = (
        best_set
        if best_set is not None and best_set.tta_speedup is not None and not absent(best_set.acc_delta)
        else None
    )
    labelled = verdict + ([star] if star is not None else [])  # the star's label takes its place among them
    groups = []
    for part, named in ((verdict, True), (muted, False)):
        for censored in (False, True):
            for converged in (True, False):
                sub = [r for r in part if r.censored == censored and (r.converged is True) == converged]
                if sub:
                    groups.append((sub, named, censored, converged))
    for sub, named, censored, converged in groups:
        shape = "circle" if converged else "diamond"
        tta = [r.tta_speedup for r in sub]
        x, raw = [t.ratio for t in tta], [100 * r.acc_delta for r in sub]
        y = [_on_scale(v, limit) for v in raw]
        off = [v != c for v, c in zip(raw, y)]
        symbol = [
            ("triangle-up" if v > 0 else "triangle-down") if o else shape + ("-open" if censored else "")
            for v, o in zip(raw, off)
        ]
        where = "accuracy at convergence" if converged else "accuracy at equal steps or at the target"
        name = f"{'with a verdict' if named else 'no family-wise verdict'}: {where}" + (
            "; censored (a bound)" if censored else ""
        )
        fig.add_scatter(
            x=x,
            y=y,
            mode="markers",
            name=name,
            marker={
                "symbol": symbol,
                "size": 12 if named else 8,
                "line": {"width": 2},
                "color": [_CHART_COLOR[effect_kind(r, floors)] for r in sub],
                "opacity": 1.0 if named else 0.6,
            },
            error_x=error_bars(x, [t.low for t in tta], [t.high for t in tta]) | {"color": "#777"} if named else None,
            error_y=(
                error_bars(
                    y,
                    [None if o else 100 * r.acc_delta_low for r, o in zip(sub, off)],
                    [None if o else 100 * r.acc_delta_high for r, o in zip(sub, off)],
                )
                | {"color": "#777"}
            )
            if named
            else None,
            hovertext=[
                esc(
                    f"{r.label}: time to accuracy {speedup_text(r)}, reached in {reached_text(r)}; "
                    f"{metric} {pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)} {_where_read(r)} "
                    f"({r.acc_verdict})"
                )
                for r in sub
            ],
            hoverinfo="text",
        )
    for effect in dict.fromkeys(effect_kind(r, floors) for r in rows):  # one legend entry per colour drawn
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="markers",
            name=f"colour: {EFFECT_WORDS[effect]}",
            marker={"symbol": "square", "size": 12, "color": _CHART_COLOR[effect]},
            hoverinfo="skip",
        )
    if star is not None:
        t, v = star.tta_speedup, 100 * star.acc_delta
        fig.add_scatter(
            x=[t.ratio],
            y=[_on_scale(v, limit)],
            mode="markers",
            name="the measured best set (its own rounds)",
            marker={"symbol": "star", "size": 18, "color": _CHART_COLOR[effect_kind(best_set, floors)]},
            error_x=error_bars([t.ratio], [t.low], [t.high]) | {"color": "#777"},
            error_y=error_bars([_on_scale(v, limit)], [100 * best_set.acc_delta_low], [100 * best_set.acc_delta_high])
            | {"color": "#777"},
            hovertext=[
                esc(
                    f"{best_set.label} (best set, its own rounds): {speedup_text(best_set)}; {metric} "
                    f"{pp(best_set.acc_delta, best_set.acc_delta_low, best_set.acc_delta_high)}"
                )
            ],
            hoverinfo="text",
        )
    judged = [r for r in rows if _notable(r, floors)]
    front = pareto_front(judged)
    by_label = {r.label: r for r in judged}
    pts = [
        (1.0, 0.0) if label == BASELINE else (by_label[label].tta_speedup.ratio, 100 * by_label[label].acc_delta)
        for label in front
    ]
    if len(pts) > 1:
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines",
            name="Pareto front of the rows with a verdict",
            line={"color": "#2a9d5b", "width": 1, "dash": "dot"},
            hoverinfo="skip",
        )
    fig.add_vline(x=1.0, line_dash="dash", line_color="#555")
    fig.add_hline(y=0.0, line_dash="dash", line_color="#555")
    fig.add_hrect(y0=-NO_COST_PP, y1=NO_COST_PP, fillcolor="#2a9d5b", opacity=0.10, line_width=0)
    # every labelled point is named in a column right of the plot, a leader line to its point: points a few
    # percent apart (the allocators near 1.2x, no accuracy cost) leave no room for labels beside them
    ends = [
        v
        for r in rows + ([star] if star is not None else [])
        for v in (r.tta_speedup.ratio, r.tta_speedup.low, r.tta_speedup.high)
        if v is not None and v == v and v > 0
    ]
    lo, hi = math.log10(min(ends + [1.0])), math.log10(max(ends + [1.0]))
    pad = 0.05 * max(hi - lo, 0.1)
    x_range = [lo - pad, hi + pad]
    names = [
        "best set"
        if r is star
        else r.label + (f" ({100 * r.acc_delta:+.2f} pp, off scale)" if abs(100 * r.acc_delta) > limit else "")
        for r in labelled
    ]
    points = [(r.tta_speedup.ratio, _on_scale(100 * r.acc_delta, limit)) for r in labelled]
    heights = label_column([y for _, y in points], limit, gap=0.12 * limit)
    for (x, y), h, text in zip(points, heights, names):
        fig.add_annotation(
            x=math.log10(x),
            y=y,
            ax=x_range[1] + 0.04 * (x_range[1] - x_range[0]),
            ay=h,
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            text=esc(text),
            showarrow=True,
            arrowhead=0,
            arrowwidth=1,
            arrowcolor="#aaa",
            standoff=6,
            xanchor="left",
            font={"size": 11},
        )
    ticks = [2.0**k for k in range(-8, 9)]
    fig.update_layout(
        title=f"Trade-off: time-to-accuracy speedup against the test {metric} change<br>"
        f"<sup>95% intervals on rows with a verdict; shaded: no accuracy cost (+-{NO_COST_PP} pp); a triangle "
        "at the edge: off scale, its value in its label; every point names itself in its hover text</sup>",
        xaxis={
            "type": "log",
            "title": "time-to-accuracy speedup (x, log scale)",
            "tickvals": ticks,
            "ticktext": [f"{v:g}x" for v in ticks],
            "range": x_range,
        },
        yaxis={"title": f"test {metric} change against the baseline (pp)", "range": [-1.05 * limit, 1.05 * limit]},
        height=600,
        margin={"r": 210},
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


def _muted_list(rows: list[ComparisonRow], floors: dict) -> str:
    """The rows the trade-off chart draws as one muted group, named under it."""
    muted = [r.label for r in rows if not _notable(r, floors)]
    return f"<p class='muted'>No family-wise verdict (the grey group): {esc(', '.join(muted))}.</p>" if muted else ""


def _accuracy_chart(ranked: list[ComparisonRow], metric: str):
    import plotly.graph_objects as go

    deltas = [100 * r.acc_delta for r in ranked]
    limit = accuracy_scale(deltas)
    fig = go.Figure(
        go.Bar(
            x=deltas,
            y=[
                r.label
                + ("" if r.converged is True else " †")
                + (f" ({d:+.2f} pp, off scale)" if abs(d) > limit else "")
                for r, d in zip(ranked, deltas)
            ],
            orientation="h",
            marker_color=[_ACCURACY_COLOR["converged" if r.converged is True else "elsewhere"] for r in ranked],
            hovertext=[
                esc(f"{r.label}: {pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)} {_where_read(r)}") for r in ranked
            ],
            hoverinfo="text",
            error_x=error_bars(
                deltas, [100 * r.acc_delta_low for r in ranked], [100 * r.acc_delta_high for r in ranked]
            ),
        )
    )
    fig.add_vrect(x0=-NO_COST_PP, x1=NO_COST_PP, fillcolor="#2a9d5b", opacity=0.08, line_width=0)
    fig.update_layout(
        title=f"Test {metric} change against the baseline<br><sup>pp, 95% paired interval over "
        f"rounds; band: +-{NO_COST_PP} pp (no accuracy cost); dark: at convergence; light, †: read at equal steps "
        "or at the target (derived rows, rows stopped at the target)</sup>",
        xaxis={"title": "pp", "range": [-1.05 * limit, 1.05 * limit]},
        yaxis={"autorange": "reversed"},
        height=max(260, 28 * len(ranked) + 120),
        margin={"l": 260},
    )
    return fig


def phases_present(rows: list[ComparisonRow]) -> list[str]:
    """The phases of :data:`~gnnbench.timing.PHASES` that any row has, in order (results of schema 1 and 2
    have no ``negatives``)."""
    return [p for p in PHASES if any(p in r.phases for r in rows)]


def _phase_chart(measured: list[ComparisonRow]):
    import plotly.graph_objects as go

    fig = go.Figure()
    for p in phases_present(measured):
        fig.add_bar(name=p, x=[r.label for r in measured], y=[1e3 * r.phases.get(p, 0.0) for r in measured])
    fig.update_layout(
        barmode="stack", title="Phase breakdown per configuration (median ms per step)", yaxis_title="ms", height=420
    )
    return fig


_CURVE_ROWS = 4  # rows drawn beside the baseline in the time-to-accuracy curves


def curves_chart(c: Comparison, runs: list, metric: str):
    """Validation against the run clock (setup + training, evaluation off the clock) for the baseline and the top
    :data:`_CURVE_ROWS` ranked rows trained to the target, each in the first round both ran (one seed), with the
    calibrated target as a line: where each crosses it is its time to accuracy. ``None`` without a target or
    curves."""
    import plotly.graph_objects as go

    if c.target is None:
        return None
    trained = [
        r for r in c.rows if r.status == "ok" and in_family(r.label) and not r.derived and r.primary == TIME_TO_ACCURACY
    ][:_CURVE_ROWS]
    by_label: dict[str, dict[int, object]] = {}
    for run in runs:
        if run.ok and run.curve:
            by_label.setdefault(run.label, {}).setdefault(run.round if run.round is not None else 0, run)
    base = by_label.get(BASELINE, {})
    fig = go.Figure()
    for label in [BASELINE, *(r.label for r in trained)]:
        rounds = sorted(set(by_label.get(label, {})) & set(base))
        if not rounds:
            continue
        run = by_label[label][rounds[0]]
        fig.add_scatter(
            x=[p.seconds for p in run.curve],
            y=[p.val for p in run.curve],
            mode="lines+markers",
            name=f"{label} (round {rounds[0]})",
            line={"width": 3 if label == BASELINE else 2, "color": "#333" if label == BASELINE else None},
            marker={"size": 4},
        )
    if not fig.data:
        return None
    fig.add_hline(
        y=c.target,
        line_dash="dash",
        line_color="#c0392b",
        annotation_text=f"target {c.target:.4f}",
        annotation_position="bottom right",
    )
    fig.update_layout(
        title=f"Time to accuracy: validation {metric} against the run clock<br><sup>setup + training, evaluation "
        "off the clock; the baseline and the top rows trained to the target, one seed each; a line crosses the "
        "dashed target at its time to accuracy</sup>",
        xaxis_title="run clock (s)",
        yaxis_title=f"validation {metric}",
        height=460,
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def sweep_charts(c: Comparison, metric: str, index: int, runs: list | None = None) -> str:
    measured = [r for r in c.rows if r.status == "ok"]
    # the end-to-end copy of the baseline is a reference, not an optimization: in the table, not in the charts
    ranked = [r for r in measured if r.label not in (BASELINE, E2E_BASELINE) and not absent(r.speedup)]
    primaries = sorted({r.primary for r in ranked}, key=[TIME_TO_ACCURACY, EPOCH_TIME].index) or [EPOCH_TIME]
    charts = "".join(
        figure_html(
            _speedup_chart([r for r in ranked if r.primary == p], c.floors, p),
            f"speedup-{index}" + (f"-{k}" if k else ""),
        )
        for k, p in enumerate(primaries)
    )
    # rows of the family only: the A/A check and derived rows' measured twins would sit on their own rows
    tradeoff = [r for r in ranked if r.primary == TIME_TO_ACCURACY and not absent(r.acc_delta) and in_family(r.label)]
    charts += (
        figure_html(tradeoff_chart(tradeoff, c.floors, metric), f"tradeoff-{index}") + _muted_list(tradeoff, c.floors)
        if tradeoff
        else "<p class='muted'>No trade-off chart: no row has a time to accuracy.</p>"
    )
    curves = curves_chart(c, runs or [], metric)
    charts += figure_html(curves, f"curves-{index}") if curves is not None else ""
    return (
        charts
        + figure_html(_accuracy_chart(ranked, metric), f"accuracy-{index}")
        + figure_html(_phase_chart(measured), f"phases-{index}")
    )
