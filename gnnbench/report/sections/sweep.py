"""The report's sweeps: the runs grouped by sweep directory and compared
(:func:`gnnbench.measure.compare.comparison.compare`), and each sweep's section: what was measured and how (graph, model,
optimizer, training length, seeds, identity), then its tables and charts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gnnbench.measure.compare import BASELINE, CALIBRATION, Calibration, Comparison, compare
from gnnbench.measure.run import RunResult, graph_label
from gnnbench.measure.sweep import BEST_SET_DIR, BestSetOutcome
from gnnbench.report.html import esc
from gnnbench.report.inputs import sweep_equivalence_margin, sweep_rule
from gnnbench.report.sections.charts import sweep_charts
from gnnbench.report.sections.table import derived_checks_html, distributed_html, sweep_notes, sweep_table


@dataclass
class Sweep:
    """One sweep of the report: its title, runs and comparison (or why there is none)."""

    title: str
    runs: list[RunResult]
    comparison: Comparison | None
    error: str | None = None
    group: str = ""  # the sweep's directory ("" for loose files)

    @property
    def base_run(self) -> RunResult:
        """The sweep's first measured baseline run (its first run where none was measured)."""
        return next((r for r in self.runs if r.label == BASELINE and r.ok), self.runs[0])

    @property
    def metric(self) -> str:
        """The name of the task's metric (``accuracy``, ``auc``)."""
        acc = self.base_run.accuracy
        return acc.metric if acc is not None else "accuracy"

    @property
    def best_set_of(self) -> str | None:
        """The directory of the sweep whose best set this sweep measured (its ``best-set`` folder), or ``None``."""
        return str(Path(self.group).parent) if self.group and Path(self.group).name == BEST_SET_DIR else None


def _optimizer_text(cfg: dict) -> str:
    """``adam (lr 0.01), fanout [15, 10, 5], batch 1024`` / ``sgd (lr 0.05, momentum 0.9, cosine schedule), ...``
    from a stored config (one that names no optimizer trained with Adam)."""
    name, lr = cfg.get("optimizer", "adam"), cfg.get("lr", 0.01)
    parts = [f"lr {lr:g}"] + ([f"momentum {cfg.get('momentum', 0.9):g}"] if name == "sgd" else [])
    if cfg.get("lr_schedule", "constant") != "constant":
        parts.append(f"{cfg['lr_schedule']} schedule")
    flags = cfg.get("flags") or {}
    batch = f", fanout {list(flags['fanout'])}, batch {flags['batch_size']}" if "fanout" in flags else ""
    return f"{name} ({', '.join(parts)}){batch}"


def _length_text(cfg: dict) -> str:
    """How long the runs trained: ``30 epochs``, or ``trained to a validation plateau (patience 5 epochs, at most
    200 epochs, budget 12.0 s)`` for a run to a plateau (``epochs`` None), from the config fields present."""
    budget = cfg.get("max_seconds")
    if cfg.get("epochs") is not None:
        return f"{cfg['epochs']} epochs" + (f" (budget {budget:.1f} s)" if budget else "")
    parts = (
        ([f"patience {cfg['patience']:g} epochs"] if cfg.get("patience") is not None else [])
        + ([f"at most {cfg['max_epochs']} epochs"] if cfg.get("max_epochs") is not None else [])
        + ([f"budget {budget:.1f} s"] if budget else [])
    )
    return "trained to a validation plateau" + (f" ({', '.join(parts)})" if parts else "")


