"""The training band: availability (every layer's answer, collected), the run configuration, the pipeline
assembled once from it, the step bodies, evaluation off the clock, and the one training loop."""

from gnnbench.training.availability import config_unavailable, run_context
from gnnbench.training.config import LR_SCHEDULES, OPTIMIZERS, RunConfig
from gnnbench.training.evaluation import EvalPoint
from gnnbench.training.trainer import Step, Trainer

__all__ = [
    "RunConfig",
    "Trainer",
    "Step",
    "EvalPoint",
    "config_unavailable",
    "run_context",
    "OPTIMIZERS",
    "LR_SCHEDULES",
]
