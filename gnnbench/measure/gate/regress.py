"""The regression gate: two commits (or two source trees) compared the way ``compare`` compares two flags.

``gnnbench regress BASE [HEAD]`` checks both out side by side (``git worktree``; ``HEAD`` defaults to ``.``, the
working tree), refuses trees whose declared dependencies differ in one environment, and runs a benchmark set
(:func:`~gnnbench.measure.gate.benches.default_benches`) in rounds, one process per tree and round at one thread
each: both at once, one per core, in a duet (the default, :mod:`gnnbench.measure.gate.duet`), or alternating. Per
benchmark, paired by round: the step ratio ``BASE / HEAD`` with its interval, Holm across the set (weighted by tier:
the baseline and the micro-benchmarks first), the phase that moved most and the accuracy delta on the same seeds.
A regression is a Holm-significant slowdown beyond :data:`~gnnbench.measure.gate.verdicts.MIN_THRESHOLD`, or an
accuracy drop beyond :data:`~gnnbench.measure.gate.verdicts.ACC_BOUND_PP`, or counted instructions beyond their
threshold. The method, its measured error rates and what it takes to go lower: ``docs/regression-gate.md``.

The room, by idea: the benchmarks (:mod:`~gnnbench.measure.gate.benches`), the rounds
(:mod:`~gnnbench.measure.gate.rounds`, :mod:`~gnnbench.measure.gate.duet`; the benchmark process
:mod:`~gnnbench.measure.gate.worker`), the counts (:mod:`~gnnbench.measure.gate.counts`), the verdict (this
module's :func:`gate`, :mod:`~gnnbench.measure.gate.verdicts`, its table :mod:`~gnnbench.measure.gate.text`), the
options (:mod:`~gnnbench.measure.gate.options`) and the trees (:mod:`~gnnbench.measure.gate.trees`).
"""

from __future__ import annotations

import datetime
import tempfile
import time
from pathlib import Path
from typing import Callable

from gnnbench.measure.gate.benches import Bench
from gnnbench.measure.gate.counts import CountRunner, count_gate
from gnnbench.measure.gate.duet import ALTERNATING, DUET, duet_refusal
from gnnbench.measure.gate.options import GateOptions
from gnnbench.measure.gate.rounds import RoundLog, Runner, run_tree
from gnnbench.measure.gate.trees import commit_of, dependency_difference
from gnnbench.measure.gate.verdicts import ALPHAS, PRIMARY_SHARE, GateResult, judge
from gnnbench.measure.gate.worker import script_in

__all__ = ["gate"]

Progress = Callable[[int, int, str], None]


