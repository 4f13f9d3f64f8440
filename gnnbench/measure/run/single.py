"""Measure one configuration: drive :meth:`Trainer.steps`, evaluate, and
assemble a :class:`~gnnbench.measure.run.results.RunResult`.

A configuration that cannot run here gives ``status="unavailable"`` with the
reason for each offending flag, never a number. The first
``warmup_steps`` steps (first touch, compilation) are excluded from the
steady-state timings; each measured step is split into the phases of
:data:`gnnbench.timing.PHASES`.

``python -m gnnbench.measure.run.single CONFIG.json OUT.json`` runs one configuration in
its own process (sweeps isolate each configuration this way). A configuration
of ``nproc > 1`` ranks runs through :func:`gnnbench.measure.run.launch.launch`
(torchrun), from :func:`run` as from the command line.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from gnnbench import process
from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment, resolve_device
from gnnbench.flags import UnavailableError
from gnnbench.host_memory import peak_bytes
from gnnbench.measure.run.device_busy import BusySampler
from gnnbench.measure.run.launch import DEFAULT_TIMEOUT, DistributedRunError, launch
from gnnbench.measure.run.results import (
    SCHEMA_VERSION,
    Accuracy,
    CompileMetrics,
    GraphInfo,
    Memory,
    Point,
    RunResult,
    StepCounts,
    Summary,
    Transfer,
    load_result,
)
from gnnbench.timing import PHASES, PhaseTimer
from gnnbench.training import RunConfig, Trainer, config_unavailable

__all__ = ["run", "main"]


def _instrumentation_overhead(device: torch.device, sync: bool, phases_per_step: int) -> float:
    """Seconds the timer itself adds to one step (measured on empty phases)."""
    timer = PhaseTimer(device, sync=sync)
    reps = 200
    timer.start_step()
    t0 = time.perf_counter()
    for _ in range(reps):
        with timer.phase("forward"):
            pass
    per_phase = (time.perf_counter() - t0) / reps
    timer.end_step(record=False)
    return per_phase * phases_per_step


def run(
    config: RunConfig,
    *,
    out: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    profiler: Any = None,
    graph: Any = None,
    after: Callable[[Trainer], None] | None = None,
    dist_timeout: float = DEFAULT_TIMEOUT,
) -> RunResult:
    """Measure ``config``; returns (and, with ``out``, atomically writes) the :class:`RunResult`.

    Args:
        config: The configuration.
        out: Where to write the result JSON.
        progress: Called with ``(steps done, total steps or 0)`` after every step.
        profiler: Entered around the training loop (e.g. ``torch.profiler.profile``)
            and stepped after every training step.
        graph: An already built graph of ``config`` (a sweep builds each graph once in-process).
        after: Called with the trainer once training ended (distributed ranks read its figures).
        dist_timeout: With ``config.nproc > 1``: the process-group timeout in seconds.

    With ``config.nproc > 1`` outside a process group the run is launched on that many ranks
    (:func:`gnnbench.measure.run.launch.launch`); the file at ``out`` then also holds the
    ``distributed`` figures, and a failed run gives ``status="failed"`` with its one-line error.
    """
    device = resolve_device(config.device)
    if config.nproc > 1 and not (dist.is_available() and dist.is_initialized()):
        return _launched(config, out, dist_timeout)
    env = environment(device)
    mismatch = None if config_unavailable(config, device) else process.start_mismatch(config.flags)
    if mismatch is not None and not process.was_placed():
        return _in_child(config, out, dist_timeout)  # the allocator is set when a process starts
    if mismatch is not None:  # started for its allocator, and running another: never measured as the one asked
        error = f"the process started for it does not run its allocator: {mismatch}"
        return _written(out, RunResult(status="failed", config=config.to_dict(), environment=env, error=error))
    try:
        trainer = Trainer(config, graph)
    except UnavailableError as exc:
        unavailable = RunResult(status="unavailable", config=config.to_dict(), environment=env, unavailable=exc.reasons)
        return _written(out, unavailable)
    nvml = BusySampler(device)
    losses, threads, usage = _train(trainer, device, nvml, progress, profiler)
    accuracy = _final_accuracy(trainer)
    if after is not None:
        after(trainer)
    result = _assemble(trainer, env, nvml, accuracy, trainer.evaluation.seconds, losses)
    result.process = process.in_effect(threads, usage.summary())
    return _written(out, result)


def _written(out: str | Path | None, result: RunResult) -> RunResult:
    """``result``, atomically written to ``out`` first (with ``out``)."""
    if out:
        write_json_atomic(out, result.to_dict())
    return result


def _train(
    trainer: Trainer,
    device: torch.device,
    nvml: BusySampler,
    progress: Callable[[int, int], None] | None,
    profiler: Any,
) -> tuple[list[float], Any, process.StepUsage]:
    """Drive :meth:`Trainer.steps` to its end (evaluating), sampling the device's busy share, the process's usage
    and each step's loss, then close the trainer; returns the losses, the threads in effect (read back before
    closing undoes them) and the usage."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    losses: list[float] = []
    usage = process.StepUsage(trainer.config.warmup_steps)
    total = (trainer.config.epochs or 0) * (trainer.config.max_steps_per_epoch or 0)
    if profiler is not None:
        profiler.__enter__()
    try:
        for step in trainer.steps(evaluate=True):
            usage.tick(step.index, len(trainer.curve))
            nvml.sample()
            losses.append(step.loss)
            if profiler is not None:
                profiler.step()
            if progress:
                progress(step.index + 1, total)
    finally:
        threads = process.threads_in_effect(
            trainer.pipeline.threads,  # read back before close undoes them
            getattr(trainer.pipeline.batches, "worker_cores", None),
        )
        trainer.close()
        if profiler is not None:
            profiler.__exit__(None, None, None)
    return losses, threads, usage


