"""The regression gate: two commits (or two source trees) compared the way ``compare`` compares two flags.

``gnnbench regress BASE [HEAD]`` checks both out side by side (``git worktree``; ``HEAD`` defaults to ``.``, the
working tree), refuses trees whose declared dependencies differ in one environment, and runs a benchmark set
(:func:`default_benches`) in alternating processes, one per tree and round, one thread each. Per benchmark,
paired by round: the step ratio ``BASE / HEAD`` with its interval, Holm across the set (weighted by tier: the
baseline and the micro-benchmarks first), the phase that moved most and the accuracy delta on the same seeds. A
regression is a Holm-significant slowdown beyond :data:`~gnnbench.measure.gate.verdicts.MIN_THRESHOLD`, or an
accuracy drop beyond
:data:`~gnnbench.measure.gate.verdicts.ACC_BOUND_PP`. The method, its measured error rates and what it takes to
go lower: ``docs/regression-gate.md``.

This module holds the benchmarks and the rounds (processes, failures, extra rounds within the budget); the
benchmark process is :mod:`gnnbench.measure.gate.worker`, the trees :mod:`gnnbench.measure.gate.trees`, the
judging and the result :mod:`gnnbench.measure.gate.verdicts`, its table :mod:`gnnbench.measure.gate.text`.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gnnbench.atomic import write_json_atomic
from gnnbench.measure.gate.duet import ALTERNATING, BARRIER_TIMEOUT_S, DESIGNS, DUET, duet_cores, duet_refusal, run_both
from gnnbench.measure.gate.trees import commit_of, dependency_difference
from gnnbench.measure.gate.verdicts import (
    ALPHAS,
    DEFAULT_SENSITIVITY,
    PRIMARY_SHARE,
    BenchVerdict,
    GateResult,
    WorkerFailure,
    detectable_at,
    judge,
)
from gnnbench.measure.gate.worker import DUET_ABORTED, MICRO_BENCHES, script_in
from gnnbench.process import run_child

__all__ = [
    "Bench",
    "gate",
    "default_benches",
    "gate_config",
    "MICRO",
    "DEFAULT_BUDGET_SECONDS",
    "DEFAULT_ROUNDS",
    "COUNT_BENCHES",
    "COUNT_PROCESSES",
    "count_gate",
    "per_unit",
]

MICRO = tuple(MICRO_BENCHES)  # code paths timed alone (the worker's table: sampler, gather, aggregation)
DEFAULT_BUDGET_SECONDS = 600.0  # the CLI's wall-clock budget for a gate run, extra rounds included
DEFAULT_ROUNDS = 8  # rounds every benchmark receives (docs/regression-gate.md: what 8 resolve at this spread)
MAX_ROUNDS = 20  # extra rounds stop here whatever the budget


@dataclass(frozen=True)
class Bench:
    """One benchmark of the gate: a configuration trained for a fixed number of steps."""

    name: str
    config: Any  # RunConfig (seed set per round)


def gate_config(preset: str = "tiny", *, warmup: int = 3, device: str = "cpu") -> Any:
    """The gate's base configuration: the one benchmark workload (:mod:`gnnbench.measure.run.workload`) on
    ``preset``'s graph (epochs are fitted per benchmark by :func:`default_benches`)."""
    from gnnbench.measure.run.workload import bench_config

    return bench_config(preset=preset, epochs=1, warmup_steps=warmup, device=device)


