"""Sweeps: the entries of a plan (:mod:`gnnbench.measure.sweep.plan`) measured in interleaved rounds.

Each round runs the baseline and every configuration once, each in its own process, in an order shuffled per
round from a recorded seed, so drift and a slow process hit all configurations alike. Before the rounds,
:func:`run_calibration` trains the baseline on seeds no round uses and fixes the accuracy target, the validation
cadence and the budget of every configuration (:mod:`gnnbench.measure.compare.calibration`). Results are written
atomically, one file per configuration and round; an interrupted sweep resumes, but a stored result is reused
only when its config, the code fingerprint and the environment all match
(:func:`gnnbench.measure.run.results.reuse_problem`); anything else is measured again.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from pathlib import Path
from typing import Callable

from gnnbench import process
from gnnbench.atomic import write_json_atomic
from gnnbench.env import COMPARABLE_KEYS, environment, resolve_device
from gnnbench.measure.compare import (
    BASELINE,
    CALIBRATION,
    CALIBRATION_SEED_OFFSET,
    MEASURED_SUFFIX,
    Calibration,
    calibrate,
)
from gnnbench.measure.run import (
    DEFAULT_TIMEOUT,
    DUET,
    PAIR_TIMEOUT_S,
    RunResult,
    child_argv,
    child_error,
    child_timeout,
    load_result,
    paired_argv,
    rank_threads,
    reuse_problem,
    run,
    run_paired,
)
from gnnbench.measure.stats import StoppingRule
from gnnbench.measure.sweep.duet import DuetFailed, time_duet
from gnnbench.measure.sweep.options import SweepOptions
from gnnbench.measure.sweep.plan import Entry, on_ranks, validate_base
from gnnbench.parallel.data_parallel import world_size_for
from gnnbench.training import RunConfig, config_unavailable
from gnnbench.training.pipeline import graph_of

__all__ = ["SweepResults", "run_sweep", "run_round", "run_calibration", "MANIFEST"]

MANIFEST = "sweep.json"


class SweepResults(list):
    """The results of a sweep (:class:`~gnnbench.measure.run.results.RunResult`, in entry order, each placed:
    label, round, optimizations), how many were kept from disk or measured now, and how
    many were not run because their row's verdict was settled (rounds that stop when decided)."""

    kept: int = 0
    measured: int = 0
    skipped: int = 0
    discarded: int = 0  # measured on another machine beside the round that settled their row

    def failed(self) -> list[str]:
        """``label (round r): error`` of every run that failed (a crash or an error; an entry unavailable
        here is not a failure)."""
        return [f"{r.label} (round {r.round}): {r.error or 'no result'}" for r in self if r and r.status == "failed"]

    def summary(self) -> str:
        text = (
            f"kept {self.kept} stored result{'s' * (self.kept != 1)} (same config, code and environment), "
            f"measured {self.measured}"
        )
        text += f", {self.skipped} not run (their verdict was settled)" if self.skipped else ""
        return text + (
            f", {self.discarded} discarded (measured beside the round that settled their row)" if self.discarded else ""
        )


def _stored(path: Path, entry: Entry, env: dict) -> RunResult | None:
    data = load_result(path)
    if data is None or data.status not in ("ok", "unavailable"):
        return None
    if world_size_for(entry.config.flags, entry.config.nproc) > 1 and "threads" in env:
        env = {**env, "threads": rank_threads()}  # compared with the ranks' environment, not this process's
    return None if reuse_problem(data, entry.config.to_dict(), env) else data


def _round_orders(entries: list[Entry], order_seed: int) -> list[list[int]]:
    """Entry indices per round, shuffled per round from ``order_seed``."""
    rounds: dict[int, list[int]] = {}
    for i, e in enumerate(entries):
        rounds.setdefault(e.round, []).append(i)
    orders = []
    for r in sorted(rounds):
        idx = rounds[r]
        random.Random(order_seed * 1_000_003 + r).shuffle(idx)
        orders.append(idx)
    return orders


