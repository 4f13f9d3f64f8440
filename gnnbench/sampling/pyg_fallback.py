"""gnnbench's neighbour sampler behind PyG's own ``NeighborSampler``, for machines without pyg-lib or torch-sparse.

A user's ``NeighborLoader(data, num_neighbors=[...])`` (or ``LinkNeighborLoader``) builds PyG's
``NeighborSampler``, whose sampling routine calls pyg-lib or torch-sparse and raises ``ImportError`` when
neither is installed (neither ships a wheel for every torch). :func:`pyg_sampling_fallback` replaces that one
routine, ``NeighborSampler._sample``, with :class:`~gnnbench.sampling.neighbor.NeighborSampleCore` over the
sampler's own CSC, for as long as the context is open: the user's loader, its filtering, its workers and its
batches are PyG's, only the draws are gnnbench's (uniform without replacement, or with ``replace=True``). The
draws are seeded from torch's global generator, so ``torch.manual_seed`` in the user's script fixes them.

What it cannot do it refuses with the reason, at the first batch: heterogeneous graphs, temporal and weighted
sampling, ``disjoint`` and non-directional subgraphs, hops of 0 neighbours, repeated seeds in a batch. Loader
workers inherit the replacement by ``fork`` (Linux's default); workers started by ``spawn`` do not, and raise
PyG's own ``ImportError``. Each batch draws one number from torch's global generator (its seed). With pyg-lib or
torch-sparse installed nothing is replaced.
:func:`pyg_backend` names the backend a ``NeighborLoader`` runs on here.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch

from gnnbench.sampling.neighbor import NeighborSampleCore
from gnnbench.sampling.sampler import native_backend_status

__all__ = ["pyg_backend", "pyg_sampling_fallback", "FALLBACK"]

FALLBACK = "gnnbench (fallback: neither pyg-lib nor torch-sparse is installed)"


def pyg_backend() -> str:
    """The sampling backend PyG's ``NeighborSampler`` uses here: ``pyg-lib``, ``torch-sparse``, or none
    (``native_backend_status`` says what to install)."""
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB:
        return "pyg-lib"
    if pyg_typing.WITH_TORCH_SPARSE:
        return "torch-sparse"
    return "none"


def _refusal(sampler: Any, seed: Any, seed_time: Any) -> str | None:
    from torch_geometric.sampler.base import SubgraphType

    if isinstance(seed, dict):
        return "a heterogeneous graph"
    if (
        seed_time is not None
        or getattr(sampler, "node_time", None) is not None
        or getattr(sampler, "edge_time", None) is not None
    ):
        return "temporal sampling"
    if getattr(sampler, "edge_weight", None) is not None:
        return "weighted sampling"
    if sampler.disjoint:
        return "disjoint=True"
    if sampler.subgraph_type != SubgraphType.directional:
        return f"subgraph_type={sampler.subgraph_type.value!r}"
    fanouts = list(sampler.num_neighbors.get_mapped_values())
    if any(int(k) == 0 or int(k) < -1 for k in fanouts):
        return f"num_neighbors={fanouts} (a hop of 0 neighbours)"
    if isinstance(seed, torch.Tensor) and seed.numel() != torch.unique(seed).numel():
        return "repeated seed nodes in one batch (input_nodes with duplicates)"
    return None


def _gnnbench_sample(self: Any, seed: Any, seed_time: Any = None, **kwargs: Any) -> Any:
    """``NeighborSampler._sample`` on gnnbench's sampler: the same :class:`SamplerOutput` layout (seeds first,
    ``row`` the sampled sources' local ids, ``col`` their targets', ``edge`` CSC positions that the loader maps
    through the sampler's edge permutation)."""
    from torch_geometric.sampler import SamplerOutput

    why = _refusal(self, seed, seed_time)
    if why is not None:
        raise ImportError(
            f"{type(self).__name__} needs pyg-lib or torch-sparse for {why}; gnnbench's fallback "
            f"sampler draws uniform neighbours of homogeneous graphs only. "
            f"{native_backend_status()}"
        )
    core = self.__dict__.get("_gnnbench_core")
    if core is None:
        fanouts = [int(k) for k in self.num_neighbors.get_mapped_values()]
        core = NeighborSampleCore(self.colptr, self.row, fanouts, replace=bool(self.replace))
        self._gnnbench_core = core
    core.reseed(int(torch.randint(0, 2**62, (1,))))  # torch's global generator: the user's seed decides
    out = core.sample(seed)
    row, col = out.row.to(torch.int64), out.col.to(torch.int64)
    if getattr(self, "sample_direction", "forward") == "backward":
        row, col = col, row
    return SamplerOutput(
        node=out.node.to(torch.int64),
        row=row,
        col=col,
        edge=out.edge.to(torch.int64),
        batch=None,
        num_sampled_nodes=out.num_sampled_nodes,
        num_sampled_edges=out.num_sampled_edges,
    )


@contextmanager
def pyg_sampling_fallback() -> Iterator[str]:
    """While open, PyG's ``NeighborSampler`` samples with gnnbench's sampler when pyg-lib and torch-sparse are
    both missing (else nothing changes). Yields the backend the user's loaders run on: ``pyg-lib``,
    ``torch-sparse`` or :data:`FALLBACK`. Nested in an open one it assigns nothing (the outer one restores)."""
    backend = pyg_backend()
    if backend != "none":
        yield backend
        return
    from torch_geometric.sampler import NeighborSampler

    original = NeighborSampler.__dict__["_sample"]
    if original is _gnnbench_sample:  # an enclosing fallback put it in place (gnnbench.watch inside the user's):
        yield FALLBACK  # the class is left alone, since every assignment to it undoes the interpreter's
        return  # specialization of the code that uses it
    NeighborSampler._sample = _gnnbench_sample
    try:
        yield FALLBACK
    finally:
        NeighborSampler._sample = original