def default_benches(
    base_config: Any, names: list[str] | None = None, *, steps: int | None = None, skipped: dict[str, str] | None = None
) -> list[Bench]:
    """The baseline and every registry entry that runs here on ``base_config`` (or ``names`` among them;
    ``"baseline"`` is the base configuration itself). Each entry left out is put in ``skipped`` (when given)
    with the reason: it does not apply to the gate's workload, needs several processes, or cannot run on this
    device.

    With ``steps``, each benchmark's epochs are fitted so that it measures at least ``steps`` steps after its
    warm-up, whatever its batches per epoch (a neighbour epoch on ``tiny`` is 8 batches, a Cluster-GCN epoch
    2, a full-batch epoch 1); epochs are never cut short, since a cut epoch changes a source's regime (the
    batch cache does not keep it).
    """
    from gnnbench import registry
    from gnnbench.env import resolve_device
    from gnnbench.training import config_unavailable

    device = resolve_device(base_config.device)
    wanted = ["baseline"] + registry.names() + list(MICRO) if names is None else list(names)
    graph = None
    if steps is not None:
        if not isinstance(steps, int) or steps < 2:
            raise ValueError(f"the gate needs at least 2 measured steps per benchmark (got {steps!r})")
        from gnnbench.graphs import generate

        graph = generate(base_config.spec)
    benches = []
    for name in wanted:
        if name in MICRO:  # one code path alone, on the base configuration's graph
            benches.append(Bench(name, base_config))
            continue
        if name == "baseline":
            config = base_config
        else:
            parts = registry.combination(name)
            why = registry.not_applicable(base_config, parts)
            if why is None:
                config = registry.config_for(base_config, parts)
                refused = config_unavailable(config, device)
                multi = config.nproc > 1 or config.flags.parallel != "none"
                allocator = config.flags.allocator != base_config.flags.allocator
                why = (
                    "a multi-rank entry (torch.distributed): the gate times one process per tree"
                    if multi
                    else "an allocator entry: set when a process starts, and the gate's processes run with the "
                    "environment the gate was started with"
                    if allocator
                    else "; ".join(f"{k}: {v}" for k, v in refused.items())
                    if refused
                    else None
                )
            if why is not None:
                if skipped is not None:
                    skipped[name] = why
                continue
        if steps is not None:
            config = _fit_steps(config, graph, steps)
        benches.append(Bench(name, config))
    if not benches:
        raise ValueError(f"no benchmark of {wanted} runs here")
    return benches


def _fit_steps(config: Any, graph: Any, steps: int) -> Any:
    """``config`` with enough whole epochs for ``steps`` measured steps after ``config.warmup_steps``."""
    import dataclasses
    import math

    from gnnbench.training.pipeline import assemble

    pipe = assemble(dataclasses.replace(config, epochs=1, max_steps_per_epoch=None), graph)
    try:
        per_epoch = pipe.batches.steps_per_epoch()
        if per_epoch is None:  # a source that learns its length by running: count one epoch's batches
            per_epoch = sum(1 for _ in pipe.batches.epoch(0))
        floor = pipe.batches.min_epochs(config.warmup_steps)
    finally:
        pipe.batches.close()
    epochs = max(floor, math.ceil((steps + config.warmup_steps) / max(per_epoch, 1)))
    return dataclasses.replace(config, epochs=epochs, max_steps_per_epoch=None)


# ------------------------------------------------------------------ the gate
def _spec_file(benches: list[Bench], seed: int, folder: Path, duet: dict | None = None) -> Path:
    """Round ``seed``'s spec for the worker; with ``duet`` (the worker's barrier and core, per side), one file
    per side."""
    import dataclasses

    graph = benches[0].config.spec
    spec = {
        "graph": dataclasses.asdict(graph),
        "seed": seed,
        "benches": {b.name: dataclasses.replace(b.config, seed=seed).to_dict() for b in benches},
    }
    if duet is not None:
        spec["duet"] = duet
    path = folder / (f"spec-{seed}.json" if duet is None else f"spec-{seed}-{duet['me']}.json")
    write_json_atomic(path, spec)
    return path


class _WorkerFailed(Exception):
    def __init__(self, kind: str, returncode: int | None, stderr: str, partial: dict) -> None:
        super().__init__(kind)
        self.kind, self.returncode, self.stderr, self.partial = kind, returncode, stderr, partial


def _tail(text_: str | bytes | None, limit: int = 2000) -> str:
    if isinstance(text_, bytes):
        text_ = text_.decode(errors="replace")
    return (text_ or "").strip()[-limit:]


def _run_tree(
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
) -> dict:
    """One benchmark process in ``tree``: its results per benchmark. Raises :class:`_WorkerFailed` (with what
    the process had written before it stopped and the end of its output) when it exits non-zero or runs past
    ``timeout``; a process that runs past it is killed with everything it started (loader workers). ``wrap``
    puts a command before the worker's (callgrind), ``env_extra`` adds to its environment."""
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        **(env_extra or {}),
    }
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
        raise _WorkerFailed(
            "timed out",
            None,
            _tail(log.read_text(errors="replace")) or f"no output within {timeout:g} s",
            partial(),
        )
    if child.returncode != 0:
        raise _WorkerFailed("crashed", child.returncode, _tail(log.read_text(errors="replace")), partial())
    return partial()


Runner = Callable[[str, Path, Path], dict]  # (role, spec file, output file) -> results per benchmark

