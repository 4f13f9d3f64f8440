"""A comparison row (:func:`gnnbench.measure.compare.comparison.compare`): one configuration of a sweep against the
baseline of the same sweep, as typed dataclasses, and the labels rows are known by.

:class:`ComparisonRow` holds every figure of a row; its clocks' paired ratios are :class:`PairedRatio` (step,
epoch) and :class:`TimeToAccuracy` (the ratio with its censoring). :meth:`ComparisonRow.to_dict` writes a row as
``compare --json``, ``diagnose --verify --json`` and ``tune --json`` print it (a row that was not measured carries
its label, status and reason only; the family's figures only where the family-wise step set them), and
:meth:`ComparisonRow.from_dict` reads that back.

A row's ``distributed`` block stays a mapping: it is the same block a multi-rank run result carries, and
:mod:`gnnbench.report.distributed_text` and :func:`gnnbench.advice.distributed.distributed_advice` read either.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from gnnbench.measure.stats import Stop

__all__ = [
    "ComparisonRow",
    "PairedRatio",
    "TimeToAccuracy",
    "BASELINE",
    "AA_LABEL",
    "AA_INPROCESS_LABEL",
    "AA_DUET_LABEL",
    "E2E_BASELINE",
    "MEASURED_SUFFIX",
    "STATIC_LIST",
    "TIME_TO_ACCURACY",
    "EPOCH_TIME",
    "FLOOR_KEY",
    "TtaFactors",
    "STEPS",
    "EPOCHS",
    "JUDGED_MEASURED",
    "JUDGED_PER_STEP",
    "JUDGED_FACTORS",
    "PAIR_JUDGED",
    "JUDGED_DERIVED",
]

BASELINE = "baseline"
AA_LABEL = "baseline (A/A)"
AA_INPROCESS_LABEL = "baseline (A/A, one process)"  # the baseline against itself, steps interleaved in one process
AA_DUET_LABEL = "baseline (A/A, duet)"  # the baseline against itself, two processes at once, one core each
E2E_BASELINE = "baseline (end-to-end)"  # the baseline timed end to end, for entries whose gain is overlap
MEASURED_SUFFIX = " (measured)"  # a derived entry also trained to the target: the check of its derived figure
STATIC_LIST = "all_recommended"  # the registry's fixed list of recommended entries: a guess, never a headline

TIME_TO_ACCURACY = "time to accuracy"  # a row's primary clock where the sweep has a target
EPOCH_TIME = "epoch time"  # a row's primary clock without one
FLOOR_KEY = {TIME_TO_ACCURACY: "time_to_accuracy", EPOCH_TIME: "epoch"}  # a row's primary -> its floors key
STEPS, EPOCHS = "steps", "epochs"  # the unit of a row's steps to the target (epochs: it changes the work per step)
JUDGED_MEASURED = "measured time to accuracy"
JUDGED_PER_STEP = "time per step x the baseline's steps to the target (steps equivalent)"
JUDGED_FACTORS = "its steps to the target x its time per step (each paired by round)"
PAIR_JUDGED = (JUDGED_PER_STEP, JUDGED_FACTORS)  # judgments whose time per step is read from the pairs
JUDGED_DERIVED = "derived (same trajectory, proven by test)"


@dataclass
class PairedRatio:
    """A clock's ratio ``baseline / configuration`` paired by round (:func:`gnnbench.measure.stats.intervals.paired_ratio`):
    above 1, the configuration is faster."""

    ratio: float  # exp(mean of the per-round log ratios)
    low: float  # lower end of the 95% interval (nan with fewer than 2 rounds)
    high: float  # upper end of the 95% interval (nan with fewer than 2 rounds)
    significant: bool  # the interval excludes 1 (per row; the family-wise verdict is the row's own)
    rounds: int  # rounds paired
    p: float  # two-sided p-value of the paired t-test of "no difference"
    log_ratios: list[float]  # each round's log(baseline / configuration), aligned with the inputs (nan: no pair)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PairedRatio:
        return cls(**d)


@dataclass
class TimeToAccuracy(PairedRatio):
    """The time-to-accuracy ratio: a :class:`PairedRatio` over rounds in which a round that missed the target is
    censored at its budget (:func:`gnnbench.measure.compare.time_to_accuracy.measured_tta`), so the ratio can be a
    bound. ``rounds`` is the configuration's rounds, reached or not."""

    bound: str | None  # "at most" (this row missed rounds), "at least" (the baseline did), "unknown" (both), None
    censored: bool  # this row missed the target in some round
    reached: int  # rounds that reached the target
    reached_text: str  # "k/R", or "derived" for a derived row
    seconds: float | None  # median time to the target over the rounds that reached it (None: none did)
    note: str | None  # the censoring, or how a derived figure was derived, in words