def run_calibration(
    base: RunConfig,
    out_dir: str | Path,
    options: SweepOptions = SweepOptions(),
    *,
    progress: Callable[[int, int, Entry, str], None] | None = None,
) -> tuple[Calibration | None, SweepResults]:
    """Train the baseline ``options.calibration_runs`` times on seeds no round uses (``base.seed +
    CALIBRATION_SEED_OFFSET + i``), stored in ``out_dir`` beside the sweep (resumed like it, under the same
    ``options``), and fix the sweep's target, cadence and budget (:func:`gnnbench.measure.compare.calibration.calibrate`
    with ``options.target_acc`` and ``options.budget_factor``). No runs: no calibration (``(None, [])``); the
    comparison then falls back to a target read off the measured baseline, and says so."""
    validate_base(base)
    runs = options.calibration_runs
    if runs == 0:
        return None, SweepResults()
    entries = [
        Entry(CALIBRATION, on_ranks(dataclasses.replace(base, seed=base.seed + CALIBRATION_SEED_OFFSET + i)), (), i)
        for i in range(runs)
    ]
    results = run_sweep(entries, out_dir, options, progress=progress)
    return calibrate(results, target_acc=options.target_acc, budget_factor=options.budget_factor), results


def equivalence_manifest(margin: float | None) -> dict | None:
    """The equivalence margin as a sweep's manifest records it (``None``: none declared)."""
    if margin is None:
        return None
    from gnnbench.measure.compare import EQUIVALENCE_ALPHA

    return {
        "margin": float(margin),
        "alpha": EQUIVALENCE_ALPHA,
        "method": (
            f"two one-sided t-tests (TOST, {EQUIVALENCE_ALPHA:.0%} each) on the paired log ratios of "
            f"steps to the target (interpolated between evaluations) against +-log(1 + {margin:g}); a "
            "row that keeps the work per step, is not derived and is shown equivalent is judged by its "
            "setup + time per step x the baseline's steps to the target of the same round"
        ),
    }


def run_sweep(
    entries: list[Entry],
    out_dir: str | Path,
    options: SweepOptions = SweepOptions(),
    *,
    calibration: Calibration | None = None,
    progress: Callable[[int, int, Entry, str], None] | None = None,
    rule: StoppingRule | None = None,
    after_round: Callable[[list[RunResult]], tuple[set[str], bool]] | None = None,
) -> SweepResults:
    """Run every entry round by round, in a per-round shuffled order, and return the results in entry order.

    Each result lands in ``out_dir/<label>-r<round>-<key>.json``, written atomically; with ``options.resume`` a
    stored file is kept only when its config, code fingerprint and environment match this run (a missing,
    partial, failed or stale file is measured again). The order of every round and its seed
    (``options.order_seed``) are recorded in ``out_dir/sweep.json``, with the ``calibration`` (target, cadence,
    budget) when given. With ``options.isolate`` each configuration runs in a fresh process (clean peak memory,
    no state shared between runs, and process-to-process variance measured as it should be).

    Rounds that stop when decided: after each round, ``after_round(results so far)`` returns the labels whose
    verdict is settled (they receive no further round; a ``"<label> (measured)"`` check follows its entry) and
    whether the sweep is done; ``rule`` (the :class:`~gnnbench.measure.stats.sequential.StoppingRule` it applies) is
    recorded in the manifest, with each round's stops. ``options.equivalence_margin`` (the margin within which a row's
    steps to the target count as the baseline's) is recorded in the manifest before the first round
    (``equivalence``). The returned results hold what ran.

    With an ``options.executor`` (:class:`~gnnbench.measure.sweep.executors.RoundExecutor`: submitit, on Slurm or local
    processes) up to ``executor.machines`` rounds run at once, each whole on one machine; the stopping rule is
    then applied round by round after each batch, and a round measured beside the one that settled its row is
    discarded, so the verdicts are those of the same sweep run one round at a time.
    """
    return _Rounds(entries, Path(out_dir), options, calibration, progress, rule, after_round).run()


