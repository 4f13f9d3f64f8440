"""A sweep's tables: the summary table (one row per configuration, then every registry entry the sweep did not
measure), the notes printed beside it (noise floor, target and calibration, ranking), the multi-rank table and the
check of derived entries against measured ones.
"""

from __future__ import annotations

from gnnbench import registry
from gnnbench.measure.compare import (
    AA_LABEL,
    BASELINE,
    DERIVED_LABEL,
    JUDGED_MEASURED,
    NO_COST_PP,
    PAIR_JUDGED,
    Comparison,
    ComparisonRow,
    no_effect_text,
    verdict_summary,
    verdict_words,
)
from gnnbench.report.distributed_text import advice_lines, detail_lines, efficiency_text, share_text, wire_text
from gnnbench.report.html import esc
from gnnbench.report.rows import (
    below_floor,
    effect_kind,
    floor_text,
    primary_floor,
    ratio_text,
    reached_text,
    speedup_text,
)
from gnnbench.text import absent, pp, ratio_of, seconds

_COLUMNS = 11  # of the summary table


def _cost_text(r: ComparisonRow) -> str:
    """``faster, costs 1.20 pp`` (the accuracy lost at convergence), or why no cost is shown."""
    if r.acc_verdict == "costs accuracy":
        return f"faster, costs {-100 * r.acc_delta:.2f} pp"
    return f"faster; accuracy {r.acc_verdict}: not shown to cost nothing"


def _speedup_cell(r: ComparisonRow, floors: dict) -> str:
    if r.label == BASELINE:
        return "<td class='num muted'>1.00x (reference)</td>"
    primary = r.primary_ratio
    text, effect, bound = esc(speedup_text(r)), effect_kind(r, floors), r.bound
    if primary and absent(primary.low):
        return f"<td class='num muted'>{text}<br><small>not resolved: one round, no interval</small></td>"
    if bound == "unknown":
        return (
            f"<td class='num na'>{text}<br><small>this row and the baseline both missed the target in some "
            "rounds: no direction can be claimed</small></td>"
        )
    if not r.significant and no_effect_text(r):
        return f"<td class='num muted'>{esc(no_effect_text(r))}<br><small>{text}</small></td>"
    if not r.significant:
        why = {
            "at most": "censored: an upper bound on the speedup shows no gain",
            "at least": "the baseline missed rounds: a lower bound",
        }.get(
            bound,
            "significant alone, not after Holm's family-wise correction" if r.significant_per_row else _stop_words(r),
        )
        words = esc(verdict_words(r) or "no significant difference")  # one vocabulary (compare.verdict_words)
        return f"<td class='num {effect}'>{words}<br><small>{text}; {esc(why)}</small></td>"
    if below_floor(r, floors):
        return (
            f"<td class='num {effect}'>{text}<br><small>below the noise floor "
            f"({floor_text(primary_floor(r, floors))})</small></td>"
        )
    if effect == "tradeoff":
        cost = esc(_cost_text(r))
        return (
            f"<td class='num tradeoff' title='{cost} of test accuracy at convergence'>{text}<br>"
            f"<small>trade-off: {cost}</small></td>"
        )
    if effect == "na":
        return (
            f"<td class='num na'>{text}<br><small>reached the target in {esc(reached_text(r))} rounds: "
            "not a clean gain</small></td>"
        )
    return f"<td class='num {effect}'>{text}</td>"


def _stop_words(r: ComparisonRow) -> str:
    """Why a row that is not significant ended where it did, in the words of its stop: below the noise floor
    only for a row the stopping rule stopped so."""
    stop = r.stop
    if stop is None or stop.reason == "max rounds":
        return f"its interval contains 1 after {r.rounds} rounds: not resolved"
    if stop.reason == "below the floor":
        return f"stopped after round {stop.look}: its interval lies inside the noise floor"
    if stop.reason == "futile":
        return (
            f"stopped after round {stop.look} as futile: its chance of becoming significant by the last "
            "round was below 10%"
        )
    return f"stopped after round {stop.look}: {stop.reason}"


def _factors_text(r: ComparisonRow) -> str:
    """The two factors of a row's time to accuracy, each paired against the baseline: steps (or epochs) to the
    target and time per step (per epoch), and how the row is judged where that is not its measured time."""
    f = r.factors
    if f is None or r.label == BASELINE:
        return ""
    unit = "epochs" if f.unit == "epochs" else "steps"
    steps = (
        "the baseline's (derived)"
        if f.steps is None and r.derived
        else f"{ratio_text(f.steps)}{factor_direction(f.steps, unit)}"
        if f.steps
        else "-"
    )
    per = f"{ratio_text(f.per_step)}{factor_direction(f.per_step, unit[:-1])}" if f.per_step else "-"
    judged = f"; judged by {f.judged_by}" if f.judged_by != JUDGED_MEASURED else ""
    return (
        f"<br><small class='factors'>{unit} to the target {esc(steps)} x time per {unit[:-1]} "
        f"{esc(per)}{esc(judged)}</small>"
    )