@dataclass
class TtaFactors:
    """A row's time to accuracy split into its factors, each paired by round against the baseline.

    ``steps`` is the ratio ``baseline / row`` of steps (or epochs) to the target (> 1: the row needs fewer), over
    the rounds both reached it; ``per_step`` the ratio of time per step (or per epoch; > 1: the row is faster
    per unit). Their product, with the setup, is the row's time to accuracy.
    """

    unit: str  # STEPS, or EPOCHS for a row that changes the work per step
    steps: PairedRatio | None  # baseline / row steps (epochs) to the target; None for a derived row
    per_step: PairedRatio | None  # baseline / row training clock per step (per epoch)
    steps_to_target: float | None  # the row's median steps (epochs) to the target over the rounds it reached it
    base_steps_to_target: float | None  # the baseline's, over the same rounds
    seconds_per_unit: float | None  # the row's median training clock per step (per epoch)
    setup_s: float | None  # the row's median setup clock
    base_setup_s: float | None  # the baseline's
    equivalence: dict[str, Any] | None = None  # the TOST of the steps ratio (Equivalence.to_dict), where tested
    judged_by: str = JUDGED_MEASURED  # how the row's time to accuracy is judged

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        for k in ("steps", "per_step"):
            out[k] = out[k].to_dict() if out[k] is not None else None
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TtaFactors:
        kw = dict(d)
        for k in ("steps", "per_step"):
            if isinstance(kw.get(k), dict):
                kw[k] = PairedRatio(**kw[k])
        return cls(**kw)