# ------------------------------------------------------------------ counted instructions
COUNT_PROCESSES = 1  # the CLI's default counting processes per tree (their repeatability: docs/regression-gate.md)
COUNT_BENCHES = ("baseline", *MICRO)  # the primary tier: the code paths every configuration runs through
COUNT_CALLS = 40  # a micro-benchmark's counted calls
COUNT_EPOCHS = (1, 2)  # the baseline's counted runs: their difference is one epoch of steps
CountRunner = Callable[[str, Path, Path], tuple[dict, dict]]  # (role, spec, folder) -> (results, regions)


def _count_spec(benches: list[Bench], seed: int, folder: Path) -> Path:
    import dataclasses

    spec = {
        "graph": dataclasses.asdict(benches[0].config.spec),
        "seed": seed,
        "benches": {b.name: dataclasses.replace(b.config, seed=seed).to_dict() for b in benches},
        "counts": {"calls": COUNT_CALLS, "epochs": list(COUNT_EPOCHS)},
    }
    path = folder / f"count-spec-{seed}.json"
    write_json_atomic(path, spec)
    return path


def per_unit(result: dict, regions: dict[str, dict[str, int]]) -> float | None:
    """A benchmark's instructions per unit from its worker result and the regions dumped: a micro-benchmark's
    region over its calls, a training configuration's two regions' difference over the steps between them."""
    c = result.get("counted") if result.get("status") == "ok" else None
    if not c or not c.get("units"):
        return None
    got = [regions.get(name, {}).get("Ir") for name in c["regions"]]
    if any(x is None for x in got):
        return None
    total = got[0] if len(got) == 1 else got[1] - got[0]
    return total / c["units"] if total > 0 else None


