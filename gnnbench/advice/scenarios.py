"""Named workloads whose bottleneck is known by construction, for ``diagnose``, ``compare``, ``run`` and asv.

Each scenario fixes the graph, the task, the model and the base flags so that one part of the step
dominates on purpose; ``diagnose --scenario NAME`` must name that part (``expected``), and its
recommendations must pay when verified. ``--batch-size``, ``--fanout`` and ``--flags`` still apply on top.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec

__all__ = ["Scenario", "SCENARIOS", "get_scenario"]


@dataclass(frozen=True)
class Scenario:
    """A workload with a known bottleneck."""

    name: str  # short name (--scenario)
    description: str  # what it models and why its bottleneck is what it is
    expected: str  # the bottleneck diagnose should name (a group of gnnbench.advice.rules.PHASE_GROUPS)
    preset: str  # the graph preset, with spec_overrides on top
    spec_overrides: dict[str, Any] = field(default_factory=dict)  # GraphSpec fields changed from the preset
    flags: Flags = field(default_factory=Flags)  # the base flags (the scenario's baseline)
    task: str = "node"  # "node" or "link"
    model: str = "gcn"  # "gcn" or "sage"
    hidden: int = 64  # hidden width
    epochs: int | None = None  # epochs of a measured run (compare, --verify); None: to a validation plateau
    warmup_steps: int = 3  # warm-up steps excluded from timings

    def spec(self) -> GraphSpec:
        return GraphSpec.preset(self.preset, **self.spec_overrides)

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~gnnbench.training.config.RunConfig` fields this scenario sets."""
        return {
            "spec": self.spec(),
            "flags": self.flags,
            "task": self.task,
            "model": self.model,
            "hidden": self.hidden,
            "epochs": self.epochs,
            "warmup_steps": self.warmup_steps,
        }


# Base flags of the pipeline-bound scenarios: the kernels already optimized (sparse aggregation on the batch's
# CSR, vectorized dropout), as after a first round of "locate, then optimize": the bottleneck has moved.
_FAST_KERNELS = {"aggregation": "sparse", "keep_csr": True, "dropout_kernel": "uniform"}

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            name="sampling-bound",
            description="Large fanout on a denser graph, narrow model with its kernels already optimized: a 2-hop "
            "[100, 60] neighbourhood of 1024 seeds, drawn from nodes with 80 neighbours on average (so every hop "
            "really chooses), feeds a GCN of width 4 on 4 features (sparse aggregation on the batch's CSR, "
            "vectorized dropout, normalization once per batch, int32 indices). On the sparser default graph the "
            "same fanout leaves sampling and kernels about even, so the denser graph is what makes it "
            "sampling-bound.",
            expected="sampling",
            preset="small",
            spec_overrides={"feature_dim": 4, "avg_degree": 80.0},
            flags=Flags(fanout=(100, 60), batch_size=1024, cached_norm=True, index_dtype="int32", **_FAST_KERNELS),
            hidden=4,
        ),
        Scenario(
            name="kernel-bound",
            description="Full-batch GCN on a 20k-node power-law graph: no sampling or gather per step, so the step "
            "is all kernels (aggregation over every edge, transforms, dropout). One optimizer step per epoch, so "
            "measured runs train to a plateau over many epochs.",
            expected="kernels",
            preset="small",
            spec_overrides={"num_nodes": 20_000},
            flags=Flags(batch_source="full"),
            warmup_steps=2,
        ),
        Scenario(
            name="link-negatives",
            description="Link prediction with 20 negatives per positive, strictly rejected against the training "
            "edges. Drawing the negatives is vectorized and cheap (a few percent of the step, not the half the "
            "rules of thumb expect for link prediction); the cost of many negatives is their endpoints' "
            "neighbourhoods, sampled and then aggregated for every pair, and the aggregation dominates: the step "
            "is kernel-bound.",
            expected="kernels",
            preset="small",
            spec_overrides={"feature_dim": 16},
            flags=Flags(fanout=(10, 5), batch_size=256, negative_ratio=20),
            task="link",
            hidden=16,
        ),
    )
}


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; accepted: {', '.join(SCENARIOS)}") from None
