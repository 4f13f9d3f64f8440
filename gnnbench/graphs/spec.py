"""Graph specifications: what to generate, with size presets.

A :class:`GraphSpec` is plain data. Two equal specs generate identical graphs
(see :func:`gnnbench.graphs.generate.generate`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["GraphSpec", "PRESETS"]


@dataclass(frozen=True)
class GraphSpec:
    """A degree-corrected stochastic block model with power-law propensities.

    The defaults of ``homophily`` and ``feature_snr`` keep node classification unsaturated, so accuracy
    changes stay visible (the calibration: ``docs/graphs.md``).
    """

    num_nodes: int = 10_000  # nodes
    avg_degree: float = 20.0  # mean neighbours per node: the graph stores num_nodes * avg_degree directed edges
    exponent: float = 2.3  # gamma of the power-law degree propensities, P(theta) ~ theta^-gamma; in (2, 5]
    num_classes: int = 10  # blocks / label classes
    homophily: float = 0.55  # fraction of edges whose endpoints share a class
    feature_dim: int = 32  # node feature width
    feature_snr: float = 1.0  # class-mean norm / per-dimension noise std (lower is harder from features alone)
    max_degree: int | None = None  # expected-degree cap; None -> max(sqrt(n * avg_degree), 2 * avg_degree)
    train_frac: float = 0.2  # fraction of nodes in the training split
    val_frac: float = 0.1  # fraction of nodes in the validation split (rest: test)
    lp_val_frac: float = 0.05  # fraction of undirected edges held out as link-prediction validation positives
    lp_test_frac: float = 0.1  # fraction of undirected edges held out as link-prediction test positives
    seed: int = 0  # seed of every random draw
    name: str = "custom"  # preset name this spec came from, or "custom"

    def __post_init__(self) -> None:
        def bad(field: str, accepted: str) -> ValueError:
            return ValueError(f"GraphSpec.{field} must be {accepted} (got {getattr(self, field)!r})")

        if not isinstance(self.num_nodes, int) or self.num_nodes < 2:
            raise bad("num_nodes", "an integer >= 2")
        if self.num_nodes > 3_000_000_000:
            raise bad("num_nodes", "at most 3_000_000_000")
        if not (isinstance(self.avg_degree, (int, float)) and 0 < self.avg_degree <= self.num_nodes - 1):
            raise bad("avg_degree", f"a number in (0, num_nodes - 1 = {self.num_nodes - 1}]")
        if not (isinstance(self.exponent, (int, float)) and 2.0 < self.exponent <= 5.0):
            raise bad("exponent", "a number in (2, 5]")
        if not isinstance(self.num_classes, int) or not 2 <= self.num_classes <= self.num_nodes:
            raise bad("num_classes", f"an integer in [2, num_nodes = {self.num_nodes}]")
        if not (isinstance(self.homophily, (int, float)) and 0.0 <= self.homophily <= 1.0):
            raise bad("homophily", "a number in [0, 1]")
        if not isinstance(self.feature_dim, int) or self.feature_dim < 1:
            raise bad("feature_dim", "an integer >= 1")
        if not (
            isinstance(self.feature_snr, (int, float)) and math.isfinite(self.feature_snr) and self.feature_snr >= 0
        ):
            raise bad("feature_snr", "a finite number >= 0")
        if self.max_degree is not None and (not isinstance(self.max_degree, int) or self.max_degree < 1):
            raise bad("max_degree", "None or an integer >= 1")
        for field in ("train_frac", "val_frac", "lp_val_frac", "lp_test_frac"):
            value = getattr(self, field)
            if not (isinstance(value, (int, float)) and 0.0 <= value < 1.0):
                raise bad(field, "a number in [0, 1)")
        if self.train_frac <= 0:
            raise bad("train_frac", "a number in (0, 1)")
        if self.train_frac + self.val_frac >= 1.0:
            raise ValueError(
                "GraphSpec.train_frac + val_frac must be < 1 to leave test nodes "
                f"(got {self.train_frac} + {self.val_frac})"
            )
        if self.lp_val_frac + self.lp_test_frac >= 1.0:
            raise ValueError(
                f"GraphSpec.lp_val_frac + lp_test_frac must be < 1 (got {self.lp_val_frac} + {self.lp_test_frac})"
            )
        if not isinstance(self.seed, int) or self.seed < 0:
            raise bad("seed", "an integer >= 0")

    @property
    def num_edges(self) -> int:
        """Target number of stored (directed) edges: ``num_nodes * avg_degree``."""
        return 2 * (int(round(self.num_nodes * self.avg_degree)) // 2)

    @property
    def degree_cap(self) -> float:
        """Effective cap on a node's expected degree."""
        if self.max_degree is not None:
            return float(self.max_degree)
        return max(math.sqrt(self.num_nodes * self.avg_degree), 2.0 * self.avg_degree)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "GraphSpec":
        """Build a spec from a preset, with optional field overrides.

        Args:
            name: One of :data:`PRESETS` (``tiny``, ``small``, ``medium``, ``large``).
            **overrides: Any :class:`GraphSpec` field; ``None`` values are ignored.
        """
        if name not in PRESETS:
            raise ValueError(f"unknown graph preset {name!r}; accepted: {', '.join(PRESETS)}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise ValueError(f"unknown GraphSpec field(s) {unknown}; accepted: {sorted(fields)}")
        given = {k: v for k, v in overrides.items() if v is not None}
        base = PRESETS[name]
        spec = dataclasses.replace(base, **given)
        size_fields = {
            "num_nodes",
            "avg_degree",
            "exponent",
            "num_classes",
            "feature_dim",
            "homophily",
            "feature_snr",
            "max_degree",
        }
        if size_fields & set(given):
            spec = dataclasses.replace(spec, name=f"{name}+custom")
        return spec

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[str, GraphSpec] = {
    # CI-sized toy: ~10k nodes, ~200k directed edges.
    "tiny": GraphSpec(num_nodes=10_000, avg_degree=20.0, feature_dim=32, name="tiny"),
    # The CPU default: ~100k nodes, ~2M directed edges.
    "small": GraphSpec(num_nodes=100_000, avg_degree=20.0, feature_dim=64, name="small"),
    # ~1M nodes, ~20M directed edges.
    "medium": GraphSpec(num_nodes=1_000_000, avg_degree=20.0, feature_dim=64, name="medium"),
    # ~10M nodes, ~200M directed edges: for a GPU machine.
    "large": GraphSpec(num_nodes=10_000_000, avg_degree=20.0, feature_dim=64, name="large"),
}
