"""The page's first screen, read in a minute: what was measured (model, task, graph, machine, date, commit) in
one line, a "turn on first" box per graph and machine (the measured best set or best row, its gain and accuracy
change with intervals, and the command to copy), the A/A check of every sweep that ran one, and every measured
row of the main sweep with its verdict in words (an unresolved row with why, in plain words) and the glossary of
those words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gnnbench import registry
from gnnbench.measure.compare import (
    STATIC_LIST,
    TIME_TO_ACCURACY,
    VERDICT_GLOSSARY,
    ComparisonRow,
    in_family,
    measured_best,
    plain_reason,
    tradeoffs,
    verdict_words,
)
from gnnbench.measure.run import graph_label
from gnnbench.report.html import esc, figure_html
from gnnbench.report.rows import effect_kind, ratio_text, speedup_text
from gnnbench.report.sections.charts import EFFECT_WORDS, tradeoff_chart
from gnnbench.report.sections.sweep import Sweep, best_set_outcome, sweep_date
from gnnbench.text import absent, pp

_METHOD_LINK = "How these figures were measured: <a href='#method'>the method, below the tables</a>."

__all__ = ["aa_summary", "first_screen", "measured_line", "run_command", "Place"]


# ------------------------------------------------------------------ what was measured
def _layers(cfg: dict) -> int | None:
    """The model's layers: its config's, else one per fanout hop (the default)."""
    if cfg.get("num_layers"):
        return int(cfg["num_layers"])
    fanout = (cfg.get("flags") or {}).get("fanout")
    return len(fanout) if fanout else None


_TASKS = {"node": "node classification", "link": "link prediction"}


def measured_line(s: Sweep) -> str:
    """What a sweep measured, in one line: ``GCN (3 layers, hidden 64), node classification, neighbour batches of
    1024 with fanout [15, 10, 5], on small (100,000-node synthetic power-law graph), cpu on AMD EPYC|2 cores|24 GiB,
    torch 2.13.0+cpu; started 2026-12-06 at commit 62e05ae``."""
    base = s.base_run
    cfg, env = base.config, base.environment
    flags = cfg.get("flags") or {}
    layers = _layers(cfg)
    model = f"{str(cfg.get('model', '?')).upper()} ({f'{layers} layers, ' if layers else ''}hidden {cfg.get('hidden')})"
    batches = (
        f"neighbour batches of {flags['batch_size']} with fanout {list(flags['fanout'])}"
        if flags.get("batch_source", "neighbor") == "neighbor" and "fanout" in flags
        else f"{flags.get('batch_source', '?')} batches"
    )
    source = cfg.get("source")
    nodes = (cfg.get("spec") or {}).get("num_nodes")
    graph = (
        f"{graph_label(cfg)} (a loaded graph)"
        if source
        else f"{graph_label(cfg)} ({nodes:,}-node synthetic power-law graph)"
        if nodes
        else graph_label(cfg)
    )
    machine = machine_words(env)
    commit = str(env.get("commit") or "?")[:7]
    return (
        f"{model}, {_TASKS.get(cfg.get('task', 'node'), cfg.get('task'))}, {batches}, on {graph}, "
        f"{cfg.get('device', 'cpu')} on {machine}, torch {env.get('torch', '?')}; {sweep_date(s)} at commit {commit}"
    )


def machine_words(env: dict) -> str:
    """The machine in words: ``AMD EPYC, 2 cores, 24 GiB`` (its hardware class, else its machine key)."""
    return str(env.get("hardware_class") or env.get("machine") or "machine not recorded").replace("|", ", ")


# ------------------------------------------------------------------ turn on first
def run_command(label: str, preset: str | None) -> str:
    """The command that trains a row's configuration: ``gnnbench run --preset small --flags a,b``."""
    names = ",".join(registry.combination(label))
    return "gnnbench run" + (f" --preset {preset}" if preset else "") + f" --flags {names}"


def _process_lines(label: str) -> list[str]:
    """For the process entries of a row (an allocator is set when a process starts): the variables to put before
    one's own training command, as a user types them on this machine."""
    from gnnbench.process.allocators import shell_prefix

    lines = []
    for name in registry.combination(label):
        allocator = registry.flags_for([name]).allocator
        if allocator != registry.flags_for([]).allocator:
            lines.append(f"{shell_prefix(allocator)} python train.py   # {name}: set when the process starts")
    return lines


def _copy_block(row: ComparisonRow, preset: str | None) -> str:
    lines = [run_command(row.label, preset), *_process_lines(row.label)]
    return f"<pre class='copy'>{esc(chr(10).join(lines))}</pre>"


