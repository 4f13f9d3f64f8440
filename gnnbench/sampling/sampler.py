"""gnnbench's neighbour sampler as a PyG ``BaseSampler``, and the backend choice.

PyG's ``NodeLoader`` and ``LinkLoader`` drive :class:`GnnbenchNeighborSampler`
exactly as they drive PyG's own ``NeighborSampler``; ``backend="pyg"`` selects
PyG's native sampler (pyg-lib or torch-sparse) for comparison.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch_geometric.sampler import BaseSampler, EdgeSamplerInput, NegativeSampling, NodeSamplerInput, SamplerOutput

from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.labor import LaborSampleCore, LaborSubgraph
from gnnbench.sampling.negative import NegativeSampler
from gnnbench.sampling.neighbor import NeighborSampleCore, SampledSubgraph

__all__ = [
    "GnnbenchNeighborSampler",
    "NegativeTiming",
    "drop_pair_edges",
    "make_neighbor_sampler",
    "native_backend_status",
    "SAMPLER_BACKENDS",
]


@dataclass(frozen=True)
class NegativeTiming:
    """What drawing one batch's negatives cost, and where it ran.

    :meth:`GnnbenchNeighborSampler.sample_from_edges` appends it to the
    ``SamplerOutput`` metadata, after the entries PyG's ``LinkLoader`` reads.
    """

    seconds: float  # NegativeSampler.sample's own clock for this batch
    in_worker: bool  # drawn in a DataLoader worker process (overlapped with training)


def drop_pair_edges(out: SampledSubgraph, src: Tensor, dst: Tensor, num_nodes: int) -> SampledSubgraph:
    """``out`` without the sampled edges that join a pair ``(src[i], dst[i])``, in either direction.

    The pairs' endpoints must be seeds of ``out``. An edge between two seeds
    can only be sampled in hop 0 (the only hop whose targets are seeds; seeds
    hold local ids ``0 .. S-1``), so only those edges are checked; the edges'
    order (sorted by target) is kept.

    Args:
        out: A sampled subgraph.
        src, dst: ``[P]`` global node ids of the pairs.
        num_nodes: Nodes of the graph (to form pair keys).
    """
    hop0, seeds = out.num_sampled_edges[0], out.num_sampled_nodes[0]
    if src.numel() == 0 or hop0 == 0:
        return out
    a, b = src.to(torch.int64), dst.to(torch.int64)
    keys, _ = torch.sort(torch.cat([b * num_nodes + a, a * num_nodes + b]))
    row = out.row[:hop0].to(torch.int64)
    cand = (row < seeds).nonzero().view(-1)  # source is a seed too (hop-0 targets are seeds)
    node = out.node.to(torch.int64)
    key = node.index_select(0, out.col[:hop0].to(torch.int64).index_select(0, cand)) * num_nodes + node.index_select(
        0, row.index_select(0, cand)
    )
    hit = keys.index_select(0, torch.searchsorted(keys, key).clamp_max_(keys.numel() - 1)) == key
    drop = cand[hit]
    if drop.numel() == 0:
        return out
    keep = torch.ones(out.row.numel(), dtype=torch.bool, device=out.row.device)
    keep[drop] = False
    return SampledSubgraph(
        node=out.node,
        row=out.row[keep],
        col=out.col[keep],
        edge=out.edge[keep],
        num_sampled_nodes=list(out.num_sampled_nodes),
        num_sampled_edges=[hop0 - drop.numel(), *out.num_sampled_edges[1:]],
    )


def native_backend_status() -> str | None:
    """``None`` when PyG's native sampler can run here, else why not and what to install."""
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE:
        return None
    return (
        "PyG's native neighbour sampler needs pyg-lib or torch-sparse, and neither is installed: "
        "install pyg-lib from the wheels at data.pyg.org matching your torch, or build torch-sparse "
        "with `pip install --no-build-isolation torch-scatter torch-sparse` (about 10 minutes)"
    )


