"""``gnnbench diagnose --script train.py --verify``: the advice measured in the user's own script.

The baseline (the script as it is) and each variant (one :class:`~gnnbench.advice.watch.changes.ScriptChange`
applied from the outside) run in processes of their own (:mod:`gnnbench.advice.watch.child`), alternating in
rounds (each round runs every configuration once, its order rotated round by round, the script's randomness
seeded alike within a round); each run's warm-up steps are left out and its measured steps summarized by their
median. As ``gnnbench compare`` measures: per variant the paired ratio of the rounds' medians (baseline /
variant: above 1 the variant is faster) with its run-level interval (:func:`gnnbench.measure.stats.intervals.paired_ratio`),
significance family-wise across the variants (Holm), and the noise floor of the baseline's runs printed beside
them. A variant that may change the numbers (compile, low precision) reports its loss at equal steps against the
same-seed baseline. The variants that pay significantly, at most one per kind (loader, process, compile,
precision), are then combined and measured as one more variant against the baseline in rounds of their own, and
the exact change to make in the script is printed.

Rounds until decided (``max_rounds`` above ``rounds``, the CLI's default with ``--verify-budget``): after the first
``rounds`` rounds, each round is a look of ``compare``'s stopping rule (:mod:`gnnbench.measure.stats.sequential`, Holm
at every look, alpha split over the looks, a variant stopped once significant or futile); a variant still open
receives another round while the time left allows one (the budget, measured against the rounds' own pace), and
when the budget ends first, its verdict is taken at the level of the last look made (a smaller level than the
last look's: never more false alarms). :func:`plan_rounds` sizes ``max_rounds`` from the diagnosed step before
the first run.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Callable

from gnnbench.advice.watch.changes import BASELINE, ScriptChange
from gnnbench.measure.stats import (
    SIGNIFICANT,
    RatioInterval,
    StoppingRule,
    family_p_values,
    holm,
    noise_floor,
    paired_ratio,
    settled,
    t_quantile,
)
from gnnbench.process import DEFAULT_CHILD_TIMEOUT_S, run_child

DEFAULT_ROUNDS = 4  # rounds of --verify every variant receives (each runs the baseline and every variant once)
DEFAULT_STEPS = 20  # measured steps per run
DEFAULT_BUDGET_S = 15 * 60.0  # the CLI's budget for --verify's rounds, the combination's included
MAX_ROUNDS = 20  # rounds at most, whatever the budget
DEFAULT_WARMUP = 3  # warm-up steps per run, left out
COMPILE_WARMUP = 3  # warm-up steps of a compiled variant at least (its compilation stays out of the measure)
WAIT_BOUND_S = 300.0  # a loader next() waiting longer ends the run (exit 1, the loader's state reported)


@dataclass
class Outcome:
    """One variant's measurement against the baseline of the same rounds."""

    change: ScriptChange
    step_ms: list[float]  # per round, the run's median measured step
    ratio: RatioInterval | None = None  # baseline / variant (above 1: the variant is faster)
    significant: bool = False  # Holm across the variants
    loss: dict[str, Any] | None = None  # at equal steps against the same-seed baseline
    error: str | None = None  # a run failed: its reason (the variant is not judged)
    warmup_s: list[float] = field(default_factory=list)  # per run, the warm-up's seconds (compilation is in it)
    stop: dict[str, Any] | None = None  # why its rounds ended: reason, look, level (the stopping rule's Stop)

    @property
    def pays(self) -> bool:
        return self.error is None and self.significant and self.ratio is not None and self.ratio.ratio > 1

    def to_dict(self) -> dict[str, Any]:
        r = self.ratio
        return {
            "label": self.change.label,
            "entries": list(self.change.entries),
            "step_ms": self.step_ms,
            "ratio": None
            if r is None
            else {"ratio": r.ratio, "low": r.low, "high": r.high, "p_value": r.p_value, "rounds": r.rounds},
            "significant": self.significant,
            "pays": self.pays,
            "loss": self.loss,
            "error": self.error,
            "warmup_s": self.warmup_s,
            "edit": list(self.change.edit),
            "stop": self.stop,
        }