def _effect(r: ComparisonRow, metric: str) -> str:
    acc = pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)
    return (
        f"<b>{esc(speedup_text(r))}</b> faster by {esc(r.primary)} (95% interval), "
        f"test {esc(metric)} {esc(acc)}: {esc(r.acc_verdict)}"
    )


def _short_reason(reason: str) -> str:
    """A left-out reason in a few words: its first clause (the whole of it in the hover text)."""
    return reason.split(" (")[0].split(": ")[0]


@dataclass
class Place:
    """One graph on one machine, and the sweeps measured there (the first is the one whose box it is)."""

    graph: str
    machine: str
    sweeps: list[Sweep] = field(default_factory=list)


def places(sweeps: list[Sweep]) -> list[Place]:
    """The sweeps grouped by graph and machine, in page order; a best set's rounds go with the sweep that chose
    it. Within a place, the sweep with the most measured rows leads."""
    out: dict[tuple[str, str], Place] = {}
    for s in sweeps:
        if s.comparison is None or s.best_set_of is not None:
            continue
        env = s.base_run.environment
        key = (graph_label(s.base_run.config), machine_words(env))
        out.setdefault(key, Place(*key)).sweeps.append(s)
    for p in out.values():
        p.sweeps.sort(key=lambda s: -sum(1 for r in s.comparison.rows if r.status == "ok"))
    return list(out.values())


def _turn_on(place: Place, sweeps: list[Sweep], index: int) -> str:
    """The box of one graph and machine: the measured best set (else the best single row) with its gain, its
    accuracy change and the command; what was left out and why; the other sweeps measured there, each scoped."""
    lead = place.sweeps[0]
    preset = (lead.base_run.config.get("spec") or {}).get("name") if not lead.base_run.config.get("source") else None
    metric = lead.metric
    outcome = best_set_outcome(lead, sweeps)
    best = measured_best(lead.comparison)
    items = []
    if outcome is not None and outcome.pays:
        row = outcome.row
        items.append(
            f"<p class='gain'>The measured best set, <b>{esc(' + '.join(outcome.choice.names))}</b>: "
            f"{_effect(row, metric)} (measured in its own {row.rounds} rounds).</p>" + _copy_block(row, preset)
        )
        left = outcome.choice.left_out
        if left:
            items.append(
                "<p class='muted'>Left out of the set: "
                + "; ".join(
                    f"<span title='{esc(v)}'>{esc(k)} ({esc(_short_reason(v))})</span>" for k, v in left.items()
                )
                + ".</p>"
            )
    elif best is not None:
        why = (
            f" (the best set {esc(outcome.choice.label)} did not pay in its own rounds)"
            if outcome is not None and outcome.row is not None
            else ""
        )
        items.append(
            f"<p class='gain'>The best measured row{why}, <b>{esc(best.label)}</b>: {_effect(best, metric)}.</p>"
            + _copy_block(best, preset)
        )
    else:
        items.append(
            f"<p>Nothing measured in <a href='#sweep-{sweeps.index(lead)}'>{esc(lead.title)}</a> pays at no "
            "accuracy cost on this machine: keep the baseline.</p>"
        )
    for r in tradeoffs(lead.comparison):
        items.append(
            f"<p class='tradeoff'>Faster, but not at no accuracy cost: <b>{esc(r.label)}</b> {_effect(r, metric)}.</p>"
        )
    for other in place.sweeps[1:]:
        ob = measured_best(other.comparison)
        rows = [r.label for r in other.comparison.rows if r.status == "ok" and in_family(r.label)]
        said = (
            f"its best row is <b>{esc(ob.label)}</b> ({esc(speedup_text(ob))})"
            if ob
            else "none of its rows pays at no accuracy cost in that sweep"
        )
        items.append(
            f"<p class='muted'>Also measured here, <a href='#sweep-{sweeps.index(other)}'>{esc(other.title)}</a> "
            f"({esc(', '.join(rows))}; {esc(measured_line(other))}): {said}.</p>"
        )
    return (
        f"<div class='turn-on' id='turn-on-{index}'><h2>Turn on first: {esc(place.graph)} on "
        f"{esc(place.machine)}</h2><p class='measured'><b>Measured:</b> {esc(measured_line(lead))} "
        f"(<a href='#sweep-{sweeps.index(lead)}'>{esc(lead.title)}</a>).</p>{''.join(items)}</div>"
    )


