"""``Flags``: every optimization switch in one frozen, typed dataclass.

The baseline is ``Flags()``. Optimizations are named changes to these fields,
listed once in :mod:`gnnbench.registry`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["Flags", "INDEX_DTYPES"]

INDEX_DTYPES = ("int64", "int32")


@dataclass(frozen=True)
class Flags:
    """Optimization switches; ``Flags()`` is the baseline."""

    index_dtype: str = "int64"  # edge index / CSR offset dtype: "int64" | "int32" (overflow-guarded)
    cached_norm: bool = False  # compute GCN normalization once per graph instead of every forward
    keep_csr: bool = False  # keep CSR beside COO instead of deriving neighbour lists on each use

    def __post_init__(self) -> None:
        if self.index_dtype not in INDEX_DTYPES:
            raise ValueError(
                f"Flags.index_dtype must be one of {', '.join(map(repr, INDEX_DTYPES))} (got {self.index_dtype!r})"
            )
        for f in dataclasses.fields(self):
            if f.type in ("bool", bool) and not isinstance(getattr(self, f.name), bool):
                raise ValueError(f"Flags.{f.name} must be True or False (got {getattr(self, f.name)!r})")

    def replace(self, **changes: Any) -> "Flags":
        """A copy with ``changes``; unknown field names raise, listing the valid ones."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown Flags field(s) {unknown}; accepted: {sorted(names)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def changed(self) -> dict[str, Any]:
        """Fields that differ from the baseline ``Flags()``."""
        base = Flags()
        return {k: v for k, v in self.to_dict().items() if getattr(base, k) != v}
