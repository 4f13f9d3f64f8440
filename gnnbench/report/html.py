"""The HTML helpers every part of the report shares: escaping text, embedding a plotly figure and its error bars."""

from __future__ import annotations

import html

from gnnbench.text import absent

__all__ = ["esc", "figure_html", "error_bars", "trace_types"]


def esc(x) -> str:
    """``x`` as text safe inside HTML (tags and quotes escaped)."""
    return html.escape(str(x))


def figure_html(fig, div_id: str) -> str:
    """A plotly figure as a ``<div>`` with id ``div_id``; plotly.js itself is inlined once, by the page."""
    import plotly.io as pio

    traces = ",".join(sorted({t.type for t in fig.data}))
    chart = pio.to_html(
        fig, include_plotlyjs=False, full_html=False, div_id=div_id, config={"displaylogo": False, "responsive": True}
    )
    return f"<div class='chart' data-traces='{traces}'>{chart}</div>"


def trace_types(page: str) -> set[str]:
    """The plotly trace types a page's charts draw (each chart's ``data-traces``)."""
    import re

    return {t for found in re.findall(r"data-traces='([a-z0-9,]*)'", page) for t in found.split(",") if t}


def error_bars(values: list, lows: list, highs: list) -> dict:
    """Plotly's asymmetric error bars from values and their interval ends (``None`` where a value has none)."""
    return {
        "type": "data",
        "symmetric": False,
        "array": [None if absent(h) or absent(v) else h - v for v, h in zip(values, highs)],
        "arrayminus": [None if absent(lo) or absent(v) else v - lo for v, lo in zip(values, lows)],
    }
