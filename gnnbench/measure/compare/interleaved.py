"""A row's time per step where each round timed it against its baseline in one process, steps interleaved
(:mod:`gnnbench.measure.run.interleaved`; DESIGN.md §3, "Measure where the noise cancels").

Such a round's result carries the pair (``RunResult.interleaved``): both sides' measured steps and setup clocks,
from one process. The drift of a process's speed hits both sides alike, so a round's ratio is read from the
pair alone and the rounds' spread is what remains. A row uses the pairs only when every round has one (one
design per ratio), and says so.
"""

from __future__ import annotations

import math
import statistics

from gnnbench.measure.compare.derived import DERIVED_LABEL
from gnnbench.measure.compare.paired import ratio_over_rounds
from gnnbench.measure.compare.rows import AA_DUET_LABEL, AA_INPROCESS_LABEL, AA_LABEL, PairedRatio, TimeToAccuracy
from gnnbench.measure.run import DUET, PairTiming, RunResult

__all__ = [
    "INTERLEAVED_NOTE",
    "DUET_NOTE",
    "pair_note",
    "pair_design",
    "interleaved_pairs",
    "interleaved_step",
    "interleaved_tta",
    "pair_seconds",
    "aa_spreads",
    "aa_spread_line",
]

INTERLEAVED_NOTE = "timed against the baseline in one process, steps interleaved"
DUET_NOTE = "timed against the baseline in duet (its process and the baseline's at once, one core each, at one thread)"


def interleaved_pairs(m: list[RunResult]) -> list[PairTiming] | None:
    """Each round's pair, when every round has one, all of one design; else ``None``."""
    if not m or not all(r.interleaved for r in m):
        return None
    pairs = [PairTiming.from_dict(r.interleaved) for r in m]
    return pairs if len({p.design for p in pairs}) == 1 else None


def pair_design(m: list[RunResult]) -> str | None:
    """How every round of ``m`` timed its pair (``"interleaved"`` or ``"duet"``), or ``None`` where the row is
    read across processes (:func:`interleaved_pairs` is ``None``)."""
    pairs = interleaved_pairs(m)
    return pairs[0].design if pairs else None


def pair_note(design: str | None) -> str:
    """How a row's pairs were timed, in words (:data:`INTERLEAVED_NOTE` or :data:`DUET_NOTE`)."""
    return DUET_NOTE if design == DUET else INTERLEAVED_NOTE


def interleaved_step(m: list[RunResult]) -> PairedRatio | None:
    """The per-step ratio over rounds, each round's from its pair (base mean step / this row's); ``None``
    unless every round has a pair."""
    pairs = interleaved_pairs(m)
    if pairs is None:
        return None
    return ratio_over_rounds([p.base_step for p in pairs], [p.other_step for p in pairs])


def pair_seconds(run: RunResult, steps: float) -> tuple[float, float] | None:
    """``(baseline, this row)``: each side's setup plus ``steps`` times its mean interleaved step, from the
    run's pair; ``None`` without one."""
    if not run.interleaved or steps is None or not math.isfinite(steps):
        return None
    p = PairTiming.from_dict(run.interleaved)
    return p.setup_seconds[0] + steps * p.base_step, p.setup_seconds[1] + steps * p.other_step


def interleaved_tta(m: list[RunResult], steps_to_target: float) -> TimeToAccuracy | None:
    """A same-trajectory row's derived time to accuracy (:mod:`gnnbench.measure.compare.derived`) where every round
    has a pair: per round, each side's setup plus the calibrated steps to the target times its mean interleaved
    step."""
    if interleaved_pairs(m) is None:
        return None
    both = [pair_seconds(r, steps_to_target) for r in m]
    ratio = ratio_over_rounds([b for b, _ in both], [t for _, t in both])
    if ratio is None:
        return None
    pairs = interleaved_pairs(m)
    steps = statistics.median(len(p.other_seconds) for p in pairs)
    paused = (
        "; its producers paused (loader workers suspended, a producer thread held) while the baseline stepped, whole epochs a side"
        if any("other" in p.paused for p in pairs)
        else ""
    )
    return TimeToAccuracy(
        **{**vars(ratio), "rounds": len(m)},
        bound=None,
        censored=False,
        reached=len(m),
        reached_text="derived",
        seconds=statistics.median(t for _, t in both),
        note=f"{DERIVED_LABEL}: setup + {steps_to_target:g} calibrated steps to the target x its mean step, "
        f"{pair_note(pairs[0].design)} ({steps:g} measured steps a side per round{paused})",
    )


def aa_spreads(rows) -> dict[str, dict]:
    """The sweep's A/A rows' per-step noise: ``{"one process": ..., "duet": ..., "across processes": ...}`` (where
    the sweep ran that A/A), each with its step ratio (a :class:`PairedRatio`), the sd and the mean of its per-round log ratio
    (the mean of the in-process A/A is the construction-order and position bias left after counterbalancing)."""
    out = {}
    designs = (("one process", AA_INPROCESS_LABEL), ("duet", AA_DUET_LABEL), ("across processes", AA_LABEL))
    for design, label in designs:
        r = next((r for r in rows if r.label == label and r.status == "ok"), None)
        step = r.step_speedup if r is not None else None
        xs = [x for x in (step.log_ratios if step is not None else []) if x == x]
        if step is None or not xs:
            continue
        out[design] = {
            "ratio": step,
            "sd": statistics.stdev(xs) if len(xs) > 1 else math.nan,
            "mean": statistics.fmean(xs),
            "rounds": len(xs),
        }
    return out


def aa_spread_line(rows) -> str | None:
    """The A/A spreads in one line (both designs where the sweep ran both), or ``None`` without an A/A."""
    spreads = aa_spreads(rows)
    if not spreads:
        return None
    parts = [
        f"{design} sd {s['sd']:.3f} (mean {s['mean']:+.3f}, {s['rounds']} rounds)" for design, s in spreads.items()
    ]
    return "A/A per-round spread of the step's log ratio: " + "; ".join(parts)