class _Rounds:
    """One call of :func:`run_sweep`: the entries, their rounds' orders, the manifest as it grows, each entry's
    result once it has one, the rows settled so far and the counts of what was kept, measured and skipped."""

    def __init__(self, entries, out_dir: Path, options: SweepOptions, calibration, progress, rule, after_round):
        out_dir.mkdir(parents=True, exist_ok=True)
        self.entries, self.out_dir, self.options = entries, out_dir, options
        self.progress, self.after_round = progress, after_round
        self.env = environment(resolve_device(entries[0].config.device)) if entries else {}
        self.orders = _round_orders(entries, options.order_seed)
        self.manifest = _manifest(entries, out_dir, self.orders, self.env, options, calibration, rule)
        write_json_atomic(out_dir / MANIFEST, self.manifest)
        self.results: list[RunResult | None] = [None] * len(entries)
        self.outcome = SweepResults()
        self.graphs: dict = {}
        self.done = 0
        self.settled_labels: set[str] = set()

    def run(self) -> SweepResults:
        """Batch after batch of rounds (one round per machine of the executor; one at a time without)."""
        per_batch = self.options.executor.machines if self.options.executor is not None else 1
        number = 0
        while number < len(self.orders):
            batch = self.orders[number : number + per_batch]
            self._measure([self._to_measure(order) for order in batch])
            finished = self._settle(batch, number)
            write_json_atomic(self.out_dir / MANIFEST, self.manifest)
            number += len(batch)
            if finished:
                self._skip_rest(self.orders[number:])
                break
        self.outcome.extend(r for r in self.results if r is not None)
        return self.outcome

    def _report(self, entry: Entry, status: str, stored: RunResult | None = None) -> None:
        if not self.progress:
            return
        if stored is not None and stored.ok:  # a kept run's duration: the estimate of a resumed sweep needs it
            self.progress(self.done, len(self.entries), entry, status, seconds=stored.clock_seconds)
        else:
            self.progress(self.done, len(self.entries), entry, status)

    def _settled(self, entry: Entry) -> bool:
        twin = entry.label[: -len(MEASURED_SUFFIX)] if entry.label.endswith(MEASURED_SUFFIX) else None
        return entry.label in self.settled_labels or twin in self.settled_labels

    def _to_measure(self, order: list[int]) -> list[int]:
        """A round's entries still to measure, in its order: settled rows skipped, stored results kept."""
        todo = []
        for i in order:
            entry = self.entries[i]
            if self._settled(entry):
                self.outcome.skipped += 1
                self.done += 1
                self._report(entry, "settled")
                continue
            data = _stored(self.out_dir / entry.filename(), entry, self.env) if self.options.resume else None
            if data is not None:
                self.outcome.kept += 1
                self._finish(i, data, "kept")
            else:
                todo.append(i)
        return todo

    def _measure(self, plan: list[list[int]]) -> None:
        """The batch's rounds measured: here one entry at a time, or each round whole on one machine of the
        executor (pairing stays within a machine)."""
        isolate, timeout = self.options.isolate, self.options.dist_timeout
        if self.options.executor is None:
            for i in plan[0]:
                self._report(self.entries[i], "running")
                path = self.out_dir / self.entries[i].filename()
                self._finish(i, _measure(self.entries[i], path, isolate, self.graphs, timeout))
            return
        jobs = [([self.entries[i] for i in todo], str(self.out_dir), isolate, timeout) for todo in plan]
        for todo, measured in zip(plan, self.options.executor.map(run_round, jobs)):
            for i, data in zip(todo, measured):
                self._finish(i, data)

    def _finish(self, i: int, data: RunResult, status: str | None = None) -> None:
        entry, path = self.entries[i], self.out_dir / self.entries[i].filename()
        placed = dataclasses.replace(
            data, label=entry.label, round=entry.round, optimizations=list(entry.optimizations), derived=entry.derived
        )
        if status is None:  # measured now: the file says which configuration and round it is, for the report
            if path.exists():
                write_json_atomic(path, placed.to_dict())
            self.outcome.measured += 1
            status = data.status
        self.done += 1
        self._report(entry, status, data if status == "kept" else None)
        self.results[i] = placed

    def _drop(self, order: list[int]) -> None:
        """A round's results that are not part of the sweep (measured beside the round that settled their row)."""
        for i in order:
            if self.results[i] is not None:
                self.results[i] = None
                self.outcome.discarded += 1

    def _settle(self, batch: list[list[int]], number: int) -> bool:
        """The stopping rule after each round of the batch, in round order; whether the sweep is finished."""
        for j, order in enumerate(batch):
            k = number + j + 1
            if j:  # measured beside an earlier round of this batch that settled its row: not part of the sweep
                self._drop([i for i in order if self._settled(self.entries[i])])
            if self.after_round is None or k >= len(self.orders):
                continue
            # only rounds up to k: a round measured beside it must not decide k's stops
            stopped, finished = self.after_round([r for r in self.results if r is not None and r.round < k])
            self.manifest.setdefault("stopped_after_round", {})[str(k)] = sorted(set(stopped) - self.settled_labels)
            self.settled_labels |= set(stopped)
            if finished:
                self.manifest["finished_after_round"] = k
                for later in batch[j + 1 :]:  # rounds measured beside the last one needed
                    self._drop(later)
                return True
        return False

    def _skip_rest(self, orders: list[list[int]]) -> None:
        skipped = sum(len(o) for o in orders)
        self.outcome.skipped += skipped
        self.done += skipped


