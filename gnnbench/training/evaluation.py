"""Evaluation off the training clock: full-neighbourhood metrics, the validation curve, and evaluation's peak
memory apart from training's.

The model runs layer by layer over the whole graph, a chunk of target nodes at a time
(:class:`~gnnbench.models.inference.LayerwiseInference`, chunks within ``RunConfig.eval_chunk_bytes``), so the
metrics carry no sampling noise and memory grows with the nodes, not with edges x features.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from gnnbench.host_memory import PeakMemory
from gnnbench.models.inference import LayerwiseInference
from gnnbench.training.pipeline import Pipeline

__all__ = ["EvalPoint", "Evaluator"]


@dataclass(frozen=True)
class EvalPoint:
    """One validation point of the accuracy curve (time to accuracy reads these)."""

    seconds: float  # setup + training clock at this point (evaluation excluded)
    step: int  # steps taken
    epoch: int  # epoch just trained
    val: float  # validation metric (accuracy or AUC)
    test: float  # test metric
    metrics: dict  # everything the task's evaluation returned


class Evaluator:
    """Evaluates a pipeline's model and keeps its curve.

    Args:
        pipeline: The assembled pipeline (its model, task, graph, policy and precision are read).
        chunk_bytes: Memory budget of one chunk of target nodes.

    Attributes:
        curve: The :class:`EvalPoint` s recorded so far.
        seconds: Time spent evaluating (kept off the training clock).
        peaks: Evaluation's peak memory apart from the rest (:class:`~gnnbench.host_memory.PeakMemory`).
    """

    def __init__(self, pipeline: Pipeline, chunk_bytes: int) -> None:
        self.pipeline = pipeline
        self.chunk_bytes = chunk_bytes
        self.curve: list[EvalPoint] = []
        self.seconds = 0.0
        self.inference: LayerwiseInference | None = None  # built at the first evaluation
        self.peaks = PeakMemory(pipeline.device)

    @torch.no_grad()
    def evaluate(self) -> tuple[dict, float]:
        """Full-neighbourhood metrics of the model now: ``(metrics, seconds)``; the model is left in eval mode."""
        t0 = time.perf_counter()
        p = self.pipeline
        p.model.eval()
        with self.peaks.evaluation():
            if self.inference is None:
                g = p.prepared.graph
                self.inference = LayerwiseInference(
                    g.edge_index, g.rowptr, p.policy, p.device, chunk_bytes=self.chunk_bytes
                )
            metrics = p.task.evaluate(lambda: self.inference(p.model, p.graph.x, p.precision))
        return metrics, time.perf_counter() - t0

    def record(self, clock_seconds: float, step: int, epoch: int) -> EvalPoint:
        """Evaluate, add the point to :attr:`curve` at ``clock_seconds`` (setup + training clock) and put the
        model back in training mode."""
        metrics, seconds = self.evaluate()
        self.seconds += seconds
        self.pipeline.model.train()
        point = EvalPoint(clock_seconds, step, epoch, float(metrics["val"]), float(metrics["test"]), metrics)
        self.curve.append(point)
        return point
