"""The out-of-memory ladder: what to give up, in order, until a training step fits a memory budget.

The rungs (:data:`RUNGS`) follow the order of the rules of thumb (``docs/rules.md``), each applied on top
of the ones before it: halve the fanout, halve the batch, store features in fp16, switch to Cluster-GCN
subgraphs. :func:`walk` trains the configuration as given, then each rung in turn, and stops at the first
whose measured step peak (:mod:`gnnbench.measure.run.step_peak`) is within the budget; the path it took is a
:class:`LadderResult` of :class:`RungResult` rows (peak, median step time and test metric of a short run,
or why the rung was skipped). Short runs make the accuracy figures noisy: they say where to look, and
``gnnbench compare`` measures a cost properly.

What each rung changes and how a rung is run, skipped or judged: ``docs/advice.md``.
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.flags import Flags, UnavailableError, format_reasons
from gnnbench.measure.run import step_peak as memory
from gnnbench.timing import summarize
from gnnbench.training import RunConfig, Trainer, availability
from gnnbench.training.pipeline import graph_of

__all__ = ["Rung", "RUNGS", "RungResult", "LadderResult", "walk", "STATUSES", "ACCURACY_DROP_PP", "DEFAULT_PROBE_STEPS"]

STATUSES = ("fits", "over", "oom", "skipped", "unavailable")
ACCURACY_DROP_PP = 1.0  # a rung whose test metric falls this many points below the rung before shows its hint
DEFAULT_PROBE_STEPS = 3  # steps whose peak memory is measured (the run's warm-up steps, outside its timings)


@dataclass(frozen=True)
class Rung:
    """One step down the ladder.

    Args:
        name: Short name shown in the path.
        description: What it gives up, in one line.
        change: The ``Flags`` fields it sets, given the flags so far.
        skip: Why it does not apply to the flags so far, or ``None`` when it does.
        hint: The triage when it costs accuracy.
    """

    name: str
    description: str
    change: Callable[[Flags], dict[str, Any]]
    skip: Callable[[Flags], str | None]
    hint: str

    @classmethod
    def of_entry(cls, opt: Any) -> "Rung":
        """A rung that switches a registry entry on (:attr:`~gnnbench.registry.Optimization.oom_rung`): its
        change, its description, its hint; skipped when the flags so far already have it."""

        def skip(flags: Flags) -> str | None:
            return f"{opt.name} is already on: {opt.description}" if opt.apply(flags) == flags else None

        return cls(opt.name, opt.description, opt.changes_for, skip, opt.oom_hint)


def _neighbour_sampled(what: str) -> Callable[[Flags], str | None]:
    def reason(flags: Flags) -> str | None:
        if flags.batch_source != "neighbor":
            return f"batch_source={flags.batch_source!r} does not sample neighbours: {what}"
        return None

    return reason


def _skip_fanout(flags: Flags) -> str | None:
    if reason := _neighbour_sampled("its fanout only sets the depth")(flags):
        return reason
    if all(k in (1, -1) for k in flags.fanout):
        return f"fanout {list(flags.fanout)} cannot be halved (every hop is 1, or -1 = all neighbours)"
    return None


def _skip_batch(flags: Flags) -> str | None:
    if reason := _neighbour_sampled("batch_size does not size its batches")(flags):
        return reason
    return "batch_size 1 cannot be halved" if flags.batch_size == 1 else None


RUNGS: tuple[Rung, ...] = (
    Rung(
        "halve_fanout",
        "halve every hop of the fanout (at least 1)",
        lambda f: {"fanout": tuple(k if k == -1 else max(1, k // 2) for k in f.fanout)},
        _skip_fanout,
        "a smaller sampled neighbourhood: halve the deepest hops only (e.g. --fanout 15,10,2)",
    ),
    Rung(
        "halve_batch",
        "halve the seed nodes per batch",
        lambda f: {"batch_size": max(1, f.batch_size // 2)},
        _skip_batch,
        "smaller batches give noisier gradients: lower the learning rate or train more steps",
    ),
    *(Rung.of_entry(o) for o in registry.oom_rungs()),
)


@dataclass(frozen=True)
class RungResult:
    """One row of the ladder's path.

    Args:
        rung: ``"as given"`` or a :class:`Rung` name.
        change: What it changed, e.g. ``"fanout [15, 10, 5] -> [7, 5, 2]"``.
        flags: The cumulative flags it ran with.
        status: One of :data:`STATUSES`.
        peak_bytes: Measured step peak (``None`` when it did not run, or ran out of memory).
        step_seconds: Median step time of its short run.
        test_metric: Test metric (accuracy, or AUC for link prediction) of its short run.
        accuracy_delta_pp: Test metric against the configuration as given, in points (cumulative).
        note: Why it was skipped, unavailable or out of memory; that no step was timed; or, when this rung's
            test metric is more than :data:`ACCURACY_DROP_PP` below the previous rung's, its triage hint.
    """

    rung: str
    change: str
    flags: Flags
    status: str
    peak_bytes: int | None = None
    step_seconds: float | None = None
    test_metric: float | None = None
    accuracy_delta_pp: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["flags"] = self.flags.to_dict()
        return d


@dataclass(frozen=True)
class LadderResult:
    """The path :func:`walk` took.

    Args:
        budget_bytes: The budget.
        device: The device the steps ran on.
        memory_source: How the peaks were measured (:data:`gnnbench.measure.run.step_peak.MEMORY_SOURCES`).
        probe_steps: Steps each peak was measured over.
        path: Every rung tried or skipped, in order.
    """

    budget_bytes: int
    device: str
    memory_source: str
    probe_steps: int
    path: tuple[RungResult, ...]

    @property
    def final(self) -> RungResult | None:
        """The rung that fits, or ``None`` when none does."""
        return next((r for r in self.path if r.status == "fits"), None)

    @property
    def smallest(self) -> RungResult | None:
        """The rung with the smallest measured peak (``None`` when nothing was measured)."""
        measured = [r for r in self.path if r.peak_bytes is not None]
        return min(measured, key=lambda r: r.peak_bytes) if measured else None

    def to_dict(self) -> dict[str, Any]:
        final, smallest = self.final, self.smallest
        return {
            "budget_bytes": self.budget_bytes,
            "device": self.device,
            "memory_source": self.memory_source,
            "probe_steps": self.probe_steps,
            "fits": final is not None,
            "final": final.to_dict() if final else None,
            "smallest_peak_bytes": smallest.peak_bytes if smallest else None,
            "path": [r.to_dict() for r in self.path],
        }


def _describe(before: Flags, after: Flags) -> str:
    parts = []
    for name, value in after.to_dict().items():
        old = before.to_dict()[name]
        if old != value:
            parts.append(f"{name} {old} -> {value}")
    return ", ".join(parts)


def walk(
    config: RunConfig,
    budget_bytes: int,
    *,
    graph: Any = None,
    probe_steps: int = DEFAULT_PROBE_STEPS,
    rungs: tuple[Rung, ...] = RUNGS,
    progress: Callable[[RungResult], None] | None = None,
) -> LadderResult:
    """Walk the ladder from ``config`` until a step's measured peak fits ``budget_bytes``.

    Args:
        config: The configuration as given (its epochs and step cap size each rung's short run).
        budget_bytes: The memory budget, in bytes.
        graph: An already built graph of ``config`` (default: generated or loaded here, once).
        probe_steps: Steps whose peak is measured; they are the run's warm-up steps, so the tracker's
            overhead stays out of the median step time.
        rungs: The ladder (default :data:`RUNGS`).
        progress: Called with each :class:`RungResult` as soon as it is known.

    Returns:
        The :class:`LadderResult`; its ``final`` is ``None`` when no rung fits.

    Raises:
        ValueError: a budget or ``probe_steps`` that is not a positive integer.
        UnavailableError: the configuration as given cannot run here (nothing to walk down from), or its
            step memory cannot be measured here (:func:`gnnbench.measure.run.step_peak.unavailable`: compile off CUDA).
    """
    if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 1:
        raise ValueError(f"the memory budget must be a positive number of bytes (got {budget_bytes!r})")
    if isinstance(probe_steps, bool) or not isinstance(probe_steps, int) or probe_steps < 1:
        raise ValueError(f"probe_steps must be an integer >= 1 (got {probe_steps!r})")
    device = resolve_device(config.device)
    given = availability.check(config.flags, availability.run_context(config, device, graph)) + memory.unavailable(
        config.flags, availability.run_context(config, device, graph)
    )
    if given:  # the configuration as given cannot run: nothing to walk down from
        raise UnavailableError(given)
    graph = graph_of(config, graph)[0]
    path: list[RungResult] = []
    flags, given_metric, previous_metric = config.flags, None, None

    def record(result: RungResult) -> RungResult:
        path.append(result)
        if progress:
            progress(result)
        return result

    for rung in (None, *rungs):
        if rung is not None:
            reason = rung.skip(flags)
            if reason:
                record(RungResult(rung.name, "-", flags, "skipped", note=reason))
                continue
        tried = flags.replace(**rung.change(flags)) if rung is not None else flags
        name, change = (rung.name, _describe(flags, tried)) if rung is not None else ("as given", "-")
        cfg = dataclasses.replace(config, flags=tried, warmup_steps=max(config.warmup_steps, probe_steps))
        reasons = availability.check(tried, availability.run_context(cfg, device, graph))
        if reasons:  # not kept: later rungs build on the flags that ran
            record(RungResult(name, change, tried, "unavailable", note=format_reasons(reasons)))
            continue
        flags = tried
        result = _try(name, change, cfg, graph, budget_bytes, probe_steps)
        metric = result.test_metric
        if metric is not None:
            notes = [result.note] if result.note else []
            if (
                previous_metric is not None
                and rung is not None
                and (drop := 100.0 * (previous_metric - metric)) > ACCURACY_DROP_PP
            ):
                notes.append(f"this rung costs {drop:.1f} pp: {rung.hint}")
            given_metric = metric if given_metric is None else given_metric
            result = dataclasses.replace(
                result, accuracy_delta_pp=100.0 * (metric - given_metric), note="; ".join(notes)
            )
            previous_metric = metric
        record(result)
        if result.status == "fits":
            break
    source = memory.MEMORY_SOURCES.get(device.type, memory.MEMORY_SOURCES["cpu"])
    return LadderResult(budget_bytes, str(device), source, probe_steps, tuple(path))


def _try(name: str, change: str, cfg: RunConfig, graph: Any, budget: int, probe_steps: int) -> RungResult:
    """Run one rung; an out-of-memory error is a result (``"oom"``), its memory freed before the next rung."""
    oom = None
    try:
        peak, step, metric = _short_run(cfg, graph, probe_steps)
    except (torch.OutOfMemoryError, MemoryError) as exc:
        oom = f"out of memory: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if oom is not None:
        gc.collect()
        if resolve_device(cfg.device).type == "cuda":
            torch.cuda.empty_cache()
        return RungResult(name, change, cfg.flags, "oom", note=oom)
    timed = not math.isnan(step)
    note = (
        ""
        if timed
        else (
            f"no step timed after the {probe_steps} measured for memory (warm-up): "
            "give it more steps (--epochs, --max-steps)"
        )
    )
    return RungResult(
        name,
        change,
        cfg.flags,
        "fits" if peak <= budget else "over",
        peak_bytes=peak,
        step_seconds=step if timed else None,
        test_metric=metric,
        note=note,
    )


def _short_run(cfg: RunConfig, graph: Any, probe_steps: int) -> tuple[int, float, float]:
    """``(peak bytes of the first probe_steps steps, median step seconds of the rest, test metric)``; a run to a
    plateau (``epochs=None``, the CLI default) evaluates on the way and reads the test metric at its best
    validation point."""
    trainer = Trainer(cfg, graph)
    try:
        steps = trainer.steps(evaluate=cfg.to_plateau)
        try:
            with memory.step_peak(trainer.device) as peak:
                for _ in itertools.islice(steps, probe_steps):
                    pass
            for _ in steps:
                pass
        finally:
            steps.close()
        if cfg.to_plateau and trainer.curve:
            metric = max(trainer.curve, key=lambda p: p.val).test
        else:
            metric = float(trainer.evaluate()[0]["test"])
    finally:
        trainer.close()
    return peak.peak_bytes, summarize(trainer.timer.step_seconds)["median"], float(metric)
