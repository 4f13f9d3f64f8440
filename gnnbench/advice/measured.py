"""``gnnbench diagnose``'s first answer: its top candidates measured against the baseline, in this process,
steps interleaved (:mod:`gnnbench.measure.run.interleaved`; DESIGN.md §3, "Measure where the noise cancels").

A ranked guess says what to try; a measurement says what pays. :func:`measure_top` takes the diagnosis's
recommendations in their order, keeps the first ``top`` that can be timed beside the baseline in one process
(:attr:`gnnbench.registry.Optimization.shares_process`) and do the same work per step (a per-step ratio between
different work says nothing), and times each against a baseline trainer built beside it, after an A/A pair
(the baseline against itself) that shows what this process's reading of "no difference" is. The verdict of a
row (:func:`verdict`):

* **pays here**: the interval's lower end clears the A/A's reading (a gain beyond what two identical trainers
  showed in this process);
* **does not pay here, it is slower** (the words `diagnose --verify` uses): its upper end is below the A/A's reading inverted;
* **no effect beyond ±5% here**: equivalence shown (TOST on the blocks' log ratios at :data:`MARGIN`);
* **not resolved**: none of these; the interval says how far it reaches.

Every interval is over blocks of interleaved steps *within* this process: the spread from one process to the
next is not in it (``--verify`` and ``compare`` measure across processes). The ratio is per step: for an entry
proven to keep the training trajectory it is also the ratio of time to accuracy; for one that changes the
numerics the steps to the target may differ, and for one that may cost accuracy, accuracy is not judged here.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis
from gnnbench.flags import UnavailableError
from gnnbench.measure.run import BUILD_ORDERS, PairRefused, PairTiming, time_pair
from gnnbench.measure.stats import RatioInterval, equivalence
from gnnbench.text import ratio
from gnnbench.training import RunConfig

__all__ = [
    "MeasuredRow",
    "Measured",
    "measure_top",
    "pick",
    "verdict",
    "format_measured",
    "DEFAULT_TOP",
    "DEFAULT_BLOCKS",
    "MARGIN",
    "AA_LABEL",
]

DEFAULT_TOP = 3  # candidates measured by default
DEFAULT_BLOCKS = 8  # blocks of four interleaved steps per pair (16 measured steps a side)
MARGIN = 0.05  # "no effect beyond +-5% here": the equivalence margin, fixed before measuring
AA_LABEL = "baseline (A/A)"
VERDICTS = ("pays here", "does not pay here, it is slower", f"no effect beyond ±{MARGIN:.0%} here", "not resolved")


@dataclass(frozen=True)
class MeasuredRow:
    """One configuration timed against the baseline in this process."""

    name: str  # a registry entry, or AA_LABEL
    pair: PairTiming
    interval: RatioInterval  # speedup per step (baseline / entry), over blocks
    equivalent: bool  # no effect beyond +-MARGIN shown (TOST over blocks)
    verdict: str  # one of VERDICTS
    note: str  # what the per-step ratio means for this entry

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {
            "name": self.name,
            "speedup": iv.ratio,
            "low": iv.low,
            "high": iv.high,
            "blocks": iv.rounds,
            "p_value": iv.p_value,
            "equivalent": self.equivalent,
            "verdict": self.verdict,
            "note": self.note,
            "base_step_ms": 1e3 * self.pair.base_step,
            "step_ms": 1e3 * self.pair.other_step,
            "pair": self.pair.to_dict(),
        }


@dataclass
class Measured:
    """What :func:`measure_top` measured: the A/A pair, the candidates, and what it left to the ranked list."""

    aa: MeasuredRow | None
    rows: list[MeasuredRow] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # ranked entries not timed here: name -> why
    blocks: int = DEFAULT_BLOCKS
    seconds: float = 0.0

    def by_name(self) -> dict[str, MeasuredRow]:
        return {r.name: r for r in self.rows}

    def to_dict(self) -> dict[str, Any]:
        return {
            "design": "two trainers in one process, steps interleaved (ABBA blocks), intervals over blocks",
            "aa": self.aa.to_dict() if self.aa is not None else None,
            "rows": [r.to_dict() for r in self.rows],
            "skipped": dict(self.skipped),
            "blocks": self.blocks,
            "margin": MARGIN,
            "seconds": self.seconds,
        }


def pick(d: Diagnosis, top: int = DEFAULT_TOP) -> tuple[list[str], dict[str, str]]:
    """The first ``top`` runnable recommendations, in the diagnosis's order, that can be timed in this process
    against the baseline; and, for the ones ranked above the last of them that cannot, why."""
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    for name in d.recommended:
        if len(chosen) >= top:
            break
        opt = registry.get(name)
        if not opt.shares_process:
            skipped[name] = "needs a process of its own (what it does to the process): --verify measures it"
        elif opt.changes_work:
            skipped[name] = "changes the work per step, so a per-step ratio says nothing: --verify measures it"
        else:
            chosen.append(name)
    return chosen, skipped


def _aa_reading(aa: MeasuredRow | None) -> float:
    """How far from 1 the A/A pair read (its point, as a factor >= 1): a gain must clear it."""
    if aa is None or not math.isfinite(aa.interval.ratio):
        return 1.0
    return math.exp(abs(math.log(aa.interval.ratio)))


def verdict(interval: RatioInterval, equivalent: bool, aa_reading: float = 1.0) -> str:
    """One of :data:`VERDICTS` for a per-step interval (see the module's docstring)."""
    low, high = interval.low, interval.high
    if interval.significant and math.isfinite(low) and low > aa_reading:
        return VERDICTS[0]
    if interval.significant and math.isfinite(high) and high < 1 / aa_reading:
        return VERDICTS[1]
    if equivalent:
        return VERDICTS[2]
    return VERDICTS[3]


def _note(name: str) -> str:
    if name == AA_LABEL:
        return "the baseline against itself: what 'no difference' reads as in this process"
    opt = registry.get(name)
    if opt.same_trajectory:
        return "same trajectory (proven by test): the per-step ratio is also time to accuracy's"
    if opt.costs_accuracy:
        return "per step; it may cost accuracy, not judged here (--verify judges it by time to accuracy)"
    return "per step; it changes the numerics, so its steps to the target may differ (--verify measures them)"


def _row(name: str, pair: PairTiming, aa_reading: float) -> MeasuredRow:
    iv = pair.interval()
    eq = equivalence(pair.block_log_ratios(), MARGIN).equivalent
    note = _note(name)
    if pair.paused:
        note += (
            f"; its producers paused (loader workers suspended, a producer thread held) while the other side stepped, {len(pair.other_seconds)} measured steps "
            f"a side (whole epochs), the interval over {len(pair.block_log_ratios())} windows of them"
        )
    return MeasuredRow(name, pair, iv, eq, verdict(iv, eq, aa_reading), note)


def measure_top(
    config: RunConfig,
    d: Diagnosis,
    *,
    graph: Any = None,
    top: int = DEFAULT_TOP,
    blocks: int = DEFAULT_BLOCKS,
    aa: bool = True,
    log: Callable[[str], None] | None = None,
) -> Measured:
    """Time the diagnosis's top ``top`` in-process candidates against ``config`` (the baseline), one pair each,
    after an A/A pair when ``aa``; construction order alternates from pair to pair.

    Args:
        config: The diagnosed configuration (the baseline of every pair).
        d: Its diagnosis (the recommendations, in order).
        graph: The graph both sides train on (generated once when ``None``).
        top: Candidates to measure (0: none).
        blocks: Blocks of four interleaved steps per pair (at least 2).
        aa: Time the baseline against itself first.
        log: Receives a line as each pair starts.
    """
    from gnnbench.training.pipeline import graph_of

    if isinstance(top, bool) or not isinstance(top, int) or top < 0:
        raise ValueError(f"top must be an integer >= 0 (got {top!r})")
    start = time.perf_counter()
    names, skipped = pick(d, top)
    measured = Measured(aa=None, skipped=skipped, blocks=blocks)
    if not names:
        return measured
    base = dataclasses.replace(config, sync_phases=False)  # whole steps: the end-to-end figure
    graph = graph_of(base, graph)[0]
    plan = ([AA_LABEL] if aa else []) + names
    for i, name in enumerate(plan):
        if log is not None:
            log(f"measuring {name} against the baseline in this process ({blocks} blocks of interleaved steps)")
        other = base if name == AA_LABEL else registry.config_for(base, [name])
        try:
            pair = time_pair(base, other, graph=graph, blocks=blocks, built_first=BUILD_ORDERS[i % 2], windows=2)
        except (UnavailableError, PairRefused) as exc:  # found only while building: listed, never raised
            if name == AA_LABEL:
                raise
            measured.skipped[name] = f"could not be timed here: {exc}"
            continue
        if name == AA_LABEL:
            measured.aa = _row(name, pair, 1.0)
        else:
            measured.rows.append(_row(name, pair, _aa_reading(measured.aa)))
    measured.seconds = time.perf_counter() - start
    return measured


def format_measured(m: Measured) -> list[str]:
    """The lines that open ``diagnose``'s report: each measured candidate's per-step ratio with its interval
    and verdict, the A/A reading, and what the intervals hold."""
    if not m.rows:
        return []
    lines = [
        f"measured here, each against the baseline in this process (steps interleaved, {m.blocks} blocks of 4; "
        f"{m.seconds:.0f} s):"
    ]
    width = max(len(r.name) for r in m.rows + ([m.aa] if m.aa else []))
    for r in m.rows:
        iv = r.interval
        lines.append(
            f"  {r.name:<{width}}  {ratio(iv.ratio, iv.low, iv.high)} per step "
            f"({1e3 * r.pair.base_step:.0f} -> {1e3 * r.pair.other_step:.0f} ms): {r.verdict}"
        )
        lines.append(f"  {'':<{width}}  {r.note}")
    if m.aa is not None:
        iv = m.aa.interval
        lines.append(
            f"  {AA_LABEL:<{width}}  {ratio(iv.ratio, iv.low, iv.high)}: a gain must clear "
            f"{_aa_reading(m.aa):.3f}x, the A/A's own reading"
        )
    lines.append(
        "  intervals are over blocks within this process; the spread from one process to the next is not in "
        "them (--verify measures across processes)"
    )
    for name, why in m.skipped.items():
        lines.append(f"  not measured here: {name}: {why}")
    return lines