class GnnbenchNeighborSampler(BaseSampler):
    """Exact, vectorized multi-hop neighbour sampling (see :mod:`gnnbench.sampling.neighbor`).

    Args:
        prepared: The prepared graph; its CSR is used if kept, else derived from
            COO once here (what PyG's samplers do at construction).
        fanouts: Neighbours per hop.
        replace: Sample with replacement.
        seed: Base seed: each batch draws from a stream keyed by it, the epoch (:meth:`set_epoch`) and
            the batch's input ids, so the draws do not depend on which process samples the batch.
        negatives: Negative sampler used by :meth:`sample_from_edges`.
        device: Where sampling runs (default: where the CSR lives).
        exclude_seed_edges: In :meth:`sample_from_edges`, drop the seed
            (positive) edges from the sampled subgraph, both directions, so a
            supervision edge is never in its own message-passing graph (as
            held-out edges are not at evaluation). Default ``False`` (PyG's
            behaviour).
    """

    def __init__(
        self,
        prepared: PreparedGraph,
        fanouts,
        *,
        replace: bool = False,
        seed: int = 0,
        negatives: NegativeSampler | None = None,
        device: torch.device | str | None = None,
        exclude_seed_edges: bool = False,
        sampler: str = "neighbor",
    ) -> None:
        csr = prepared.neighbours()
        dev = torch.device(device) if device is not None else csr.rowptr.device
        if sampler not in ("neighbor", "labor"):
            raise ValueError(f"unknown sampler {sampler!r}; accepted: 'neighbor', 'labor'")
        if sampler == "labor" and (negatives is not None or exclude_seed_edges):
            raise ValueError("LABOR samples node batches; link prediction's batches use the neighbour sampler")
        core = LaborSampleCore if sampler == "labor" else NeighborSampleCore
        self.core = core(csr.rowptr.to(dev), csr.col.to(dev), fanouts, replace=replace, seed=seed)
        self.num_nodes = prepared.num_nodes
        self.negatives = negatives
        self.exclude_seed_edges = exclude_seed_edges
        self.seed = seed
        # The epoch the loader is in (set_epoch), in shared memory: persistent loader workers keep the copy of
        # this sampler they were started with, and still read the epoch the main process sets.
        self._epoch = torch.zeros((), dtype=torch.int64).share_memory_()

    def set_epoch(self, epoch: int) -> None:
        """Key the following batches' draws by ``epoch`` (the batch sources call it before each epoch)."""
        self._epoch.fill_(int(epoch))

    def _reseed_for_batch(self, input_id: Tensor | None) -> None:
        """Draw this batch from a stream of its own, keyed by (seed, epoch, the batch's input ids in order).

        So a batch draws the same neighbours (and negatives) whichever process samples it: the main process
        or any loader worker, persistent or not, however far each worker's copy has got. Within an epoch the
        batches are disjoint, so their keys differ; the same batch in the same epoch draws the same again.
        """
        h = hashlib.blake2b(f"{self.seed}:{int(self._epoch)}:".encode(), digest_size=8)
        if input_id is not None:
            h.update(input_id.detach().to("cpu", torch.int64).contiguous().numpy().tobytes())
        key = int.from_bytes(h.digest(), "little") >> 1  # a seed in [0, 2**63)
        self.core.reseed(key)
        if self.negatives is not None:
            self.negatives.generator.manual_seed(key ^ 1)

    def _output(self, seeds: Tensor, metadata: Any) -> SamplerOutput:
        """The sample of ``seeds``; a LABOR sample appends its edge weights to the metadata (after the entries
        PyG's ``NodeLoader`` reads), which :class:`~gnnbench.sampling.loaders.WeightedNodeLoader` hands on."""
        out = self.core.sample(seeds)
        if isinstance(out, LaborSubgraph):
            metadata = (*metadata, out.weight)
        return SamplerOutput(
            node=out.node,
            row=out.row,
            col=out.col,
            edge=out.edge,
            num_sampled_nodes=out.num_sampled_nodes,
            num_sampled_edges=out.num_sampled_edges,
            metadata=metadata,
        )

    def sample_from_nodes(self, index: NodeSamplerInput, **kwargs) -> SamplerOutput:
        self._reseed_for_batch(index.input_id)
        if index.time is not None:
            raise ValueError("temporal sampling is not supported by gnnbench's sampler (got seed times)")
        return self._output(index.node, (index.input_id, index.time))

    def sample_from_edges(self, index: EdgeSamplerInput, neg_sampling: NegativeSampling | None = None) -> SamplerOutput:
        """Sample around the endpoints of seed edges (plus negatives), PyG's metadata layout.

        Negatives come from this sampler's :class:`NegativeSampler` (uniform or
        degree-weighted; strict mode rejects training positives); PyG's
        ``NegativeSampling`` only sets the mode (binary/triplet) and amount
        (negatives per positive). The metadata ends with a
        :class:`NegativeTiming` (after the entries PyG reads). With
        ``exclude_seed_edges`` the positive edges are removed from the subgraph.
        """
        self._reseed_for_batch(index.input_id)
        if index.time is not None:
            raise ValueError("temporal sampling is not supported by gnnbench's sampler (got edge times)")
        src, dst, label = index.row, index.col, index.label
        num_pos = src.numel()
        drawn_before = self.negatives.stats.seconds if self.negatives is not None else 0.0
        if neg_sampling is not None:
            if self.negatives is None:
                raise ValueError("negative sampling requested but the sampler has no NegativeSampler")
            num_neg = math.ceil(num_pos * neg_sampling.amount)
            if neg_sampling.is_binary():
                neg = self.negatives.sample(num_neg)
                src, dst = torch.cat([src, neg[0]]), torch.cat([dst, neg[1]])
                label = torch.ones(num_pos) if label is None else label
                label = torch.cat([label, label.new_zeros((num_neg,) + label.shape[1:])])
            else:  # triplet: corrupt the destination of each positive, `amount` times
                if float(neg_sampling.amount) != int(neg_sampling.amount):
                    raise ValueError(f"triplet negative sampling needs an integer amount (got {neg_sampling.amount})")
                per = int(neg_sampling.amount)
                neg = self.negatives.sample(per * num_pos, src=src.repeat(per))
                dst = torch.cat([dst, neg[1]])
        timing = NegativeTiming(
            seconds=self.negatives.stats.seconds - drawn_before if self.negatives is not None else 0.0,
            in_worker=torch.utils.data.get_worker_info() is not None,
        )
        seed, inverse = torch.cat([src, dst]).unique(return_inverse=True)
        out = self.core.sample(seed)
        if self.exclude_seed_edges:
            out = drop_pair_edges(out, index.row, index.col, self.num_nodes)
        # unique() sorts; the core keeps seeds first in the order given, so inverse indexes them directly.
        if neg_sampling is None or neg_sampling.is_binary():
            metadata = (index.input_id, inverse.view(2, -1), label, None, timing)
        else:
            n_src = src.numel()
            dst_idx = inverse[n_src:]
            metadata = (
                index.input_id,
                inverse[:n_src],
                dst_idx[:num_pos],
                dst_idx[num_pos:].view(-1, num_pos).t().reshape(num_pos, -1).squeeze(-1),
                None,
                timing,
            )
        return SamplerOutput(
            node=out.node,
            row=out.row,
            col=out.col,
            edge=out.edge,
            num_sampled_nodes=out.num_sampled_nodes,
            num_sampled_edges=out.num_sampled_edges,
            metadata=metadata,
        )


