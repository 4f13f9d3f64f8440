"""Build the self-contained HTML report (plotly charts, plotly.js inlined: no network needed).

Each sweep section is a :func:`gnnbench.measure.compare.comparison.compare` of the sweep's runs: the time-to-accuracy
speedup against a target fixed in advance by calibration (epoch time where no target exists), with run-level 95%
intervals; rounds that missed the target by their budget are censored, so the row shows a bound ("reached in k of
R") and ranks after rows that reached in every round. Beside it: the noise floor, the paired accuracy delta at
convergence (test at the best validation point) and a speed/accuracy trade-off chart. A speedup is painted as a
gain only when it is significant, reached in every round and costs no accuracy. The page opens with the A/A check
(the baseline against itself) or says none was run.

This module assembles the page: its style, the environment table, the method and the order of the sections. The
sections are built in :mod:`gnnbench.report.sections` (every row read as :mod:`~gnnbench.report.rows` reads it,
the shared HTML helpers in :mod:`~gnnbench.report.html`).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

from gnnbench.atomic import write_bytes_atomic
from gnnbench.measure.run import RunResult
from gnnbench.report.bundle import plotly_bundle
from gnnbench.report.html import esc, trace_types
from gnnbench.report.inputs import ReportInputs, inputs_fingerprint
from gnnbench.report.sections import (
    asv_section,
    first_screen,
    gate_history_section,
    gate_rates_section,
    load_sweeps,
    pytest_benchmark_section,
    registry_section,
    sweep_section,
)

__all__ = ["build_report", "INPUTS_ID", "read_fingerprint"]

INPUTS_ID = "gnnbench-inputs"  # the page's JSON block that records what it was built from

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1200px;color:#222;
padding:0 12px;overflow-wrap:anywhere}
h1{margin-bottom:4px} h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;width:100%;table-layout:auto}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word}
td code,#environment td{overflow-wrap:anywhere} .nowrap{white-space:nowrap} .key span{padding:0 6px;font-weight:600}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;overflow-wrap:anywhere} .chart{max-width:100%;overflow:hidden}
.muted{color:#777} .gain{font-weight:600} .tradeoff{font-weight:600;background:#fff4e0}
.aa{padding:8px 12px;border-left:4px solid #4a6fa5;background:#f5f8fc} .aa.bad{border-color:#a11;background:#fcf5f5}
.turn-on{padding:4px 16px 8px;border:2px solid #2a9d5b;border-radius:6px;margin:16px 0}
.turn-on h2{margin-top:8px;border:0} pre.copy{background:#f4f4f4;padding:8px;font-size:14px}
ul.measured{margin-top:0} dl.glossary{font-size:13px} dl.glossary dt{font-weight:600;margin-top:4px}
dl.glossary dd{margin-left:16px;color:#444}
.floor{font-size:13px;color:#555} small{color:#777}
"""


def _verdict_css() -> str:
    """Each verdict's text colour in the tables, the chart's colour for it (one colour per verdict)."""
    from gnnbench.report.sections.charts import VERDICT_COLORS

    return "".join(f".{kind}{{color:{colour}}}" for kind, colour in VERDICT_COLORS.items())


def _built_line(out: Path) -> str:
    """Where the page was built from: the commit of this checkout, and whether its tracked files other than the
    page itself were clean."""
    from gnnbench.env import head_commit, uncommitted_files

    changed = uncommitted_files()
    if changed is None:
        return "Built outside a git checkout: the code that built it is not recorded"
    changed = [f for f in changed if Path(f).name != out.name]
    tree = "a clean tree" if not changed else f"a tree with {len(changed)} uncommitted change(s): {', '.join(changed)}"
    return f"This page was built at commit {str(head_commit())[:7]} from {tree}"


def _environment_table(runs: list[RunResult], sweeps: list | None = None) -> str:
    """Where each sweep was measured, one column per sweep (the machine's hardware class, device, versions,
    threads, commit): sweeps measured on different machines are shown apart, never merged. A field whose value
    differs within one sweep lists every value."""
    envs = [r.environment for r in runs if r.environment]
    if not envs:
        return "<p class='muted'>No run results given.</p>"
    keys = [
        "hardware_class",
        "device",
        "device_name",
        "torch",
        "torch_geometric",
        "python",
        "cuda",
        "threads",
        "cpu_count",
        "platform",
        "commit",
    ]
    columns = [(s.title, [r.environment for r in s.runs if r.environment]) for s in sweeps or []]
    columns = [(t, e) for t, e in columns if e] or [("runs", envs)]

    def value(group: list[dict], k: str) -> str:
        seen = sorted({str(e.get(k)) for e in group})
        return seen[0] if len(seen) == 1 else "differs between runs: " + ", ".join(seen)

    head = "<tr><th></th>" + "".join(f"<th>{esc(t)}</th>" for t, _ in columns) + "</tr>"
    rows = "".join(
        f"<tr><th>{esc(k.replace('_', ' '))}</th>"
        + "".join(f"<td>{esc(value(group, k))}</td>" for _, group in columns)
        + "</tr>"
        for k in keys
    )
    rows += (
        "<tr><th>optional backends</th>"
        + "".join(
            "<td>"
            + esc(
                ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in (group[0].get("optional_backends") or {}).items())
            )
            + "</td>"
            for _, group in columns
        )
        + "</tr>"
    )
    return f"<table id='environment'>{head}{rows}</table>"


