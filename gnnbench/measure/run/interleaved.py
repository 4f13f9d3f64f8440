"""Two configurations timed in one process, their steps interleaved (DESIGN.md §3, "Measure where the noise
cancels").

On a shared machine a process's speed drifts from one process to the next more than most effects we judge.
Two trainers built in **one** process on one graph, stepping in turn, see the same drift, so it cancels in the
ratio of their step times. Reading the measurement::

    build A and B on one graph                (order given: counterbalanced across rounds by the caller)
    warm-up: A, B, A, B, ...                  (each side's burn-in: first touch, compilation; not timed)
    measured, in blocks of four steps:        A B B A | B A A B | A B B A | ...
    each block's ratio: (A + A) / (B + B)     (a drift linear over a block cancels exactly)

A block ratio compares the same number of steps of each side, in mirrored positions, so neither side is
favoured by its place in the order; the blocks alternate which side opens, so neither is favoured by
opening. Both trainers train on the same seed, so with the same batch source the k-th steps of both sides
sample the same batch: the pair is matched step by step.

A side with loader worker processes or the pipelined loader's thread
(:func:`gnnbench.process.sharing.paused_producers`) has them suspended (the thread held, its item in progress
finished on its own clock) while the other side steps and continued for its own steps, so they never work on
the other side's time and its pipeline is where its own last step left it. Its producers cost something once
per epoch (workers forked or handed the epoch's first indices, the thread started, in the epoch's first step),
so such a pair measures **whole epochs** of each side (:func:`whole_epoch_blocks`): any window of k epochs'
steps holds exactly k epoch starts, wherever it begins.

:func:`interleave` is the order and the clock, over two callables (tested on a fake clock);
:func:`time_pair` builds the two trainers and times them; :class:`PairTiming` is the record (JSON-ready),
whose :meth:`~PairTiming.interval` gives the speedup of B over A with a Student-t interval over blocks: the
spread *within* this process. The spread from one process to the next is not in it; a sweep's rounds (one
process each) give that.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from gnnbench.measure.stats import RatioInterval, paired_ratio
from gnnbench.process.sharing import own_process_reasons, paused_producers

__all__ = [
    "PairTiming",
    "interleave",
    "block_orders",
    "time_pair",
    "whole_epoch_blocks",
    "epoch_window",
    "estimated_steps_per_epoch",
    "trainer_steps_per_epoch",
    "PairRefused",
    "BUILD_ORDERS",
    "INTERLEAVED",
    "DUET",
    "PAIR_DESIGNS",
    "MIN_BLOCKS",
    "MAX_WINDOW_STEPS",
]

BUILD_ORDERS = ("base", "other")  # which trainer a pair builds first
INTERLEAVED, DUET = "interleaved", "duet"
PAIR_DESIGNS = (INTERLEAVED, DUET)  # steps interleaved in one process; or two processes at once, one core each
MIN_BLOCKS = 2  # an interval needs two blocks at least
MAX_WINDOW_STEPS = 256  # measured steps a side at most when whole epochs are measured


class PairRefused(ValueError):
    """Two configurations that cannot be timed in one process (the message says which and why)."""


def block_orders(blocks: int, first: str = "A") -> list[str]:
    """The measured order, block by block: ``"ABBA"``, ``"BAAB"``, ... starting with ``first``'s block.

    Args:
        blocks: Blocks of four measured steps (two per side), >= 1.
        first: ``"A"`` or ``"B"``: which side opens the first block (the caller alternates it across rounds).
    """
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise ValueError(f"blocks must be an integer >= 1 (got {blocks!r})")
    if first not in ("A", "B"):
        raise ValueError(f"first must be 'A' or 'B' (got {first!r})")
    opening = ("ABBA", "BAAB") if first == "A" else ("BAAB", "ABBA")
    return [opening[k % 2] for k in range(blocks)]


def whole_epoch_blocks(blocks: int, per_epoch: tuple[int | None, int | None], windows: int = 1) -> tuple[int, int]:
    """The blocks a pair measures so that each side's measured steps are whole epochs of both sides: at least
    ``blocks``, at least ``windows`` windows of whole epochs, and ``2 x blocks`` a multiple of each side's steps
    per epoch (and of 2). Returns ``(blocks, steps_per_side)``.

    Args:
        blocks: The blocks asked for (>= 1).
        per_epoch: Each side's steps per epoch (``None``: not known before the epoch runs).
        windows: Windows of whole epochs at least (an interval within the process needs two).

    Raises:
        PairRefused: when a side's steps per epoch are not known, or whole epochs of both sides take more than
            :data:`MAX_WINDOW_STEPS` measured steps a side.
    """
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise ValueError(f"blocks must be an integer >= 1 (got {blocks!r})")
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < 1:
        raise ValueError(f"windows must be an integer >= 1 (got {windows!r})")
    unit = epoch_window(per_epoch)
    steps = max(-(-2 * blocks // unit), windows) * unit
    if steps > MAX_WINDOW_STEPS:
        raise PairRefused(
            f"whole epochs of both sides ({per_epoch[0]} and {per_epoch[1]} steps an epoch) take {steps} measured "
            f"steps a side, more than {MAX_WINDOW_STEPS}"
        )
    return steps // 2, steps


def epoch_window(per_epoch: tuple[int | None, int | None]) -> int:
    """The fewest measured steps a side that are whole epochs of both sides and whole blocks (a multiple of 2).

    Raises:
        PairRefused: when a side's steps per epoch are not known before its epoch runs.
    """
    unit = 2
    for side, n in zip(BUILD_ORDERS, per_epoch):
        if n is None or isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise PairRefused(
                f"the {side} side's steps per epoch are not known before its epoch runs (got {n!r}); a pair with "
                "paused loader workers measures whole epochs"
            )
        unit = math.lcm(unit, n)
    return unit


def interleave(
    step_a: Callable[[], Any],
    step_b: Callable[[], Any],
    *,
    warmup: int,
    blocks: int,
    first: str = "A",
    clock: Callable[[], float] = time.perf_counter,
    after_step: Callable[[], Any] | None = None,
) -> tuple[list[float], list[float], str]:
    """Call ``step_a`` and ``step_b`` in turn: ``warmup`` untimed steps each (alternating), then ``blocks``
    blocks of :func:`block_orders`. Returns ``(a_seconds, b_seconds, sequence)``: each side's measured step
    times in the order taken, and the measured order as a string (``"ABBABAAB..."``).

    ``after_step`` runs inside each timed step, after the step (a device synchronization on CUDA, so one side's
    queued kernels are never charged to the other)."""
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0 (got {warmup!r})")
    steps = {"A": step_a, "B": step_b}
    for _ in range(warmup):
        for side in "AB" if first == "A" else "BA":
            steps[side]()
            if after_step is not None:
                after_step()
    times: dict[str, list[float]] = {"A": [], "B": []}
    sequence = "".join(block_orders(blocks, first))
    for side in sequence:
        t0 = clock()
        steps[side]()
        if after_step is not None:
            after_step()
        times[side].append(clock() - t0)
    return times["A"], times["B"], sequence


@dataclass(frozen=True)
class PairTiming:
    """Two trainers timed in one process, steps interleaved: A is the base, B the other configuration.

    Attributes:
        base_seconds: The base's measured step times, in the order taken.
        other_seconds: The other configuration's, likewise.
        sequence: The measured order (``"ABBABAAB..."``), blocks of four.
        built_first: ``"base"`` or ``"other"``: which trainer was built first.
        setup_seconds: Each trainer's setup clock (``[base, other]``): preparation plus assembly.
        warmup_steps: Untimed steps per side before the measured ones.
        paused: The sides (``"base"``, ``"other"``) whose producers (loader workers, the pipelined loader's
            thread) were paused while the other stepped.
        epoch_steps: With paused sides, the steps of one epoch the measured window is a multiple of, per side
            (``[base, other]``); ``(0, 0)``: the window is not aligned to epochs.
        design: ``"interleaved"`` (one process, the steps in ``sequence``) or ``"duet"``: each side in a process
            of its own, both at once, each pinned to its own core at one thread, a barrier before either builds
            its trainer (:mod:`gnnbench.measure.sweep.duet`); a duet has no ``sequence`` (its sides step at the
            same time) and its units are the sides' steps taken four by four in the order each side took them.
        cores: A duet's cores, ``[base, other]`` per part in the order run: ``[0, 1, 1, 0]`` is a duet of two
            parts with the cores swapped between them (each side's steps are its parts' steps, in that order);
            ``()`` in one process.
    """

    base_seconds: tuple[float, ...]
    other_seconds: tuple[float, ...]
    sequence: str
    built_first: str = "base"
    setup_seconds: tuple[float, float] = (0.0, 0.0)
    warmup_steps: int = 0
    paused: tuple[str, ...] = ()
    epoch_steps: tuple[int, int] = (0, 0)
    design: str = INTERLEAVED
    cores: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.built_first not in BUILD_ORDERS:
            raise ValueError(f"built_first must be one of {BUILD_ORDERS} (got {self.built_first!r})")
        if set(self.paused) - set(BUILD_ORDERS):
            raise ValueError(f"paused must name sides of {BUILD_ORDERS} (got {self.paused!r})")
        if self.design not in PAIR_DESIGNS:
            raise ValueError(f"design must be one of {PAIR_DESIGNS} (got {self.design!r})")
        if self.design == DUET:
            if self.sequence or self.paused or self.epoch_steps != (0, 0):
                raise ValueError("a duet's sides step at once: it has no sequence, paused side or epoch window")
            if not self.base_seconds or not self.other_seconds:
                raise ValueError("a duet needs measured steps on both sides")
            if not self.cores or len(self.cores) % 2:
                raise ValueError(f"a duet names each side's core per part, [base, other, ...] (got {list(self.cores)})")
            return
        if len(self.sequence) % 4 or set(self.sequence) - {"A", "B"}:
            raise ValueError(f"sequence must be blocks of four steps of 'A' and 'B' (got {self.sequence!r})")
        if self.sequence.count("A") != len(self.base_seconds) or self.sequence.count("B") != len(self.other_seconds):
            raise ValueError(
                f"sequence {self.sequence!r} does not match {len(self.base_seconds)} base and "
                f"{len(self.other_seconds)} other step times"
            )

    @property
    def base_step(self) -> float:
        """The base's mean measured step (seconds)."""
        return statistics.fmean(self.base_seconds)

    @property
    def other_step(self) -> float:
        """The other configuration's mean measured step (seconds)."""
        return statistics.fmean(self.other_seconds)

    @property
    def speedup(self) -> float:
        """Mean base step over mean other step: > 1 when the other configuration steps faster."""
        return self.base_step / self.other_step

    @property
    def unit_blocks(self) -> int:
        """Blocks of four steps in one unit of the interval: 1, or with paused sides the blocks of one window of
        whole epochs (a once-an-epoch cost lands in one block of a window: a block's ratio alone would be
        skewed by it, a window's is not)."""
        if self.epoch_steps == (0, 0):
            return 1
        return epoch_window(self.epoch_steps) // 2

    def block_sums(self) -> tuple[list[float], list[float]]:
        """Per unit (:attr:`unit_blocks`: a block of four steps, or a window of whole epochs): the base's step
        times summed, and the other side's."""
        if self.design == DUET:  # each side's steps four by four, in the order it took them
            n = min(len(self.base_seconds), len(self.other_seconds)) // 4 * 4
            return (
                [sum(self.base_seconds[k : k + 4]) for k in range(0, n, 4)],
                [sum(self.other_seconds[k : k + 4]) for k in range(0, n, 4)],
            )
        base, other, a, b = [], [], iter(self.base_seconds), iter(self.other_seconds)
        width = 4 * self.unit_blocks
        for k in range(0, len(self.sequence) - width + 1, width):
            unit = self.sequence[k : k + width]
            base.append(sum(next(a) for side in unit if side == "A"))
            other.append(sum(next(b) for side in unit if side == "B"))
        return base, other

    def block_log_ratios(self) -> list[float]:
        """Per unit (:meth:`block_sums`): log(base's steps / other's steps)."""
        return [math.log(x / y) for x, y in zip(*self.block_sums())]

    def interval(self, level: float = 0.95) -> RatioInterval:
        """The speedup of the other configuration (base / other) with a paired-t interval over blocks, or over
        windows of whole epochs when a side's loader workers were paused
        (:func:`~gnnbench.measure.stats.intervals.paired_ratio`): the spread *within* this process. One window
        gives no interval."""
        return paired_ratio(*self.block_sums(), level=level)

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_seconds": list(self.base_seconds),
            "other_seconds": list(self.other_seconds),
            "sequence": self.sequence,
            "built_first": self.built_first,
            "setup_seconds": list(self.setup_seconds),
            "warmup_steps": self.warmup_steps,
            "paused": list(self.paused),
            "epoch_steps": list(self.epoch_steps),
            "design": self.design,
            "cores": list(self.cores),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PairTiming":
        return cls(
            base_seconds=tuple(d["base_seconds"]),
            other_seconds=tuple(d["other_seconds"]),
            sequence=d["sequence"],
            built_first=d.get("built_first", "base"),
            setup_seconds=tuple(d.get("setup_seconds", (0.0, 0.0))),
            warmup_steps=d.get("warmup_steps", 0),
            paused=tuple(d.get("paused", ())),
            epoch_steps=tuple(d.get("epoch_steps", (0, 0))),
            design=d.get("design", INTERLEAVED),
            cores=tuple(d.get("cores", ())),
        )