# ------------------------------------------------------------------ every measured row
def _verdict_row(r: ComparisonRow, family: int, floors: dict, primary: str) -> str:
    words = verdict_words(r) or ""
    why = plain_reason(r, family)
    acc = "" if absent(r.acc_delta) else f"{pp(r.acc_delta, r.acc_delta_low, r.acc_delta_high)}: {r.acc_verdict}"
    clock = "" if r.primary == primary else f" <small>by {esc(r.primary)}</small>"
    return (
        f"<tr><td><code>{esc(r.label)}</code></td><td class='{effect_kind(r, floors)}'>{esc(words)}"
        + (f"<br><small>{esc(why)}</small>" if why else "")
        + f"</td><td class='num nowrap'>{esc(speedup_text(r))}{clock}</td>"
        f"<td class='num'>{esc(acc)}</td></tr>"
    )


def colour_key() -> str:
    """What each verdict colour means, in the words and colours the charts' legends use (charts.EFFECT_WORDS)."""
    return (
        "<p class='key'>Colours: "
        + "".join(f"<span class='{k}'>{esc(w)}</span>" for k, w in EFFECT_WORDS.items())
        + "</p>"
    )


def verdict_table(s: Sweep, index: int) -> str:
    """Every measured family row of a sweep, in rank order, with its verdict in words and, unresolved, why."""
    rows = [r for r in s.comparison.rows if r.status == "ok" and in_family(r.label) and not absent(r.speedup)]
    if not rows:
        return ""
    unmeasured = [r.label for r in s.comparison.rows if r.status != "ok" and in_family(r.label)]
    primary = max({r.primary for r in rows}, key=[r.primary for r in rows].count)
    head = (
        f"<tr><th>row</th><th>verdict (why, where not resolved)</th><th>speedup [95%], by {esc(primary)}</th>"
        f"<th>test {esc(s.metric)} change, pp [95%]</th></tr>"
    )
    not_measured = (
        f"<p class='muted'>Not measured here ({len(unmeasured)}: unavailable on this machine or not applicable; "
        f"each reason in <a href='#sweep-{index}'>the sweep's table</a>): {esc(', '.join(unmeasured))}.</p>"
        if unmeasured
        else ""
    )
    return (
        f"<h2 id='verdicts'>Every measured row: {esc(s.title)}</h2>"
        + colour_key()
        + f"<table class='verdicts' id='verdicts-{index}'>{head}"
        + "".join(_verdict_row(r, len(rows), s.comparison.floors, primary) for r in rows)
        + "</table>"
        + not_measured
        + glossary()
    )


def glossary() -> str:
    """The verdict words and the terms beside them, defined once (:data:`gnnbench.measure.compare.VERDICT_GLOSSARY`)."""
    return (
        "<dl class='glossary' id='glossary'>"
        + "".join(f"<dt>{esc(term)}</dt><dd>{esc(text)}</dd>" for term, text in VERDICT_GLOSSARY)
        + "</dl>"
    )


def first_screen(sweeps: list[Sweep], built: str) -> str:
    """The report's own build, a "turn on first" box per graph and machine (what was measured in one line, then
    what to turn on), the A/A check, and every measured row of the first place's leading sweep with the
    glossary."""
    where = places(sweeps)
    if not where:
        return f"<section id='first-screen'><p class='muted' id='built'>{esc(built)} {_METHOD_LINK}</p>{aa_summary(sweeps)}</section>"
    boxes = "".join(_turn_on(p, sweeps, i) for i, p in enumerate(where))
    lead = where[0].sweeps[0]
    chart = ""
    ranked = [
        r
        for r in lead.comparison.rows
        if r.status == "ok" and in_family(r.label) and r.primary == TIME_TO_ACCURACY and not absent(r.acc_delta)
    ]
    if ranked:
        outcome = best_set_outcome(lead, sweeps)
        best = outcome.row if outcome is not None and outcome.row is not None and outcome.row.status == "ok" else None
        chart = figure_html(tradeoff_chart(ranked, lead.comparison.floors, lead.metric, best_set=best), "tradeoff-top")
    static = next((r for r in lead.comparison.rows if r.label == STATIC_LIST and r.status == "ok"), None)
    static_note = (
        f"<p class='muted'>The registry's static list <code>{STATIC_LIST}</code> ({esc(ratio_text(static.primary_ratio))}) "
        "is a guess measured as one row, not a recommendation.</p>"
        if static is not None
        else ""
    )
    return (
        "<section id='first-screen'>"
        f"<p class='muted' id='built'>{esc(built)} {_METHOD_LINK}</p>"
        + boxes
        + aa_summary(sweeps)
        + verdict_table(lead, sweeps.index(lead))
        + static_note
        + chart
        + "</section>"
    )


# ------------------------------------------------------------------ the A/A check
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
