"""Sweeps: the baseline against baseline + each optimization and against all
recommended optimizations together, measured in interleaved rounds.

Each round runs the baseline and every configuration once, each in its own
process, in an order shuffled per round from a recorded seed, so drift and a
slow process hit all configurations alike; round ``r`` trains with seed
``base.seed + r``, so timings and accuracies are paired by round (and by
seed). The A/A copy of the baseline trains on its own seed stream
(``base.seed + AA_SEED_OFFSET + r``), so it shows the seed-to-seed spread too.
Before the rounds, :func:`run_calibration` trains the baseline on seeds no
round uses and fixes the accuracy target, the validation cadence and the
budget of every configuration (:mod:`gnnbench.measure.calibration`). Results are written atomically, one file per configuration and round;
an interrupted sweep resumes, but a stored result is reused only when its
config, the code fingerprint and the environment all match
(:func:`gnnbench.measure.results.reuse_problem`); anything else is measured again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

from gnnbench import registry
from gnnbench.env import COMPARABLE_KEYS, environment, resolve_device
from gnnbench.measure.calibration import (
    AA_SEED_OFFSET,
    BUDGET_FACTOR,
    CALIBRATION,
    CALIBRATION_SEED_OFFSET,
    DEFAULT_CALIBRATION_RUNS,
    Calibration,
    calibrate,
)
from gnnbench.measure.comparison import AA_LABEL, BASELINE, E2E_BASELINE, MEASURED_SUFFIX
from gnnbench.measure.derived import is_derivable, short_config, short_epochs
from gnnbench.measure.executors import RoundExecutor
from gnnbench.measure.launch import DEFAULT_TIMEOUT, rank_threads
from gnnbench.measure.results import RunResult, load_result, reuse_problem, write_json_atomic
from gnnbench.measure.run import run
from gnnbench.measure.sequential import StoppingRule
from gnnbench.measure.stats import DEFAULT_REPEATS
from gnnbench.parallel.data_parallel import world_size_for
from gnnbench.training import RunConfig, config_unavailable
from gnnbench.training.pipeline import graph_of

__all__ = ["Entry", "SweepResults", "sweep_entries", "run_sweep", "run_calibration", "validate_base",
           "time_to_accuracy_config",
           "ALL_RECOMMENDED", "BASELINE", "AA_LABEL", "E2E_BASELINE", "MANIFEST"]

ALL_RECOMMENDED = "all_recommended"
MANIFEST = "sweep.json"


@dataclasses.dataclass(frozen=True)
class Entry:
    """One configuration of a sweep, in one round."""

    label: str  # "baseline", an optimization name, "all_recommended" or the A/A copy of the baseline
    config: RunConfig
    optimizations: tuple[str, ...]
    round: int = 0  # interleaved round (its seed is base.seed + round)
    not_applicable: str | None = None  # why its optimizations cannot apply to the base (config: the base's)
    derived: bool = False  # a short run; time to accuracy derived (gnnbench.measure.derived)

    def key(self) -> str:
        blob = json.dumps(self.config.to_dict(), sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def filename(self) -> str:
        """``<label>-r<round>-<key>.json``, the label made safe for a file name (the A/A label has a slash)."""
        return f"{re.sub(r'[^A-Za-z0-9_.]+', '_', self.label)}-r{self.round}-{self.key()}.json"


class SweepResults(list):
    """The results of a sweep (dicts, in entry order), how many were kept from disk or measured now, and how
    many were not run because their row's verdict was settled (rounds that stop when decided)."""

    kept: int = 0
    measured: int = 0
    skipped: int = 0
    discarded: int = 0  # measured on another machine beside the round that settled their row

    def failed(self) -> list[str]:
        """``label (round r): error`` of every run that failed (a crash or an error; an entry unavailable
        here is not a failure)."""
        return [f"{r.get('label')} (round {r.get('round')}): {r.get('error') or 'no result'}"
                for r in self if r and r.get("status") == "failed"]

    def summary(self) -> str:
        text = (f"kept {self.kept} stored result{'s' * (self.kept != 1)} (same config, code and environment), "
                f"measured {self.measured}")
        text += f", {self.skipped} not run (their verdict was settled)" if self.skipped else ""
        return text + (f", {self.discarded} discarded (measured beside the round that settled their row)"
                       if self.discarded else "")


