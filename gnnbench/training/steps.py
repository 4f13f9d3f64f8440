"""The body of one training step, one class per kind of step behind one call:
``step(batch, features, timer) -> loss``.

- :class:`SampledStep`: a batch from the batch source (neighbour-sampled, subgraph or full batch): gather,
  transfer, forward, backward, optimizer.
- :class:`PartitionStep`: partition-parallel training: this rank's part of the whole graph, with a halo
  exchange per layer in forward and the gradient all-reduce in backward.

:func:`step_for` picks the one the pipeline was built for.
"""

from __future__ import annotations

import torch

from gnnbench.sampling.batch import Batch
from gnnbench.timing import PhaseTimer, code_path
from gnnbench.training.pipeline import Pipeline

__all__ = ["TrainStep", "SampledStep", "PartitionStep", "step_for"]


class TrainStep:
    """One optimizer step of a pipeline.

    Attributes:
        widened_index_bytes: int32 -> int64 index bytes made inside steps (the scatter path on a CPU).
        narrowed_index_bytes: int64 -> int32 CSR index bytes made inside steps (MKL's index on a CPU).
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.widened_index_bytes = 0
        self.narrowed_index_bytes = 0

    def __call__(self, batch: Batch, x: torch.Tensor | None, timer: PhaseTimer) -> torch.Tensor:
        """Train on ``batch`` (features ``x`` when prefetched, else gathered here); the detached loss."""
        raise NotImplementedError

    def _update(self, timer: PhaseTimer) -> None:
        p = self.pipeline
        with timer.phase("optimizer"):
            p.scaler.step(p.optimizer)
            p.scaler.update()
            p.optimizer.zero_grad(set_to_none=True)


class SampledStep(TrainStep):
    """gather -> transfer -> forward -> backward -> optimizer on one batch."""

    def __call__(self, batch: Batch, x: torch.Tensor | None, timer: PhaseTimer) -> torch.Tensor:
        p = self.pipeline
        if x is None:
            with code_path("gather"):
                x = p.features.gather(batch.n_id, timer)
        with timer.phase("transfer"):
            batch = batch.to(p.device, edge_ids=p.policy.needs_edge_ids)
        with timer.phase("forward"):
            agg = p.policy.for_batch(batch.edge_index, batch.n_id, batch.e_id, batch.rowptr)
            self.widened_index_bytes += agg.widened_bytes
            self.narrowed_index_bytes += agg.narrowed_bytes
            loss = p.task.loss(p.forward(x, agg, p.precision), batch)
        with timer.phase("backward"):
            p.scaler.scale(loss).backward()
        self._update(timer)
        return loss.detach()


class PartitionStep(TrainStep):
    """One partition-parallel step (the epoch's full batch, whose features the part already holds): this
    rank's part with a halo exchange per layer, the gradient all-reduce inside ``backward``; the loss is the
    whole graph's."""

    def __call__(self, batch: Batch, x: torch.Tensor | None, timer: PhaseTimer) -> torch.Tensor:
        p, part = self.pipeline, self.pipeline.partition
        with timer.phase("forward"):
            loss = part.loss(part.forward(p.model, p.precision))
        with timer.phase("backward"):
            p.scaler.scale(loss).backward()
            total = part.allreduce(list(p.model.parameters()), loss)
        self._update(timer)
        return total


def step_for(pipeline: Pipeline) -> TrainStep:
    """The step the pipeline was built for: a part of the graph when it holds one, else sampled batches."""
    return PartitionStep(pipeline) if pipeline.partition is not None else SampledStep(pipeline)