def _manifest(entries, out_dir: Path, orders, env: dict, options: SweepOptions, calibration, rule) -> dict:
    """The sweep's manifest as it stands before the first round."""
    base = next((e.config for e in entries if e.label == BASELINE), entries[0].config if entries else None)
    manifest = {
        "sweep": out_dir.name,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "order_seed": options.order_seed,
        "rounds": [[entries[i].label for i in order] for order in orders],
        "code_fingerprint": env.get("code_fingerprint"),
        "commit": env.get("commit"),
        "isolate": options.isolate,
        "interleave": options.interleave,
        "machine": env.get("machine"),
        "hardware_class": env.get("hardware_class"),
        "environment": {k: env.get(k) for k in COMPARABLE_KEYS},
        "base_config": base.to_dict() if base is not None else None,
        "calibration": calibration.to_dict() if calibration is not None else None,
        "rule": rule.to_dict() if rule is not None else None,
        "equivalence": equivalence_manifest(options.equivalence_margin),
    }
    if options.executor is not None:
        manifest["executor"] = options.executor.describe()
    return manifest


def run_round(entries: list[Entry], out_dir: str, isolate: bool, dist_timeout: float) -> list[RunResult]:
    """One round's entries measured in order on this machine (a job of
    :class:`~gnnbench.measure.sweep.executors.RoundExecutor`): each writes its result file into ``out_dir`` (shared
    by the machines) and its result is returned."""
    graphs: dict = {}
    return [_measure(e, Path(out_dir) / e.filename(), isolate, graphs, dist_timeout) for e in entries]


def _refused_here(entry: Entry) -> RunResult | None:
    """The result of an entry that cannot run here, written without starting a process for it: not applicable
    to the base configuration, or a flag this device or setup cannot run (the same answer the run's own check,
    :func:`gnnbench.training.config_unavailable`, would give). ``None`` when it can run."""
    device = resolve_device(entry.config.device)
    reasons = (
        {"not applicable": entry.not_applicable} if entry.not_applicable else config_unavailable(entry.config, device)
    )
    if not reasons:
        return None
    env = environment(device)
    if world_size_for(entry.config.flags, entry.config.nproc) > 1 and "threads" in env:
        env = {**env, "threads": rank_threads()}  # what its ranks would have recorded
    return RunResult(status="unavailable", config=entry.config.to_dict(), environment=env, unavailable=reasons)


