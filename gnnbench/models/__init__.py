"""The model band: networks (GCN, GraphSAGE), aggregation and its GCN normalization policy, the precision
policy, the training tasks (loss, evaluation) and layer-wise full-neighbourhood inference."""

from gnnbench.models.aggregation import Aggregator, unavailable
from gnnbench.models.aggregation_policy import AggregationPolicy
from gnnbench.models.nets import GCN, MODELS, GraphSAGE, build_model, compile_model, model_for
from gnnbench.models.precision import Precision

__all__ = [
    "AggregationPolicy",
    "Aggregator",
    "GCN",
    "GraphSAGE",
    "MODELS",
    "Precision",
    "build_model",
    "compile_model",
    "model_for",
    "unavailable",
]
