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
    """A workload with a known bottleneck.

    Args:
        name: Short name (``--scenario``).
        description: What it models and why its bottleneck is what it is.
        expected: The bottleneck ``diagnose`` should name (a group of :data:`gnnbench.advice.diagnose.PHASE_GROUPS`).
        preset: The graph preset, with ``spec_overrides`` on top.
        flags: The base flags (the scenario's baseline).
        task: ``"node"`` or ``"link"``.
        model: ``"gcn"`` or ``"sage"``.
        hidden: Hidden width.
        epochs: Training epochs of a measured run (``compare``, ``--verify``).
        warmup_steps: Warm-up steps excluded from timings.
    """

    name: str
    description: str
    expected: str
    preset: str
    spec_overrides: dict[str, Any] = field(default_factory=dict)
    flags: Flags = field(default_factory=Flags)
    task: str = "node"
    model: str = "gcn"
    hidden: int = 64
    epochs: int = 2  # compare / --verify: enough optimizer steps to measure (full batch: one per epoch)
    warmup_steps: int = 3

    def spec(self) -> GraphSpec:
        return GraphSpec.preset(self.preset, **self.spec_overrides)

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~gnnbench.training.trainer.RunConfig` fields this scenario sets."""
        return {"spec": self.spec(), "flags": self.flags, "task": self.task, "model": self.model,
                "hidden": self.hidden, "epochs": self.epochs, "warmup_steps": self.warmup_steps}


# Base flags of the pipeline-bound scenarios: the kernels already optimized (sparse aggregation on the batch's
# CSR, vectorized dropout), as after a first round of "locate, then optimize": the bottleneck has moved.
_FAST_KERNELS = {"aggregation": "sparse", "keep_csr": True, "dropout_kernel": "uniform"}

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario(
        name="sampling-bound",
        description="Large fanout on a denser graph, narrow model with its kernels already optimized: a 2-hop "
        "[100, 60] neighbourhood of 1024 seeds, drawn from nodes with 80 neighbours on average (so every hop "
        "really chooses), feeds a GCN of width 4 on 4 features (sparse aggregation on the batch's CSR, "
        "vectorized dropout, normalization once per batch, int32 indices). Recorded on this 2-core CPU: "
        "sampling 61% of the step against 38% kernels. (On the sparser default graph, [60, 40] was a coin "
        "toss, 48% against 50%, once the CSR product got faster.)",
        expected="sampling", preset="small", spec_overrides={"feature_dim": 4, "avg_degree": 80.0},
        flags=Flags(fanout=(100, 60), batch_size=1024, cached_norm=True, index_dtype="int32", **_FAST_KERNELS),
        hidden=4,
    ),
    Scenario(
        name="kernel-bound",
        description="Full-batch GCN on a 20k-node power-law graph: no sampling or gather per step, so the step "
        "is all kernels (aggregation over every edge, transforms, dropout). One optimizer step per epoch, so "
        "measured runs last 40 epochs.",
        expected="kernels", preset="small", spec_overrides={"num_nodes": 20_000},
        flags=Flags(batch_source="full"), epochs=40, warmup_steps=2,
    ),
    Scenario(
        name="link-negatives",
        description="Link prediction with 20 negatives per positive, strictly rejected against the training "
        "edges. Drawing the negatives is vectorized and cheap (about 2-4% of the step here, not the field "
        "report's half); the cost of many negatives is their endpoints' neighbourhoods, sampled and then "
        "aggregated for every pair, and the aggregation dominates: the step is kernel-bound.",
        expected="kernels", preset="small", spec_overrides={"feature_dim": 16},
        flags=Flags(fanout=(10, 5), batch_size=256, negative_ratio=20), task="link", hidden=16,
    ),
)}


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; accepted: {', '.join(SCENARIOS)}") from None
