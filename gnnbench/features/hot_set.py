"""The hot set of the ``hot_cold`` placement: which rows to keep on the device (ranked by access counts over a
profiled epoch, or by out-degree) and how many (the budget). Pure functions on CPU tensors, and the chooser
:class:`~gnnbench.features.stores.HotColdFeatures` calls once the device and the row size are known.
"""

from __future__ import annotations

import time
from typing import Iterable

import torch
from torch import Tensor

from gnnbench.flags import Flags
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.sources import make_batch_source

__all__ = [
    "choose_hot_rows",
    "access_counts",
    "out_degrees",
    "hit_rate",
    "hot_budget_rows",
    "HotSetChooser",
    "hot_set_chooser",
]


def choose_hot_rows(scores: Tensor, budget_rows: int, tiebreak: Tensor | None = None) -> Tensor:
    """The ``budget_rows`` row ids with the highest ``scores``, ascending (pure; CPU).

    Ties are broken by the higher ``tiebreak`` (for example the degree, so rows
    a short profile never saw are still ranked), then by the lower id, so the
    choice is deterministic.

    Args:
        scores: ``[N]`` per-row score: access counts (:func:`access_counts`) or degrees (:func:`out_degrees`).
        budget_rows: Rows to choose (clamped to ``[0, N]``).
        tiebreak: Optional ``[N]`` secondary score.
    """
    n = scores.numel()
    k = max(0, min(int(budget_rows), n))
    order = torch.arange(n)
    if tiebreak is not None:
        order = torch.sort(tiebreak.reshape(-1), descending=True, stable=True).indices
    order = order[torch.sort(scores.reshape(-1)[order], descending=True, stable=True).indices]
    return torch.sort(order[:k]).values


def access_counts(batches: Iterable, num_nodes: int, n_id_of=lambda b: b.n_id) -> Tensor:
    """``[num_nodes]`` int64: in how many of ``batches`` each node's feature row is gathered (its ``n_id``)."""
    counts = torch.zeros(num_nodes, dtype=torch.int64)
    for batch in batches:
        ids = n_id_of(batch).to(torch.int64).cpu()
        counts.index_add_(0, ids, torch.ones_like(ids))
    return counts


def out_degrees(prepared: PreparedGraph) -> Tensor:
    """``[N]`` int64: how many nodes can sample each node as a neighbour (its out-degree; edges are
    ``(source, target)`` and the sampler draws sources for targets)."""
    g = prepared.graph
    return torch.bincount(g.edge_index[0].to(torch.int64), minlength=g.num_nodes)


def hit_rate(hot: Tensor, batches: Iterable, num_nodes: int, n_id_of=lambda b: b.n_id) -> float:
    """Share of the rows ``batches`` gather that lie in ``hot`` (what ``hot_cold`` would serve from the device)."""
    is_hot = torch.zeros(num_nodes, dtype=torch.bool)
    is_hot[hot.to(torch.int64)] = True
    hits = total = 0
    for batch in batches:
        ids = n_id_of(batch).to(torch.int64).cpu()
        hits += int(is_hot[ids].sum())
        total += ids.numel()
    return hits / total if total else 0.0


def hot_budget_rows(
    num_rows: int,
    row_bytes: int,
    *,
    fraction: float = 0.25,
    budget_bytes: int = 0,
    free_device_bytes: int | None = None,
) -> int:
    """Rows the hot set may hold (pure).

    ``budget_bytes > 0`` (``--hot-budget 512MiB``) gives ``budget_bytes // row_bytes``
    rows, as asked. Otherwise ``fraction`` of the rows (``--hot-budget 0.25``, the
    default), capped at half of ``free_device_bytes`` when given (the free memory
    of the CUDA device, leaving the rest for activations). Never more than
    ``num_rows``.
    """
    if budget_bytes > 0:
        rows = budget_bytes // row_bytes
    else:
        rows = int(fraction * num_rows)
        if free_device_bytes is not None:
            rows = min(rows, free_device_bytes // 2 // row_bytes)
    return max(0, min(int(rows), num_rows))


def _free_device_bytes(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    return int(torch.cuda.mem_get_info(device)[0])


class HotSetChooser:
    """The function ``(device, row_bytes) -> hot ids`` that ``hot_cold`` calls (:class:`~gnnbench.features.stores.HotColdFeatures`).

    Reads this layer's flags: ``hot_budget_fraction`` / ``hot_budget_bytes``
    size the set (:func:`hot_budget_rows`) and ``hot_rank`` ranks the rows:

    - ``"access"``: a profiling pass over one epoch of a fresh batch source of
      the run's kind and flags (batch cache off; seed ``seed + 1``, so the
      profile estimates the access distribution instead of replaying the
      training epochs' own batches), counting how often each node's row is
      gathered; rows the profile never saw are ranked by degree. The pass is
      part of the run's setup time.
    - ``"degree"``: out-degree (:func:`out_degrees`), no profiling.

    After the call, :attr:`info` says what was chosen: rank, budget rows,
    profiling seconds and batches.
    """

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, kind: str | None = None, seed: int = 0) -> None:
        self.prepared, self.flags, self.kind, self.seed = prepared, flags, kind, seed
        self.info: dict | None = None

    def __call__(self, device: torch.device, row_bytes: int) -> Tensor:
        flags, n = self.flags, self.prepared.num_nodes
        budget = hot_budget_rows(
            n,
            row_bytes,
            fraction=flags.hot_budget_fraction,
            budget_bytes=flags.hot_budget_bytes,
            free_device_bytes=_free_device_bytes(device),
        )
        degrees = out_degrees(self.prepared)
        info = {"rank": flags.hot_rank, "budget_rows": budget, "profile_seconds": 0.0, "profile_batches": 0}
        if flags.hot_rank == "degree":
            hot = choose_hot_rows(degrees, budget)
        else:
            t0 = time.perf_counter()
            counts = self.profile()
            hot = choose_hot_rows(counts, budget, tiebreak=degrees)
            info.update(profile_seconds=time.perf_counter() - t0, profile_batches=self.profile_batches)
        self.info = info
        return hot

    def profile(self) -> Tensor:
        """Access counts over one epoch of a fresh batch source (see the class docstring)."""
        source = make_batch_source(
            self.prepared, self.flags.replace(batch_cache_epochs=0), kind=self.kind, seed=self.seed + 1
        )
        self.profile_batches = 0

        def counted(batches):
            for b in batches:
                self.profile_batches += 1
                yield b

        try:
            return access_counts(counted(source.epoch(0)), self.prepared.num_nodes)
        finally:
            source.close()


def hot_set_chooser(prepared: PreparedGraph, flags: Flags, *, kind: str | None = None, seed: int = 0) -> HotSetChooser:
    """The hot-set chooser of a run (``kind``: its batch source's kind; ``seed``: its seed): :class:`HotSetChooser`."""
    return HotSetChooser(prepared, flags, kind=kind, seed=seed)