def gate(
    trees: dict[str, Path],
    benches: list[Bench],
    options: GateOptions | None = None,
    *,
    labels: tuple[str, str] = ("base", "head"),
    skipped: dict[str, str] | None = None,
    runner: Runner | None = None,
    progress: Progress | None = None,
    count_runner: CountRunner | None = None,
) -> GateResult:
    """Run ``benches`` in both trees (``options``: :class:`GateOptions`, default its defaults) and judge every
    benchmark (see the module docstring).

    With ``options.budget_seconds``, benchmarks still inconclusive after ``rounds`` get further rounds while the
    next is predicted to fit (:meth:`~gnnbench.measure.gate.rounds.RoundLog.more_rounds`). A benchmark process
    that crashes or times out stops the gate (:attr:`GateResult.failure`). ``options.counts`` processes per tree
    count the primary tier's instructions after the planned rounds (:func:`~gnnbench.measure.gate.counts.count_gate`).
    ``runner`` replaces the benchmark process and ``count_runner`` the counting one (tests); ``progress(round,
    rounds, side)`` is called as each process starts; ``skipped`` lists benchmarks left out, with the reason.

    Raises:
        ValueError: for trees that declare different dependencies in one environment, or a loaded graph.
    """
    options = options or GateOptions()
    pythons = options.interpreters()
    _check(trees, benches, pythons)
    t0 = time.perf_counter()
    cores = list(options.cores) if options.cores else None
    note = duet_refusal(options.threads, cores) if options.design == DUET else None
    log = RoundLog.empty(benches, ALTERNATING if note else options.design, cores)
    result = _empty_result(options, log, labels, pythons, skipped, note)
    with tempfile.TemporaryDirectory(prefix="gnnbench-gate-") as tmp:
        folder = Path(tmp)
        worker = script_in(folder)  # the gate's own worker, run against each tree's gnnbench

        def default_runner(role: str, spec: Path, out: Path) -> dict:
            return run_tree(trees[role], spec, out, options.threads, worker, options.timeout, pythons[role])

        def counted() -> None:  # after the planned rounds, before any extra one
            started = time.perf_counter()
            result.counts, result.counts_unavailable = count_gate(
                trees, benches, repeats=options.counts, folder=folder, worker=worker, pythons=pythons,
                timeout=options.timeout, cache_sim=options.cache_sim, runner=count_runner, progress=progress,
            )  # fmt: skip
            result.counts_seconds = time.perf_counter() - started

        rounds = _run_rounds(log, runner or default_runner, benches, folder, options, result, t0, progress, counted)
    return _finished(result, log, benches, rounds, trees, t0)


def _empty_result(
    options: GateOptions,
    log: RoundLog,
    labels: tuple[str, str],
    pythons: dict[str, str],
    skipped: dict[str, str] | None,
    note: str | None,
) -> GateResult:
    """The result before any round: what runs, how, and what was left out."""
    return GateResult(
        labels[0],
        labels[1],
        options.rounds,
        options.threads,
        log.orders,
        pythons=pythons if pythons["base"] != pythons["head"] else None,
        sensitivity=options.sensitivity,
        budget_seconds=options.budget_seconds,
        skipped=dict(skipped or {}),
        design=log.design,
        design_note=note,
        cores=log.cores,
    )


def _check(trees: dict[str, Path], benches: list[Bench], pythons: dict[str, str]) -> None:
    """The trees must run in their interpreters, and the benchmarks on a generated graph."""
    problem = dependency_difference(trees["base"], trees["head"])
    if problem and pythons["base"] == pythons["head"]:
        raise ValueError(
            f"the two trees need different dependencies ({problem}): one environment cannot run "
            "both; compare them with two environments instead"
        )
    if any(b.config.spec is None for b in benches):
        raise ValueError("the gate runs on a generated graph (a GraphSpec), not a loaded one")


def _run_rounds(
    log: RoundLog,
    run_one: Runner,
    benches: list[Bench],
    folder: Path,
    options: GateOptions,
    result: GateResult,
    t0: float,
    progress: Progress | None,
    counted: Callable[[], None],
) -> int:
    """The planned rounds, the counts after them, then extra rounds within the budget; the rounds run."""
    names = [b.name for b in benches]
    todo, r = list(benches), 0
    while todo:
        log.run_round(run_one, todo, r, folder, options.order_seed, progress, max(options.rounds, r + 1))
        r += 1
        if log.failure is not None:
            break
        if r < options.rounds:
            continue
        if r == options.rounds and options.counts:
            counted()
        result.benches = judge(names, log.data, options.sensitivity)
        if options.budget_seconds is None or r >= options.max_rounds:
            break
        left = options.budget_seconds - (time.perf_counter() - t0)
        todo = log.more_rounds(benches, result, options.max_rounds, left)
    return r


def _finished(
    result: GateResult, log: RoundLog, benches: list[Bench], rounds: int, trees: dict[str, Path], t0: float
) -> GateResult:
    """The verdicts from every round run, the failure that stopped them, the family in words, the clock."""
    result.benches = judge([b.name for b in benches], log.data, result.sensitivity)
    if log.failure is not None:
        result.failure = log.failure
    result.rounds = rounds
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
