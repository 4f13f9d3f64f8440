"""The report's plotly figures: a sweep's speedup, trade-off, accuracy and phase charts, their error bars, and how
a figure is embedded in the page (plotly.js itself is inlined once, by :func:`gnnbench.report.build.build_report`).
"""

from __future__ import annotations

from gnnbench.measure.comparison import BASELINE, NO_COST_PP, Comparison, ComparisonRow, pareto_front
from gnnbench.measure.rows import EPOCH_TIME, TIME_TO_ACCURACY
from gnnbench.report.rows import _effect, _esc, _reached_text, _speedup_text
from gnnbench.text import absent, pp
from gnnbench.timing import PHASES

__all__ = ["phases_present"]

_CHART_COLOR = {"gain": "#2a9d5b", "tradeoff": "#e08e0b", "loss": "#c0392b", "na": "#c9b458", "muted": "#9aa5b1"}


def _figure_html(fig, div_id: str) -> str:
    import plotly.io as pio

    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _error_bars(values: list, lows: list, highs: list) -> dict:
    return {"type": "data", "symmetric": False,
            "array": [None if absent(h) or absent(v) else h - v for v, h in zip(values, highs)],
            "arrayminus": [None if absent(lo) or absent(v) else v - lo for v, lo in zip(values, lows)]}


def _speedup_chart(ranked: list[ComparisonRow], floors: dict, primary: str):
    """The speedups of the rows ranked by ``primary`` (one metric per chart: never two on one axis); censored
    bars are faded and outlined, their bound in the hover text."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(
        x=[r.speedup for r in ranked], y=[r.label for r in ranked], orientation="h",
        marker={"color": [_CHART_COLOR[_effect(r, floors)] for r in ranked],
                "opacity": [0.45 if r.bound else 1.0 for r in ranked],
                "line": {"color": "#333", "width": [2 if r.bound else 0 for r in ranked]}},
        error_x=_error_bars([r.speedup for r in ranked], [r.speedup_low for r in ranked],
                            [r.speedup_high for r in ranked]),
        hovertext=[_esc(f"{r.label}: {_speedup_text(r)}") for r in ranked], hoverinfo="text"))
    fig.add_vline(x=1.0, line_dash="dash", line_color="#555")
    fig.update_layout(title=f"{primary.capitalize()} speedup over the baseline (95% run-level interval)<br><sup>"
                            "green: gain, amber: faster but costs accuracy, red: slower, grey: below the noise floor; "
                            "faded and outlined: censored, a bound</sup>",
                      xaxis_title="speedup (x)", yaxis={"autorange": "reversed"},
                      height=max(260, 28 * len(ranked) + 120), margin={"l": 160})
    return fig


def _notable(r: ComparisonRow, floors: dict) -> bool:
    """A point the trade-off chart labels: a coloured effect, or an accuracy change beyond 1 pp (the rest stay
    unlabelled in the cluster near 1x, 0 pp; every point names itself in its hover text)."""
    return _effect(r, floors) in ("gain", "tradeoff", "loss") or abs(100 * (r.acc_delta or 0)) > 1


def _tradeoff_chart(rows: list[ComparisonRow], floors: dict, metric: str):
    """Speed against accuracy: time-to-accuracy speedup (log axis) against the accuracy delta at convergence (pp),
    with both intervals; censored rows hollow, their bound in the hover text."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, part, symbol in (("reached the target in every round", [r for r in rows if not r.censored],
                                "circle"),
                               ("censored (a bound)", [r for r in rows if r.censored], "circle-open")):
        if not part:
            continue
        tta = [r.tta_speedup for r in part]
        x, y = [t.ratio for t in tta], [100 * r.acc_delta for r in part]
        fig.add_scatter(
            x=x, y=y, mode="markers+text", name=name,
            text=[_esc(r.label) if _notable(r, floors) else "" for r in part],
            textposition="top center",
            marker={"symbol": symbol, "size": 12, "line": {"width": 2},
                    "color": [_CHART_COLOR[_effect(r, floors)] for r in part]},
            error_x=_error_bars(x, [t.low for t in tta], [t.high for t in tta]) | {"color": "#777"},
            error_y=_error_bars(y, [100 * r.acc_delta_low for r in part],
                                [100 * r.acc_delta_high for r in part]) | {"color": "#777"},
            hovertext=[_esc(f"{r.label}: time to accuracy {_speedup_text(r)}, reached in {_reached_text(r)}; "
                            f"{metric} {pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)} at "
                            f"convergence ({r.acc_verdict})") for r in part], hoverinfo="text")
    front = pareto_front(rows)
    by_label = {r.label: r for r in rows}
    pts = [(1.0, 0.0) if label == BASELINE else (by_label[label].tta_speedup.ratio,
                                                 100 * by_label[label].acc_delta) for label in front]
    if len(pts) > 1:
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines", name="Pareto front",
                        line={"color": "#2a9d5b", "width": 1, "dash": "dot"}, hoverinfo="skip")
    fig.add_vline(x=1.0, line_dash="dash", line_color="#555")
    fig.add_hline(y=0.0, line_dash="dash", line_color="#555")
    ticks = [2.0 ** k for k in range(-8, 9)]
    fig.update_layout(title=f"Trade-off: time-to-accuracy speedup against test {metric} change at convergence<br>"
                            "<sup>95% intervals; hollow: censored, the speedup is a bound (see the hover text)</sup>",
                      xaxis={"type": "log", "title": "time-to-accuracy speedup (x, log scale)", "tickvals": ticks,
                             "ticktext": [f"{v:g}x" for v in ticks]},
                      yaxis_title="accuracy delta at convergence (pp)", height=480)
    return fig