def factor_direction(d, unit: str) -> str:
    """What a factor of time to accuracy (the baseline's / the row's, so > 1 is better) means, in words:
    `` (3.70x the baseline's steps)`` for steps or epochs to the target, `` (each step 1.44x faster)`` for time
    per step or epoch; ``""`` without a ratio."""
    x = getattr(d, "ratio", d)
    if absent(x) or not x:
        return ""
    if unit in ("steps", "epochs"):
        return f" ({1 / x:.2f}x the baseline's {unit})"
    return f" (each {unit} {x:.2f}x faster)" if x >= 1 else f" (each {unit} {1 / x:.2f}x slower)"


def _tta_cell(r: ComparisonRow, c: Comparison) -> str:
    if c.target is None:
        return "<td class='muted'>not measured (no validation curve in these results)</td>"
    if r.tta_reached is None:
        return "<td class='muted'>not measured (no time to the target in these rounds)</td>"
    value = "never" if r.tta_s is None else seconds(r.tta_s)
    if r.derived:
        return (
            f"<td class='num'>{esc(value)}<br><small title='{esc(r.tta_note)}'>{esc(DERIVED_LABEL)}"
            f"</small>{_factors_text(r)}</td>"
        )
    reached = esc(f"reached in {reached_text(r)}")
    if r.factors is not None and r.factors.judged_by in PAIR_JUDGED:
        return (
            f"<td class='num'>{esc(value)} <small>({reached})</small><br><small>{esc(r.tta_note)}</small>"
            f"{_factors_text(r)}</td>"
        )
    if r.tta_note:
        median = " (median of the rounds that reached)" if r.tta_s is not None else ""
        return (
            f"<td class='na'>{esc(value + median)}; {reached}<br><small>{esc(r.tta_note)}</small>"
            f"{_factors_text(r)}</td>"
        )
    return f"<td class='num'>{esc(value)} <small>({reached})</small>{_factors_text(r)}</td>"


def _step_cell(r: ComparisonRow) -> str:
    if not r.same_work:
        return "<td class='na'>changes the work per step (no per-step ratio)</td>"
    return f"<td class='num'>{'-' if r.label == BASELINE else esc(ratio_text(r.step_speedup))}</td>"


def _acc_cell(r: ComparisonRow, metric: str) -> str:
    if r.label == BASELINE:
        return f"<td class='num'>test {esc(metric)} {r.test_acc:.4f}<br><small>at convergence</small></td>"
    cls = {"costs accuracy": "loss", "gains accuracy": "gain"}.get(r.acc_verdict, "")
    where = "" if r.converged is True else f"<br><small class='na'>{esc(r.acc_point)}</small>"
    if not where and r.accuracy_rounds < r.rounds:
        where = f"<br><small>over the {r.accuracy_rounds} rounds trained to the plateau</small>"
    return (
        f"<td class='num'>{esc(pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high))}<br>"
        f"<small class='{cls}'>{esc(r.acc_verdict)}</small>{where}</td>"
    )


def _expected(label: str) -> str:
    if label == BASELINE:
        return "(the reference every row is compared with)"
    if label == AA_LABEL:
        return "(A/A check: the baseline against itself; should show no difference)"
    opt = registry.REGISTRY.get(label)
    return esc(opt.expected_effect) if opt else "(combination)"


def _rounds_cell(r: ComparisonRow) -> str:
    """The rounds the row was paired over, and why its runs stopped (``plateau 4, max_seconds 1``)."""
    reasons = {k: v for k, v in r.stop_reasons.items() if k != "?"}
    why = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items()))
    stop = r.stop  # the stopping rule's: when the row's verdict settled
    settled = f"<br><small>rounds ended after round {stop.look}: {esc(stop.reason)}</small>" if stop else ""
    return (
        f"<td class='num'>{r.rounds}"
        + (f"<br><small>runs stopped: {esc(why)}</small>" if why else "")
        + settled
        + "</td>"
    )


def _sampled_text(r: ComparisonRow) -> str:
    """The neighbour explosion beside the step: what a batch sampled (rows whose batches record it)."""
    s = r.sampled
    if not s:
        return ""
    return f"<br><small>{s['nodes_per_batch']:.0f} nodes per batch ({s['coverage']:.0%} of the graph)</small>"