def _ran_text(c: Comparison, cfg: dict) -> str:
    """What ran: how long the runs trained (with a calibration: to the calibrated target and on to a plateau,
    waiting at most each run's own steps to the target, within the step budget) and the rounds each row received
    (the stopping rule gives fewer to rows it settled)."""
    from collections import Counter

    from gnnbench.measure.compare import in_family

    cal = c.calibration or {}
    if cal.get("step_budget") and c.target is not None:
        length = (
            f"trained past the target {c.target:.4f} on to a validation plateau, waiting for a further rise "
            f"at most as many steps as each run took to reach the target, within {cal['step_budget']} steps, "
            f"never stopping before step {cal.get('min_steps', 0)}"
        )
    else:
        length = _length_text(cfg)
    given = Counter(r.rounds for r in c.rows if r.status == "ok" and in_family(r.label))
    rounds = (
        f"the baseline {c.rounds} rounds, the rows "
        + ", ".join(f"{k} rounds ({n} row{'s' * (n != 1)})" for k, n in sorted(given.items()))
        if given
        else f"{c.rounds} round(s)"
    )
    return f"{length}; {rounds}"


def sweep_section(s: Sweep, index: int) -> str:
    if s.comparison is None:
        return f"<h2 id='sweep-{index}'>{esc(s.title)}</h2><p class='na'>{esc(s.error)}</p>"
    base, metric = s.base_run, s.metric
    cfg = base.config
    nodes = (cfg.get("source") or cfg.get("spec") or {}).get("num_nodes", 0)
    head = (
        f"<h2 id='sweep-{index}'>{esc(s.title)}</h2><p>graph <b>{esc(graph_label(cfg))}</b> "
        f"({nodes:,} nodes), model {esc(cfg['model'])}, task {esc(cfg.get('task', 'node'))}, "
        f"optimizer {esc(_optimizer_text(cfg))}, "
        f"device {esc(cfg['device'])}, {esc(_ran_text(s.comparison, cfg))} "
        "(one process per configuration and round; the rows marked as timed in one process also against "
        "the round's baseline in one process, steps interleaved), seeds "
        f"{sorted({r.config['seed'] for r in s.runs if r.label != CALIBRATION})}.</p>"
        + _identity_html(base, s.runs, index)
    )
    return (
        head + f"<p class='muted'>How to read the table (noise floor, target, budgets, ranking, what is "
        f"derived): <a href='#notes-{index}'>the notes below it</a>.</p>"
        + sweep_table(s.comparison, metric, index)
        + derived_checks_html(s.comparison)
        + f"<div id='notes-{index}'>"
        + sweep_notes(s.comparison, index)
        + "</div>"
        + distributed_html(s.comparison)
        + sweep_charts(s.comparison, metric, index, s.runs)
    )


def _identity_html(base: RunResult, runs: list[RunResult], index: int) -> str:
    """The sweep's identity: commit, code fingerprint, machine and threads (the ranks' where they differ)."""
    env = base.environment
    threads = sorted({r.environment.get("threads") for r in runs} - {None})
    shown = ", ".join(map(str, threads)) if threads else "?"
    return (
        f"<p class='identity' id='identity-{index}'>Measured at commit <code>{esc(env.get('commit') or '?')}"
        f"</code>, code fingerprint <code>{esc(env.get('code_fingerprint') or '?')}</code>, machine "
        f"<code>{esc(env.get('machine') or '?')}</code> ({esc(env.get('device_name') or '?')}), torch "
        f"{esc(env.get('torch') or '?')}, threads {esc(shown)} (multi-rank entries run 1-thread ranks).</p>"
    )


def load_sweeps(runs_by_sweep: dict[str, list[RunResult]]) -> list[Sweep]:
    """Each sweep directory's runs compared (:func:`gnnbench.measure.compare.comparison.compare`), or why they
    cannot be."""
    out = []
    for g, group in sorted(runs_by_sweep.items()):
        path = Path(g)
        title = (
            f"Sweep: {path.parent.name} / best set"
            if g and path.name == BEST_SET_DIR
            else f"Sweep: {path.name or 'runs'}"
        )
        try:
            out.append(
                Sweep(
                    title,
                    group,
                    compare(
                        group,
                        rule=sweep_rule(path) if g else None,
                        equivalence_margin=sweep_equivalence_margin(path) if g else None,
                        calibration=_recorded_calibration(path, group) if g else None,
                    ),
                    group=g,
                )
            )
        except ValueError as exc:
            out.append(Sweep(title, group, None, str(exc), group=g))
    return out