@dataclass(kw_only=True)
class ComparisonRow:
    """One configuration of a sweep, paired by round against the baseline of the same sweep.

    A row that was not measured (``status`` other than ``"ok"``) has its label, optimizations, derived, timing
    mode, status and ``reason``; the other fields keep their defaults. A measured row has every field but
    ``reason``. Accuracy figures are fractions (``acc_delta`` -0.012 is -1.2 pp).
    """

    label: str  # the configuration's label in the sweep: "baseline", a registry entry, "a+b", ...
    optimizations: list[str] = field(default_factory=list)  # the registry entries it switches on
    derived: bool = False  # a same-trajectory entry: its time to accuracy is derived from its time per step
    timing_mode: str = "sync"  # "sync", or "end_to_end" (entries whose gain is overlap, against that baseline)
    status: str | None = "ok"  # "ok" (measured), "not measured", or its runs' status ("unavailable", "failed")
    reason: str | None = None  # why it was not measured (rows whose status is not "ok")
    # --- the clocks (measured rows)
    rounds: int = 0  # rounds paired with a measured baseline run
    same_work: bool = True  # no entry of it changes the work per step, so a per-step ratio means something
    step_ms: float = math.nan  # median step time over its rounds, ms
    step_speedup: PairedRatio | None = None  # the per-step ratio (None where the work per step differs)
    epoch_s: float = math.nan  # median epoch time over its rounds, s
    epoch_speedup: PairedRatio | None = None  # the epoch-time ratio
    setup_s: float = math.nan  # median setup clock over its rounds, s
    tta_s: float | None = None  # median time to the target of the rounds that reached it, s
    tta_reached: str | None = None  # "k/R" rounds that reached the target, or "derived"; None: no time to accuracy
    tta_speedup: TimeToAccuracy | None = None  # the time-to-accuracy ratio (None without a target)
    censored: bool = False  # missed the target in some round: its time-to-accuracy ratio is a bound
    tta_note: str | None = None  # the censoring or the derivation, in words (tta_speedup.note)
    factors: TtaFactors | None = None  # time to accuracy as steps to the target x time per step (+ setup)
    measured_tta_speedup: TimeToAccuracy | None = None  # the measured ratio, where the row is judged otherwise
    # --- the primary speedup: time to accuracy where there is one, else epoch time
    primary: str = EPOCH_TIME  # TIME_TO_ACCURACY or EPOCH_TIME: the clock the row is ranked by
    speedup: float | None = None  # the primary ratio (None: no paired round of that clock)
    speedup_low: float | None = None  # its interval's lower end
    speedup_high: float | None = None  # its interval's upper end
    significant: bool = False  # a significant speedup or slowdown: family-wise, and only in a bound's direction
    # --- where accuracy was read, and how the runs ended
    acc_point: str = ""  # where accuracy was read (at convergence, at equal steps and why), in words
    converged: bool | None = True  # every run of the accuracy pairs measured to its end; None for a derived row
    convergence: str | None = None  # which runs a budget cut short, in words (None: none)
    primary_rounds: list[int] = field(default_factory=list)  # the baseline rounds the primary log_ratios align with
    stop_reasons: dict[str, int] = field(default_factory=dict)  # why its runs stopped ("plateau", ...) -> count
    accuracy_rounds: int = 0  # rounds trained to the plateau, from which accuracy is read
    sampled: dict[str, float] | None = None  # nodes_per_batch, edges_per_batch, coverage (sampled_summary)
    # --- accuracy, paired by round
    test_acc: float = math.nan  # mean test metric at convergence over the accuracy rounds
    acc_delta: float = math.nan  # mean paired test-metric delta against the baseline (a fraction)
    acc_delta_low: float = math.nan  # its 95% t-interval's lower end (nan with one round)
    acc_delta_high: float = math.nan  # its upper end
    acc_delta_spread: float = 0.0  # largest minus smallest paired delta
    acc_verdict: str = ""  # "no accuracy cost", "costs accuracy", "gains accuracy", "inconclusive (...)", ...
    # --- what its runs recorded
    seeds: int = 0  # runs paired (one seed per round)
    phases: dict[str, float] = field(default_factory=dict)  # phase -> median seconds per step (its first run)
    compile: dict[str, Any] | None = None  # torch.compile's cost (its first run's compile block)
    device_busy: float | None = None  # mean device-busy fraction (None where a run has none)
    h2d_bytes_per_batch: float = 0.0  # host-to-device bytes per batch (its first run)
    device_phase_ms: dict[str, float] | None = None  # CUDA-event phase -> median ms (None where a run has none)
    distributed: dict[str, Any] | None = None  # multi-rank figures (distributed_summary); None: single process
    # every round timed it against its baseline in one process, steps interleaved, or in duet: its time per step
    # is read there
    interleaved: bool = False
    pair_design: str | None = None  # how: "interleaved" (one process) or "duet"; None: not paired
    # --- the family-wise verdict (rows of the family only; None elsewhere, and left out of to_dict)
    p_value: float | None = None  # the primary ratio's p-value that Holm's procedure read
    significant_per_row: bool | None = None  # significant before the family-wise correction
    stop: Stop | None = None  # when the stopping rule settled its verdict (None: it ran every round)
    # no effect beyond the declared margin: the equivalence test of its primary ratio (family.no_effect_verdicts)
    no_effect: dict[str, Any] | None = None

    @property
    def primary_ratio(self) -> PairedRatio | None:
        """The ratio the row is ranked by: its time to accuracy's where that is its primary clock, else its
        epoch time's."""
        return self.tta_speedup if self.primary == TIME_TO_ACCURACY else self.epoch_speedup

    @property
    def bound(self) -> str | None:
        """The bound its primary ratio is, where time to accuracy was censored (``"at most"``, ``"at least"``,
        ``"unknown"``); ``None`` for a ratio that is no bound."""
        if self.primary != TIME_TO_ACCURACY or self.tta_speedup is None:
            return None
        return self.tta_speedup.bound

    def to_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict, in field order: a row not measured has its label, optimizations,
        derived, timing mode, status and reason; a measured row every field but ``reason``, and the family's
        figures only where they were set."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in _NOT_MEASURED:
                keep = f.name != "reason" or self.status != "ok"
            else:
                keep = self.status == "ok" and (f.name not in _FAMILY or value is not None)
            if keep:
                out[f.name] = value.to_dict() if hasattr(value, "to_dict") else copy.deepcopy(value)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ComparisonRow:
        """A row from :meth:`to_dict` (any subset of its keys: the others keep their defaults)."""
        kw = dict(d)
        for key, kind in (
            ("step_speedup", PairedRatio),
            ("epoch_speedup", PairedRatio),
            ("tta_speedup", TimeToAccuracy),
            ("measured_tta_speedup", TimeToAccuracy),
            ("stop", Stop),
            ("factors", TtaFactors),
        ):
            if isinstance(kw.get(key), dict):
                kw[key] = kind.from_dict(kw[key]) if hasattr(kind, "from_dict") else kind(**kw[key])
        return cls(**kw)


_NOT_MEASURED = ("label", "optimizations", "derived", "timing_mode", "status", "reason")  # every row's fields
_FAMILY = (
    "p_value",
    "significant_per_row",
    "stop",
    "no_effect",
)  # set by the family-wise step for the rows of the family