def pair_refusal(base: Any, other: Any) -> str | None:
    """Why two RunConfigs cannot be timed in one process, or ``None``: both must share a process
    (:func:`gnnbench.process.sharing.own_process_reasons`), train on one graph, one device and one task, on
    a single rank."""
    for side, cfg in (("the base", base), ("the other configuration", other)):
        reasons = own_process_reasons(cfg.flags)
        if reasons:
            return f"{side} cannot share a process: {'; '.join(reasons)}"
        if cfg.nproc != 1:
            return f"{side} runs on {cfg.nproc} ranks (nproc={cfg.nproc}); a pair is timed in one process"
    if base.graph_key() != other.graph_key():
        return "the two configurations train on different graphs"
    for name in ("device", "task"):
        if getattr(base, name) != getattr(other, name):
            return f"the two configurations differ in {name} ({getattr(base, name)!r} vs {getattr(other, name)!r})"
    if paused_producers(base.flags) or paused_producers(other.flags):
        known = (estimated_steps_per_epoch(base), estimated_steps_per_epoch(other))
        if None not in known:  # else the pair learns them from its trainers
            try:
                whole_epoch_blocks(1, known)
            except PairRefused as exc:
                return str(exc)
    return None


def estimated_steps_per_epoch(cfg: Any) -> int | None:
    """The steps per epoch of a node-classification run on neighbour-sampled batches of a generated graph,
    known from its configuration alone (the training split's size over the batch size, capped by
    ``max_steps_per_epoch``); ``None`` for any other run (its trainer tells)."""
    spec, flags = getattr(cfg, "spec", None), cfg.flags
    if spec is None or cfg.task != "node" or flags.batch_source != "neighbor":
        return None
    n_train = max(1, int(round(spec.train_frac * spec.num_nodes)))  # gnnbench.graphs.checks.random_split_masks
    n = -(-n_train // flags.batch_size)
    cap = cfg.max_steps_per_epoch
    return n if cap is None else min(n, cap)


def time_pair(
    base: Any,
    other: Any,
    *,
    graph: Any = None,
    blocks: int = 8,
    warmup: int | None = None,
    built_first: str = "base",
    windows: int = 1,
) -> PairTiming:
    """Time ``other`` against ``base`` (two RunConfigs) in this process, steps interleaved.

    Args:
        base: The base configuration (side A).
        other: The configuration measured against it (side B); same graph, device and task.
        graph: The graph both train on (generated or loaded once when ``None``).
        blocks: Blocks of four measured steps (two per side each), at least :data:`MIN_BLOCKS`; raised to whole
            epochs of both sides when a side's loader workers are paused (:func:`whole_epoch_blocks`).
        warmup: Untimed steps per side first (default: the larger ``warmup_steps`` of the two configurations).
        built_first: ``"base"`` or ``"other"``: which trainer is built first (a sweep alternates it across
            rounds, so the construction order is counterbalanced like the step order).
        windows: With paused sides, windows of whole epochs at least: 1 gives the ratio of the mean steps (a
            sweep's round); an interval within the process (:meth:`PairTiming.interval`) needs 2.

    Raises:
        PairRefused: when the pair cannot share a process (:func:`pair_refusal` says why).
        UnavailableError: when either configuration cannot run here.
    """
    import torch

    from gnnbench.env import resolve_device
    from gnnbench.training import Trainer
    from gnnbench.training.pipeline import graph_of

    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < MIN_BLOCKS:
        raise ValueError(f"blocks must be an integer >= {MIN_BLOCKS} (got {blocks!r})")
    if built_first not in BUILD_ORDERS:
        raise ValueError(f"built_first must be one of {BUILD_ORDERS} (got {built_first!r})")
    refusal = pair_refusal(base, other)
    if refusal:
        raise PairRefused(refusal)
    # a pair times a number of steps, not a run: a time budget would end one side's loop mid-pair
    base, other = (dataclasses.replace(c, max_seconds=None, stop_at=None) for c in (base, other))
    warmup = max(base.warmup_steps, other.warmup_steps) if warmup is None else warmup
    graph = graph_of(base, graph)[0]
    device = resolve_device(base.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
    configs = {"base": base, "other": other}
    trainers: dict[str, Any] = {}
    loops: dict[str, Any] = {}
    paused = tuple(side for side in BUILD_ORDERS if paused_producers(configs[side].flags))
    try:
        for side in (built_first, BUILD_ORDERS[1 - BUILD_ORDERS.index(built_first)]):
            trainers[side] = Trainer(configs[side], graph)
            loops[side] = trainers[side].steps(epochs=float("inf"))
        epoch_steps = (0, 0)
        if paused:
            epoch_steps = tuple(trainer_steps_per_epoch(trainers[side]) for side in BUILD_ORDERS)
            blocks, _ = whole_epoch_blocks(blocks, epoch_steps, windows)
        a, b, sequence = interleave(
            _stepper(trainers["base"], loops["base"], "base" in paused),
            _stepper(trainers["other"], loops["other"], "other" in paused),
            warmup=warmup,
            blocks=blocks,
            first="A" if built_first == "other" else "B",  # the side built second opens: both orders get a turn
            after_step=sync,
        )
        setup = (trainers["base"].pipeline.setup_clock, trainers["other"].pipeline.setup_clock)
    finally:
        for side in paused:  # suspended workers cannot be shut down: continue them first
            if side in trainers:
                trainers[side].pipeline.background.resume()
        for loop in loops.values():
            loop.close()
        for trainer in trainers.values():
            trainer.close()
    return PairTiming(tuple(a), tuple(b), sequence, built_first, setup, warmup, paused, epoch_steps)


def trainer_steps_per_epoch(trainer: Any) -> int | None:
    """A trainer's steps in one epoch, known before it runs (its batch source's, capped by
    ``max_steps_per_epoch``), or ``None``."""
    n = trainer.pipeline.batches.steps_per_epoch()
    cap = trainer.config.max_steps_per_epoch
    return n if n is None or cap is None else min(n, cap)


DRAIN_TIMEOUT_S = 120.0  # a held producer thread finishes the item it is on within this, or the pair fails


def _stepper(trainer: Any, loop: Any, paused: bool) -> Callable[[], Any]:
    """One step of ``trainer``'s loop; with ``paused``, its producers are continued for the step, and after it
    its loader workers are suspended and its producer thread held, the item it had in progress finished first
    (:meth:`~gnnbench.background.BackgroundWork.drain`), all on this side's clock."""
    if not paused:
        return lambda: next(loop)
    work = trainer.pipeline.background

    def step() -> Any:
        work.resume()
        try:
            return next(loop)
        finally:
            work.pause()
            if not work.drain(DRAIN_TIMEOUT_S):
                raise RuntimeError(
                    f"a held producer thread did not finish its item within {DRAIN_TIMEOUT_S:.0f} s; the pair "
                    "cannot keep its work off the other side's time"
                )

    return step