def validate_base(base: RunConfig) -> None:
    """Refuse, before running anything, a sweep whose configuration cannot produce a measured step."""
    epochs = base.epochs if base.epochs is not None else base.max_epochs
    if base.max_steps_per_epoch is not None and base.warmup_steps >= epochs * base.max_steps_per_epoch:
        raise ValueError(
            f"no step would be measured: {epochs} epoch(s) x {base.max_steps_per_epoch} steps with "
            f"{base.warmup_steps} warm-up steps; lower --warmup below {epochs * base.max_steps_per_epoch} "
            "or raise --epochs / --max-epochs / --max-steps")


def _ranks(cfg: RunConfig) -> RunConfig:
    """A ``--nproc N`` sweep runs its parallel entries on N ranks, the rest (the baseline: one process on the
    same global batch, what scaling efficiency compares with) in one process."""
    return dataclasses.replace(cfg, nproc=world_size_for(cfg.flags, cfg.nproc))


def derivable_base(base: RunConfig) -> bool:
    """Whether a short run keeps the trajectory on ``base``: only with a constant learning rate (a cosine
    horizon follows the run's length) and gnnbench's sampler (PyG's native one draws from each worker's own
    state)."""
    return base.lr_schedule == "constant" and base.flags.sampler_backend == "gnnbench"


def check_also_measured(base: RunConfig, names: Iterable[str] | None, also_measured: Iterable[str]) -> None:
    """Refuse, before anything runs (calibration included), an ``also_measured`` name that this sweep cannot
    derive: not among its entries (``names``; ``None``: every registered one), not declared
    ``same_trajectory``, or a base configuration on which no short run keeps the trajectory."""
    entries = list(names) if names is not None else registry.names()
    for n in also_measured:
        if n not in entries:
            shown = ", ".join(entries) if entries else "none: with --aa and no --flags it is the A/A check alone"
            raise ValueError(f"--also-measure {n!r}: not an entry of this sweep (its entries: {shown}); "
                             "name it in --flags too")
        if not is_derivable(registry.combination(n)):
            declared = ", ".join(o.name for o in registry.REGISTRY.values() if o.same_trajectory)
            raise ValueError(f"--also-measure {n!r}: not declared same_trajectory, so it is trained to the target "
                             f"anyway; entries whose time to accuracy is derived: {declared}")
        if not derivable_base(base):
            raise ValueError(f"--also-measure {n!r}: no time to accuracy is derived on this base configuration "
                             f"(lr schedule {base.lr_schedule!r}, sampler backend {base.flags.sampler_backend!r}; "
                             "derived needs 'constant' and 'gnnbench')")