def count_gate(
    trees: dict[str, Path],
    benches: list[Bench],
    *,
    repeats: int = 2,
    folder: Path,
    worker: Path,
    pythons: dict[str, str],
    timeout: float = 1800.0,
    seed: int = 0,
    cache_sim: bool = False,
    tolerance: float | None = None,
    runner: CountRunner | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[list[Any], str | None]:
    """The benchmarks of :data:`COUNT_BENCHES` among ``benches`` counted in both trees (:mod:`gnnbench.measure.gate.counts`),
    ``repeats`` processes per tree (ABBA order), and judged per benchmark; with the reason when counts cannot be
    taken here (then no verdict: the wall clock stays the only measure)."""
    from gnnbench.measure.gate import counts as cn

    chosen = [b for b in benches if b.name in COUNT_BENCHES]
    if not chosen:
        return [], None
    if runner is None:
        why = cn.unavailable()
        if why:
            return [], why
        marker = cn.marker_library()

        def runner(role: str, spec: Path, out_dir: Path) -> tuple[dict, dict]:
            out_dir.mkdir(parents=True, exist_ok=True)
            result = _run_tree(
                trees[role],
                spec,
                out_dir / "result.json",
                1,
                worker,
                timeout,
                pythons[role],
                wrap=lambda argv: cn.callgrind_command(argv, out_dir, cache_sim=cache_sim),
                env_extra={cn.ENV_MARKER: str(marker), "PYTHONHASHSEED": "0"},
            )
            return result, cn.parse_dumps(out_dir)

    spec = _count_spec(chosen, seed, folder)
    values: dict[str, dict[str, list[float]]] = {b.name: {"base": [], "head": []} for b in chosen}
    reasons: dict[str, str] = {}
    for k in range(repeats):
        for role in ("base", "head") if k % 2 == 0 else ("head", "base"):  # ABBA: neither side always first
            if progress:
                progress(k, repeats, f"{role} (counted instructions)")
            try:
                result, regions = runner(role, spec, folder / f"counts-{role}-{k}")
            except _WorkerFailed as exc:
                return [], (
                    f"{role}'s counting process {exc.kind}"
                    + (f" (exit {exc.returncode})" if exc.returncode is not None else "")
                    + f": {exc.stderr[-300:]}"
                )
            except ValueError as exc:  # a dump that cannot be read
                return [], f"{role}'s counts could not be read: {exc}"
            for b in chosen:
                got = result.get(b.name, {})
                x = per_unit(got, regions)
                if x is None:
                    reasons.setdefault(b.name, f"{role}: {got.get('status', 'missing')}: {got.get('reason') or ''}")
                else:
                    values[b.name][role].append(x)
    verdicts = []
    for b in chosen:
        unit = "step" if not b.name.startswith("micro:") else "call"
        v = cn.judge_counts(
            b.name,
            unit,
            values[b.name]["base"],
            values[b.name]["head"],
            tolerance=cn.TOLERANCE if tolerance is None else tolerance,
        )
        if v.status != "ok" and b.name in reasons:
            v.reason = reasons[b.name]
        verdicts.append(v)
    return verdicts, None


def gate(
    trees: dict[str, Path],
    benches: list[Bench],
    *,
    rounds: int = DEFAULT_ROUNDS,
    threads: int = 1,
    order_seed: int = 0,
    timeout: float = 1800.0,
    labels: tuple[str, str] = ("base", "head"),
    pythons: dict[str, str] | None = None,
    sensitivity: float = DEFAULT_SENSITIVITY,
    budget_seconds: float | None = None,
    max_rounds: int = MAX_ROUNDS,
    skipped: dict[str, str] | None = None,
    runner: Runner | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    counts: int = 0,
    cache_sim: bool = False,
    count_runner: CountRunner | None = None,
    design: str = DUET,
    cores: list[int] | None = None,
) -> GateResult:
    """Run ``benches`` in both trees, ``rounds`` processes each, and judge every benchmark (see the module
    docstring). ``design``: ``"duet"`` (the default) runs a round's two processes at once, each pinned to one of
    two cores (``cores``: default the first two usable), swapped every round, with a barrier before each
    benchmark (:mod:`gnnbench.measure.gate.duet`); where a duet cannot run (:func:`duet_refusal`) the rounds
    alternate and the result says why (:attr:`GateResult.design_note`). ``"alternating"``: one process after the
    other, the order shuffled per round.

    With ``budget_seconds`` (the whole gate's wall-clock budget, the counts' time included), benchmarks still
    inconclusive after ``rounds`` (their detectable slowdown above ``1 + sensitivity``) get further rounds, only
    they and only those whose spread would resolve the sensitivity by ``max_rounds``, while the next round is
    predicted to fit what is left of the budget. A benchmark process that crashes or
    times out stops the gate: :attr:`GateResult.failure` holds the side, the round and its stderr's tail, and
    the benchmarks it had not reached read "not judged" (or lost, where BASE measured them).

    ``counts`` (processes per tree, 0: none) counts, after the planned rounds and before any extra one, the
    instructions of the primary tier
    (:data:`COUNT_BENCHES`) in both trees under callgrind (:func:`count_gate`; ``cache_sim`` adds cache misses):
    a count beyond its threshold is a regression beside the wall-time verdicts, and a primary benchmark counted
    in both trees no longer makes the run inconclusive. Where callgrind cannot run, the reason is kept
    (:attr:`GateResult.counts_unavailable`) and the wall clock stays the only measure. ``count_runner`` replaces
    the counting process (tests).

    ``pythons`` (``{"base": exe, "head": exe}``) runs each side with its own interpreter: two environments (two
    torch or PyG versions) on one commit or two, the check that catches a library upgrade's slowdown. Trees
    that declare different dependencies are compared only that way. ``runner`` replaces the benchmark process
    (tests).

    Raises:
        ValueError: for fewer than 2 rounds, or trees that declare different dependencies in one environment.
    """
    if not isinstance(rounds, int) or rounds < 2:
        raise ValueError(f"the gate needs at least 2 rounds for an interval (got {rounds!r})")
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1 (got {threads!r})")
    if not isinstance(counts, int) or isinstance(counts, bool) or counts < 0:
        raise ValueError(f"counts must be a number of processes per tree >= 0 (got {counts!r})")
    if not (isinstance(sensitivity, (int, float)) and 0 < sensitivity < 1):
        raise ValueError(f"sensitivity must be a fraction in (0, 1), e.g. 0.1 for 10% (got {sensitivity!r})")
    if budget_seconds is not None and not budget_seconds >= 0:
        raise ValueError(f"budget_seconds must be None or >= 0 (got {budget_seconds!r})")
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {', '.join(DESIGNS)} (got {design!r})")
    pythons = pythons or {"base": sys.executable, "head": sys.executable}
    problem = dependency_difference(trees["base"], trees["head"])
    if problem and pythons["base"] == pythons["head"]:
        raise ValueError(
            f"the two trees need different dependencies ({problem}): one environment cannot run "
            "both; compare them with two environments instead"
        )
    if any(b.config.spec is None for b in benches):
        raise ValueError("the gate runs on a generated graph (a GraphSpec), not a loaded one")
    t0 = time.perf_counter()
    note = duet_refusal(threads, cores) if design == DUET else None
    log = _RoundLog.empty(benches, ALTERNATING if note else design, cores)
    result = GateResult(
        labels[0],
        labels[1],
        rounds,
        threads,
        log.orders,
        pythons=pythons if pythons["base"] != pythons["head"] else None,
        sensitivity=sensitivity,
        budget_seconds=budget_seconds,
        skipped=dict(skipped or {}),
        design=log.design,
        design_note=note,
        cores=log.cores,
    )
    names = [b.name for b in benches]
    with tempfile.TemporaryDirectory(prefix="gnnbench-gate-") as tmp:
        folder = Path(tmp)
        worker = script_in(folder)  # the gate's own worker, run against each tree's gnnbench

        def default_runner(role: str, spec: Path, out: Path) -> dict:
            return _run_tree(trees[role], spec, out, threads, worker, timeout, pythons[role])

        run_one = runner or default_runner
        todo, r = list(benches), 0
        while todo:
            log.run_round(run_one, todo, r, folder, order_seed, progress, max(rounds, r + 1))
            r += 1
            if log.failure is not None:
                break
            if r < rounds:
                continue
            if r == rounds and counts:  # counted before any extra round: the budget left then is what it is
                started = time.perf_counter()
                result.counts, result.counts_unavailable = count_gate(
                    trees,
                    benches,
                    repeats=counts,
                    folder=folder,
                    worker=worker,
                    pythons=pythons,
                    timeout=timeout,
                    cache_sim=cache_sim,
                    runner=count_runner,
                    progress=progress,
                )
                result.counts_seconds = time.perf_counter() - started
            result.benches = judge(names, log.data, sensitivity)
            if budget_seconds is None or r >= max_rounds:
                break
            todo = log.more_rounds(benches, result, max_rounds, budget_seconds - (time.perf_counter() - t0))
        failure = log.failure
    result.benches = judge(names, log.data, sensitivity)
    if failure is not None:
        result.failure = failure
    result.rounds = r
    m = sum(1 for v in result.benches if v.status == "ok" and v.p_value is not None)
    result.family = (
        f"Holm over {m} benchmarks per figure, at {ALPHAS['step']:.0%} for the step (weighted: the "
        f"baseline and the micro-benchmarks share {PRIMARY_SHARE:.0%} of it, the entries the rest) and "
        f"{ALPHAS['setup']:.1%} each for setup and epoch time: the chance that any is flagged by "
        f"noise is at most {sum(ALPHAS.values()):.0%}"
    )
    result.seconds = time.perf_counter() - t0
    result.finished = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    result.commits = {role: commit_of(tree) for role, tree in trees.items()}
    return result


@dataclass
class _RoundLog:
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
    def empty(cls, benches: list[Bench], design: str = ALTERNATING, usable: list[int] | None = None) -> _RoundLog:
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
        spec = _spec_file(todo, r, folder)
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
            except _WorkerFailed as exc:
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
            role: _spec_file(
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
            if not isinstance(exc, _WorkerFailed):
                raise exc
            self.failure = WorkerFailure(first, r, exc.kind, exc.returncode, exc.stderr)
            for role, x in failed.items():
                ran[role] = _failed_side(x, role, r, todo) if isinstance(x, _WorkerFailed) else {}
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
        rounds that make a difference significant), if the round is predicted to fit the ``left_s`` seconds
        left; each one's extra round is counted in ``result``."""
        sensitivity = result.sensitivity
        todo = [b for b, v in zip(benches, result.benches) if _needs_rounds(v, sensitivity, max_rounds)]
        sides = 1 if self.design == DUET else 2  # a duet round takes one side's time, both running at once
        predicted = sides * statistics.median(self.overhead or [0.0]) + 2 * sum(
            statistics.median(self.seconds[b.name] or [0.0]) for b in todo
        ) / (2 if self.design == DUET else 1)
        if todo and predicted > left_s:
            return []
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
        return isinstance(exc, _WorkerFailed) and exc.returncode == DUET_ABORTED

    return min(failed, key=lambda role: (reached(role), aborted(failed[role])))


def _failed_side(exc: _WorkerFailed, role: str, r: int, todo: list[Bench]) -> dict[str, dict]:
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
