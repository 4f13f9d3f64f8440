"""The gate's rounds: one benchmark process per tree and round (:func:`run_tree`, the gate's worker against the
tree's gnnbench, with a timeout and a process group), the two sides of a round alternating or in duet
(:class:`RoundLog`, :mod:`gnnbench.measure.gate.duet`), the failure that stops the rounds, and the extra rounds a
benchmark receives within the budget (:meth:`RoundLog.more_rounds`).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gnnbench.atomic import write_json_atomic
from gnnbench.measure.gate.benches import Bench
from gnnbench.measure.gate.duet import ALTERNATING, BARRIER_TIMEOUT_S, DUET, duet_cores, run_both
from gnnbench.measure.gate.verdicts import BenchVerdict, GateResult, WorkerFailure, detectable_at, is_primary
from gnnbench.measure.gate.worker import DUET_ABORTED
from gnnbench.process import run_child

__all__ = ["Runner", "RoundLog", "WorkerFailed", "run_tree", "spec_file", "hash_seed", "HASH_SEED_BASE"]

HASH_SEED_BASE = 1000  # round r's processes start with PYTHONHASHSEED = HASH_SEED_BASE + r, on both sides


def hash_seed(seed: int) -> int:
    """The ``PYTHONHASHSEED`` both sides of round ``seed`` start with: one per round, shared by the two trees.
    Python randomizes its string hashes per process, which moves dicts, sets and their memory around, and a
    process's speed with them: measured on the gate's baseline step, a per-round sd of 0.17 of the log ratio with a
    random seed per process against 0.03 with one seed for both (duet, docs/regression-gate.md). Shared within a
    round, the layout's effect cancels in the round's ratio; varied across rounds, no one layout favours a tree."""
    return HASH_SEED_BASE + int(seed)


def spec_file(benches: list[Bench], seed: int, folder: Path, duet: dict | None = None) -> Path:
    """Round ``seed``'s spec for the worker; with ``duet`` (the worker's barrier and core, per side), one file
    per side."""
    import dataclasses

    graph = benches[0].config.spec
    spec = {
        "graph": dataclasses.asdict(graph),
        "seed": seed,
        "benches": {b.name: dataclasses.replace(b.config, seed=seed).to_dict() for b in benches},
        "hash_seed": hash_seed(seed),  # read by run_tree into the process's environment (it is set at its start)
    }
    if duet is not None:
        spec["duet"] = duet
    path = folder / (f"spec-{seed}.json" if duet is None else f"spec-{seed}-{duet['me']}.json")
    write_json_atomic(path, spec)
    return path


def _spec_env(spec: Path) -> dict[str, str]:
    """What a spec asks of its process's environment: the round's ``PYTHONHASHSEED`` (:func:`hash_seed`)."""
    try:
        seed = json.loads(Path(spec).read_text()).get("hash_seed")
    except (OSError, ValueError, AttributeError):
        return {}
    return {"PYTHONHASHSEED": str(int(seed))} if seed is not None else {}


class WorkerFailed(Exception):
    def __init__(self, kind: str, returncode: int | None, stderr: str, partial: dict) -> None:
        super().__init__(kind)
        self.kind, self.returncode, self.stderr, self.partial = kind, returncode, stderr, partial


def _tail(text_: str | bytes | None, limit: int = 2000) -> str:
    if isinstance(text_, bytes):
        text_ = text_.decode(errors="replace")
    return (text_ or "").strip()[-limit:]


def run_tree(
    tree: Path,
    spec: Path,
    out: Path,
    threads: int,
    worker: Path,
    timeout: float,
    python: str = sys.executable,
    *,
    wrap: Callable[[list[str]], list[str]] | None = None,
    env_extra: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
) -> dict:
    """One benchmark process in ``tree``: its results per benchmark. Raises :class:`WorkerFailed` (with what
    the process had written before it stopped and the end of its output) when it exits non-zero or runs past
    ``timeout``; a process that runs past it is killed with everything it started (loader workers). ``wrap``
    puts a command before the worker's (callgrind), ``env_extra`` adds to its environment and ``unset`` names
    variables it must not inherit (an allocator setting of this process's that is not its own)."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        **_spec_env(spec),
        **(env_extra or {}),
    }
    for name in unset:
        if name not in (env_extra or {}):
            env.pop(name, None)
    log = out.with_suffix(".log")

    def partial() -> dict:
        try:
            return json.loads(out.read_text())
        except (OSError, ValueError):
            return {}

    argv = [python, str(worker), str(spec), str(out), str(threads)]
    # its output goes to the log as it is written; a process that runs past the timeout, or is interrupted, is
    # ended with everything it started, and whatever a finished one left behind is killed (loader workers)
    child = run_child(wrap(argv) if wrap else argv, cwd=tree, env=env, timeout=timeout, log=log)
    if child.timed_out:
        raise WorkerFailed(
            "timed out",
            None,
            _tail(log.read_text(errors="replace")) or f"no output within {timeout:g} s",
            partial(),
        )
    if child.returncode != 0:
        raise WorkerFailed("crashed", child.returncode, _tail(log.read_text(errors="replace")), partial())
    return partial()


