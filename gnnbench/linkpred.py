"""Link prediction: edge mini-batches through PyG's ``LinkLoader`` with gnnbench's
sampler and negatives, a dot-product decoder, and AUC / Hits@K evaluation."""

from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnbench.flags import Flags
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.negative import NegativeSampler
from gnnbench.sampling.sampler import GnnbenchNeighborSampler

__all__ = ["LinkBatches", "link_loss", "auc", "hits_at_k", "evaluation_negatives", "HITS_K"]

HITS_K = 50


def training_pairs(prepared: PreparedGraph) -> Tensor:
    """Each undirected training edge once (``u < v``) as a ``[2, m]`` tensor."""
    ei = prepared.edge_index.to(torch.int64)
    return ei[:, ei[0] < ei[1]]


class LinkBatches:
    """Edge mini-batches of positives plus negatives (binary labels), neighbour-sampled around their endpoints.

    Args:
        prepared: The *training* graph (``Graph.link_split()`` prepared), so
            held-out edges never feed message passing.
        flags: Sampling, loader and negative-sampling flags (``batch_size`` counts positive edges).
        seed: Seed of the sampler, the negatives and the shuffle.
    """

    def __init__(self, prepared: PreparedGraph, flags: Flags, *, seed: int = 0) -> None:
        from torch_geometric.data import Data
        from torch_geometric.loader import LinkLoader
        from torch_geometric.sampler import NegativeSampling

        if flags.sampler_backend != "gnnbench":
            raise ValueError("link prediction uses gnnbench's sampler (its negatives reject positives); "
                             f"got sampler_backend={flags.sampler_backend!r}")
        self.negatives = NegativeSampler(prepared.edge_index, prepared.num_nodes, mode=flags.negative_mode,
                                         strict=flags.negative_strict, seed=seed + 1)
        sampler = GnnbenchNeighborSampler(prepared, flags.fanout, replace=flags.sample_replace, seed=seed,
                                          negatives=self.negatives)
        data = Data(edge_index=prepared.edge_index, num_nodes=prepared.num_nodes)
        self.loader = LinkLoader(
            data, link_sampler=sampler, edge_label_index=training_pairs(prepared),
            neg_sampling=NegativeSampling("binary", amount=1), batch_size=flags.batch_size, shuffle=True,
            num_workers=flags.num_workers, prefetch_factor=flags.prefetch_factor,
            persistent_workers=flags.persistent_workers, pin_memory=flags.pin_memory,
            generator=torch.Generator().manual_seed(seed), filter_per_worker=flags.num_workers > 0,
        )

    def epoch(self, epoch: int) -> Iterator[Batch]:
        for data in self.loader:
            yield Batch(n_id=data.n_id, edge_index=data.edge_index, e_id=data.e_id,
                        target=torch.unique(data.edge_label_index),
                        num_sampled_nodes=list(data.num_sampled_nodes),
                        num_sampled_edges=list(data.num_sampled_edges),
                        edge_label_index=data.edge_label_index, edge_label=data.edge_label)

    def close(self) -> None:
        from gnnbench.sampling.loader import shutdown_loader

        shutdown_loader(self.loader)


def link_loss(z: Tensor, edge_label_index: Tensor, edge_label: Tensor) -> Tensor:
    """Binary cross-entropy of dot-product scores against positive (1) / negative (0) labels."""
    scores = (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(-1).float()
    return F.binary_cross_entropy_with_logits(scores, edge_label.float())


def auc(pos: Tensor, neg: Tensor) -> float:
    """Area under the ROC curve: P(score(pos) > score(neg)), ties counted half (rank statistic)."""
    scores = torch.cat([pos, neg]).double()
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=torch.float64)
    # average ranks over ties
    uniq, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    sums = torch.zeros(uniq.numel(), dtype=torch.float64).index_add_(0, inverse, ranks)
    ranks = (sums / counts)[inverse]
    n_pos, n_neg = pos.numel(), neg.numel()
    return float((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def hits_at_k(pos: Tensor, neg: Tensor, k: int = HITS_K) -> float:
    """OGB's Hits@K: fraction of positives scored above the K-th best negative."""
    if neg.numel() < k:
        return float("nan")
    kth = torch.topk(neg, k).values[-1]
    return float((pos > kth).float().mean())


def evaluation_negatives(full_edge_index: Tensor, num_nodes: int, count: int, seed: int) -> Tensor:
    """Fixed-seed negatives that are not edges of the *full* graph (held-out edges included)."""
    return NegativeSampler(full_edge_index, num_nodes, mode="uniform", strict=True, seed=seed).sample(count)
