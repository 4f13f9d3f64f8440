"""Plain-text tables and reports for the terminal: every command formats through here."""

from __future__ import annotations

from typing import Callable

from gnnbench.flags import Flags
from gnnbench.measure.compare import (
    AA_DUET_LABEL,
    AA_INPROCESS_LABEL,
    BASELINE,
    STATIC_LIST,
    ComparisonRow,
    aa_spread_line,
    measured_best,
    no_effect_text,
    tradeoffs,
    verdict_summary,
    verdict_words,
)
from gnnbench.measure.run import Accuracy, Memory, RunResult, graph_label
from gnnbench.measure.sweep import outcome_line
from gnnbench.report.distributed_text import advice_lines, detail_lines, summary_line
from gnnbench.text import human_bytes, noise_floor, percent, pp, ratio, ratio_of, seconds

__all__ = [
    "table",
    "format_graph_report",
    "format_run",
    "format_compare",
    "format_distributed",
    "GPU_COLUMNS",
    "registry_markdown",
    "format_ladder",
]


def table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """Right-aligned plain-text table: ``columns`` are (key, format spec) pairs."""
    cells = [[format(r[k], f) for k, f in columns] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, (k, _) in enumerate(columns)]
    lines = ["  ".join(k.rjust(w) for (k, _), w in zip(columns, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def _pairs(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def format_graph_report(r: dict) -> str:
    """``gnnbench graph``: statistics, index bytes per dtype, generation and preparation time."""
    s = r["stats"]
    rows: list[tuple[str, str]] = [
        ("source", r["source"]),
        ("nodes", f"{s['num_nodes']:,}"),
        ("edges (directed)", f"{s['num_edges']:,}" + ("  (undirected graph)" if s["is_undirected"] else "")),
        ("features / classes", f"{s['num_features']} / {s['num_classes']}"),
        ("average degree", f"{s['avg_degree']:.2f}"),
        ("degree quantiles", "  ".join(f"{k}={v:g}" for k, v in s["degree_quantiles"].items())),
        (
            "max degree",
            f"{s['max_degree']:,}  ({s['max_degree'] / max(s['degree_quantiles']['p50'], 1):.0f}x the median)",
        ),
        ("isolated nodes", f"{s['isolated_nodes']:,}"),
        (
            "tail exponent (Hill)",
            f"{s['hill_exponent']:.2f}" + (f"  (configured {r['spec']['exponent']})" if "spec" in r else ""),
        ),
        ("edge homophily", f"{s['edge_homophily']:.3f}"),
    ]
    for dtype, b in s["index_bytes"].items():
        rows.append(
            (
                f"index bytes {dtype}",
                f"{human_bytes(b['total'])}  (COO {human_bytes(b['coo'])}"
                f" + CSR offsets {human_bytes(b['csr_rowptr'])})",
            )
        )
    if "generate_seconds" in r:
        rows.append(("generation time", seconds(r["generate_seconds"], digits=3)))
    if "load_seconds" in r:
        rows.append(("load time", seconds(r["load_seconds"], digits=3)))
    if "load_peak_bytes" in r:
        rows.append(
            (
                "load peak memory",
                f"+{human_bytes(r['load_peak_bytes'])} above memory before the load "
                f"(the graph holds {human_bytes(r['graph_bytes'])}: "
                f"{r['load_peak_bytes'] / max(r['graph_bytes'], 1):.1f}x)",
            )
        )
    for note in [r["notes"]] if isinstance(r.get("notes"), str) else r.get("notes") or []:
        rows.append(("note", str(note)))
    if "twin" in r:
        t = r["twin"]
        rows.append(
            (
                "closest preset",
                f"{t['preset']} (distance {t['distance']:.2f}; "
                + ", ".join(f"{k} {v:.2f}" for k, v in t["distances"].items() if k != t["preset"])
                + ")",
            )
        )
        rows.append(("synthetic twin", f"gnnbench run {t['cli']}"))
        for note in t.get("notes", []):
            rows.append(("twin note", note))
    p = r["prepare"]
    rows.append(("preparation (baseline)", seconds(p["baseline_seconds"], digits=3)))
    rows.append(
        (
            f"preparation ({','.join(p['flags']) or 'none'})",
            f"{seconds(p['flagged_seconds'], digits=3)}; index storage {human_bytes(p['index_bytes_before'])}"
            f" at int64 -> {human_bytes(p['index_bytes_after'])}",
        )
    )
    return _pairs(rows)


def _format_accuracy(acc: Accuracy) -> str:
    extra = "".join(f", {k} {v:.4f}" for k, v in acc.extra.items() if "hits" in k)
    return f"accuracy   {acc.metric}: val {acc.val:.4f}, test {acc.test:.4f}{extra} (full-neighbourhood evaluation)"


def _format_memory(m: Memory) -> str:
    """The process's host peak (and the device's), then the compute device's peak outside and during
    evaluation (a result without those fields shows neither)."""
    text = f"memory     host peak {human_bytes(m.host_peak_bytes)}"
    if m.device_peak_bytes:
        text += f", device peak {human_bytes(m.device_peak_bytes)}"
    if m.eval_peak_bytes is not None:
        text += (
            f"; outside evaluation {human_bytes(m.train_peak_bytes)}, evaluation "
            f"{human_bytes(m.eval_peak_bytes)} (+{human_bytes(m.eval_rise_bytes)} over its start)"
            f"\n           measured as {m.peak_method}"
        )
    elif m.peak_method:
        text += f"; evaluation apart: {m.peak_method}"
    return text


def _format_sampled(s: dict | None, graph_nodes: int | None) -> list[str]:
    """The neighbour explosion of a run's batches: nodes, edges, coverage, per hop."""
    if not s:
        return []
    line = (
        f"sampled    {s['nodes_per_batch']:.0f} nodes per batch ({s['coverage']:.0%} of the graph's "
        f"{graph_nodes} nodes), {s['edges_per_batch']:.0f} edges"
    )
    if s.get("nodes_per_hop"):
        line += (
            "; per hop: nodes "
            + " / ".join(f"{v:.0f}" for v in s["nodes_per_hop"])
            + ", edges "
            + " / ".join(f"{v:.0f}" for v in s["edges_per_hop"])
        )
    return [line]


def format_run(r: RunResult) -> str:
    """Human-readable phase breakdown of one run result."""
    if not r.ok:
        return f"{r.status}:\n" + "\n".join(f"  {k}: {v}" for k, v in (r.unavailable or {"error": r.error}).items())
    cfg, env, g, step = r.config, r.environment, r.graph, r.step_seconds
    lines = [
        f"graph      {graph_label(cfg)}: {g.num_nodes:,} nodes, {g.num_edges:,} edges "
        f"({'loaded' if cfg.get('source') else 'generated'} in {seconds(g.generate_seconds)}, prepared in "
        f"{seconds(g.prepare_seconds, digits=3)}, pipeline set up in {seconds(g.setup_seconds)})",
        f"model      {cfg['model']}, {len(cfg['flags']['fanout'])} layers, fanout {cfg['flags']['fanout']}, "
        f"{cfg.get('optimizer', 'adam')} lr {cfg.get('lr', 0.01):g}, "
        f"device {env['device']} ({env['device_name']}), {env['threads']} threads",
        f"flags      {', '.join(f'{k}={v}' for k, v in Flags.from_dict(cfg['flags']).changed().items()) or 'baseline'}",
        f"steps      {r.steps.measured} measured after {r.steps.warmup} warm-up; timing mode {r.timing_mode}",
        "",
        f"{'phase':<10}{'median ms':>11}{'IQR ms':>18}{'share':>8}",
    ]
    med = step.median
    for p, v in r.phases.items():
        share = v.median / med if med else float("nan")
        lines.append(f"{p:<10}{1e3 * v.median:>11.2f}{1e3 * v.q1:>9.2f}-{1e3 * v.q3:<8.2f}{share:>8.1%}")
    lines.append(
        f"{'step':<10}{1e3 * med:>11.2f}{1e3 * step.q1:>9.2f}-{1e3 * step.q3:<8.2f}"
        f"   (min {1e3 * step.min:.2f}, max {1e3 * step.max:.2f})"
    )
    for p, v in (r.worker_phases or {}).items():
        lines.append(
            f"{p:<10}{1e3 * v.median:>11.2f}{1e3 * v.q1:>9.2f}-{1e3 * v.q3:<8.2f}"
            "   in loader workers, per batch on the worker's clock: overlapped, not part of the step"
        )
    lines.append("")
    busy = percent(r.device_busy_fraction, missing=f"n/a ({r.device_busy_reason})")
    lines += [
        f"data wait  {percent(r.data_wait_fraction)} of a step; compute {percent(r.compute_fraction)}; device busy {busy}",
        "epochs     " + ", ".join(map(seconds, r.epoch_seconds)) + f"; evaluation {seconds(r.eval_seconds)}",
        _format_accuracy(r.accuracy),
        f"transfer   {human_bytes(r.transfer.bytes_h2d_per_batch)} host->device per batch",
        *_format_sampled(r.sampled, g.num_nodes),
        _format_memory(r.memory),
        f"overhead   instrumentation {percent(r.instrumentation_overhead_fraction)} of a step",
    ]
    if r.compile is not None:
        c = r.compile
        lines.append(
            f"compile    first step {seconds(c.first_step_seconds)} "
            f"(~{seconds(c.estimated_compile_seconds or 0.0)} compiling), {c.unique_graphs} graphs, "
            f"{c.recompilations} recompilations"
            + (f", {c.graph_breaks} graph breaks" if c.graph_breaks is not None else "")
        )
    for w in r.warnings:
        lines.append(f"WARNING    {w}")
    notes = g.notes or []
    for note in [notes] if isinstance(notes, str) else notes:
        lines.append(f"NOTE       {note}")
    if g.link_holdout and cfg.get("task") == "link":
        lines.append(f"NOTE       held-out link-prediction edges: {g.link_holdout}")
    if r.batch_cache:
        b = r.batch_cache
        lines.append(f"cache      {b['hits']} hits, {b['misses']} misses, {b['corrupt']} corrupt entries rejected")
    return "\n".join(lines)


# Extra columns of the compare table: (header, width, cell from a row). gpu-check adds GPU_COLUMNS.
Column = tuple[str, int, Callable[[ComparisonRow], str]]
GPU_COLUMNS: list[Column] = [
    ("GPU busy", 10, lambda r: percent(r.device_busy, digits=0)),
    ("H2D/batch", 12, lambda r: human_bytes(r.h2d_bytes_per_batch)),
    # CUDA-event phase times: the host-side sampling drifts between configurations sharing one process, so a
    # flag that acts on the GPU is read from its device compute time (forward + backward + optimizer)
    ("sample ms", 10, lambda r: _device_ms(r, ("sample",))),
    ("compute ms", 11, lambda r: _device_ms(r, ("forward", "backward", "optimizer"))),
]


def _device_ms(row: ComparisonRow, phases: tuple[str, ...]) -> str:
    d = row.device_phase_ms
    return "n/a" if not d else f"{sum(d.get(p, 0.0) for p in phases):.1f}"


def _one_process_lines(c) -> list[str]:
    """Which rows were timed against their baseline in one process, steps interleaved, and which in duet, with
    each design's A/A."""
    lines = []
    for design, aa_label, how, aa_how, differ in (
        (
            "interleaved",
            AA_INPROCESS_LABEL,
            "in one process, steps interleaved",
            "A/A in one process (baseline against itself, steps interleaved)",
            "the two trainers of a process differ",
        ),
        (
            "duet",
            AA_DUET_LABEL,
            "in duet (its process and the baseline's at once, one core each, at one thread: the effect at one thread)",
            "A/A in duet (baseline against itself, two processes at once)",
            "the two cores or the two sides differ",
        ),
    ):
        paired = [
            r.label
            for r in c.rows
            if r.status == "ok" and r.interleaved and (r.pair_design or "interleaved") == design and r.label != aa_label
        ]
        if not paired:
            continue
        lines.append(
            f"timed against the baseline {how} (their step x, and their time per step where time to accuracy is "
            f"steps x time per step, read there): {', '.join(paired)}"
        )
        aa = next((r for r in c.rows if r.label == aa_label and r.status == "ok"), None)
        if aa is not None and aa.step_speedup is not None:
            step = aa.step_speedup
            lines.append(f"{aa_how}: step {ratio_of(step)}" + (f": SIGNIFICANT: {differ}" if step.significant else ""))
    if not lines:
        return []
    spread = aa_spread_line(c.rows)
    if spread:
        lines.append(spread)
    return lines


def format_compare(comparison, extra: list[Column] = (), best_set=None) -> str:
    """The comparison table (:class:`gnnbench.measure.compare.comparison.Comparison`): the primary speedup (time to accuracy
    where measured, else epoch time) with its run-level interval, the clocks, the per-step ratio where the
    work per step is the same, the paired accuracy delta, the noise floor and the A/A check."""
    c = comparison
    lines = _noise_lines(c) + _one_process_lines(c) + _reading_lines(c) + headline(c, best_set)
    lines += ["", _factors_legend(c.equivalence_margin)]
    head = _table_head(extra)
    lines += [head, "-" * len(head)]
    lines += [_row_line(r, extra) if r.status == "ok" else _unmeasured_row_line(r, extra) for r in c.rows]
    lines += format_distributed(c.rows)
    return "\n".join(lines)


def _noise_lines(c) -> list[str]:
    """The noise floor from the baseline's processes, and the A/A check where the sweep ran one."""
    lines = [
        f"noise floor (from {c.rounds} baseline processes on this machine; smaller effects are not "
        f"resolvable): " + ", ".join(f"{k.replace('_', ' ')} {noise_floor(v)}" for k, v in c.floors.items())
    ]
    if c.aa is not None and c.aa.status == "ok":
        aa = c.aa.epoch_speedup
        step = c.aa.step_speedup
        lines.append(
            f"A/A (baseline against itself): epoch {ratio_of(aa)}, step {ratio_of(step)}: "
            + (
                "no significant difference"
                if not (aa and aa.significant) and not (step and step.significant)
                else "SIGNIFICANT: this machine is too noisy for the effects below"
            )
        )
    return lines


def _reading_lines(c) -> list[str]:
    """How to read the rows: the target, the budget that censors time to accuracy, where accuracy is read and
    how the rows are ranked, the family-wise control and the verdicts in one line."""
    lines = [
        "time to accuracy: "
        + (f"validation {c.target:.4f} ({c.target_source})" if c.target is not None else c.target_source)
    ]
    lines += _budget_lines(c.calibration or {})
    lines.append(
        "accuracy: test metric at each run's best validation point, paired by round: at convergence "
        "where every run of the pair converged, else at equal steps (said in the note); ranked: rows "
        "that reached the target in every round first, then family-wise significant speedups, no "
        "significant difference, family-wise significant slowdowns"
    )
    summary = verdict_summary(c.rows)
    return lines + [text for text in (c.family, summary) if text]


def _budget_lines(cal: dict) -> list[str]:
    """The calibrated budget that censors time to accuracy (none without one)."""
    if not cal.get("budget_seconds"):
        return []
    return [
        f"budget: {cal['budget_seconds']:.1f} s of run clock per run ({cal['budget_factor']:g}x the "
        f"calibrated time to the target) censors time to accuracy: a round that has not reached the "
        f"target by then is censored there and its row's ratio is a bound; it stops no run: accuracy "
        f"runs go on to their plateau within {cal.get('step_budget')} steps, never stopping before "
        f"{cal.get('min_steps')}, waiting for a further rise at most as many steps as they took to "
        f"reach the target (and at most the patience); validation every {cal.get('eval_every')} steps"
    ]


def _factors_legend(equivalence_margin: float | None) -> str:
    """What the two factor columns mean, and the declared equivalence margin of steps to the target."""
    return (
        "to target x, per step x: the two factors of time to accuracy (setup + steps to the target x time "
        "per step), each paired by round against the baseline (> 1: fewer steps, faster steps; 'ep': "
        "epochs and time per epoch, for entries that change the work per step; 'derived': the baseline's "
        "steps, by proof)"
        + (
            f"; steps to the target within +-{equivalence_margin:.0%} of the "
            "baseline's (declared before the sweep, shown by TOST): judged by time per "
            "step x the baseline's steps"
            if equivalence_margin
            else ""
        )
    )


def _table_head(extra: list[Column]) -> str:
    return (
        f"{'configuration':<20}{'speedup [95% CI]':<24}{'by':<18}{'to target x [95% CI]':<24}"
        f"{'per step x [95% CI]':<24}{'epoch s':>8}{'setup s':>8}{'to-acc s':>9}"
        f"{'reached':>8}"
        f"{'step ms':>9}  {'step x [95% CI]':<22}{'test acc':>9}  {'acc delta pp [95% CI]':<24}"
        + "".join(f"{h:>{w}}" for h, w, _ in extra)
        + "  note"
    )


def _unmeasured_row_line(r: ComparisonRow, extra: list[Column]) -> str:
    """A row that was not measured: dashes, then its status and why."""
    return (
        f"{r.label:<20}{'-':<24}{'-':<18}{'-':<24}{'-':<24}"
        + " " * 42
        + f"  {'-':<22}{'-':>9}  {'-':<24}"
        + "".join(f"{'-':>{w}}" for _, w, _ in extra)
        + f"  {r.status}: {r.reason}"
    )


def _row_line(r: ComparisonRow, extra: list[Column]) -> str:
    """A measured row: its ratios with their intervals, its clocks and accuracy, then its notes."""
    base = r.label == BASELINE
    delta = pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high, unit="")
    tta = "-" if r.tta_s is None else f"{r.tta_s:.2f}"
    bound = {"at most": "<=", "at least": ">="}.get(r.bound, "")
    shown = "-" if base else (bound + ratio_of(r.primary_ratio) if r.bound != "unknown" else "bound unknown")
    steps_x, per_step_x = _factor_cells(r, base)
    return (
        f"{r.label:<20}{shown:<24}{r.primary:<18}{steps_x:<24}{per_step_x:<24}{r.epoch_s:>8.2f}"
        f"{r.setup_s:>8.2f}{tta:>9}{r.tta_reached or '-':>8}{r.step_ms:>9.1f}  "
        f"{'-' if base else ratio_of(r.step_speedup):<22}"
        f"{r.test_acc:>9.4f}  {'-' if base else delta:<24}"
        + "".join(f"{cell(r):>{w}}" for _, w, cell in extra)
        + "  "
        + "; ".join(_verdict_notes(r, base) + _run_notes(r))
    )


def _verdict_notes(r: ComparisonRow, base: bool) -> list[str]:
    """A row's notes on its verdict: no significant effect, its time to accuracy, the work per step, accuracy."""
    notes = []
    if not base and not r.significant:  # a family row's verdict in the words every view uses
        notes.append(verdict_words(r) or no_effect_text(r) or "no significant difference")
    if r.tta_note:
        notes.append(r.tta_note)
    if not r.same_work:
        notes.append("changes the work per step: no per-step ratio")
    if not base:
        notes.append(r.acc_verdict)
    return notes


def _run_notes(r: ComparisonRow) -> list[str]:
    """A row's notes on its runs: where accuracy was read, when its rounds ended, why its runs stopped, what
    its batches sampled."""
    notes = []
    if r.converged is not True:  # read at equal steps: derived, or cut by a budget
        notes.append(r.acc_point)
    elif r.accuracy_rounds < r.rounds:
        notes.append(f"accuracy over the {r.accuracy_rounds} rounds trained to the plateau")
    if r.stop is not None and r.stop.reason != "max rounds":  # the stopping rule settled it early
        notes.append(f"rounds ended after round {r.stop.look}: {r.stop.reason}")
    stops = {k: v for k, v in r.stop_reasons.items() if k != "?"}
    if stops:
        notes.append("stopped: " + ", ".join(f"{k} {v}" for k, v in sorted(stops.items())))
    if r.sampled:
        notes.append(
            f"sampled {r.sampled['nodes_per_batch']:.0f} nodes per batch ({r.sampled['coverage']:.0%} of the graph)"
        )
    return notes


def _factor_cells(r: ComparisonRow, base: bool) -> tuple[str, str]:
    """The two factors of a row's time to accuracy as table cells: steps to the target and time per step."""
    f = r.factors
    if base or f is None:
        return "-", "-"
    unit = " ep" if f.unit == "epochs" else ""
    steps = "derived" if f.steps is None and r.derived else ratio_of(f.steps) + unit if f.steps else "-"
    return steps, ratio_of(f.per_step) + unit if f.per_step else "-"


def headline(c, best_set=None) -> list[str]:
    """What pays here, from this sweep's measurement: the measured best set first (its own rounds,
    :mod:`gnnbench.measure.sweep.best_set`), the measured best row at no accuracy cost, the trade-offs, and what the
    registry's static list measured (a guess, never the headline)."""

    def effect(r: ComparisonRow) -> str:
        return (
            f"{ratio(r.speedup, r.speedup_low, r.speedup_high)} by {r.primary}, accuracy "
            f"{pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)}: {r.acc_verdict}"
        )

    best = measured_best(c)

    def factored(r: ComparisonRow) -> str:
        steps_x, per_step_x = _factor_cells(r, False)
        return effect(r) + (f" (steps to the target {steps_x}, time per step {per_step_x})" if r.factors else "")

    first = outcome_line(best_set, factored)
    lines = [""] + ([first] if first else [])
    lines += [
        "measured best single row here: "
        + (f"{best.label}: {effect(best)}" if best else "nothing measured pays at no accuracy cost on this machine")
    ]
    lines += [f"trade-off: {r.label}: {effect(r)}" for r in tradeoffs(c)]
    static = next((r for r in c.rows if r.label == STATIC_LIST and r.status == "ok"), None)
    if static is not None and static is not best:
        lines.append(
            f"{STATIC_LIST} (the registry's static list: a guess, not a recommendation) measured {effect(static)}"
        )
    return lines


def format_distributed(rows: list[ComparisonRow]) -> list[str]:
    """The multi-rank configurations of a comparison (:mod:`gnnbench.report.distributed_text`): ranks, backend,
    communication share, bytes on the wire, scaling efficiency ``T1 / (N x TN)``, the partition or the
    compression's accuracy, and the distributed rules of thumb (docs/rules.md) applied to them."""
    multi = [r for r in rows if r.status == "ok" and r.distributed]
    if not multi:
        return []
    lines = [
        "",
        "distributed (scaling efficiency T1 / (N x TN): the single-process baseline's step against N ranks "
        "on the same global batch; 1.0 is perfect scaling):",
    ]
    for r in multi:
        d = r.distributed
        lines.append(f"  {r.label:<20}{summary_line(d)}")
        lines += [f"      {text}" for text in detail_lines(d)]
        lines += [f"      -> {advice}" for advice in advice_lines(d)]
    return lines


def registry_markdown() -> str:
    """The registry as a Markdown table (docs/optimizations.md's table is exactly this; a test keeps it so)."""
    from gnnbench import registry

    lines = [
        "| name | layer | what it does | needs | may cost accuracy | changes work per step | tasks |",
        "|---|---|---|---|---|---|---|",
    ]
    for opt in registry.REGISTRY.values():
        lines.append(
            f"| `{opt.name}` | `{opt.layer}` | {opt.description} | {', '.join(opt.requires) or 'any device'} "
            f"| {'yes' if opt.costs_accuracy else 'no'} | {'yes' if opt.changes_work else 'no'} "
            f"| {', '.join(opt.tasks)} |"
        )
    return "\n".join(lines)


def format_ladder(result) -> str:
    """``run --memory-budget``: the out-of-memory ladder's path (:class:`gnnbench.advice.ladder.LadderResult`), one
    row per rung, ending with the configuration that fits (or the smallest peak reached)."""
    budget = human_bytes(result.budget_bytes)
    lines = [
        f"memory budget {budget} on {result.device}; peak of the first {result.probe_steps} steps: "
        f"{result.memory_source}",
        "",
    ]
    rows = [
        {
            "rung": r.rung,
            "change": r.change,
            "status": r.status,
            "peak": "-" if r.peak_bytes is None else human_bytes(r.peak_bytes),
            "step ms": "-" if r.step_seconds is None else f"{1e3 * r.step_seconds:.1f}",
            "test": "-" if r.test_metric is None else f"{r.test_metric:.4f}",
            "vs given": "-"
            if r.accuracy_delta_pp is None or r.rung == "as given"
            else pp(r.accuracy_delta_pp / 100, digits=1),
            "note": r.note,
        }
        for r in result.path
    ]
    keys = ["rung", "change", "status", "peak", "step ms", "test", "vs given"]
    widths = {k: max(len(k), *(len(row[k]) for row in rows)) for k in keys}
    lines.append("  ".join(k.ljust(widths[k]) for k in keys) + "  note")
    for row in rows:
        lines.append("  ".join(row[k].ljust(widths[k]) for k in keys) + ("  " + row["note"] if row["note"] else ""))
    lines.append("")
    final, smallest = result.final, result.smallest
    if final is not None:
        changed = final.flags.changed()
        lines.append(
            f"fits at rung '{final.rung}': peak {human_bytes(final.peak_bytes)} <= {budget}; flags "
            + (", ".join(f"{k}={v}" for k, v in changed.items()) or "baseline")
        )
    elif smallest is not None:
        lines.append(
            f"nothing fits {budget}: the smallest peak reached is {human_bytes(smallest.peak_bytes)} "
            f"(rung '{smallest.rung}'); beyond this ladder: a narrower model (--hidden), fewer layers, "
            "smaller Cluster-GCN batches (clusters_per_batch, cluster_size)"
        )
    else:
        lines.append(f"nothing fits {budget}: no rung could be measured (see the notes)")
    return "\n".join(lines)