Runner = Callable[[str, Path, Path], dict]  # (role, spec file, output file) -> results per benchmark


@dataclass
class RoundLog:
    """What the gate's rounds measured so far: per benchmark and side, one result per round it ran in (rounds
    pair by position); each benchmark's own seconds per process; each process's wall time beyond its benchmarks
    (start, imports, the graph); the sides' order per round; the failure that stopped the rounds, if any."""

    data: dict[str, dict[str, list[dict]]]
    seconds: dict[str, list[float]]
    overhead: list[float]
    orders: list[list[str]]
    failure: WorkerFailure | None = None
    design: str = ALTERNATING  # "duet": both sides of a round at once, one per core
    usable: list[int] | None = None  # the cores a duet may use (None: this process's usable cores)
    cores: list[dict[str, int]] = field(default_factory=list)  # per duet round, each side's core

    @classmethod
    def empty(cls, benches: list[Bench], design: str = ALTERNATING, usable: list[int] | None = None) -> RoundLog:
        return cls(
            {b.name: {"base": [], "head": []} for b in benches},
            {b.name: [] for b in benches},
            [],
            [],
            design=design,
            usable=usable,
        )

    def run_round(
        self,
        run_one: Runner,
        todo: list[Bench],
        r: int,
        folder: Path,
        order_seed: int,
        progress: Callable[[int, int, str], None] | None,
        planned: int,
    ) -> None:
        """Round ``r`` of ``todo``: both sides at once in a duet (:meth:`_duet_round`), else in a shuffled order,
        each one process; a process that fails stops the round (:attr:`failure`), the benchmarks it had not
        reached read "not reached"."""
        if self.design == DUET:
            ran = self._duet_round(run_one, todo, r, folder, progress, planned)
        else:
            ran = self._alternating_round(run_one, todo, r, folder, order_seed, progress, planned)
        self._record(todo, ran)

    def _alternating_round(
        self,
        run_one: Runner,
        todo: list[Bench],
        r: int,
        folder: Path,
        order_seed: int,
        progress: Callable[[int, int, str], None] | None,
        planned: int,
    ) -> dict[str, dict]:
        spec = spec_file(todo, r, folder)
        order = ["base", "head"]
        random.Random(order_seed * 1_000_003 + r).shuffle(order)
        self.orders.append(order)
        ran: dict[str, dict] = {}
        for role in order:
            if progress:
                progress(r, planned, role)
            started = time.perf_counter()
            try:
                ran[role] = run_one(role, spec, folder / f"{role}-{r}.json")
            except WorkerFailed as exc:
                self.failure = WorkerFailure(role, r, exc.kind, exc.returncode, exc.stderr)
                ran[role] = _failed_side(exc, role, r, todo)
                break
            wall = time.perf_counter() - started
            self.overhead.append(max(0.0, wall - sum(v.get("seconds") or 0.0 for v in ran[role].values())))
        return ran

    def _duet_round(
        self,
        run_one: Runner,
        todo: list[Bench],
        r: int,
        folder: Path,
        progress: Callable[[int, int, str], None] | None,
        planned: int,
    ) -> dict[str, dict]:
        """Both sides at once, each pinned to its core of the round (:func:`duet_cores`), a barrier before each
        benchmark; a side that fails has its peer stopped at its next barrier, and the failure recorded is the
        side that failed first (not the peer it stopped)."""
        cpus = duet_cores(r, self.usable)
        self.cores.append(cpus)
        self.orders.append(["base", "head"])
        barrier = folder / f"barrier-{r}"
        barrier.mkdir(exist_ok=True)
        specs = {
            role: spec_file(
                todo,
                r,
                folder,
                {"dir": str(barrier), "me": role, "peer": peer, "cpu": cpus[role], "timeout": BARRIER_TIMEOUT_S},
            )
            for role, peer in (("base", "head"), ("head", "base"))
        }
        if progress:  # one call per side, as alternating rounds make: the caller's pace counts processes
            for role in ("base", "head"):
                progress(r, planned, f"{role} (duet, core {cpus[role]})")
        started = time.perf_counter()
        got = run_both(lambda role: run_one(role, specs[role], folder / f"{role}-{r}.json"), barrier)
        wall = time.perf_counter() - started
        ran: dict[str, dict] = {}
        failed = {role: x for role, x in got.items() if isinstance(x, BaseException)}
        for role, x in got.items():
            if role not in failed:
                ran[role] = x
        if failed:
            first = _culprit(failed, barrier)
            exc = failed[first]
            if not isinstance(exc, WorkerFailed):
                raise exc
            self.failure = WorkerFailure(first, r, exc.kind, exc.returncode, exc.stderr)
            for role, x in failed.items():
                ran[role] = _failed_side(x, role, r, todo) if isinstance(x, WorkerFailed) else {}
        else:  # the round's wall time beyond the slower side's benchmarks
            busy = max(sum(v.get("seconds") or 0.0 for v in side.values()) for side in ran.values())
            self.overhead.append(max(0.0, wall - busy))
        return ran

    def _record(self, todo: list[Bench], ran: dict[str, dict]) -> None:
        for b in todo:
            for role in ("base", "head"):
                if role not in ran:
                    got = {"status": "not run", "reason": "the round stopped before this side ran"}
                else:
                    missing = {"status": "missing", "reason": "the benchmark process ended without its result"}
                    got = ran[role].get(b.name, missing)
                self.data[b.name][role].append(got)
                if got.get("seconds"):
                    self.seconds[b.name].append(got["seconds"])

    def more_rounds(self, benches: list[Bench], result: GateResult, max_rounds: int, left_s: float) -> list[Bench]:
        """The benchmarks the next round measures: those whose spread cannot resolve the sensitivity now but
        would by ``max_rounds``, whatever their ratio (a rule that also stopped at significance would pick the
        rounds that make a difference significant), as many as the round is predicted to fit in the ``left_s``
        seconds left: the primary tier first (a primary benchmark that cannot see the sensitivity makes the run
        inconclusive; an entry does not), then the entries, cheapest first. Each one's extra round is counted in
        ``result``."""
        sensitivity = result.sensitivity
        wanted = [b for b, v in zip(benches, result.benches) if _needs_rounds(v, sensitivity, max_rounds)]
        if not wanted:
            return []

        def cost(b: Bench) -> float:
            return statistics.median(self.seconds[b.name] or [0.0])

        # one side's time a round in a duet (both run at once; its overhead is per round), two alternating
        sides = 1 if self.design == DUET else 2
        spent = statistics.median(self.overhead or [0.0])
        chosen: set[str] = set()
        for b in sorted(wanted, key=lambda b: (not is_primary(b.name), cost(b))):
            if sides * (spent + cost(b)) > left_s:
                if is_primary(b.name):
                    return []  # a round without every primary that needs one would not settle the run
                continue
            spent += cost(b)
            chosen.add(b.name)
        todo = [b for b in wanted if b.name in chosen]  # the gate's own order
        for b in todo:
            result.extra_rounds[b.name] = result.extra_rounds.get(b.name, 0) + 1
        return todo