def _final_accuracy(trainer: Trainer) -> dict:
    """The metrics at the end of training: the last validation point's when it was read at the last step, else
    an evaluation now (its seconds added to the evaluation's)."""
    last = trainer.curve[-1] if trainer.curve else None
    if last is not None and last.step == trainer.steps_taken:
        return last.metrics
    accuracy, seconds = trainer.evaluate()  # the loop ended without a validation point at its last step
    trainer.evaluation.seconds += seconds
    return accuracy


def _in_child(config: RunConfig, out: str | Path | None, dist_timeout: float) -> RunResult:
    """``config`` measured in a child process started with its allocator (``python -m gnnbench.measure.run.single``
    with :func:`gnnbench.process.child_environment`, under :func:`child_timeout`); its result is this run's."""
    with tempfile.TemporaryDirectory(prefix="gnnbench-process-") as tmp:
        cfg_path, path = Path(tmp) / "config.json", Path(out) if out else Path(tmp) / "result.json"
        write_json_atomic(cfg_path, config.to_dict())
        child = process.run_child(
            child_argv(cfg_path, path, dist_timeout),
            env=process.child_environment(config.flags),
            timeout=child_timeout(config),
        )
        data = load_result(path) if child.ok else None
        if data is None:
            return RunResult(status="failed", config=config.to_dict(), error=child_error(child, path, n_lines=1))
        return data


def child_timeout(config: RunConfig) -> float:
    """Seconds a process that measures ``config`` may run: from the time budget that stops it
    (:attr:`RunConfig.clock_bound`) with a margin, or an hour without one (:func:`gnnbench.process.budget_timeout`)."""
    return process.budget_timeout(config.clock_bound)


def child_error(child: process.ChildOutcome, path: Path, n_lines: int = 40) -> str:
    """The error of a failed result whose process gave no result at ``path``: that it timed out (naming the
    command), else the last ``n_lines`` lines of its stderr, else that it left no result."""
    if child.timed_out:
        return child.error_text()
    return child.tail(n_lines) or f"no result in {path}"


