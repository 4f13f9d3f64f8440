"""Build the self-contained HTML report (plotly charts, plotly.js inlined: no network needed)."""

from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path

from gnnbench import registry
from gnnbench.atomic import write_bytes_atomic
from gnnbench.report.inputs import ReportInputs, asv_series
from gnnbench.results import BASELINE, compare_rows
from gnnbench.timing import PHASES

__all__ = ["build_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222}
h1{margin-bottom:4px} h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;width:100%}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#777} .gain{color:#0a6b2d;font-weight:600} .loss{color:#a11} .na{color:#8a6d00}
"""


def _esc(x) -> str:
    return html.escape(str(x))


def _figure_html(fig, div_id: str) -> str:
    import plotly.io as pio

    return pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def _environment_table(runs: list[dict]) -> str:
    env = next((r["environment"] for r in runs if r.get("environment")), None)
    if env is None:
        return "<p class='muted'>No run results given.</p>"
    keys = ["device", "device_name", "torch", "torch_geometric", "python", "cuda", "threads", "cpu_count",
            "platform", "commit"]
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(env.get(k))}</td></tr>" for k in keys)
    backends = env.get("optional_backends") or {}
    rows += ("<tr><th>optional backends</th><td>"
             + _esc(", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in backends.items())) + "</td></tr>")
    return f"<table id='environment'>{rows}</table>"


def _sweep_section(title: str, runs: list[dict], index: int) -> str:
    import plotly.graph_objects as go

    try:
        rows = compare_rows(runs)
    except ValueError as exc:
        return f"<h2>{_esc(title)}</h2><p class='na'>{_esc(exc)}</p>"
    by_label = {r["label"]: r for r in rows}
    base = next((r for r in runs if r.get("label") == BASELINE and r.get("status") == "ok"), runs[0])
    metric = (base.get("accuracy") or {}).get("metric", "accuracy")
    cfg = base["config"]
    ok = sorted((r for r in rows if r["status"] == "ok" and r["label"] != BASELINE),
                key=lambda r: r["speedup"], reverse=True)

    # --- summary table: every registry entry, measured, unavailable or absent
    lines = []
    for r in ok:
        opt = registry.REGISTRY.get(r["label"])
        cls = "gain" if r["significant"] and r["speedup"] > 1 else ("loss" if r["significant"] else "muted")
        verdict = (f"{r['speedup']:.2f}x" if r["significant"] else "no significant difference")
        spread = f" ± {r['acc_delta_spread'] * 50:.2f}" if r["seeds"] > 1 else ""
        lines.append(
            f"<tr><td>{_esc(r['label'])}</td><td class='num {cls}'>{_esc(verdict)}</td>"
            f"<td class='num'>[{r['speedup_low']:.2f}, {r['speedup_high']:.2f}]</td>"
            f"<td class='num'>{r['step_ms']:.1f}</td>"
            f"<td class='num'>{r['acc_delta'] * 100:+.2f} pp{spread}</td>"
            f"<td>{_esc(opt.expected_effect) if opt else '(combination)'}</td></tr>")
    for r in rows:
        if r["status"] != "ok":
            opt = registry.REGISTRY.get(r["label"])
            lines.append(f"<tr><td>{_esc(r['label'])}</td><td class='na' colspan='4'>{_esc(r['status'])}: "
                         f"{_esc(r['reason'])}</td><td>{_esc(opt.expected_effect) if opt else ''}</td></tr>")
    for name, opt in registry.REGISTRY.items():
        if name not in by_label:
            lines.append(f"<tr><td>{_esc(name)}</td><td class='muted' colspan='4'>not measured in these "
                         f"results</td><td>{_esc(opt.expected_effect)}</td></tr>")
    b = by_label.get(BASELINE)
    base_line = (f"baseline step {b['step_ms']:.1f} ms, test {metric} {b['test_acc']:.4f}" if b else "")
    table = (f"<table class='summary' id='summary-{index}'><tr><th>optimization</th><th>speedup</th>"
             f"<th>95% interval</th><th>step ms</th><th>{_esc(metric)} delta</th>"
             f"<th>expected effect (as commonly reported)</th></tr>{''.join(lines)}</table>")

    # --- charts
    names = [r["label"] for r in ok]
    speed = go.Figure(go.Bar(
        x=[r["speedup"] for r in ok], y=names, orientation="h",
        marker_color=["#2a9d5b" if r["significant"] and r["speedup"] > 1 else
                      "#c0392b" if r["significant"] else "#9aa5b1" for r in ok],
        error_x={"type": "data", "symmetric": False,
                 "array": [r["speedup_high"] - r["speedup"] for r in ok],
                 "arrayminus": [r["speedup"] - r["speedup_low"] for r in ok]},
        hovertemplate="%{y}: %{x:.2f}x<extra></extra>"))
    speed.add_vline(x=1.0, line_dash="dash", line_color="#555")
    speed.update_layout(title="Speedup over the baseline (median step time ratio, 95% bootstrap interval)",
                        xaxis_title="speedup (x)", yaxis={"autorange": "reversed"},
                        height=max(260, 28 * len(ok) + 120), margin={"l": 160})
    acc = go.Figure(go.Bar(x=[100 * r["acc_delta"] for r in ok], y=names, orientation="h",
                           error_x={"type": "data", "array": [50 * r["acc_delta_spread"] for r in ok]},
                           marker_color="#4a6fa5"))
    acc.update_layout(title=f"Test {metric} change against the baseline (percentage points)",
                      xaxis_title="pp", yaxis={"autorange": "reversed"},
                      height=max(260, 28 * len(ok) + 120), margin={"l": 160})
    measured = [r for r in rows if r["status"] == "ok"]
    phases = go.Figure()
    for p in PHASES:
        phases.add_bar(name=p, x=[r["label"] for r in measured], y=[1e3 * r["phases"].get(p, 0.0) for r in measured])
    phases.update_layout(barmode="stack", title="Phase breakdown per configuration (median ms per step)",
                         yaxis_title="ms", height=420)
    head = (f"<h2>{_esc(title)}</h2><p>graph <b>{_esc(cfg['spec']['name'])}</b> "
            f"({cfg['spec']['num_nodes']:,} nodes), model {_esc(cfg['model'])}, task {_esc(cfg.get('task', 'node'))}, "
            f"device {_esc(cfg['device'])}, {cfg['epochs']} epochs, seeds: "
            f"{sorted({r['config']['seed'] for r in runs})}. {_esc(base_line)}.</p>")
    return (head + table + _figure_html(speed, f"speedup-{index}") + _figure_html(acc, f"accuracy-{index}")
            + _figure_html(phases, f"phases-{index}"))


def _asv_section(inputs: ReportInputs) -> str:
    import plotly.graph_objects as go

    if not inputs.asv:
        return "<h2>History across commits</h2><p class='muted'>No asv results given (run <code>asv run</code>).</p>"
    series = asv_series(inputs.asv)
    wanted = sorted(k for k in series if ".time_step(" in k or k.endswith(".time_step"))
    wanted = wanted or sorted(series)[:20]
    fig = go.Figure()
    for key in wanted:
        pts = series[key]
        fig.add_scatter(x=[p[1] for p in pts], y=[1e3 * p[2] for p in pts], mode="lines+markers",
                        name=key.split(".")[-1])
    fig.update_layout(title="asv: step time per optimization across commits (ms)", xaxis_title="commit",
                      yaxis_title="ms", height=480)
    n_commits = len({d["commit_hash"] for d in inputs.asv["results"]})
    return (f"<h2>History across commits</h2><p>{n_commits} commit(s), {len(series)} series from asv.</p>"
            + _figure_html(fig, "history"))


def _pytest_benchmark_section(inputs: ReportInputs) -> str:
    if not inputs.pytest_benchmarks:
        return ""
    rows = []
    for doc in inputs.pytest_benchmarks:
        for b in doc["benchmarks"]:
            st = b["stats"]
            rows.append(f"<tr><td>{_esc(b.get('group'))}</td><td>{_esc(b['name'])}</td>"
                        f"<td class='num'>{1e3 * st['median']:.3f}</td>"
                        f"<td class='num'>{1e3 * st['q1']:.3f}-{1e3 * st['q3']:.3f}</td>"
                        f"<td class='num'>{st['rounds']}</td></tr>")
    return ("<h2>pytest-benchmark</h2><table id='pytest-benchmark'><tr><th>group</th><th>benchmark</th>"
            "<th>median ms</th><th>IQR ms</th><th>rounds</th></tr>" + "".join(rows) + "</table>")


def build_report(inputs: ReportInputs, out: str | Path, *, title: str = "gnnbench: optimization gains") -> Path:
    """Write the report to ``out`` (atomically) and return its path."""
    import plotly.offline

    groups: dict[str, list[dict]] = {}
    for r in inputs.runs:
        groups.setdefault(r.get("_group", ""), []).append(r)
    sections = [_sweep_section(f"Sweep: {Path(g).name or 'runs'}", runs, i)
                for i, (g, runs) in enumerate(sorted(groups.items()))]
    if not sections:
        sections = ["<h2>Optimizations</h2><p class='na'>No gnnbench run results were given.</p>"]
    registry_rows = "".join(
        f"<tr><td>{_esc(o.name)}</td><td>{_esc(o.description)}</td><td>{_esc(o.expected_effect)}</td>"
        f"<td>{'CUDA' if o.requires else 'any'}</td><td>{'yes' if o.costs_accuracy else 'no'}</td></tr>"
        for o in registry.REGISTRY.values())
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (
        f"<h1>{_esc(title)}</h1><p class='muted'>Generated {generated} from {len(inputs.sources)} file(s). "
        "Speedups are ratios of median step times against the baseline of the same sweep, with 95% bootstrap "
        "intervals; an interval containing 1 is reported as no significant difference. Accuracy comes from "
        "full-neighbourhood evaluation.</p>"
        "<h2>Environment</h2>" + _environment_table(inputs.runs) + "".join(sections)
        + _asv_section(inputs) + _pytest_benchmark_section(inputs)
        + "<h2>Registry</h2><table id='registry'><tr><th>name</th><th>what it does</th><th>expected effect</th>"
        f"<th>device</th><th>may cost accuracy</th></tr>{registry_rows}</table>"
    )
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
            f"<style>{_CSS}</style><script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"
            f"</head><body>{body}</body></html>")
    out = Path(out)
    write_bytes_atomic(out, page.encode("utf-8"))
    return out