def _measure_isolated(entry: Entry, path: Path, dist_timeout: float) -> RunResult:
    """``entry`` measured in a fresh process, and a paired entry's pair then timed in another fresh one.

    nproc > 1: gnnbench.measure.run.single launches the ranks through torchrun (gnnbench.measure.run.launch). The
    process is part of the configuration: started with its allocator (gnnbench.process). A process that hangs is
    ended at its timeout (from the run's time budget) with all it started. The pair never shares a process with
    the run: a run earlier in the process changed what the pair read (:mod:`gnnbench.measure.run.paired`). A
    paired entry's run lands beside ``path`` and is moved onto it only with its pair (or the reason it has none),
    so a sweep interrupted between the two leaves no run without its pair for a resume to keep."""
    cfg_path = path.with_name(f".{path.name}.config.json")
    pair_path = path.with_name(f".{path.name}.pair.json")
    out = path if entry.pair_with is None else path.with_name(f".{path.name}.run.json")
    write_json_atomic(cfg_path, entry.config.to_dict())
    env = process.child_environment(entry.config.flags)
    try:
        child = process.run_child(child_argv(cfg_path, out, dist_timeout), env=env, timeout=child_timeout(entry.config))
        data = load_result(out) if child.ok else None
        if data is not None and out != path:
            if data.ok:
                data = _add_pair(entry, out, cfg_path, pair_path, env, data)
            os.replace(out, path)
    finally:
        for temporary in (cfg_path, pair_path, out if out != path else None):
            if temporary is not None:
                temporary.unlink(missing_ok=True)
    if data is None:
        data = RunResult(status="failed", error=child_error(child, out), config=entry.config.to_dict())
        write_json_atomic(path.with_suffix(".failed.json"), data.to_dict())
    return data


def _add_pair(entry: Entry, out: Path, cfg_path: Path, pair_path: Path, env: dict, data: RunResult) -> RunResult:
    """The run stored at ``out`` with its pair, timed in a process of its own (the same timeout as the run's, at
    least :data:`PAIR_TIMEOUT_S`: it loads the graph again), or in duet (:func:`_add_duet`); a pair whose process
    failed before storing it leaves the run as it is, with a warning naming why (the row is then read across
    processes)."""
    if entry.pair_design == DUET:
        return _add_duet(entry, out, data)
    write_json_atomic(pair_path, entry.pair_with.to_dict())
    argv = paired_argv(cfg_path, out, pair_path, entry.built_first)
    child = process.run_child(argv, env=env, timeout=max(PAIR_TIMEOUT_S, child_timeout(entry.config)))
    stored = load_result(out)
    if stored is not None and (stored.interleaved or child.ok):  # a pair stored is kept, however its process ended
        return stored
    why = child_error(child, out, n_lines=5).strip().replace("\n", " | ")
    data = dataclasses.replace(
        data, warnings=[*data.warnings, f"interleaved pair not measured: its process failed: {why}"]
    )
    write_json_atomic(out, data.to_dict())
    return data


def _add_duet(entry: Entry, out: Path, data: RunResult) -> RunResult:
    """The run ``data`` (stored at ``out``) with its pair timed in duet (:func:`gnnbench.measure.sweep.duet.time_duet`),
    written back to ``out``; a duet that gives no pair leaves the run with a warning naming why."""
    try:
        timing = time_duet(entry.config, entry.pair_with, entry.round)
    except (DuetFailed, OSError, ValueError) as exc:  # the row is then read across processes, and says why
        why = str(exc) if isinstance(exc, DuetFailed) else f"{type(exc).__name__}: {exc}"
        data = dataclasses.replace(data, warnings=[*data.warnings, f"duet pair not measured: {why}"])
    else:
        data = dataclasses.replace(data, interleaved=timing.to_dict())
    write_json_atomic(out, data.to_dict())
    return data


def _measure(entry: Entry, path: Path, isolate: bool, graphs: dict, dist_timeout: float = DEFAULT_TIMEOUT) -> RunResult:
    path.unlink(missing_ok=True)  # a stale or partial file must never stand in for this measurement
    refused = _refused_here(entry)
    if refused is not None:  # a process would only say the same, after seconds of imports
        write_json_atomic(path, refused.to_dict())
        return refused
    if isolate:
        return _measure_isolated(entry, path, dist_timeout)
    key = entry.config.graph_key()
    if key not in graphs:  # in-process: generate (or load) each graph once
        graphs.clear()
        graphs[key] = graph_of(entry.config)[0]
    if entry.pair_with is not None and entry.pair_design == DUET:  # two processes of their own, this one waits
        result = run(entry.config, out=path, graph=graphs[key], dist_timeout=dist_timeout)
        if result.ok:
            result = _add_duet(entry, path, result)
    elif entry.pair_with is not None:
        result = run_paired(entry.config, entry.pair_with, built_first=entry.built_first, out=path, graph=graphs[key])
    else:
        result = run(entry.config, out=path, graph=graphs[key], dist_timeout=dist_timeout)
    return (load_result(path) if path.exists() else None) or result