def _launched(config: RunConfig, out: str | Path | None, timeout: float) -> RunResult:
    """``config`` on ``config.nproc`` ranks through torchrun (refused here first when it cannot run)."""
    reasons = config_unavailable(config)
    if reasons:
        result = RunResult(
            status="unavailable",
            config=config.to_dict(),
            environment=environment(resolve_device(config.device)),
            unavailable=reasons,
        )
        return _written(out, result)
    with tempfile.TemporaryDirectory(prefix="gnnbench-launch-") as tmp:
        try:
            data = launch(config, out or Path(tmp) / "result.json", timeout=timeout)
        except DistributedRunError as exc:
            return RunResult(status="failed", config=config.to_dict(), error=str(exc))
    return RunResult.from_dict(data)


def _worker_phases(timer: PhaseTimer) -> dict[str, Summary] | None:
    """Phases loader worker processes ran for the measured steps' batches (worker clock, overlapped with the
    steps, so not in ``phases``); ``None`` when sampling ran in this process."""
    names = [p for p in PHASES if any(p in a for a in timer.apart)]
    return {p: Summary.of([a.get(p, 0.0) for a in timer.apart]) for p in names} or None


def converged_point(curve: list) -> Point | None:
    """The curve's best validation point (the first, on ties), with its test metric: the accuracy at
    convergence that comparisons pair (early stopping's choice, read off the validation split only)."""
    if not curve:
        return None
    best = max(range(len(curve)), key=lambda i: (curve[i].val, -i))
    p = curve[best]
    return Point(seconds=p.seconds, step=p.step, epoch=p.epoch, val=p.val, test=p.test)


def _assemble(
    trainer: Trainer, env: dict, nvml: BusySampler, accuracy: dict, eval_seconds: float, losses: list[float]
) -> RunResult:
    """The ``ok`` result of a finished ``trainer``: its graph, steps and their phases, clocks, curve, the shares
    of a step (:func:`_step_shares`), compilation, transfer, accuracy, memory, batch cache and warnings."""
    config, timer, pipe = trainer.config, trainer.timer, trainer.pipeline
    cache = pipe.batches.cache
    step_stats = Summary.of(timer.step_seconds)
    phase_stats = {p: Summary.of([s.get(p, 0.0) for s in timer.steps]) for p in PHASES}
    data_wait, compute, overhead = _step_shares(trainer, step_stats.median, phase_stats)
    return RunResult(
        schema_version=SCHEMA_VERSION,
        status="ok",
        environment=env,
        config=config.to_dict(),
        timing_mode=timer.mode,
        graph=_graph_info(trainer),
        steps=StepCounts(
            measured=len(timer.step_seconds),
            warmup=min(trainer.steps_taken, config.warmup_steps),
            total=trainer.steps_taken,
        ),
        step_seconds=step_stats,
        step_seconds_all=list(timer.step_seconds),
        phases=phase_stats,
        device_phase_ms=(
            {p: Summary.of([d.get(p, 0.0) for d in timer.device_ms]) for p in PHASES} if timer.device_ms else None
        ),
        epoch_seconds=list(trainer.epoch_seconds),
        epochs_run=len(trainer.epoch_seconds),
        steps_per_epoch=trainer.steps_per_epoch,
        setup_seconds=pipe.setup_clock,
        sampled=trainer.sampled.to_dict(),
        train_seconds=trainer.train_seconds,
        curve=[Point(seconds=p.seconds, step=p.step, epoch=p.epoch, val=p.val, test=p.test) for p in trainer.curve],
        eval_seconds=eval_seconds,
        stop_reason=trainer.stop_reason,
        converged=converged_point(trainer.curve),
        eval_charged_seconds=pipe.background.charged_seconds,
        worker_phases=_worker_phases(timer),
        data_wait_fraction=data_wait,
        compute_fraction=compute,
        device_busy_fraction=nvml.mean_fraction(),
        device_busy_reason=nvml.reason,
        instrumentation_overhead_fraction=overhead,
        compile=_compile_metrics(trainer, step_stats.median),
        transfer=_transfer(pipe.features),
        accuracy=Accuracy.from_dict({**accuracy, "final_loss": losses[-1] if losses else None}),
        memory=_memory(trainer),
        batch_cache=dataclasses.asdict(cache.stats) if cache is not None else None,
        warnings=_warnings(trainer),
    )