@dataclass
class Verification:
    """What ``--verify`` measured in the script."""

    rounds: int
    steps: int
    warmup: int
    base_ms: list[float]  # per round, the baseline run's median measured step
    floor: float  # the baseline's noise floor (smallest resolvable factor)
    outcomes: list[Outcome] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # entry -> why it cannot be applied to this script
    combination: Outcome | None = None
    combination_base_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    base_warmup_s: list[float] = field(default_factory=list)  # per baseline run, its warm-up's seconds
    min_rounds: int = 0  # rounds every variant received before it could stop
    max_rounds: int = 0  # rounds at most (the stopping rule's last look)
    budget_s: float | None = None  # the time the rounds could take (None: no budget)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "steps": self.steps,
            "warmup": self.warmup,
            "base_ms": self.base_ms,
            "floor": self.floor,
            "outcomes": [o.to_dict() for o in self.outcomes],
            "refused": self.refused,
            "combination": self.combination.to_dict() if self.combination else None,
            "combination_base_ms": self.combination_base_ms,
            "wall_s": self.wall_s,
            "notes": self.notes,
            "base_warmup_s": self.base_warmup_s,
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "budget_s": self.budget_s,
        }


class RunFailed(Exception):
    """A run of the script failed; the message is the child's reason."""


def _environment(change: ScriptChange) -> dict[str, str]:
    """The child's environment: the allocator's (glibc's defaults for every other run, whatever the parent's
    shell preloads), and the path gnnbench is imported from."""
    from gnnbench.flags import Flags
    from gnnbench.process import child_environment

    env = child_environment(Flags(allocator=change.allocator or "glibc"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__import__("gnnbench").__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def run_once(
    argv: list[str],
    change: ScriptChange,
    *,
    steps: int,
    warmup: int,
    seed: int,
    folder: str,
    wait_bound_s: float = WAIT_BOUND_S,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """One run of the script with ``change`` in a child process; its result (:mod:`~gnnbench.advice.watch.child`).

    Raises:
        RunFailed: the script raised, the change found nothing to apply to, the loader hung, or the child died.
    """
    tag = f"{change.label.replace('/', '_')}-{seed}-{time.monotonic_ns()}"
    spec_path, out = os.path.join(folder, f"{tag}.spec.json"), os.path.join(folder, f"{tag}.json")
    # torch.compile takes effect at the model's second training call (changes.py) and compiles there: those
    # steps are warm-up (left out of every run alike: only the measured steps are compared)
    warmup = max(warmup, COMPILE_WARMUP) if change.compile else warmup
    spec = {
        "argv": argv,
        "change": change.to_dict(),
        "steps": steps,
        "warmup": warmup,
        "seed": seed,
        "out": out,
        "wait_bound_s": wait_bound_s,
    }
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    timeout = DEFAULT_CHILD_TIMEOUT_S if timeout_s is None else timeout_s
    # in a process group of its own: a run past its timeout is ended with the loader workers it started
    child = run_child(
        [sys.executable, "-m", "gnnbench.advice.watch.child", spec_path], env=_environment(change), timeout=timeout
    )
    if child.timed_out:
        raise RunFailed(f"{change.label}: the run took longer than {timeout:g} s and was ended")
    try:
        with open(out) as f:
            result = json.load(f)
    except (OSError, ValueError):
        tail = (child.stderr or child.stdout or "").strip().splitlines()[-3:]
        raise RunFailed(
            f"{change.label}: the run ended with status {child.returncode} and no result"
            + (f": {' | '.join(tail)}" if tail else "")
        ) from None
    if result.get("error"):
        loader = f" (loader: {result['loader']})" if result.get("hung") else ""
        raise RunFailed(f"{result['error']}{loader}")
    if len(result["step_s"]) < 2:
        raise RunFailed(
            f"{change.label}: {len(result['step_s'])} measured step(s): the script ended after "
            f"{result['seen']} steps, fewer than {warmup} warm-up + {steps} measured"
        )
    return result


SHM_NEEDED = 256 * 2**20  # free /dev/shm below this refuses loader workers (they pass batches through it)
GROWTH_AT = 0.10  # resident memory growing more than this over a run's steps (and 64 MiB) is reported
LATE_SHARE = 0.35  # ... when its second half of the steps still adds this share of the growth (no plateau)


def shm_shortage(path: str = "/dev/shm") -> str | None:
    """Why loader workers cannot be measured here: ``/dev/shm`` too small (a container's default 64 MiB), or
    ``None``."""
    import shutil

    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return None  # no /dev/shm (not Linux): workers use the platform's own sharing
    if free < SHM_NEEDED:
        return (
            f"/dev/shm has {free / 2**20:.0f} MiB free, below {SHM_NEEDED / 2**20:.0f} MiB: loader workers "
            "pass every batch through it and fail with 'bus error' or hang (docker: --shm-size=1g)"
        )
    return None


def memory_growth(rss: list[int], warmup: int) -> str | None:
    """The resident memory of a run growing step over step after its warm-up, or ``None``. Growth that levels off
    (the allocator's pools and PyG's caches filling over the first steps, then a plateau) is not growth: the
    second half of the steps must still add at least :data:`LATE_SHARE` of the whole growth, as a step that
    keeps something does at every step."""
    after = rss[warmup:]
    if len(after) < 4:
        return None
    grew = after[-1] - after[0]
    half = after[len(after) // 2 :]
    if (
        grew > max(GROWTH_AT * after[0], 64 * 2**20)
        and after[-1] >= max(after[: len(after) // 2])
        and half[-1] - half[0] >= LATE_SHARE * grew
    ):
        return (
            f"host memory grew {grew / 2**20:.0f} MiB over {len(after)} steps after the warm-up "
            f"({after[0] / 2**20:.0f} -> {after[-1] / 2**20:.0f} MiB), still growing in the last half"
        )
    return None


def growth_notes(growth: dict[str, str]) -> list[str]:
    """One note per configuration whose host memory grew (``growth``: label -> :func:`memory_growth`'s fact),
    naming what kept something: the script, where its own runs (the baseline) grew, or the variant it grew under
    where the baseline's did not (autocast's cast cache, a compiled graph per shape: the change, not the
    script)."""
    notes = []
    for label, fact in growth.items():
        if label == "baseline":
            cause = "the script keeps something each step (a loss tensor with its graph, batches in a list)"
        elif "baseline" in growth:
            cause = "as in the script's own runs (the baseline grew too): the script keeps something each step"
        else:
            cause = (
                f"only under {label} (the script's own runs did not grow): the change keeps something each "
                "step, not the script"
            )
        notes.append(f"{label}: {fact}: {cause}")
    return notes


def _loss_at_equal_steps(
    base: list[list[float]], other: list[list[float]], level: float = 0.95
) -> dict[str, Any] | None:
    """Per round, the mean difference of the variant's loss from the same-seed baseline's over the steps both
    ran; across rounds its mean and a t-interval, and whether every loss was identical."""
    diffs, identical, n_steps = [], True, None
    for b, o in zip(base, other):
        n = min(len(b), len(o))
        if n == 0:
            continue
        n_steps = n if n_steps is None else min(n_steps, n)
        d = [oo - bb for bb, oo in zip(b[:n], o[:n])]
        identical = identical and all(x == 0 for x in d)
        diffs.append(statistics.fmean(d))
    if not diffs:
        return None
    mean = statistics.fmean(diffs)
    half = (
        t_quantile((1 + level) / 2, len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
        if len(diffs) > 1
        else float("nan")
    )
    base_mean = statistics.fmean(statistics.fmean(b[:n_steps]) for b in base if b)
    return {
        "steps": n_steps,
        "base_loss": base_mean,
        "diff": mean,
        "low": mean - half,
        "high": mean + half,
        "identical": identical,
        "rounds": len(diffs),
    }


def _kind(change: ScriptChange) -> tuple[str, ...]:
    """The settings a change holds (two changes of one kind do not combine: the better one is kept)."""
    kinds = []
    if change.loader or change.intra_op is not None:
        kinds.append("loader")
    if change.allocator:
        kinds.append("process")
    if change.compile:
        kinds.append("compile")
    if change.precision:
        kinds.append("precision")
    if change.sparse:
        kinds.append("sparse")
    if change.dropout:
        kinds.append("dropout")
    return tuple(kinds)


def best_set(outcomes: list[Outcome]) -> list[ScriptChange]:
    """The variants that pay, largest gain first, at most one per kind of setting."""
    chosen: list[ScriptChange] = []
    taken: set[str] = set()
    for o in sorted((o for o in outcomes if o.pays), key=lambda o: -o.ratio.ratio):
        if not set(_kind(o.change)) & taken:
            chosen.append(o.change)
            taken |= set(_kind(o.change))
    return chosen


class _Runs:
    """The rounds' runs with a progress line after each and an estimate of the time left."""

    def __init__(
        self,
        argv: list[str],
        *,
        steps: int,
        warmup: int,
        folder: str,
        total: int,
        log: Callable,
        wait_bound_s: float,
        timeout_s: float | None,
    ) -> None:
        self.argv, self.steps, self.warmup, self.folder = argv, steps, warmup, folder
        self.total, self.log, self.done, self.t0 = total, log, 0, time.perf_counter()
        self.wait_bound_s, self.timeout_s = wait_bound_s, timeout_s
        self.growth: dict[str, str] = {}  # per configuration, the first run whose host memory grew
        self.warmup_s: dict[str, list[float]] = {}  # per configuration, each run's warm-up seconds

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def per_run_s(self) -> float:
        """The mean seconds of a run so far (0 before the first)."""
        return self.elapsed() / self.done if self.done else 0.0

    def run(self, change: ScriptChange, round_: int, rounds: int) -> dict[str, Any] | str:
        t = time.perf_counter()
        try:
            result: dict[str, Any] | str = run_once(
                self.argv,
                change,
                steps=self.steps,
                warmup=self.warmup,
                seed=1000 + round_,
                folder=self.folder,
                wait_bound_s=self.wait_bound_s,
                timeout_s=self.timeout_s,
            )
            what = f"{1e3 * statistics.median(result['step_s']):.1f} ms/step"
        except RunFailed as exc:
            result, what = str(exc), "failed"
        self.done += 1
        self.total = max(self.total, self.done)
        left = self.per_run_s() * (self.total - self.done)
        self.log(
            f"[verify] round {round_ + 1}/{rounds} {change.label}: {what} ({time.perf_counter() - t:.0f} s); "
            f"{self.done} of {'at most ' if self.total > self.done else ''}{self.total} runs done, "
            f"{self.elapsed() / 60:.1f} min so far, about {left / 60:.1f} min left at most"
        )
        return result


@dataclass
class _Measured:
    """What :func:`_measure` measured: per configuration each round's median step (ms) and losses, the variants
    that failed (with the reason), and per variant whether it is significant and why its rounds ended."""

    base_ms: list[float]
    base_loss: list[list[float]]
    ms: dict[str, list[float]]
    losses: dict[str, list[list[float]]]
    failed: dict[str, str]
    significant: dict[str, bool]
    stops: dict[str, dict[str, Any]]


def _log_ratios(m: _Measured, labels: list[str]) -> dict[str, list[float]]:
    """Per variant not failed, its paired per-round ``log(baseline / variant)`` (a variant's rounds are the
    first ones: it runs every round until it stops)."""
    return {c: [math.log(b / x) for b, x in zip(m.base_ms, m.ms[c])] for c in labels if c not in m.failed}


def _measure(
    runs: _Runs,
    changes: list[ScriptChange],
    rule: StoppingRule,
    *,
    deadline_s: float | None = None,
    round_offset: int = 0,
    reserve: int = 0,
) -> _Measured:
    """Rounds of the baseline and the ``changes`` still open under ``rule`` (at least ``rule.min_rounds``, at most
    ``rule.max_rounds``; another round only while it ends before ``deadline_s`` on the runs' clock, at their
    pace so far). A failed baseline run ends the measurement, a failed variant is dropped with its reason.
    ``reserve``: runs planned after these (the progress line's total)."""
    labels = [c.label for c in changes]
    m = _Measured([], [], {c: [] for c in labels}, {c: [] for c in labels}, {}, {}, {})
    stops: dict[str, Any] = {c: None for c in labels}
    budget_end = False
    for r in range(rule.max_rounds):
        active = [c for c in changes if c.label not in m.failed and stops[c.label] is None]
        if not active:
            break
        if (
            r >= rule.min_rounds
            and deadline_s is not None
            and runs.elapsed() + runs.per_run_s() * (1 + len(active)) > deadline_s
        ):
            budget_end = True
            break
        runs.total = runs.done + (rule.max_rounds - r) * (1 + len(active)) + reserve
        configs = [BASELINE, *active]
        shift = (r + round_offset) % len(configs)
        for change in configs[shift:] + configs[:shift]:  # every configuration takes every place in turn
            result = runs.run(change, r + round_offset, rule.max_rounds + round_offset)
            if isinstance(result, str):
                if change is BASELINE:
                    raise RunFailed(f"the baseline run failed: {result}")
                m.failed[change.label] = result
                continue
            if result.get("warmup_s") is not None:
                runs.warmup_s.setdefault(change.label, []).append(float(result["warmup_s"]))
            growth = memory_growth(result.get("rss", []), int(result.get("warmup", 0)))
            if growth and change.label not in runs.growth:
                runs.growth[change.label] = growth
            median = 1e3 * statistics.median(result["step_s"])
            if change is BASELINE:
                m.base_ms.append(median)
                m.base_loss.append(result["losses"])
            else:
                m.ms[change.label].append(median)
                m.losses[change.label].append(result["losses"])
        for label in m.failed:  # a variant that failed in this round has one entry fewer than the baseline
            stops.pop(label, None)
        if r + 1 >= rule.min_rounds:
            stops.update(settled(rule, _log_ratios(m, labels)))
    logs = _log_ratios(m, labels)
    look = len(m.base_ms)
    for label, s in stops.items():
        if s is not None:
            m.significant[label] = s.reason == SIGNIFICANT
            m.stops[label] = {**s.to_dict(), "level": s.alpha}
    still = [label for label, s in stops.items() if s is None]
    if still:  # the budget ended the rounds: Holm at the level of the last look made (stopped rows at 0 or 1)
        a = rule.look_alpha(look)
        own = {c: paired_ratio(m.base_ms[: len(logs[c])], m.ms[c]).p_value for c in logs}
        ps = family_p_values(stops, own)
        verdict = dict(zip(ps, holm(list(ps.values()), a) if a > 0 else [False] * len(ps)))
        for label in still:
            m.significant[label] = bool(verdict.get(label))
            m.stops[label] = {"reason": "budget" if budget_end else "max rounds", "look": look, "level": a}
    return m


def _outcomes(changes: list[ScriptChange], m: _Measured) -> list[Outcome]:
    out = []
    for c in changes:
        if c.label in m.failed:
            out.append(Outcome(c, m.ms[c.label], error=m.failed[c.label]))
            continue
        n = len(m.ms[c.label])
        o = Outcome(c, m.ms[c.label], paired_ratio(m.base_ms[:n], m.ms[c.label]))
        o.loss = _loss_at_equal_steps(m.base_loss[:n], m.losses[c.label])
        o.significant = m.significant.get(c.label, False)
        o.stop = m.stops.get(c.label)
        out.append(o)
    return out


def _rule(rounds: int, max_rounds: int) -> StoppingRule:
    """``compare``'s stopping rule for ``rounds``..``max_rounds`` rounds (one look at ``alpha`` when equal). No
    noise-floor stop: the baseline's unpaired spread is not the paired ratio's floor (docs/statistics.md)."""
    return StoppingRule(min_rounds=rounds, max_rounds=max_rounds, paired_floor=False)


def verify_script(
    argv: list[str],
    changes: list[ScriptChange],
    *,
    refused: dict[str, str] | None = None,
    rounds: int = DEFAULT_ROUNDS,
    steps: int = DEFAULT_STEPS,
    warmup: int = DEFAULT_WARMUP,
    max_rounds: int | None = None,
    budget_s: float | None = None,
    combine: bool = True,
    wait_bound_s: float = WAIT_BOUND_S,
    timeout_s: float | None = None,
    log: Callable[[str], None] = print,
) -> Verification:
    """Measure ``changes`` in the script ``argv`` against the script as it is (see the module's docstring).

    Args:
        argv: The script and its arguments.
        changes: The variants (their labels distinct).
        refused: Entries that could not be applied, with the reason (reported beside the table).
        rounds: Rounds every variant receives; each runs the baseline and every open variant once, in a rotated
            order.
        steps: Measured steps per run (after ``warmup`` steps left out).
        max_rounds: Rounds at most (None: ``rounds``, a fixed count and one look); above ``rounds``, a variant
            stops once decided by the stopping rule.
        budget_s: Seconds the rounds may take, the combination's included (None: no budget); a round that would
            end past it is not started (the combination's rounds, when planned, get the budget's share of their
            runs).
        combine: Measure the variants that pay, combined, in rounds of their own (when two or more pay).
        wait_bound_s: A loader ``next()`` waiting longer ends the run (reported, the variant not judged).
        timeout_s: A run taking longer is ended, with the processes it started (default: an hour,
            :data:`gnnbench.process.DEFAULT_CHILD_TIMEOUT_S`).
        log: Where the progress lines go.

    Raises:
        RunFailed: a baseline run failed (nothing can be judged without it).
        ValueError: fewer than 2 rounds, ``max_rounds`` below ``rounds``, a budget that is not positive, or labels
            that repeat.
    """
    if rounds < 2:
        raise ValueError(f"--verify needs at least 2 rounds for an interval (got {rounds})")
    max_rounds = rounds if max_rounds is None else max_rounds
    if max_rounds < rounds:
        raise ValueError(f"--verify's max rounds ({max_rounds}) must be at least its rounds ({rounds})")
    if budget_s is not None and not budget_s > 0:
        raise ValueError(f"--verify's budget must be a positive number of seconds (got {budget_s!r})")
    labels = [c.label for c in changes]
    if len(set(labels)) != len(labels) or "baseline" in labels:
        raise ValueError(f"variant labels must be distinct and not 'baseline' (got {labels})")
    t0 = time.perf_counter()
    rule = _rule(rounds, max_rounds)
    combo_runs = 2 * max_rounds if combine and len(changes) > 1 else 0
    single_runs = max_rounds * (1 + len(changes))
    with tempfile.TemporaryDirectory(prefix="gnnbench-verify-") as folder:
        runs = _Runs(
            argv,
            steps=steps,
            warmup=warmup,
            folder=folder,
            total=single_runs + combo_runs,
            log=log,
            wait_bound_s=wait_bound_s,
            timeout_s=timeout_s,
        )
        # the single variants' share of the budget: their runs' share of the planned runs
        deadline = None if budget_s is None else budget_s * single_runs / (single_runs + combo_runs)
        m = _measure(runs, changes, rule, deadline_s=deadline, reserve=combo_runs)
        v = Verification(
            len(m.base_ms),
            steps,
            warmup,
            m.base_ms,
            noise_floor(m.base_ms),
            refused=dict(refused or {}),
            min_rounds=rounds,
            max_rounds=max_rounds,
            budget_s=budget_s,
        )
        v.outcomes = _outcomes(changes, m)
        v.base_warmup_s = runs.warmup_s.get("baseline", [])
        for o in v.outcomes:
            o.warmup_s = runs.warmup_s.get(o.change.label, [])
        chosen = best_set(v.outcomes) if combine else []
        if len(chosen) > 1:
            combo = reduce(ScriptChange.combined, chosen)
            c = _measure(runs, [combo], rule, deadline_s=budget_s, round_offset=len(m.base_ms))
            v.combination = _outcomes([combo], c)[0]
            v.combination_base_ms = c.base_ms
        elif combine and len(changes) > 1:
            paid = [o for o in v.outcomes if o.pays]
            v.notes.append(
                f"{len(paid)} variants paid, all setting the same kind ({', '.join(_kind(paid[0].change))}"
                "): the best of them stands, no combination to measure"
                if len(paid) > 1
                else f"{len(paid)} variant(s) paid: no combination to measure"
            )
        v.notes += growth_notes(runs.growth)
    v.wall_s = time.perf_counter() - t0
    return v


def plan_rounds(
    report: Any,
    changes: list[ScriptChange],
    *,
    rounds: int,
    steps: int,
    warmup: int,
    budget_s: float | None,
    cap: int = MAX_ROUNDS,
    combine: bool = True,
) -> int:
    """The most rounds ``--verify`` can plan within ``budget_s`` at the diagnosed step (:func:`estimate_s`; the
    combination's rounds counted when two or more variants could pay), between ``rounds`` and ``cap``; ``rounds``
    with no budget."""
    if budget_s is None:
        return rounds
    _, per_round = estimate_s(report, changes, rounds=1, steps=steps, warmup=warmup, combine=combine)
    fit = int(budget_s // per_round) if per_round > 0 else cap
    return max(rounds, min(cap, fit))


def verify_plan(
    report: Any, *, top: int = 3, workers_curve: bool = False, cores: int | None = None
) -> tuple[list[ScriptChange], dict[str, str], list[str]]:
    """What ``--verify`` measures after the diagnosis ``report`` (a :class:`WatchReport`): the first ``top``
    pieces of advice that can be applied to the script, in the advice's order, the ones before them that cannot
    (with the reason), and notes. Unranked advice (a loop too short for its profile) is not measured: nothing
    ranked it. ``workers_curve`` adds ``num_workers`` from 1 to the usable cores and one above."""
    from gnnbench.advice.watch.changes import change_for, worker_change
    from gnnbench.process.threads import usable_cores

    n = cores if cores is not None else len(usable_cores())
    changes: list[ScriptChange] = []
    refused: dict[str, str] = {}
    notes: list[str] = []
    ranked = [a for a in report.advice if report.profiled is not False or a.op_share]
    if len(ranked) < len(report.advice):
        notes.append(
            f"{len(report.advice) - len(ranked)} unranked piece(s) of advice not measured (no profile ranked them)"
        )
    shm = shm_shortage()
    for a in ranked:
        if len(changes) >= top:
            break
        change = change_for(a.entry, device=report.device, loader=report.loader, cores=n)
        if shm and isinstance(change, ScriptChange) and change.loader.get("num_workers"):
            change = shm  # reported before any run, never a worker crash midway
        if isinstance(change, str):
            refused[a.entry] = change
        else:
            changes.append(change)
    if workers_curve:
        loader = report.loader or {}
        if not loader or loader.get("type") == "none (full batch)":
            refused["workers curve"] = "the script iterates no DataLoader (a full-batch loop)"
        elif shm:
            refused["workers curve"] = shm
        else:
            have = {c.loader.get("num_workers") for c in changes if not c.pin_workers}
            changes += [
                worker_change(k, cores=n, label=f"workers={k}")
                for k in range(1, n + 2)
                if k != int(loader.get("workers") or 0) and k not in have
            ]
            notes.append(
                f"workers curve: num_workers 1..{n + 1} on {n} usable cores, the intra-op threads "
                "cut to the cores the workers leave (at least 1); num_workers="
                f"{int(loader.get('workers') or 0)} is the baseline"
            )
    return changes, refused, notes


START_S = 4.0  # a child's own start: Python, torch, PyG and gnnbench imported (on a 2-core CPU)


def estimate_s(
    report: Any, changes: list[ScriptChange], *, rounds: int, steps: int, warmup: int, combine: bool = True
) -> tuple[int, float]:
    """Runs ``--verify`` will make and the seconds they should take, from the diagnosis: each run starts
    (:data:`START_S`), sets the script up and steps ``warmup + steps`` times at the diagnosed median step (the
    combination's rounds counted when two or more variants could pay; compilation not counted)."""
    runs = rounds * (1 + len(changes)) + (2 * rounds if combine and len(changes) > 1 else 0)
    setup = max(0.0, report.wall_s.get("setup and first step", 0.0) - report.step_ms["median"] / 1e3)
    per_run = START_S + setup + (warmup + steps) * report.step_ms["median"] / 1e3
    return runs, runs * per_run
