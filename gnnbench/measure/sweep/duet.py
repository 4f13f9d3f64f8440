"""A sweep entry that sets its process (an allocator), timed against its round's baseline in duet (DESIGN.md §3,
"Measure where the noise cancels").

An allocator is chosen when a process starts, so such an entry cannot share a process with the baseline
(:func:`gnnbench.process.sharing.own_process_reasons`), and read across processes its ratio carries the drift of
a process's speed from one process to the next. In a duet the entry's process and the baseline's start together,
each pinned to its own core at one thread (cores swapped halfway through the round), and both wait at a barrier
before building their trainers, so a drift of the machine lands on both sides of the round's ratio (Bulej et al., "Duet
Benchmarking", 2020). The evidence, and what the sweep measured this way, are in docs/statistics.md ("The entries
that set the process, in duet").

The sides are the gate's benchmark process (:mod:`gnnbench.measure.gate.worker`, its duet and barrier
:mod:`gnnbench.measure.gate.duet`) run on this tree, in two parts with the cores swapped between them
(:func:`time_duet`): in each part each side trains its configuration for half the entry's short run's epochs, on
whole steps, without a target, and reports every measured step. The record is a
:class:`~gnnbench.measure.run.interleaved.PairTiming` of design ``"duet"`` in the run's ``interleaved`` block, so
the comparison reads its time per step as it reads a pair's; the ratio is the entry's effect **at one thread**
(where the sweep's own runs use the machine's threads), and the comparison says so.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
from pathlib import Path

import gnnbench
from gnnbench import process
from gnnbench.measure.gate.benches import Bench
from gnnbench.measure.gate.duet import DUET as GATE_DUET
from gnnbench.measure.gate.duet import duet_refusal
from gnnbench.measure.gate.rounds import RoundLog, run_tree
from gnnbench.measure.gate.worker import script_in
from gnnbench.measure.run import DUET, PAIR_TIMEOUT_S, PairTiming, child_timeout
from gnnbench.process.allocators import ALLOCATOR_VARIABLES
from gnnbench.process.sharing import duet_refusals, own_process_reasons
from gnnbench.training import RunConfig

__all__ = [
    "ALLOCATOR_KEYS",
    "DuetFailed",
    "duet_pair_refusal",
    "allocator_env",
    "side_config",
    "part_epochs",
    "time_duet",
]

# what a side's process environment takes from its own allocator's; the rest is the worker's (threads, PYTHONPATH)
ALLOCATOR_KEYS = ("LD_PRELOAD", "GLIBC_TUNABLES", process.PLACED, *ALLOCATOR_VARIABLES)
DUET_SIDE = "duet"  # the benchmark's name in the worker's spec
DEFAULT_EPOCHS = 2  # a side's epochs where the entry's run has no fixed length (no calibration to shorten it)


class DuetFailed(RuntimeError):
    """A duet that gave no pair (the message says which side and why)."""


def duet_pair_refusal(base: RunConfig, other: RunConfig, cores: list[int] | None = None) -> str | None:
    """Why ``other`` cannot be timed against ``base`` in duet, or ``None``: one rank each, on the CPU, on one
    generated graph and one task; the base shares a process and ``other`` needs one of its own only for what a
    duet carries (:func:`gnnbench.process.sharing.duet_refusals`; the same configuration twice is the duet's A/A);
    and two usable cores (``cores``: default this process's)."""
    for side, cfg in (("the base", base), ("the other configuration", other)):
        if cfg.nproc != 1:
            return f"{side} runs on {cfg.nproc} ranks (nproc={cfg.nproc}); a duet side is one process"
        if cfg.device != "cpu":
            return f"{side} runs on {cfg.device!r}; a duet pins each side to a CPU core"
        if cfg.source is not None:
            where = getattr(cfg.source, "location", cfg.source)
            return f"{side} loads its graph from {where!r}; a duet side generates it from its spec"
    if own_process_reasons(base.flags):
        return f"the base cannot share a machine's core evenly: {'; '.join(own_process_reasons(base.flags))}"
    refused = duet_refusals(other.flags)
    if refused:
        return f"a duet cannot carry it: {'; '.join(refused)}"
    if base.graph_key() != other.graph_key():
        return "the two configurations train on different graphs"
    if base.task != other.task:
        return f"the two configurations differ in task ({base.task!r} vs {other.task!r})"
    return duet_refusal(1, cores)


def allocator_env(config: RunConfig) -> dict[str, str]:
    """The variables a process needs to run ``config``'s allocator (and be known to have been started for it)."""
    return {k: v for k, v in process.child_environment(config.flags).items() if k in ALLOCATOR_KEYS}


def side_config(config: RunConfig, epochs: int | None) -> RunConfig:
    """A duet side: ``config`` for ``epochs`` whole epochs (default :data:`DEFAULT_EPOCHS`), on whole steps (no
    per-phase synchronization), with no target, step budget or time budget (a fixed number of steps is timed)."""
    untargeted = {
        f.name: f.default
        for f in dataclasses.fields(RunConfig)
        if f.name in ("max_steps", "min_steps", "step_unit", "max_seconds", "censor_seconds", "stop_at")
        or f.name in ("patience_target", "eval_every")
    }
    return dataclasses.replace(
        config,
        **untargeted,
        epochs=epochs if epochs is not None else DEFAULT_EPOCHS,
        max_epochs=epochs if epochs is not None else DEFAULT_EPOCHS,
        sync_phases=False,
    )


def part_epochs(epochs: int | None) -> int:
    """Epochs of each of a duet's two parts: half the entry's run's (default :data:`DEFAULT_EPOCHS`), at least one."""
    return max(1, (epochs if epochs is not None else DEFAULT_EPOCHS) // 2)


def time_duet(config: RunConfig, pair_base: RunConfig, round_: int, timeout: float | None = None) -> PairTiming:
    """``config`` timed against ``pair_base`` in duet, in two parts with the cores swapped between them: round
    ``round_``'s first part has the base on the ``round_ % 2``-th usable core, the second on the other, each part
    :func:`part_epochs` of ``config``'s epochs at ``config``'s seed. A core slower than the other for minutes at a
    time (seen on a 2-core VM: docs/statistics.md) then slows both sides alike within the round, instead of one
    side in one round and the other in the next. Raises :class:`DuetFailed` when it cannot be timed (refused here,
    a side failed, or a side measured no step)."""
    refused = duet_pair_refusal(pair_base, config)
    if refused:
        raise DuetFailed(refused)
    epochs = part_epochs(config.epochs)
    sides = {"base": side_config(pair_base, epochs), "head": side_config(config, epochs)}
    timeout = timeout if timeout is not None else max(PAIR_TIMEOUT_S, child_timeout(config))
    tree = Path(gnnbench.__file__).resolve().parents[1]
    bench = [Bench(DUET_SIDE, sides["base"])]
    log = RoundLog.empty(bench, GATE_DUET)
    with tempfile.TemporaryDirectory(prefix="gnnbench-duet-") as tmp:
        folder = Path(tmp)
        worker = script_in(folder)

        def run_one(role: str, spec: Path, out: Path) -> dict:
            import json

            from gnnbench.atomic import write_json_atomic

            data = json.loads(spec.read_text())
            data["benches"][DUET_SIDE] = dataclasses.replace(sides[role], seed=config.seed).to_dict()
            write_json_atomic(spec, data)
            env = allocator_env(sides[role])
            return run_tree(tree, spec, out, 1, worker, timeout, env_extra=env, unset=ALLOCATOR_KEYS)

        for part in (round_, round_ + 1):  # duet_cores(r) swaps the cores from r to r + 1
            (folder / f"part-{part}").mkdir()
            log.run_round(run_one, bench, part, folder / f"part-{part}", 0, None, 2)
            if log.failure is not None:
                break
    if log.failure is not None:
        f = log.failure
        side = "baseline" if f.side == "base" else "entry"
        tail = " | ".join(f.stderr_tail.strip().splitlines()[-3:])
        raise DuetFailed(f"the {side}'s side {f.kind} (exit {f.returncode}): {tail or 'no output'}")
    parts = {role: log.data[DUET_SIDE][role] for role in ("base", "head")}
    for role, got in parts.items():
        for side in got:
            if side.get("status") != "ok" or not side.get("step_all"):
                raise DuetFailed(f"the {role} side measured no step: {side.get('status')}: {side.get('reason')}")
    return PairTiming(
        base_seconds=tuple(x for side in parts["base"] for x in side["step_all"]),
        other_seconds=tuple(x for side in parts["head"] for x in side["step_all"]),
        sequence="",
        setup_seconds=tuple(
            statistics.fmean(float(side.get("setup") or 0.0) for side in parts[role]) for role in ("base", "head")
        ),
        warmup_steps=config.warmup_steps,
        design=DUET,
        cores=tuple(c for cores in log.cores for c in (cores["base"], cores["head"])),
    )