def _row_html(r: ComparisonRow, c: Comparison, metric: str) -> str:
    label = f"<td>{esc(r.label)}</td>"
    if r.status != "ok":
        return (
            f"<tr>{label}<td class='na' colspan='{_COLUMNS - 2}'>{esc(r.status)}: {esc(r.reason)}</td>"
            f"<td>{_expected(r.label)}</td></tr>"
        )
    return (
        f"<tr>{label}{_speedup_cell(r, c.floors)}<td>{esc(r.primary)}</td>{_rounds_cell(r)}"
        f"<td class='num'>{r.epoch_s:.3f}</td><td class='num'>{r.setup_s:.3f}</td>{_tta_cell(r, c)}"
        f"{_step_cell(r)}<td class='num'>{r.step_ms:.1f}{_sampled_text(r)}</td>{_acc_cell(r, metric)}"
        f"<td>{_expected(r.label)}</td></tr>"
    )


def sweep_table(c: Comparison, metric: str, index: int) -> str:
    """Every row of the comparison, then every registry entry the sweep did not measure."""
    lines = [_row_html(r, c, metric) for r in c.rows]
    measured = {r.label for r in c.rows}
    missing = [name for name in registry.REGISTRY if name not in measured]
    if missing and 2 * (len(registry.REGISTRY) - len(missing)) < len(registry.REGISTRY):
        # a sweep of a few entries (--flags): what it left out in one line, not a row each
        lines.append(
            f"<tr><td colspan='{_COLUMNS}' class='muted'>Not in this sweep ({len(missing)} registry "
            f"entries; it measured the entries it was given): {esc(', '.join(missing))}.</td></tr>"
        )
    else:  # a sweep of every entry: an entry missing here was registered after it ran
        lines += [
            f"<tr><td>{esc(name)}</td><td class='muted' colspan='{_COLUMNS - 2}'>not measured in these "
            f"results</td><td>{esc(opt.expected_effect)}</td></tr>"
            for name, opt in registry.REGISTRY.items()
            if name not in measured
        ]
    return (
        f"<table class='summary' id='summary-{index}'><tr><th>optimization</th>"
        "<th>speedup [95% run-level interval]</th><th>ranked by</th><th>rounds</th><th>epoch s</th><th>setup s</th>"
        "<th>time to accuracy (setup included); its factors, baseline / row (&gt; 1 is better)</th>"
        "<th>per-step ratio [95%]<br><small>median measured step (interleaved in one process where marked); the "
        "time-per-step factor beside time to accuracy is the training clock per step, every per-epoch cost "
        "included, so the two can differ</small></th><th>step ms</th>"
        f"<th>test {esc(metric)}: delta, pp [95% paired interval], at convergence (best validation point) "
        "unless the cell says where it was read</th>"
        f"<th>expected effect (as commonly reported)</th></tr>{''.join(lines)}</table>"
    )


def _target_text(c: Comparison) -> str:
    """The target and how it was fixed: the calibration's seeds, plateaus, cadence and budget where one ran, else
    the target's source; then the censoring rule (escaped HTML)."""
    if c.target is None:
        return f"Time to accuracy: not measured: {esc(c.target_source)}."
    text = (
        f"<b>Target</b> {c.target:.4f} on the validation metric: {esc(c.target_source)}. Time to accuracy is "
        "the setup + training clock at the first validation point at or above it (setup: preparation, CSR, "
        "normalization, METIS, cache building)."
    )
    cal = c.calibration
    if cal:
        seeds, plateaus = cal.get("seeds") or [], ", ".join(f"{v:.4f}" for v in cal.get("plateaus") or [])
        text += (
            f" <b>Calibration</b>, before any measured round: {len(seeds)} baseline run(s) on seeds "
            f"{esc(seeds)} (no measured round uses them) trained to validation plateaus {esc(plateaus)}; "
            f"margin {100 * cal.get('margin', 0.0):g} pp"
        )
        if cal.get("eval_every"):
            text += f"; validation every {cal['eval_every']} steps"
        if cal.get("budget_seconds"):
            text += (
                f"; a time-to-accuracy budget of {cal['budget_seconds']:.1f} s for every configuration "
                f"({cal['budget_factor']:g}x the slowest calibration run's time to the target), which censors "
                "time to accuracy and stops no run"
            )
        if cal.get("step_budget"):
            text += (
                f"; accuracy runs go on to their plateau within {cal['step_budget']} steps and never stop "
                f"before {cal.get('min_steps', 0)}, waiting for a further rise at most as many steps as "
                "they took to reach the target (and at most the patience)"
            )
        text += "."
    return text + (
        " A round that has not reached the target by its budget (the end of its run where it has "
        "none) is censored there: its row says <i>reached in k of R</i> and its speedup is a bound "
        "(&le; when the row missed rounds, &ge; when the baseline did)."
    )


