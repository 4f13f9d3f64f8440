"""The gate's verdicts: one benchmark judged from its paired rounds, the set judged together, and the result.

:func:`judge` turns each benchmark's rounds (``base[i]`` pairs with ``head[i]``, one round per process pair) into
a :class:`BenchVerdict`: the step ratio ``BASE / HEAD`` with its interval, the phase that moved most, setup and
epoch time beside it (:class:`MetricVerdict`) and the accuracy delta on the same seeds; then Holm per figure
across the set (:data:`ALPHAS`; for the step, weighted by tier: :func:`tier_weights`), the practical threshold
(:data:`MIN_THRESHOLD`), the smallest slowdown the run could see with :data:`POWER` and whether that leaves it
inconclusive. :class:`GateResult` is the gate's outcome: its exit status and its JSON document.

**Tiers.** The baseline and the micro-benchmarks are the *primary* tier: every configuration runs their code
paths (sampler, gather, aggregation, the forward and backward of the base model, the optimizer), so a
regression of a shared path shows in them first, and the micro-benchmarks see a path's slowdown undiluted.
They share :data:`PRIMARY_SHARE` of the step's alpha; the registry entries share the rest. Holm's weighted
step-down (:func:`weighted_holm`) keeps the family-wise rate at the step's alpha whatever the weights, and a
machine too noisy to tell is judged on the primary tier (:attr:`GateResult.exit_status`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from gnnbench.measure.compare import mean_interval
from gnnbench.measure.stats.intervals import detectable_shift, holm, paired_ratio, t_quantile

__all__ = [
    "GateResult",
    "BenchVerdict",
    "MetricVerdict",
    "WorkerFailure",
    "judge",
    "MIN_THRESHOLD",
    "ACC_BOUND_PP",
    "ALPHAS",
    "DEFAULT_SENSITIVITY",
    "POWER",
    "PRIMARY_SHARE",
    "is_primary",
    "tier_weights",
    "weighted_holm",
    "detectable_at",
    "NOT_WORK",
]

MIN_THRESHOLD = 1.03  # a slowdown smaller than 3% is never a regression, however significant
ACC_BOUND_PP = 1.0  # an accuracy drop larger than 1 pp (paired, same seeds, interval below 0) is a regression
# the family-wise 5% split across the gated figures (Bonferroni between them, Holm within each): the step holds
# most of it, setup and epoch time (per-epoch costs) share the rest, so gating them costs the step little power
ALPHAS = {"step": 0.04, "setup": 0.005, "epoch": 0.005}
DEFAULT_SENSITIVITY = 0.10  # the slowdown a run must be able to see before "no regression" is said
POWER = 0.8  # "could detect": flagged with this probability at the run's own spread
# the slowdowns counted instructions cannot see (time that is not instructions): only the wall clock judges them
NOT_WORK = (
    "waiting (a sleep, I/O, a lock), a timed spin, memory stalls, a thread or process contending for a core, "
    "time on a GPU"
)
PRIMARY_SHARE = 0.75  # of the step's alpha, shared by the primary tier (the baseline and the micro-benchmarks)


def is_primary(name: str) -> bool:
    """Whether a benchmark belongs to the primary tier: the baseline or a micro-benchmark."""
    return name == "baseline" or name.startswith("micro:")


def tier_weights(names: list[str]) -> dict[str, float]:
    """Each benchmark's share of the step's alpha (they add up to 1): :data:`PRIMARY_SHARE` split equally over
    the primary tier, the rest equally over the entries; equal shares when only one tier is present."""
    primary = [n for n in names if is_primary(n)]
    entries = [n for n in names if not is_primary(n)]
    if not primary or not entries:
        return {n: 1.0 / len(names) for n in names}
    return {
        **{n: PRIMARY_SHARE / len(primary) for n in primary},
        **{n: (1.0 - PRIMARY_SHARE) / len(entries) for n in entries},
    }


def weighted_holm(p_values: list[float], weights: list[float], alpha: float) -> list[bool]:
    """Holm's weighted step-down (Holm 1979): which of ``p_values`` are rejected with the family-wise error rate at
    most ``alpha`` whatever their dependence. At each step the open hypothesis with the smallest ``p / w`` is
    rejected when ``p <= alpha * w / (the open weights' sum)``; the first that is not stops it. NaN p-values are
    never rejected and their weights do not count. Equal weights: :func:`~gnnbench.measure.stats.intervals.holm`."""
    if len(p_values) != len(weights) or any(not w > 0 for w in weights):
        raise ValueError(
            f"weighted_holm needs one positive weight per p-value (got {weights!r} for {len(p_values)} p-values)"
        )
    open_ = sorted((p / w, i) for i, (p, w) in enumerate(zip(p_values, weights)) if p == p)
    out = [False] * len(p_values)
    total = sum(weights[i] for _, i in open_)
    for _, i in open_:
        if p_values[i] > alpha * weights[i] / total + 1e-15:
            break
        out[i] = True
        total -= weights[i]
    return out


@dataclass
class MetricVerdict:
    """One gated figure of a benchmark beside its step (setup, epoch): ratio ``BASE / HEAD`` with its interval,
    Holm within its own family (:data:`ALPHAS`), its threshold and the part of it that moved most."""

    metric: str
    ratio: float
    low: float
    high: float
    p_value: float
    threshold: float
    detectable: float  # the smallest slowdown factor this run resolves with POWER (inf: it cannot)
    base_ms: float
    head_ms: float
    rounds: int = 0
    log_sd: float | None = None  # the spread of the per-round log ratios
    significant: bool = False
    regression: bool = False
    improvement: bool = False
    phase: str | None = None
    phase_ratio: dict[str, float] | None = None


@dataclass
class BenchVerdict:
    """One benchmark's figures: ratios are ``BASE / HEAD`` (below 1: HEAD is slower). The step's figures are
    the top-level fields; ``setup`` and ``epoch`` are gated beside it (:class:`MetricVerdict`)."""

    name: str
    status: str
    reason: str | None = None
    rounds: int = 0  # paired rounds behind the figures
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    threshold: float | None = None  # the practical threshold (MIN_THRESHOLD)
    alpha: float | None = None  # its share of the step's alpha at Holm's strictest step (its tier's weight)
    detectable: float | None = None  # the smallest step slowdown this run resolves with POWER (inf: none)
    log_sd: float | None = None  # the spread of the step's per-round log ratios
    significant: bool = False  # after Holm across the set
    regression: bool = False
    improvement: bool = False
    inconclusive: bool = False  # no regression seen, but this run could not have seen one of the sensitivity
    lost: bool = False  # fine in BASE, not in HEAD (refused, failed, no measured steps, crashed): a failure
    phase: str | None = None  # the phase that moved most
    phase_ratio: dict[str, float] | None = None  # its ratio with interval
    acc_delta_pp: float | None = None
    acc_low_pp: float | None = None
    acc_high_pp: float | None = None
    acc_regression: bool = False
    base_ms: float | None = None
    head_ms: float | None = None
    setup: MetricVerdict | None = None
    epoch: MetricVerdict | None = None

    def metrics(self) -> list[MetricVerdict]:
        return [m for m in (self.setup, self.epoch) if m is not None]


@dataclass
class WorkerFailure:
    """A benchmark process that did not finish: it crashed (non-zero exit) or ran past the timeout."""

    side: str  # "base" | "head"
    round: int
    kind: str  # "crashed" | "timed out"
    returncode: int | None
    stderr_tail: str


@dataclass
class GateResult:
    """The gate's outcome: per benchmark, whether anything regressed or was lost, and whether the run could
    see a slowdown of ``sensitivity``."""

    base: str
    head: str
    rounds: int
    threads: int
    orders: list[list[str]]
    benches: list[BenchVerdict] = field(default_factory=list)
    seconds: float = 0.0
    family: str = ""
    pythons: dict[str, str] | None = None  # each side's interpreter, when they differ (two environments)
    commits: dict[str, str] | None = None  # each side's full commit ("<sha>+dirty": a working tree), when known
    finished: str = ""  # UTC time the gate ended (orders stored gate runs into a history)
    sensitivity: float = DEFAULT_SENSITIVITY
    budget_seconds: float | None = None
    extra_rounds: dict[str, int] = field(default_factory=dict)  # rounds added per benchmark beyond ``rounds``
    failure: WorkerFailure | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # benchmarks the gate cannot run here -> why
    counts: list[Any] = field(default_factory=list)  # CountVerdict per counted benchmark (gnnbench.measure.gate.counts)
    counts_unavailable: str | None = None  # why no instruction counts were taken here, when asked for
    counts_seconds: float = 0.0  # the count stage's wall time (in ``seconds``)
    design: str = "alternating"  # how a round timed the two trees: "duet" (at once, one per core) or "alternating"
    design_note: str | None = None  # why the rounds alternate where a duet was asked for
    cores: list[dict[str, int]] = field(default_factory=list)  # per duet round, each side's core

    @property
    def count_regressions(self) -> list[Any]:
        """Counted benchmarks whose instructions grew beyond their threshold in HEAD."""
        return [c for c in self.counts if c.status == "ok" and c.regression]

    @property
    def regressed(self) -> list[BenchVerdict]:
        """Benchmarks that fail the gate: a regression (step, setup, epoch or accuracy) or lost in HEAD."""
        return [
            b
            for b in self.benches
            if b.regression or b.acc_regression or b.lost or any(m.regression for m in b.metrics())
        ]

    @property
    def inconclusive(self) -> list[BenchVerdict]:
        return [b for b in self.benches if b.inconclusive]

    @property
    def judged(self) -> list[BenchVerdict]:
        """Benchmarks with a verdict (measured in both trees over at least 2 paired rounds)."""
        return [b for b in self.benches if b.status == "ok" and b.p_value is not None]

    @property
    def blind(self) -> list[BenchVerdict]:
        """The inconclusive benchmarks that make the whole run inconclusive by both measures: those of the primary
        tier (every benchmark when no primary one was judged) whose instructions were not counted in both trees.
        An entry whose work varies per batch can stay inconclusive on a quiet machine; a primary benchmark that
        cannot see the sensitivity means the machine was too noisy. A counted one is :attr:`time_blind` instead:
        the counts see any change of its work beyond their threshold, whatever the machine's noise, but not a
        slowdown that is not work."""
        counted = self._counted()
        return [b for b in self._deciding_inconclusive() if b.name not in counted]

    @property
    def time_blind(self) -> list[BenchVerdict]:
        """The deciding inconclusive benchmarks (as :attr:`blind`) whose instructions were counted in both trees:
        the counts see a change of their work, but a slowdown that is not work (:data:`NOT_WORK`) of
        ``sensitivity`` could have gone unseen on them, since their wall clock could not resolve it."""
        counted = self._counted()
        return [b for b in self._deciding_inconclusive() if b.name in counted]

    def _counted(self) -> set[str]:
        return {c.name for c in self.counts if c.status == "ok"}

    def _deciding_inconclusive(self) -> list[BenchVerdict]:
        """Inconclusive benchmarks of the primary tier (every one when the set has no primary benchmark)."""
        tiered = any(is_primary(b.name) for b in self.judged)
        return [b for b in self.inconclusive if is_primary(b.name) or not tiered]

    @property
    def exit_status(self) -> int:
        """2: a benchmark process crashed or timed out; 1: a regression (in time, accuracy or counted
        instructions) or a lost benchmark; 3: no regression seen, but a primary benchmark could not have seen a
        slowdown of ``sensitivity`` by either measure (:attr:`blind`: too noisy here, and not counted) or by the
        one that sees what is not work (:attr:`time_blind`: counted, but its wall clock could not resolve it),
        or nothing was judged; 0: the wall clock could see the sensitivity on every primary benchmark (and, where
        instructions were counted, they did not grow)."""
        if self.failure is not None:
            return 2
        if self.regressed or self.count_regressions:
            return 1
        return 3 if self.blind or self.time_blind or not self.judged else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "head": self.head,
            "rounds": self.rounds,
            "threads": self.threads,
            "pythons": self.pythons,
            "orders": self.orders,
            "seconds": self.seconds,
            "family": self.family,
            "commits": self.commits,
            "finished": self.finished,
            "regression": bool(self.regressed),
            "inconclusive": [b.name for b in self.inconclusive],
            "blind": [b.name for b in self.blind],
            "time_blind": [b.name for b in self.time_blind],
            "exit_status": self.exit_status,
            "sensitivity": self.sensitivity,
            "budget_seconds": self.budget_seconds,
            "extra_rounds": self.extra_rounds,
            "skipped": self.skipped,
            "failure": asdict(self.failure) if self.failure else None,
            "benches": [asdict(b) for b in self.benches],
            "counts": [c.to_dict() for c in self.counts],
            "counts_unavailable": self.counts_unavailable,
            "counts_seconds": self.counts_seconds,
            "count_regressions": [c.name for c in self.count_regressions],
            "design": self.design,
            "design_note": self.design_note,
            "cores": self.cores,
        }


def judge(names: list[str], data: dict[str, dict[str, list[dict]]], sensitivity: float) -> list[BenchVerdict]:
    """Every benchmark's verdict (``names`` in the gate's order; ``data[name][side]``: its rounds) from the rounds
    so far: Holm per figure across the set, thresholds, what each could detect, and which are inconclusive at
    ``sensitivity``."""
    verdicts = [_verdict(name, data[name]["base"], data[name]["head"]) for name in names]
    measured = [v for v in verdicts if v.status == "ok" and v.p_value is not None]
    weights = tier_weights([v.name for v in measured]) if measured else {}
    for v, keep in zip(
        measured, weighted_holm([v.p_value for v in measured], [weights[v.name] for v in measured], ALPHAS["step"])
    ):
        v.alpha = ALPHAS["step"] * weights[v.name]
        v.significant = bool(keep)
        v.regression = v.significant and v.ratio < 1 / v.threshold and v.high < 1
        v.improvement = v.significant and v.ratio > v.threshold and v.low > 1
        v.detectable = _detectable(v.rounds, v.log_sd, v.alpha, v.threshold)
        v.inconclusive = not (v.regression or v.improvement) and v.detectable > 1 + sensitivity + 1e-12
    for metric in ("setup", "epoch"):
        judged = [getattr(v, metric) for v in measured if getattr(v, metric) is not None]
        for mv, keep in zip(judged, holm([mv.p_value for mv in judged], ALPHAS[metric])):
            mv.significant = bool(keep)
            mv.regression = mv.significant and mv.ratio < 1 / mv.threshold and mv.high < 1
            mv.improvement = mv.significant and mv.ratio > mv.threshold and mv.low > 1
            mv.detectable = _detectable(mv.rounds, mv.log_sd, ALPHAS[metric] / len(judged), mv.threshold)
    return verdicts


def detectable_at(v: BenchVerdict, rounds: int) -> float:
    """The smallest slowdown ``v``'s benchmark would resolve after ``rounds`` paired rounds at its current
    spread and level (what more rounds could buy it; its ratio plays no part)."""
    if v.alpha is None or v.threshold is None:
        return math.inf
    return _detectable(rounds, v.log_sd, v.alpha, v.threshold)


def _detectable(rounds: int, log_sd: float | None, alpha: float, threshold: float) -> float:
    """The smallest slowdown factor this run flags with probability :data:`POWER`, from ``rounds`` paired
    rounds whose log ratios spread by ``log_sd`` (an estimate: the spread is itself measured from those rounds).

    A regression needs both a significant paired t test at two-sided ``alpha`` (the noncentral t's power,
    :func:`~gnnbench.measure.stats.intervals.detectable_shift`) and a point estimate beyond ``threshold``; the larger of
    the two requirements decides."""
    if rounds < 2 or log_sd is None or not log_sd == log_sd:
        return math.inf
    se = log_sd / math.sqrt(rounds)
    test = math.exp(detectable_shift(rounds - 1, alpha, POWER) * se)
    beyond = threshold * math.exp(t_quantile(POWER, rounds - 1) * se)
    return max(test, beyond)


def _ratio_of(base: list[float], head: list[float]) -> tuple[Any, float, float]:
    """The paired ratio, the spread of its per-round log ratios and the practical threshold (``MIN_THRESHOLD``:
    the paired test already answers for the noise, so the threshold is not the base side's own noise floor,
    which five processes estimate too loosely to gate on)."""
    ri = paired_ratio(base, head)
    logs = [math.log(b / h) for b, h in zip(base, head)]
    sd = statistics.stdev(logs) if len(logs) > 1 else math.nan
    return ri, sd, MIN_THRESHOLD


def _moved(base: list[dict], head: list[dict], key: str, head_total: float) -> tuple[str, dict] | None:
    """The part of a figure whose change explains most of its change (its share times its log ratio)."""
    moved = []
    for phase in base[0].get(key) or {}:
        b = [d[key].get(phase, 0.0) for d in base]
        h = [d[key].get(phase, 0.0) for d in head]
        if min(b + h) <= 0:
            continue
        pr = paired_ratio(b, h)
        share = statistics.median(h) / head_total if head_total else 0.0
        moved.append((abs(share * (1 / pr.ratio - 1)), phase, pr))
    if not moved:
        return None
    _, phase, pr = max(moved)
    return phase, {"ratio": pr.ratio, "low": pr.low, "high": pr.high, "significant": pr.significant}


def _verdict(name: str, base: list[dict], head: list[dict]) -> BenchVerdict:
    """One benchmark from its rounds (``base[i]`` pairs with ``head[i]``). Fine in BASE and not in HEAD is
    lost (a failure of the gate); not fine in BASE is reported and judged no further."""

    def bad_of(side: list[dict]) -> dict | None:  # a round that never reached the benchmark says nothing of it
        return next((d for d in side if d.get("status", "missing") not in ("ok", "not run", "not reached")), None)

    bad_base, bad_head = bad_of(base), bad_of(head)
    if bad_base is not None:
        reason = f"base: {bad_base.get('reason', 'no result')}"
        if bad_head is not None:
            reason += f"; head: {bad_head.get('reason', 'no result')}"
        return BenchVerdict(name, bad_base.get("status", "missing"), reason)
    if bad_head is not None and not any(d.get("status") == "ok" for d in base):
        return BenchVerdict(name, "not judged", f"base did not run it; head: {bad_head.get('reason', 'no result')}")
    if bad_head is not None:
        return BenchVerdict(
            name,
            bad_head.get("status", "missing"),
            f"fine in base, {bad_head.get('status', 'missing')} in head: {bad_head.get('reason', 'no result')}",
            lost=True,
        )
    pairs = [(b, h) for b, h in zip(base, head) if b.get("status") == "ok" and h.get("status") == "ok"]
    if len(pairs) < 2:
        return BenchVerdict(name, "not judged", f"{len(pairs)} paired round(s): an interval needs 2", rounds=len(pairs))
    base, head = [b for b, _ in pairs], [h for _, h in pairs]
    ri, sd, threshold = _ratio_of([d["step"] for d in base], [d["step"] for d in head])
    v = BenchVerdict(
        name,
        "ok",
        rounds=len(pairs),
        ratio=ri.ratio,
        low=ri.low,
        high=ri.high,
        p_value=ri.p_value,
        threshold=threshold,
        log_sd=sd,
        base_ms=1e3 * statistics.median(d["step"] for d in base),
        head_ms=1e3 * statistics.median(d["step"] for d in head),
    )
    moved = _moved(base, head, "phases", 1e-3 * v.head_ms)
    if moved:
        v.phase, v.phase_ratio = moved
    for metric in ("setup", "epoch"):
        if all((d.get(metric) or 0) > 0 for d in base + head):
            mri, msd, mthr = _ratio_of([d[metric] for d in base], [d[metric] for d in head])
            mv = MetricVerdict(
                metric,
                mri.ratio,
                mri.low,
                mri.high,
                mri.p_value,
                mthr,
                math.inf,
                1e3 * statistics.median(d[metric] for d in base),
                1e3 * statistics.median(d[metric] for d in head),
                rounds=len(pairs),
                log_sd=msd,
            )
            moved = _moved(base, head, f"{metric}_phases", 1e-3 * mv.head_ms)
            if moved:
                mv.phase, mv.phase_ratio = moved
            setattr(v, metric, mv)
    if all(d.get("test") is not None for d in base + head):  # micro-benchmarks train nothing
        v.acc_delta_pp, v.acc_low_pp, v.acc_high_pp = mean_interval(
            [100 * (h["test"] - b["test"]) for b, h in zip(base, head)]
        )
        v.acc_regression = v.acc_delta_pp < -ACC_BOUND_PP and v.acc_high_pp < 0
    return v
