"""Index dtypes: the overflow-guarded conversion of node ids and edge offsets.

Kept apart from :mod:`gnnbench.graphs.prepare` so that the graph container can
use it without importing the preparation layer (which imports the container).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["IndexOverflowError", "check_index_fits", "to_index_dtype", "INDEX_DTYPE_BY_NAME"]

INDEX_DTYPE_BY_NAME = {"int64": torch.int64, "int32": torch.int32}


class IndexOverflowError(ValueError):
    """An index value does not fit the requested index dtype."""


def check_index_fits(max_value: int, dtype: torch.dtype, what: str = "index") -> None:
    """Raise :class:`IndexOverflowError` if ``max_value`` does not fit ``dtype``.

    Args:
        max_value: The largest value that will be stored (e.g. ``num_nodes - 1``
            for node ids, ``num_edges`` for CSR offsets).
        dtype: ``torch.int32`` or ``torch.int64``.
        what: What the value is, for the message.
    """
    if dtype not in (torch.int32, torch.int64):
        raise ValueError(f"index dtype must be torch.int32 or torch.int64 (got {dtype})")
    limit = torch.iinfo(dtype).max
    if max_value > limit:
        raise IndexOverflowError(
            f"largest {what} {max_value} does not fit {str(dtype).replace('torch.', '')} "
            f"(max {limit}); use index_dtype='int64' for this graph"
        )


def to_index_dtype(t: Tensor, dtype: torch.dtype, *, what: str = "index", max_value: int | None = None) -> Tensor:
    """Convert an index tensor to ``dtype``, never wrapping silently.

    ``max_value`` is the largest value ``t`` may hold (known from the graph's
    size); when omitted it is computed from ``t``.
    """
    if t.dtype == dtype:
        return t
    if max_value is None:
        max_value = int(t.max()) if t.numel() else 0
    check_index_fits(max_value, dtype, what)
    return t.to(dtype)