def _step_shares(trainer: Trainer, median_step: float, phase_stats: dict[str, Summary]) -> tuple[float | None, ...]:
    """The median step's shares: waiting for data and compute (with per-phase timing of measured steps), and
    the timer's own overhead (with measured steps); ``None`` where they do not apply."""
    config, timer = trainer.config, trainer.timer
    measured = bool(timer.step_seconds)
    per_phase = measured and config.sync_phases
    compute = sum(phase_stats[p].median for p in ("forward", "backward", "optimizer"))
    overhead = _instrumentation_overhead(
        trainer.device, config.sync_phases, phases_per_step=8 if config.sync_phases else 0
    )
    # waiting for data: sampling plus the negatives drawn inside it (in this process)
    data_wait = (
        Summary.of([s.get("sample", 0.0) + s.get("negatives", 0.0) for s in timer.steps]).median / median_step
        if per_phase
        else None
    )
    return (
        data_wait,
        compute / median_step if per_phase else None,
        overhead / median_step if measured else None,
    )


def _graph_info(trainer: Trainer) -> GraphInfo:
    """The graph's size, its generation and preparation seconds, its index bytes (and those widened or
    narrowed per step) and, for a loaded graph, what its metadata records."""
    pipe = trainer.pipeline
    return GraphInfo(
        num_nodes=pipe.graph.num_nodes,
        num_edges=pipe.graph.num_edges,
        generate_seconds=pipe.graph_seconds,
        prepare_seconds=pipe.prepared.prepare_seconds,
        setup_seconds=pipe.setup_seconds,
        index_bytes=pipe.prepared.index_bytes_after,
        index_bytes_int64=pipe.prepared.index_bytes_before,
        widened_index_bytes_per_step=(
            trainer.step.widened_index_bytes / trainer.steps_taken if trainer.steps_taken else 0.0
        ),
        narrowed_index_bytes_per_step=(
            trainer.step.narrowed_index_bytes / trainer.steps_taken if trainer.steps_taken else 0.0
        ),
        # a loaded graph: where it came from, its content fingerprint, how this process read it, and
        # what gnnbench substituted for anything the file lacked (features, labels, held-out edges)
        **{
            k: pipe.graph.meta[k]
            for k in (
                "source",
                "fingerprint",
                "loaded_from",
                "notes",
                "link_holdout",
                "substituted",
                "labels_substituted",
            )
            if k in pipe.graph.meta
        },
    )


def _compile_metrics(trainer: Trainer, median_step: float) -> CompileMetrics | None:
    """What ``torch.compile`` cost (first step, estimated compile seconds, graphs, recompilations, graph
    breaks); ``None`` without compilation."""
    counters = trainer.pipeline.dynamo_counters
    if counters is None:
        return None
    graphs = int(counters["stats"].get("unique_graphs", 0))
    first = trainer.first_step_seconds
    return CompileMetrics(
        first_step_seconds=first,
        estimated_compile_seconds=max(0.0, (first or 0.0) - median_step) if trainer.timer.step_seconds else None,
        unique_graphs=graphs,
        recompilations=max(0, graphs - 1),
        graph_breaks=int(sum(counters["graph_break"].values())),
    )


def _transfer(features: Any) -> Transfer:
    """The feature transfer to the device: bytes per batch and in all, device-resident bytes, rows gathered and
    from the device, the hot cache's hit rate (overall and per epoch)."""
    return Transfer(
        bytes_h2d_per_batch=features.stats.mean_bytes_per_batch,
        bytes_h2d_total=features.stats.bytes_h2d,
        device_feature_bytes=features.device_bytes(),
        rows_gathered=features.stats.rows,
        rows_from_device=features.stats.rows_device,
        hot_hit_rate=features.stats.hot_hit_rate,
        hot_hit_rate_per_epoch=features.stats.hit_rate_per_epoch,
    )