def sweep_notes(c: Comparison, index: int) -> str:
    """The noise floor, the time-to-accuracy target and the ranking rule, printed beside the table."""
    floors = ", ".join(f"{k.replace('_', ' ')} {floor_text(v)}" for k, v in c.floors.items())
    return (
        f"<p class='floor' id='noise-floor-{index}'><b>Noise floor</b> (smallest resolvable factor, from the "
        f"spread of {c.rounds} baseline processes): {floors}. A row the stopping rule stopped because its "
        "interval lay inside the floor of its own statistic says so; a row whose equivalence test shows its "
        "effect within the margin declared before the sweep says <i>no effect beyond</i> it.</p>"
        + (
            f"<p class='floor' id='verdicts-{index}'><b>Verdicts:</b> {esc(verdict_summary(c.rows))}.</p>"
            if verdict_summary(c.rows)
            else ""
        )
        + f"<p class='floor' id='target-{index}'>{_target_text(c)}</p>"
        "<p class='floor'><b>Ranked by</b> time to accuracy wherever there is a target, epoch time otherwise "
        "(column <i>ranked by</i>): rows that reached the target in every round first, rows censored in some "
        "after them; within each, significant speedups, then rows not resolved or with no effect, then "
        "significant slowdowns. <span class='gain'>Green</span>: a significant speedup that reached the target in every "
        "round at no accuracy cost; <span class='tradeoff'>amber</span>: a significant speedup that costs "
        "accuracy (a trade-off); a censored row is never green. Accuracy: the test metric at convergence (each "
        "run's best validation point), paired by round (same seed), 95% t-interval; <i>no accuracy cost</i> "
        f"only when it lies within &plusmn;{NO_COST_PP} pp.</p>"
        + (
            f"<p class='floor' id='family-{index}'><b>Many rows, one baseline:</b> {esc(c.family)}.</p>"
            if c.family
            else ""
        )
    )


def distributed_html(c: Comparison) -> str:
    """Multi-rank configurations (:mod:`gnnbench.report.distributed_text`): scaling efficiency, communication
    share, bytes on the wire and the distributed rules of thumb (docs/rules.md) applied to each."""
    rows = [r for r in c.rows if r.status == "ok" and r.distributed]
    if not rows:
        return ""
    cells = []
    for r in rows:
        d = r.distributed
        cells.append(
            f"<tr><td>{esc(r.label)}</td><td>{d['world_size']} ({esc(d.get('backend'))})</td>"
            f"<td>{esc(d.get('grad_compression') or 'none')}</td><td>{esc(share_text(d))}</td>"
            f"<td>{esc(wire_text(d))}</td><td>{esc(efficiency_text(d))}</td>"
            f"<td>{'<br>'.join(esc(a) for a in advice_lines(d))}</td></tr>"
        )
        cells += [f"<tr><td></td><td colspan='6'>{esc(text)}</td></tr>" for text in detail_lines(d)]
    return (
        "<h3>Distributed training</h3><p>Scaling efficiency is T1 / (N &times; TN): the single-process "
        "baseline's step against N ranks on the same global batch (1.0 is perfect scaling), with the paired "
        "interval; partition-parallel steps are full-graph steps, so theirs is against the sweep's "
        "single-process full-batch configuration. Communication share: the all-reduce's time (from the "
        "communication hook) over the step, plus the halo exchanges for partition parallelism. "
        "Bytes: payload per step and rank.</p><table class='distributed'><tr><th>configuration</th>"
        "<th>ranks</th><th>compression</th><th>communication</th><th>bytes on the wire</th>"
        "<th>scaling efficiency</th><th>rules of thumb</th></tr>" + "".join(cells) + "</table>"
    )


def derived_checks_html(c: Comparison) -> str:
    """Derived entries that were also trained to the target: both speedups, and whether they agree."""
    if not c.derived_checks:
        return ""
    rows = "".join(
        f"<tr><td>{esc(ch['label'])}</td><td class='num'>{esc(ratio_of(ch['derived']))}</td>"
        f"<td class='num'>{esc(ratio_of(ch['measured']))} <small>(reached {esc(ch.get('measured_reached'))})"
        f"</small></td><td class='{'gain' if ch['agrees'] else 'muted' if ch['agrees'] is None else 'loss'}'>"
        f"{'agree' if ch['agrees'] else 'undetermined (one round)' if ch['agrees'] is None else 'DISAGREE'}"
        f"{' (the measured ratio lies inside the derived interval)' if ch['measured_inside'] else ''}</td></tr>"
        for ch in c.derived_checks
    )
    return (
        "<p><b>Derived against measured.</b> Entries proven to keep the baseline's trajectory are judged by "
        "their time per step (their time to accuracy is derived); these were also trained to the target, as "
        "a check that the derived figure holds:</p><table><tr><th>entry</th><th>derived speedup [95%]</th>"
        f"<th>measured speedup [95%]</th><th>agreement</th></tr>{rows}</table>"
    )
