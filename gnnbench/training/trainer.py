"""The training loop: :meth:`Trainer.steps` is the only training loop in gnnbench.

``gnnbench run`` (through :func:`gnnbench.measure.run.run`), the asv suites and the pytest-benchmark suite all
time the same ``steps()``. The trainer builds its pipeline once (:func:`~gnnbench.training.pipeline.assemble`),
then steps; it never reads a flag value. Reading the loop::

    for each epoch:                       (epochs=None: until a validation plateau or the budget)
        batches = batch source's epoch    (features gathered per batch, or prefetched)
        for each batch (up to max_steps_per_epoch):
            sample -> gather -> transfer -> forward -> backward -> optimizer
            (link prediction: the negatives drawn inside sample are moved to "negatives")
            the first ``warmup_steps`` steps of the run are burn-in (not recorded);
            every later step is recorded by the phase timer
            yield a Step
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from gnnbench.sampling.batch import Batch, SampledStats
from gnnbench.timing import PhaseTimer
from gnnbench.training.config import RunConfig
from gnnbench.training.evaluation import EvalPoint, Evaluator
from gnnbench.training.optim import schedule_lr
from gnnbench.training.pipeline import Pipeline, assemble
from gnnbench.training.steps import TrainStep, step_for
from gnnbench.training.stopping import Plateau, any_rank, eval_interval

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
        train_seconds: The training clock: inside ``steps()``, evaluation and the consumer excluded.
        epoch_seconds: Each epoch on the training clock (worker start and first batch included).
        first_step_seconds: Wall time of the first step (compilation included), or ``None``.
        stop_reason: Why the last ``steps()`` ended: ``"epochs"`` (fixed length), ``"plateau"``,
            ``"max_epochs"``, ``"max_steps"`` or ``"max_seconds"`` (the budgets).

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
        self.train_seconds = 0.0
        self.epoch_seconds: list[float] = []
        self.first_step_seconds: float | None = None
        self.stop_reason: str | None = None  # why steps() ended (gnnbench.training.stopping.STOP_REASONS)
        self.steps_per_epoch: int | None = None  # steps of the first epoch, once it ran
        self.sampled = SampledStats(self.pipeline.graph.num_nodes)  # the neighbour explosion, per batch
        self._last_eval_step = -1

    @property
    def curve(self) -> list[EvalPoint]:
        """The validation points recorded by ``steps(evaluate=True)``."""
        return self.evaluation.curve

    # ------------------------------------------------------------------ the loop
    def steps(self, epochs: int | float | None = None, max_steps_per_epoch: int | None = None, *,
              evaluate: bool = False) -> Iterator[Step]:
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
                kept off the training clock.

        ``config.max_seconds`` stops any run at the first step past it on the run clock (setup + training);
        ``config.max_steps`` stops a run to a plateau at that many steps (``config.censor_seconds`` stops
        nothing: the comparison censors time to accuracy there).
        :attr:`stop_reason` says why the loop ended. Closing the generator (or leaving a ``for`` loop over it)
        releases the current epoch's loader iterator and its workers. Time spent by the consumer between steps
        is not on the training clock.
        """
        cfg, pipe = self.config, self.pipeline
        plateau = None
        if epochs is None:
            floor = pipe.batches.min_epochs(cfg.warmup_steps)
            if cfg.to_plateau:
                if not evaluate:
                    raise ValueError("a run to a validation plateau (RunConfig.epochs=None) needs evaluate=True: "
                                     "the plateau is read from the validation curve")
                epochs = max(cfg.max_epochs, floor)
                plateau = Plateau(cfg.patience, cfg.min_delta, granularity=pipe.task.val_granularity,
                                  min_steps=cfg.min_steps)
            else:
                epochs = max(cfg.epochs, floor)
        cap = cfg.max_steps_per_epoch if max_steps_per_epoch is None else max_steps_per_epoch
        per_epoch = pipe.batches.steps_per_epoch()
        if cap is not None and per_epoch is not None:
            per_epoch = min(per_epoch, cap)
        every = cfg.eval_every if evaluate else None
        if plateau is not None and every is None:
            every = eval_interval(per_epoch)  # None until the first epoch tells its length
        self.stop_reason = "max_epochs" if plateau is not None else "epochs"
        timer = self.timer
        epoch = 0
        stop = False
        resumed = time.perf_counter()
        while epoch < epochs and not stop:
            epoch_start = self.train_seconds  # the clock since `resumed` lands in this epoch: epochs tile the clock
            pipe.model.train()
            schedule_lr(pipe.optimizer, cfg, epoch, epochs if plateau is None else cfg.max_epochs)
            batches = pipe.features.feed(pipe.batches.epoch(epoch))
            taken = 0
            try:
                while cap is None or taken < cap:
                    timer.start_step()
                    t_step = time.perf_counter()
                    with timer.phase("sample"):
                        item = next(batches, None)
                    if item is None:
                        timer.end_step(record=False)
                        break
                    self._account_negatives(item[0])
                    self.sampled.add(item[0])
                    loss = self.step(*item, timer)
                    measured = self.steps_taken >= cfg.warmup_steps  # burn-in: first touch, compilation
                    timer.end_step(record=measured)
                    pipe.comm.end_step(measured)  # all-reduce seconds and bytes of this step (data parallel)
                    seconds = time.perf_counter() - t_step
                    if self.first_step_seconds is None:
                        self.first_step_seconds = seconds
                    step = Step(self.steps_taken, epoch, float(loss), measured, seconds)
                    self.steps_taken += 1
                    taken += 1
                    self.train_seconds += time.perf_counter() - resumed  # clock stops: evaluation, consumer
                    over = cfg.max_seconds is not None and pipe.setup_clock + self.train_seconds >= cfg.max_seconds
                    if cfg.max_seconds is not None:
                        over = any_rank(over)  # ranks stop together: one rank's clock alone would hang the rest
                    spent = plateau is not None and cfg.max_steps is not None and self.steps_taken >= cfg.max_steps
                    if every is not None and self.steps_taken % every == 0 or evaluate and (over or spent):
                        if any_rank(self._record_eval(epoch, plateau, per_epoch)):
                            stop, self.stop_reason = True, "plateau"
                        if cfg.stop_at is not None and not stop and any_rank(self._reached(cfg)):
                            stop, self.stop_reason = True, "target"
                    if (cfg.stop_at is not None and cfg.censor_seconds is not None and not stop
                            and any_rank(pipe.setup_clock + self.train_seconds > cfg.censor_seconds)):
                        stop, self.stop_reason = True, "censored"  # its time to accuracy is censored here
                    if over and not stop:
                        stop, self.stop_reason = True, "max_seconds"
                    if spent and not stop:  # the same count on every rank: no agreement needed
                        stop, self.stop_reason = True, "max_steps"
                    yield step
                    resumed = time.perf_counter()
                    if stop:
                        break
            finally:
                batches.close()  # an epoch cut short must release its loader iterator (and its workers)
            self.train_seconds += time.perf_counter() - resumed
            self.epoch_seconds.append(self.train_seconds - epoch_start)
            if epoch == 0 and taken:
                self.steps_per_epoch = taken  # the first epoch's length (a sweep sizes short runs by it)
            if per_epoch is None and taken and plateau is not None:  # the first epoch told the epoch's length
                per_epoch = taken
                if cfg.eval_every is None:
                    every = eval_interval(per_epoch)
            last = epoch + 1 >= epochs or stop
            if evaluate and taken and self._last_eval_step != self.steps_taken and (
                    every is None or last or (plateau is not None and epoch == 0)):
                if any_rank(self._record_eval(epoch, plateau, per_epoch)) and not stop:
                    stop, self.stop_reason = True, "plateau"
                if cfg.stop_at is not None and not stop and any_rank(self._reached(cfg)):
                    stop, self.stop_reason = True, "target"
            if taken == 0 and epochs == float("inf"):
                raise RuntimeError(f"the batch source yielded no batches for epoch {epoch}")
            epoch += 1
            resumed = time.perf_counter()

    def _reached(self, cfg: RunConfig) -> bool:
        """Whether a time-to-accuracy run stops at the target now: its last validation point is at or above
        ``cfg.stop_at`` (the tolerance of :func:`gnnbench.measure.calibration.time_to`), after ``cfg.min_steps``
        steps (a sweep keeps a baseline's epochs that its short runs are read against)."""
        curve = self.evaluation.curve
        return bool(curve) and curve[-1].val >= cfg.stop_at - 1e-12 and self.steps_taken >= cfg.min_steps

    def _record_eval(self, epoch: int, plateau: Plateau | None = None, per_epoch: int | None = None) -> bool:
        """Record a validation point now; whether it leaves the plateau rule's patience exhausted.

        Background producers are paused while evaluation runs (:class:`~gnnbench.background.BackgroundWork`):
        the work they still did meanwhile is charged back to the training clock, so an overlap entry gains
        nothing from evaluation pauses."""
        work = self.pipeline.background
        try:
            work.pause()
            point = self.evaluation.record(self.pipeline.setup_clock + self.train_seconds, self.steps_taken, epoch)
        finally:
            self.train_seconds += work.resume()
        self._last_eval_step = self.steps_taken
        if plateau is None or self.config.stop_at is not None:  # a time-to-accuracy run: target or budget only
            return False
        plateau.update(point.val, point.step)
        return plateau.reached(point.step, per_epoch)

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