def _pyg_native_sampler(
    prepared: PreparedGraph, fanouts, *, replace: bool = False, seed: int = 0, negatives: NegativeSampler | None = None
) -> BaseSampler:
    """PyG's own ``NeighborSampler`` (pyg-lib or torch-sparse underneath), for comparison."""
    reason = native_backend_status()
    if reason:
        raise RuntimeError(reason)
    from torch_geometric.data import Data
    from torch_geometric.sampler import NeighborSampler

    data = Data(edge_index=prepared.edge_index.to(torch.int64), num_nodes=prepared.num_nodes)
    return NeighborSampler(data, num_neighbors=list(fanouts), replace=replace)


# Flags.sampler_backend -> sampler factory
SAMPLER_BACKENDS = {"gnnbench": GnnbenchNeighborSampler, "pyg": _pyg_native_sampler}


def make_neighbor_sampler(
    prepared: PreparedGraph,
    fanouts,
    *,
    backend: str = "gnnbench",
    replace: bool = False,
    seed: int = 0,
    negatives: NegativeSampler | None = None,
    sampler: str = "neighbor",
) -> BaseSampler:
    """The neighbour sampler of ``backend``: ``"gnnbench"`` or ``"pyg"`` (native, for comparison; it takes
    neither ``seed`` nor ``negatives``: both are ignored for it). ``sampler="labor"``: gnnbench's LABOR-0."""
    if backend not in SAMPLER_BACKENDS:
        raise ValueError(f"unknown sampler backend {backend!r}; accepted: {', '.join(map(repr, SAMPLER_BACKENDS))}")
    if sampler != "neighbor":
        if backend != "gnnbench":
            raise ValueError(f"sampler={sampler!r} is gnnbench's; got backend={backend!r}")
        return GnnbenchNeighborSampler(
            prepared, fanouts, replace=replace, seed=seed, negatives=negatives, sampler=sampler
        )
    return SAMPLER_BACKENDS[backend](prepared, fanouts, replace=replace, seed=seed, negatives=negatives)