# ------------------------------------------------------------------ other sections
_METHOD = (
    "Every configuration ran in separate processes, in interleaved rounds (each round runs the baseline and every "
    "configuration once, in a shuffled order; round r trains with seed base + r). An entry that does the "
    "baseline's work per step and can share a process with it is, after its run, also timed against its round's "
    "baseline in one process of its own, steps interleaved in ABBA/BAAB blocks (construction order alternating by "
    "round), and its time per step is read from there: a process's drift hits both sides alike, so the rounds' "
    "spread is what remains (the A/A row 'one process' measures it). Speedups are paired by round "
    "against the baseline of the same sweep: the geometric mean of the per-round ratios with a 95% Student-t "
    "interval over rounds, Holm across a sweep's rows. The verdicts: faster or slower (family-wise), no effect "
    "beyond the declared margin (shown equivalent), or not resolved (the interval contains 1, or excludes it for "
    "this row alone but not after Holm's correction, or the rounds stopped as futile). Runs train to a "
    "validation plateau unless a sweep fixes its epochs (each section says which). The accuracy target is fixed "
    "before the comparison by calibration: the baseline trained to its plateau on seeds no measured round uses, "
    "its median plateau minus a stated margin; calibration also sets the validation cadence, one run-clock "
    "budget for every configuration's time to accuracy (it censors, it stops no run) and a step budget within "
    "which accuracy runs go on to their plateau (each section states its own, or why its target was not "
    "calibrated). The primary speedup is time to accuracy (setup included) wherever there is a target, else "
    "epoch time. A round that missed the target by its budget is censored there: the row says reached in k of R, "
    "its speedup is a bound (≤ or ≥), and it ranks after the rows that reached the target in every round. An "
    "entry proven by test to leave the training trajectory unchanged runs a short run instead: its time to "
    "accuracy is derived as its setup plus the calibrated steps to the target times its training clock per step "
    "(labelled derived), against the same-round baseline read the same way. Rounds stop when decided: after 3 "
    "rounds a row whose verdict is settled receives no more (Holm at each look's share of 5%, or an interval "
    "inside the noise floor; docs/statistics.md). The per-step ratio is shown only where an optimization leaves "
    "the work per step unchanged. Accuracy is read at convergence (the test metric at each run's best validation "
    "point, full-neighbourhood evaluation, paired by round) where every run of the pair converged, else at equal "
    "steps, as each row says."
)


def read_fingerprint(page: str) -> dict | None:
    """The inputs a report page records (:func:`~gnnbench.report.inputs.inputs_fingerprint`), or ``None`` for a
    page built before it recorded them."""
    start_tag = f"<script type='application/json' id='{INPUTS_ID}'>"
    start = page.find(start_tag)
    if start < 0:
        return None
    end = page.index("</script>", start)
    return json.loads(page[start + len(start_tag) : end])  # JSON reads the escaped "<\/" back as "</"


def build_report(inputs: ReportInputs, out: str | Path, *, title: str = "gnnbench: optimization gains") -> Path:
    """Write the report to ``out`` (atomically) and return its path."""
    sweeps = load_sweeps(inputs.runs_by_sweep)
    sections = [sweep_section(s, i) for i, s in enumerate(sweeps)] or [
        "<h2>Optimizations</h2><p class='na'>No gnnbench run results were given.</p>"
    ]
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = Path(out)
    built = f"{_built_line(out)}, {generated}, from {len(inputs.sources)} file(s)."
    body = (
        f"<h1>{esc(title)}</h1>"
        + first_screen(sweeps, built)
        + "<h2>Environment, per sweep</h2>"
        + _environment_table(inputs.runs, sweeps)
        + "".join(sections)
        + asv_section(inputs)
        + gate_history_section(inputs)
        + gate_rates_section(inputs)
        + pytest_benchmark_section(inputs)
        + registry_section()
        + f"<section id='method'><h2>Method</h2><p class='muted'>{_METHOD}</p></section>"
    )
    # what it was built from (arguments, files and their hashes): tests/report/test_published_report.py reads it back
    fingerprint = json.dumps(inputs_fingerprint(inputs), sort_keys=True, indent=0).replace("</", "<\\/")
    bundle = plotly_bundle(trace_types(body))
    body += f"<p class='muted' id='bundle'>Charts drawn with the inlined {esc(bundle.note)}.</p>"
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{_CSS}{_verdict_css()}</style>"
        f"<script type='text/javascript'>{bundle.js}</script>"
        f"<script type='application/json' id='{INPUTS_ID}'>{fingerprint}</script>"
        f"</head><body>{body}</body></html>"
    )
    write_bytes_atomic(out, page.encode("utf-8"))
    return out