def sweep_entries(base: RunConfig, names: Iterable[str] | None = None, *, repeats: int = DEFAULT_REPEATS,
                  include_all_recommended: bool = True, aa: bool = False, derive_per_epoch: int | None = None,
                  also_measured: Iterable[str] = (), accuracy_rounds: int | None = None,
                  target: float | None = None) -> list[Entry]:
    """Baseline, baseline + each named optimization (default: all registered) and all recommended together,
    for each of ``repeats`` rounds; ``aa`` adds a second copy of the baseline (the A/A noise check).

    With ``derive_per_epoch`` (the baseline's steps per epoch, from the calibration) an entry whose every part
    is declared ``same_trajectory`` runs as a short run (:func:`gnnbench.measure.derived.short_config`) and its
    time to accuracy is derived; each name in ``also_measured`` is, besides, trained to the target as
    ``"<name> (measured)"``, to show the derived figure agrees with the measured one.

    With ``accuracy_rounds`` K and the calibrated ``target``, only rounds ``0..K-1`` train to the plateau (they
    judge accuracy); the later rounds, which a row receives only while its verdict is open, are time-to-accuracy
    runs (:func:`time_to_accuracy_config`): they stop at the target, or past the censoring budget without it.
    ``None``: every round trains to the plateau."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1 (got {repeats!r})")
    if accuracy_rounds is not None:
        if isinstance(accuracy_rounds, bool) or not isinstance(accuracy_rounds, int) or accuracy_rounds < 2:
            raise ValueError(f"accuracy_rounds must be an integer >= 2: accuracy deltas need an interval "
                             f"(got {accuracy_rounds!r})")
        if target is None:
            raise ValueError("accuracy_rounds needs the calibrated target: the later rounds stop at it")
    validate_base(base)
    also = list(also_measured)
    names = list(names) if names is not None else registry.names()
    check_also_measured(base, names, also)
    parts = {n: registry.combination(n) for n in names}  # "a+b": one configuration with both
    derivable = derivable_base(base)
    derived = {n: derive_per_epoch is not None and derivable and is_derivable(parts[n]) for n in names}
    for n in also:
        if not derived.get(n):
            raise ValueError(f"--also-measure {n!r}: its time to accuracy is derived only with a calibration "
                             "(and without --no-derive); without one there is no derived figure to check")
    device = resolve_device(base.device)
    inapplicable = {n: registry.not_applicable(base, parts[n]) for n in names}
    rec = []
    if include_all_recommended:
        rec = [o.name for o in registry.REGISTRY.values()
               if o.recommended and o.unavailable(device) is None and not registry.not_applicable(base, [o.name])
               and not config_unavailable(_ranks(registry.config_for(base, [o.name])), device)]
    # Entries whose gain is overlap run end to end (per-phase synchronization would serialize them), and
    # are compared with an end-to-end copy of the baseline in the same round.
    overlap = [n for n in names if not inapplicable[n] and any(registry.get(p).overlap for p in parts[n])
               and not config_unavailable(_ranks(registry.config_for(base, parts[n])), device)]
    # the end-to-end baseline is only the reference of overlap rows: short too when all of them are derived
    e2e_short = all(derived[n] and n not in also for n in overlap)

    def short(cfg: RunConfig) -> RunConfig:
        return short_config(cfg, derive_per_epoch)

    def round_entries(base: RunConfig, r: int) -> list[Entry]:
        entries = []
        b = dataclasses.replace(base, seed=base.seed + r)
        entries.append(Entry(BASELINE, _ranks(b), (), r))
        if aa:  # its own seed stream: the seed-to-seed spread is part of what the A/A row must show
            entries.append(Entry(AA_LABEL, _ranks(dataclasses.replace(base, seed=base.seed + AA_SEED_OFFSET + r)),
                                 (), r))
        if overlap and base.sync_phases:
            e2e = dataclasses.replace(b, sync_phases=False)
            entries.append(Entry(E2E_BASELINE, _ranks(short(e2e) if e2e_short else e2e), (), r, derived=e2e_short))
        for n in names:
            if inapplicable[n]:  # listed as not applicable, with the reason, instead of measured
                entries.append(Entry(n, _ranks(b), parts[n], r, not_applicable=inapplicable[n]))
                continue
            cfg = registry.config_for(b, parts[n])
            if n in overlap:
                cfg = dataclasses.replace(cfg, sync_phases=False)
            entries.append(Entry(n, _ranks(short(cfg) if derived[n] else cfg), parts[n], r, derived=derived[n]))
            if n in also:  # the same entry trained to the target: the derived figure's check
                entries.append(Entry(f"{n}{MEASURED_SUFFIX}", _ranks(cfg), parts[n], r))
        if include_all_recommended:
            entries.append(Entry(ALL_RECOMMENDED, _ranks(registry.config_for(b, rec)), tuple(rec), r))
        return entries

    # a time-to-accuracy baseline still trains the epochs the same round's short runs are read against
    keep = (short_epochs(derive_per_epoch, base.warmup_steps) * derive_per_epoch
            if derive_per_epoch and any(derived.values()) else 0)
    entries = []
    for r in range(repeats):
        tta_only = accuracy_rounds is not None and r >= accuracy_rounds
        entries.extend(round_entries(time_to_accuracy_config(base, target, keep) if tta_only else base, r))
    return entries


def time_to_accuracy_config(config: RunConfig, target: float, keep_steps: int = 0) -> RunConfig:
    """``config`` as a time-to-accuracy run: it stops at its first validation point at or above ``target``, or
    once past its censoring budget without it (``RunConfig.stop_at``), and not before ``keep_steps`` steps (the
    epochs the same round's short runs are read against); the plateau rule's minimum is dropped with it (a run
    whose accuracy is never read need not wait for a plateau)."""
    return dataclasses.replace(config, stop_at=target, min_steps=keep_steps)


def _stored(path: Path, entry: Entry, env: dict) -> dict | None:
    data = load_result(path)
    if data is None or data.get("status") not in ("ok", "unavailable"):
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


def run_calibration(base: RunConfig, out_dir: str | Path, *, runs: int = DEFAULT_CALIBRATION_RUNS,
                    target_acc: float | None = None, budget_factor: float = BUDGET_FACTOR,
                    **sweep_options) -> tuple[Calibration | None, SweepResults]:
    """Train the baseline ``runs`` times on seeds no round uses (``base.seed + CALIBRATION_SEED_OFFSET + i``),
    stored in ``out_dir`` beside the sweep (resumed like it), and fix the sweep's target, cadence and budget
    (:func:`gnnbench.measure.calibration.calibrate`). ``runs=0``: no calibration (``(None, [])``); the
    comparison then falls back to a target read off the measured baseline, and says so."""
    if not isinstance(runs, int) or runs < 0:
        raise ValueError(f"calibration runs must be an integer >= 0 (got {runs!r})")
    validate_base(base)
    if runs == 0:
        return None, SweepResults()
    entries = [Entry(CALIBRATION, _ranks(dataclasses.replace(base, seed=base.seed + CALIBRATION_SEED_OFFSET + i)),
                     (), i) for i in range(runs)]
    results = run_sweep(entries, out_dir, **sweep_options)
    return calibrate(results, target_acc=target_acc, budget_factor=budget_factor), results


def run_sweep(entries: list[Entry], out_dir: str | Path, *, isolate: bool = True, resume: bool = True,
              dist_timeout: float = DEFAULT_TIMEOUT, calibration: Calibration | None = None,
              order_seed: int = 0, progress: Callable[[int, int, Entry, str], None] | None = None,
              rule: StoppingRule | None = None,
              after_round: Callable[[list[dict]], tuple[set[str], bool]] | None = None,
              executor: RoundExecutor | None = None) -> SweepResults:
    """Run every entry round by round, in a per-round shuffled order, and return the results in entry order.

    Each result lands in ``out_dir/<label>-r<round>-<key>.json``, written
    atomically; with ``resume`` a stored file is kept only when its config,
    code fingerprint and environment match this run (a missing, partial,
    failed or stale file is measured again). The order of every round and its
    seed are recorded in ``out_dir/sweep.json``, with the ``calibration`` (target, cadence, budget) when given.
    With ``isolate`` each
    configuration runs in a fresh process (clean peak memory, no state shared
    between runs, and process-to-process variance measured as it should be).

    Rounds that stop when decided: after each round, ``after_round(results so far)`` returns the labels whose
    verdict is settled (they receive no further round; a ``"<label> (measured)"`` check follows its entry) and
    whether the sweep is done; ``rule`` (the :class:`~gnnbench.measure.sequential.StoppingRule` it applies) is
    recorded in the manifest, with each round's stops. The returned results hold what ran.

    With an ``executor`` (:class:`~gnnbench.measure.executors.RoundExecutor`: submitit, on Slurm or local
    processes) up to ``executor.machines`` rounds run at once, each whole on one machine; the stopping rule is
    then applied round by round after each batch, and a round measured beside the one that settled its row is
    discarded, so the verdicts are those of the same sweep run one round at a time.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = environment(resolve_device(entries[0].config.device)) if entries else {}
    orders = _round_orders(entries, order_seed)
    base = next((e.config for e in entries if e.label == BASELINE), entries[0].config if entries else None)
    manifest = {
        "sweep": out_dir.name, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "order_seed": order_seed, "rounds": [[entries[i].label for i in order] for order in orders],
        "code_fingerprint": env.get("code_fingerprint"), "commit": env.get("commit"), "isolate": isolate,
        "machine": env.get("machine"), "hardware_class": env.get("hardware_class"), "environment": {k: env.get(k) for k in COMPARABLE_KEYS},
        "base_config": base.to_dict() if base is not None else None,
        "calibration": calibration.to_dict() if calibration is not None else None,
        "rule": rule.to_dict() if rule is not None else None}
    if executor is not None:
        manifest["executor"] = executor.describe()
    write_json_atomic(out_dir / MANIFEST, manifest)
    results: list[dict | None] = [None] * len(entries)
    outcome = SweepResults()
    graphs: dict = {}
    done = 0
    settled_labels: set[str] = set()

    def settled(entry: Entry) -> bool:
        twin = entry.label[:-len(MEASURED_SUFFIX)] if entry.label.endswith(MEASURED_SUFFIX) else None
        return entry.label in settled_labels or twin in settled_labels

    def finish(i: int, data: dict, status: str | None = None) -> None:
        nonlocal done
        entry, path = entries[i], out_dir / entries[i].filename()
        if status is None:  # measured now: the file says which configuration and round it is, for the report
            if path.exists():
                data = {**data, "label": entry.label, "round": entry.round,
                        "optimizations": list(entry.optimizations), "derived": entry.derived}
                write_json_atomic(path, data)
            outcome.measured += 1
            status = data.get("status", "?")
        done += 1
        if progress:
            progress(done, len(entries), entry, status)
        results[i] = {"label": entry.label, "optimizations": list(entry.optimizations), "round": entry.round,
                      "derived": entry.derived, **data}

    per_batch = executor.machines if executor is not None else 1  # rounds measured at once, one per machine
    number = 0
    while number < len(orders):
        batch = orders[number:number + per_batch]
        plan: list[list[int]] = []  # per round of the batch: the entries to measure, in the round's order
        for order in batch:
            todo = []
            for i in order:
                if settled(entries[i]):
                    outcome.skipped += 1
                    done += 1
                    if progress:
                        progress(done, len(entries), entries[i], "settled")
                    continue
                data = _stored(out_dir / entries[i].filename(), entries[i], env) if resume else None
                if data is not None:
                    outcome.kept += 1
                    finish(i, data, "kept")
                else:
                    todo.append(i)
            plan.append(todo)
        if executor is None:
            for i in plan[0]:
                if progress:
                    progress(done, len(entries), entries[i], "running")
                finish(i, _measure(entries[i], out_dir / entries[i].filename(), isolate, graphs, dist_timeout))
        else:  # each round whole on one machine: pairing stays within a machine
            jobs = [([entries[i] for i in todo], str(out_dir), isolate, dist_timeout) for todo in plan]
            for todo, measured in zip(plan, executor.map(run_round, jobs)):
                for i, data in zip(todo, measured):
                    finish(i, data)
        finished = False
        for j, order in enumerate(batch):
            k = number + j + 1
            if j:  # measured beside an earlier round of this batch that settled its row: not part of the sweep
                for i in order:
                    if results[i] is not None and settled(entries[i]):
                        results[i] = None
                        outcome.discarded += 1
            if after_round is None or k >= len(orders):
                continue
            # only rounds up to k: a round measured beside it must not decide k's stops
            stopped, finished = after_round([r for r in results if r is not None and r["round"] < k])
            manifest.setdefault("stopped_after_round", {})[str(k)] = sorted(set(stopped) - settled_labels)
            settled_labels |= set(stopped)
            if finished:
                manifest["finished_after_round"] = k
                for later in batch[j + 1:]:  # rounds measured beside the last one needed
                    for i in later:
                        if results[i] is not None:
                            results[i] = None
                            outcome.discarded += 1
                break
        write_json_atomic(out_dir / MANIFEST, manifest)
        number += len(batch)
        if finished:
            skipped = sum(len(o) for o in orders[number:])
            outcome.skipped += skipped
            done += skipped
            break
    outcome.extend(r for r in results if r is not None)
    return outcome


def run_round(entries: list[Entry], out_dir: str, isolate: bool, dist_timeout: float) -> list[dict]:
    """One round's entries measured in order on this machine (a job of
    :class:`~gnnbench.measure.executors.RoundExecutor`): each writes its result file into ``out_dir`` (shared
    by the machines) and its result is returned."""
    graphs: dict = {}
    return [_measure(e, Path(out_dir) / e.filename(), isolate, graphs, dist_timeout) for e in entries]


def _refused_here(entry: Entry) -> dict | None:
    """The result of an entry that cannot run here, written without starting a process for it: not applicable
    to the base configuration, or a flag this device or setup cannot run (the same answer the run's own check,
    :func:`gnnbench.training.config_unavailable`, would give). ``None`` when it can run."""
    device = resolve_device(entry.config.device)
    reasons = ({"not applicable": entry.not_applicable} if entry.not_applicable
               else config_unavailable(entry.config, device))
    if not reasons:
        return None
    env = environment(device)
    if world_size_for(entry.config.flags, entry.config.nproc) > 1 and "threads" in env:
        env = {**env, "threads": rank_threads()}  # what its ranks would have recorded
    return RunResult(status="unavailable", config=entry.config.to_dict(), environment=env,
                     unavailable=reasons).to_dict()


def _measure(entry: Entry, path: Path, isolate: bool, graphs: dict, dist_timeout: float = DEFAULT_TIMEOUT) -> dict:
    path.unlink(missing_ok=True)  # a stale or partial file must never stand in for this measurement
    refused = _refused_here(entry)
    if refused is not None:  # a process would only say the same, after seconds of imports
        write_json_atomic(path, refused)
        return refused
    if isolate:
        cfg_path = path.with_name(f".{path.name}.config.json")
        write_json_atomic(cfg_path, entry.config.to_dict())
        # nproc > 1: gnnbench.measure.run launches the ranks through torchrun (gnnbench.measure.launch)
        proc = subprocess.run([sys.executable, "-m", "gnnbench.measure.run", str(cfg_path), str(path), "--dist-timeout",
                               str(dist_timeout)], capture_output=True, text=True)
        cfg_path.unlink(missing_ok=True)
        data = load_result(path) if proc.returncode == 0 else None
        if data is None:
            data = {"status": "failed", "error": (proc.stderr[-4000:] or f"no result in {path}"),
                    "config": entry.config.to_dict()}
            write_json_atomic(path.with_suffix(".failed.json"), data)
        return data
    key = entry.config.graph_key()
    if key not in graphs:  # in-process: generate (or load) each graph once
        graphs.clear()
        graphs[key] = graph_of(entry.config)[0]
    result = run(entry.config, out=path, graph=graphs[key], dist_timeout=dist_timeout)
    return (load_result(path) if path.exists() else None) or result.to_dict()