def _recorded_calibration(group: Path, runs: list[RunResult]) -> Calibration | None:
    """The calibration a sweep's manifest recorded, for a sweep whose calibration runs are elsewhere (a best set's
    rounds are judged on the target of the sweep that chose it); ``None`` where the runs are here (compare reads
    them) or none was recorded."""
    if any(r.label == CALIBRATION for r in runs):
        return None
    recorded = (_read_manifest(group) or {}).get("calibration")
    return Calibration.from_dict(recorded) if recorded else None


def _read_manifest(group: Path) -> dict | None:
    import json

    from gnnbench.measure.sweep import MANIFEST

    try:
        return json.loads((group / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def where_measured(sweep: Sweep, base: RunResult) -> str:
    """What a sweep's figures come from, in a few words: the graph, the device, the machine's hardware class, the
    commit and the date its rounds started (from its manifest, where there is one)."""
    env = base.environment
    parts = [graph_label(base.config), base.config.get("device", "cpu"), _machine(env)]
    if env.get("commit"):
        parts.append(f"commit {str(env['commit'])[:7]}")
    parts.append(sweep_date(sweep))
    return ", ".join(str(p) for p in parts)


def sweep_date(sweep: Sweep) -> str:
    """When a sweep's rounds ran: ``started 2026-12-06`` from its manifest, else the date its results were
    committed, said as such, else ``date not recorded``."""
    manifest = (_read_manifest(Path(sweep.group)) or {}) if sweep.group else {}
    if manifest.get("started"):
        return f"started {str(manifest['started'])[:10]}"
    committed = _committed_on(Path(sweep.group)) if sweep.group else None
    return (
        f"results committed {committed} (no sweep.json records when its rounds ran)"
        if committed
        else "date not recorded"
    )


def _machine(env: dict) -> str:
    """The machine in words: its hardware class, or, for runs older than that field, the machine key read as
    ``<cpu>, <n> cores (<kind>)``."""
    if env.get("hardware_class"):
        return str(env["hardware_class"])
    key = str(env.get("machine") or "")
    if key.count("|") == 2:
        kind, cpu, cores = key.split("|")
        return f"{cpu}, {cores} cores ({kind}; hardware class not recorded)"
    return key or "machine not recorded"


def _committed_on(folder: Path) -> str | None:
    """The date (YYYY-MM-DD) of the last commit that touched ``folder``, or None outside a git work tree."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", "."], cwd=folder, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    date = out.stdout.strip()
    return date if out.returncode == 0 and len(date) == 10 else None


def best_set_outcome(sweep: Sweep, sweeps: list[Sweep]) -> BestSetOutcome | None:
    """The best set ``sweep`` chose (from its manifest) and what its own rounds measured (the ``best-set`` sweep
    among ``sweeps``), or ``None`` for a sweep that chose none."""
    from gnnbench.measure.sweep import BestSetChoice

    recorded = (_read_manifest(Path(sweep.group)) or {}).get("best_set") if sweep.group else None
    if not recorded:
        return None
    choice = BestSetChoice.from_dict(recorded)
    measured = next((s for s in sweeps if s.best_set_of == sweep.group), None)
    if not choice.measurable:
        return BestSetOutcome(choice)
    if measured is None or measured.comparison is None:
        return BestSetOutcome(
            choice,
            reason=(
                "its rounds are not in these results"
                if measured is None
                else f"its rounds could not be compared: {measured.error}"
            ),
        )
    row = next((r for r in measured.comparison.rows if r.label == choice.label), None)
    return BestSetOutcome(choice, row, measured.comparison, None if row else "its row is missing from its rounds")