def _memory(trainer: Trainer) -> Memory:
    """The process's host peak; the device's; and the compute device's peak outside and during evaluation."""
    peaks = trainer.evaluation.peaks
    return Memory(host_peak_bytes=peak_bytes(), device_peak_bytes=peaks.device_peak(), **peaks.summary())


def _warnings(trainer: Trainer) -> list[str]:
    """What a reader of the result must know: no step measured, a run extended past its epochs, no validation
    plateau within the limits, top-k compression with Adam, a batch cache that replayed nothing."""
    config, pipe = trainer.config, trainer.pipeline
    cache = pipe.batches.cache
    warnings = []
    if not trainer.timer.step_seconds:
        warnings.append(
            f"no steps measured: {trainer.steps_taken} steps ran and the first {config.warmup_steps} "
            "are warm-up; run more epochs, fewer warm-up steps or smaller batches"
        )
    epochs_run = len(trainer.epoch_seconds)
    fixed = config.epochs if config.epochs is not None else epochs_run
    if cache is not None and epochs_run > fixed:  # Trainer.steps ran the source's min_epochs
        warnings.append(f"batch_cache K={cache.epochs}: run extended to {epochs_run} epochs so K-1 epochs replay")
    if pipe.batches.measured_steps is not None and epochs_run > fixed:
        warnings.append(
            f"full batch: one step per epoch; run extended to {epochs_run} epochs so "
            f"{pipe.batches.measured_steps} steps are measured after the warm-up"
        )
    if config.to_plateau and trainer.stop_reason == "max_epochs":
        warnings.append(
            f"no validation plateau within max_epochs={config.max_epochs}: accuracy may still be "
            "rising (raise --max-epochs)"
        )
    if config.to_plateau and trainer.stop_reason == "max_steps":
        warnings.append(
            f"no validation plateau within max_steps={config.max_steps}: accuracy may still be "
            "rising; it is compared at equal steps, not at convergence"
        )
    if config.flags.grad_compression == "topk" and config.optimizer == "adam":
        warnings.append(
            "top-k compression with Adam: error feedback sends each residual late and in sum, which "
            "matches SGD's linear update but not Adam's per-coordinate normalization, so accuracy "
            "falls behind dense training; compare with --optimizer sgd (DGC's momentum correction)"
        )
    if cache is not None and cache.stats.hits == 0 and epochs_run > 1:
        warnings.append(
            "batch_cache replayed no batch: every epoch was sampled (an epoch cut short by "
            "max_steps_per_epoch is never cached)"
        )
    return warnings


def child_argv(config_path: str | Path, out: str | Path, dist_timeout: float) -> list[str]:
    """The command that measures the configuration at ``config_path`` in a process of its own, writing its result
    to ``out`` (``python -m gnnbench.measure.run.single``)."""
    return [
        sys.executable,
        "-m",
        "gnnbench.measure.run.single",
        str(config_path),
        str(out),
        "--dist-timeout",
        str(dist_timeout),
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m gnnbench.measure.run.single CONFIG.json OUT.json [--dist-timeout S]``; exit 1 when the run failed."""
    argv = sys.argv[1:] if argv is None else argv
    timeout = DEFAULT_TIMEOUT
    if len(argv) == 4 and argv[2] == "--dist-timeout":
        timeout, argv = float(argv[3]), argv[:2]
    if len(argv) != 2:
        print("usage: python -m gnnbench.measure.run.single CONFIG.json OUT.json [--dist-timeout S]", file=sys.stderr)
        return 2
    config = RunConfig.from_dict(json.loads(Path(argv[0]).read_text()))
    result = run(config, out=argv[1], dist_timeout=timeout)
    if result.status == "failed":
        print(result.error, file=sys.stderr)
        return 1
    return 0


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    # ended by its parent's timeout (gnnbench.process.run_child): SIGTERM unwinds the run, so what it started
    # in sessions of its own (torchrun and its ranks) is ended too, within the parent's grace
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    raise SystemExit(main())