def _accuracy_chart(ranked: list[ComparisonRow], metric: str):
    import plotly.graph_objects as go

    deltas = [100 * r.acc_delta for r in ranked]
    fig = go.Figure(go.Bar(
        x=deltas, y=[r.label for r in ranked], orientation="h", marker_color="#4a6fa5",
        error_x=_error_bars(deltas, [100 * r.acc_delta_low for r in ranked],
                            [100 * r.acc_delta_high for r in ranked])))
    fig.add_vrect(x0=-NO_COST_PP, x1=NO_COST_PP, fillcolor="#2a9d5b", opacity=0.08, line_width=0)
    fig.update_layout(title=f"Test {metric} change at convergence against the baseline<br><sup>pp, 95% paired "
                            f"interval over rounds; band: +-{NO_COST_PP} pp</sup>",
                      xaxis_title="pp", yaxis={"autorange": "reversed"},
                      height=max(260, 28 * len(ranked) + 120), margin={"l": 160})
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
    fig.update_layout(barmode="stack", title="Phase breakdown per configuration (median ms per step)",
                      yaxis_title="ms", height=420)
    return fig


def _sweep_charts(c: Comparison, metric: str, index: int) -> str:
    measured = [r for r in c.rows if r.status == "ok"]
    ranked = [r for r in measured if r.label != BASELINE and not absent(r.speedup)]
    primaries = sorted({r.primary for r in ranked}, key=[TIME_TO_ACCURACY, EPOCH_TIME].index) or [EPOCH_TIME]
    charts = "".join(_figure_html(_speedup_chart([r for r in ranked if r.primary == p], c.floors, p),
                                  f"speedup-{index}" + (f"-{k}" if k else "")) for k, p in enumerate(primaries))
    tradeoff = [r for r in ranked if r.primary == TIME_TO_ACCURACY and not absent(r.acc_delta)]
    charts += (_figure_html(_tradeoff_chart(tradeoff, c.floors, metric), f"tradeoff-{index}") if tradeoff else
               "<p class='muted'>No trade-off chart: no row has a time to accuracy.</p>")
    return (charts + _figure_html(_accuracy_chart(ranked, metric), f"accuracy-{index}")
            + _figure_html(_phase_chart(measured), f"phases-{index}"))
