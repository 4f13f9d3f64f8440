"""The training loop: :meth:`Trainer.steps` is the only training loop in gnnbench.

``gnnbench run`` (through :func:`gnnbench.measure.run.single.run`), the asv suites and the pytest-benchmark suite all
time the same ``steps()``. The trainer builds its pipeline once (:func:`~gnnbench.training.pipeline.assemble`),
then steps; it never reads a flag value. Reading the loop::

    for each epoch:                       (epochs=None: until a validation plateau or the budget)
        batches = batch source's epoch    (features gathered per batch, or prefetched)
        for each batch (up to max_steps_per_epoch):
            sample -> gather -> transfer -> forward -> backward -> optimizer
            (link prediction: the negatives drawn inside sample are moved to "negatives")
            the first ``warmup_steps`` steps of the run are burn-in (not recorded);
            every later step is recorded by the phase timer
            off the clock: a validation point when the evaluation cadence says so, the stopping decision
            yield a Step

When to evaluate and when to stop are two objects of :mod:`gnnbench.training.stopping`
(:class:`~gnnbench.training.stopping.EvaluationCadence`, :class:`~gnnbench.training.stopping.Stopping`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from gnnbench.sampling.batch import Batch, SampledStats
from gnnbench.timing import PhaseTimer, StopClock
from gnnbench.training.config import RunConfig
from gnnbench.training.evaluation import EvalPoint, Evaluator
from gnnbench.training.optim import schedule_lr
from gnnbench.training.pipeline import Pipeline, assemble
from gnnbench.training.steps import TrainStep, step_for
from gnnbench.training.stopping import EvaluationCadence, Stopping

__all__ = ["Trainer", "Step"]


@dataclass(frozen=True)
class Step:
    """One training step as :meth:`Trainer.steps` yields it."""

    index: int  # steps taken in this run before this one
    epoch: int  # epoch it belongs to
    loss: float  # training loss
    measured: bool  # False during burn-in (the first warmup_steps steps)
    seconds: float  # wall time of the step, sample to optimizer


class Trainer:
    """One configuration's pipeline, built once, and the training loop over it.

    Args:
        config: What to train.
        graph: ``config``'s graph when the caller already has it (else generated or loaded here).

    Attributes:
        pipeline: Everything built before the first step (:class:`~gnnbench.training.pipeline.Pipeline`).
        step: The step body (:class:`~gnnbench.training.steps.TrainStep`).
        evaluation: Evaluation off the clock, with the validation curve (:class:`~gnnbench.training.evaluation.Evaluator`).
        timer: The phase timer of measured steps.
        steps_taken: Steps run so far.
        clock: The training clock (:class:`~gnnbench.timing.StopClock`): on inside ``steps()``, off around
            evaluation and the consumer.
        train_seconds: The training clock's seconds.
        epoch_seconds: Each epoch on the training clock (worker start and first batch included).
        first_step_seconds: Wall time of the first step (compilation included), or ``None``.
        stopping: The stopping decision of the last ``steps()`` (:class:`~gnnbench.training.stopping.Stopping`),
            or ``None`` before the first.

    Raises:
        UnavailableError: when a flag cannot run on this device or setup (each layer names its field and why).
    """

    def __init__(self, config: RunConfig, graph: Any = None) -> None:
        self.config = config
        self.pipeline: Pipeline = assemble(config, graph)
        self.device = self.pipeline.device
        self.step: TrainStep = step_for(self.pipeline)
        self.evaluation = Evaluator(self.pipeline, config.eval_chunk_bytes)
        self.timer = PhaseTimer(self.device, sync=config.sync_phases)
        self.steps_taken = 0
        self.clock = StopClock()  # the training clock (train_seconds)
        self.epoch_seconds: list[float] = []
        self.first_step_seconds: float | None = None
        self.stopping: Stopping | None = None
        self.steps_per_epoch: int | None = None  # steps of the first epoch, once it ran
        self.sampled = SampledStats(self.pipeline.graph.num_nodes)  # the neighbour explosion, per batch

    @property
    def train_seconds(self) -> float:
        """The training clock (:attr:`clock`) up to its last stop."""
        return self.clock.seconds

    @property
    def curve(self) -> list[EvalPoint]:
        """The validation points recorded by ``steps(evaluate=True)``."""
        return self.evaluation.curve

    @property
    def stop_reason(self) -> str | None:
        """Why the last ``steps()`` ended (:data:`~gnnbench.training.stopping.STOP_REASONS`): ``"epochs"``
        (fixed length), ``"plateau"``, the budgets ``"max_epochs"``, ``"max_steps"`` or ``"max_seconds"``, or a
        time-to-accuracy run's ``"target"`` or ``"censored"``; ``None`` before the first."""
        return self.stopping.reason if self.stopping is not None else None

    # ------------------------------------------------------------------ the loop
    def steps(
        self, epochs: int | float | None = None, max_steps_per_epoch: int | None = None, *, evaluate: bool = False
    ) -> Iterator[Step]:
        """The training loop: yields each :class:`Step` after its optimizer update.

        Args:
            epochs: Epochs to run (default ``config.epochs``, raised to what the batch source needs to show
                its regime, :meth:`~gnnbench.sampling.batch.BatchSource.min_epochs`: the batch cache's
                ``K + 1``, so K - 1 epochs replay; full batch's warm-up + 10, one step per epoch). With
                ``config.epochs=None`` the run goes on to a validation plateau within ``config.max_epochs``
                (:mod:`gnnbench.training.stopping`; needs ``evaluate``). Pass ``float("inf")`` to cycle epochs
                forever, as the asv and pytest-benchmark suites do (they pull one step at a time).
            max_steps_per_epoch: Cap per epoch (default ``config.max_steps_per_epoch``).
            evaluate: Record validation points (:attr:`curve`) every ``config.eval_every`` steps and at the
                end, or at every epoch end (a run to a plateau: ``EVALS_PER_EPOCH`` per epoch); evaluation is
                kept off the training clock (:class:`~gnnbench.training.stopping.EvaluationCadence`).

        When the loop stops is :attr:`stopping`'s decision (:class:`~gnnbench.training.stopping.Stopping`):
        ``config.max_seconds`` stops any run at the first step past it on the run clock (setup + training);
        ``config.max_steps`` stops a run to a plateau at that many steps; ``config.stop_at`` stops a
        time-to-accuracy run at its target or past ``config.censor_seconds`` (which stops nothing else: the
        comparison censors time to accuracy there).
        :attr:`stop_reason` says why the loop ended. Closing the generator (or leaving a ``for`` loop over it)
        releases the current epoch's loader iterator and its workers. Time spent by the consumer between steps
        is not on the training clock.
        """
        cfg, pipe = self.config, self.pipeline
        cap = cfg.max_steps_per_epoch if max_steps_per_epoch is None else max_steps_per_epoch
        stopping = self.stopping = Stopping(
            cfg,
            epochs,
            evaluate=evaluate,
            floor=pipe.batches.min_epochs(cfg.warmup_steps),
            granularity=pipe.task.val_granularity,
            per_epoch=pipe.batches.steps_per_epoch(),
            cap=cap,
            clock=self._run_clock,
        )
        cadence = EvaluationCadence(stopping, cfg.eval_every, evaluate=evaluate)
        clock = self.clock
        clock.start()
        for epoch in stopping.each_epoch():
            epoch_start = clock.seconds  # the running stretch lands in this epoch: epochs tile the clock
            pipe.model.train()
            schedule_lr(pipe.optimizer, cfg, epoch, stopping.schedule_epochs)
            batches = pipe.features.feed(pipe.batches.epoch(epoch))
            taken = 0
            try:
                while (cap is None or taken < cap) and (step := self._train_step(batches, epoch)) is not None:
                    taken += 1
                    with clock.off():  # evaluation and the consumer are not training
                        ending = stopping.after_step(self.steps_taken)  # a budget spent: the run ends on a point
                        if cadence.after_step(self.steps_taken, ending):
                            self._evaluate(epoch, stopping)
                        stop = stopping.should_stop()
                        yield step
                    if stop:
                        break
            finally:
                batches.close()  # an epoch cut short must release its loader iterator (and its workers)
            clock.stop()
            self.epoch_seconds.append(clock.seconds - epoch_start)
            if epoch == 0 and taken:
                self.steps_per_epoch = taken  # the first epoch's length (a sweep sizes short runs by it)
            stopping.end_epoch(epoch, taken)
            if cadence.at_epoch_end(epoch, taken, self.steps_taken):
                self._evaluate(epoch, stopping)
            clock.start()

    def _train_step(self, batches: Iterator, epoch: int) -> Step | None:
        """One step on the phase timer: the epoch's next batch through the step body (``None``: no batch left).
        The first ``warmup_steps`` steps of the run are burn-in (not recorded)."""
        timer, comm, warmup = self.timer, self.pipeline.comm, self.config.warmup_steps
        timer.start_step()
        t_step = time.perf_counter()
        with timer.phase("sample"):
            item = next(batches, None)
        if item is None:
            timer.end_step(record=False)
            return None
        self._account_negatives(item[0])
        self.sampled.add(item[0])
        loss = self.step(*item, timer)
        measured = self.steps_taken >= warmup  # burn-in: first touch, compilation
        timer.end_step(record=measured)
        comm.end_step(measured)  # all-reduce seconds and bytes of this step (data parallel)
        seconds = time.perf_counter() - t_step
        if self.first_step_seconds is None:
            self.first_step_seconds = seconds
        step = Step(self.steps_taken, epoch, float(loss), measured, seconds)
        self.steps_taken += 1
        return step

    def _run_clock(self) -> float:
        """The run clock now: setup plus the training clock (where time to accuracy and the budgets read)."""
        return self.pipeline.setup_clock + self.train_seconds

    def _evaluate(self, epoch: int, stopping: Stopping) -> None:
        """Record a validation point now and hand it to the stopping decision.

        Background producers are paused while evaluation runs (:class:`~gnnbench.background.BackgroundWork`):
        the work they still did meanwhile is charged back to the training clock, so an overlap entry gains
        nothing from evaluation pauses."""
        work = self.pipeline.background
        try:
            work.pause()
            point = self.evaluation.record(self._run_clock(), self.steps_taken, epoch)
        finally:
            self.clock.charge(work.resume())
        stopping.after_evaluation(point.val, point.step)

    def _account_negatives(self, batch: Batch) -> None:
        """Link prediction's negatives are drawn inside the sampler, so inside ``sample``: in this process
        they move to the ``negatives`` phase (the step's total unchanged); drawn by a loader worker they ran
        overlapped with training and are recorded apart, on the worker's clock."""
        if not batch.negatives_seconds:
            return
        if batch.sampled_in_worker:
            self.timer.record_apart("negatives", batch.negatives_seconds)
        else:
            self.timer.move(batch.negatives_seconds, src="sample", dst="negatives")

    # ------------------------------------------------------------ evaluation
    def evaluate(self) -> tuple[dict, float]:
        """Full-neighbourhood evaluation of the model now (no sampling noise): ``(metrics, seconds)``; see
        :meth:`~gnnbench.training.evaluation.Evaluator.evaluate`."""
        return self.evaluation.evaluate()

    def close(self) -> None:
        self.pipeline.close()