def _culprit(failed: dict[str, BaseException], barrier: Path) -> str:
    """The duet side that failed first: of the sides that failed, the one behind at the barriers (fewest
    ``<n>.<side>.ready`` files: the other was waiting for it), then one that did not exit as stopped by its peer
    (:data:`~gnnbench.measure.gate.worker.DUET_ABORTED`)."""

    def reached(role: str) -> int:
        return sum(1 for _ in barrier.glob(f"*.{role}.ready"))

    def aborted(exc: BaseException) -> bool:
        return isinstance(exc, WorkerFailed) and exc.returncode == DUET_ABORTED

    return min(failed, key=lambda role: (reached(role), aborted(failed[role])))


def _failed_side(exc: WorkerFailed, role: str, r: int, todo: list[Bench]) -> dict[str, dict]:
    """A side whose process failed in round ``r``: the benchmark it was running named with the failure, those
    it never reached "not reached", those it finished kept."""
    why = f"{role}'s benchmark process {exc.kind} in round {r + 1} while running it" + (
        f" (exit {exc.returncode})" if exc.returncode is not None else ""
    )
    side = {b.name: {"status": "not reached", "reason": f"{role}'s process stopped before it"} for b in todo}
    for name, got in exc.partial.items():
        side[name] = {"status": exc.kind, "reason": why} if got.get("status") == "running" else got
    return side


def _needs_rounds(v: BenchVerdict, sensitivity: float, max_rounds: int) -> bool:
    """Whether a benchmark's spread leaves it unable to see a slowdown of ``sensitivity`` now, but able to by
    ``max_rounds`` at that spread (its ratio aside): rounds go where they can buy the sensitivity, not to a
    benchmark whose work varies too much per batch to resolve it within the budget."""
    return (
        v.status == "ok"
        and v.detectable is not None
        and v.detectable > 1 + sensitivity + 1e-12
        and detectable_at(v, max_rounds) <= 1 + sensitivity + 1e-12
    )
