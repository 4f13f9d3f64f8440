"""Tasks: node classification and link prediction as two small objects.

A task owns what differs between them: the graph that feeds message passing,
the batch source it trains on, the output width, the loss and the
full-neighbourhood evaluation. The trainer asks :data:`TASKS` for one and
never branches on the task's name.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs.container import Graph
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.negative import NegativeSampler

__all__ = [
    "NodeClassification",
    "LinkPrediction",
    "TASKS",
    "unavailable",
    "link_loss",
    "auc",
    "hits_at_k",
    "evaluation_negatives",
    "HITS_K",
    "pair_scores",
]

HITS_K = 50


class NodeClassification:
    """Cross-entropy on the batch's target nodes; accuracy on the val/test masks.

    Args:
        graph: The graph (with labels and splits).
        device: Compute device.
        seed: Unused (node evaluation is deterministic); kept for a common signature.
    """

    name = "node"
    metric = "accuracy"

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        out = []
        if flags.negative_mode != "uniform":
            out.append(
                Unavailable(
                    "negative_mode", "negative sampling applies to link prediction; this run trains node classification"
                )
            )
        if not flags.negative_strict:
            out.append(
                Unavailable(
                    "negative_strict",
                    "negative sampling applies to link prediction; this run trains node classification",
                )
            )
        if flags.negative_ratio != 1:
            out.append(
                Unavailable(
                    "negative_ratio",
                    f"negatives per positive (got {flags.negative_ratio}) apply "
                    "to link prediction; this run trains node classification",
                )
            )
        return out

    def __init__(self, graph: Graph, device: torch.device, seed: int = 0) -> None:
        self.full_graph = graph
        self.train_graph = graph
        self.y = graph.y.to(device)

    @staticmethod
    def source_kind(flags: Flags) -> str:
        """The batch source it trains on (a key of ``sampling.sources.SOURCES``)."""
        return flags.batch_source

    def out_dim(self, hidden: int) -> int:
        return self.train_graph.num_classes

    def loss(self, out: Tensor, batch: Batch) -> Tensor:
        """Mean cross-entropy over the targets (GraphSAINT: its unbiased ``node_norm``-weighted sum)."""
        logits = out.index_select(0, batch.target).float()
        labels = self.y.index_select(0, batch.n_id.index_select(0, batch.target))
        if batch.node_norm is not None:
            return (F.cross_entropy(logits, labels, reduction="none") * batch.node_norm).sum()
        return F.cross_entropy(logits, labels) if batch.target.numel() else logits.sum() * 0.0

    @property
    def val_granularity(self) -> float:
        """The smallest change of the validation accuracy: one validation node (the plateau rule never
        counts a smaller rise)."""
        n = int(self.train_graph.val_mask.sum())
        return 1.0 / n if n else 0.0

    def evaluate(self, embed: Callable[[], Tensor]) -> dict:
        """Accuracy of ``embed()`` (full-neighbourhood logits of every node) on val and test: correct nodes
        over nodes, divided in double precision (so equal counts give equal values)."""
        g = self.train_graph
        pred = embed().argmax(dim=-1).cpu()

        def accuracy(mask: Tensor) -> float:
            n = int(mask.sum())
            return int((pred[mask] == g.y[mask]).sum()) / n if n else float("nan")

        return {"metric": self.metric, "val": accuracy(g.val_mask), "test": accuracy(g.test_mask)}


class LinkPrediction:
    """Binary cross-entropy of dot-product scores; AUC and Hits@50 on held-out edges.

    Training message passing uses ``graph.link_split()``, so held-out edges
    never feed it; each training batch's positive edges are removed from its own
    sampled subgraph (``sampling.loaders.LinkBatches``), so supervision edges are
    never message-passing edges either; evaluation negatives are not edges of
    the full graph. Link batches weigh GCN messages by each source's full-graph
    degree (``LinkBatches.norm_mode``), so the sampled model computes at the
    scale full-neighbourhood evaluation does (``docs/models.md``).
    """

    name = "link"
    metric = "auc"

    @staticmethod
    def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
        if flags.batch_source != "neighbor":
            return [
                Unavailable(
                    "batch_source",
                    f"{flags.batch_source} batches train node classification; link "
                    "prediction uses neighbour-sampled edge batches",
                )
            ]
        return []

    val_granularity = 0.0  # AUC over thousands of pairs: continuous for the plateau rule

    def __init__(self, graph: Graph, device: torch.device, seed: int = 0) -> None:
        self.full_graph = graph
        self.train_graph = graph.link_split()
        self.seed = seed

    @staticmethod
    def source_kind(flags: Flags) -> str:
        return "link"

    def out_dim(self, hidden: int) -> int:
        return hidden

    def loss(self, out: Tensor, batch: Batch) -> Tensor:
        return link_loss(out, batch.edge_label_index, batch.edge_label)

    def evaluate(self, embed: Callable[[], Tensor]) -> dict:
        """AUC and Hits@50 of held-out positives against fixed-seed negatives."""
        z = embed().float().cpu()
        full = self.full_graph
        out: dict = {"metric": self.metric}
        for split, pos in (("val", full.lp_val_pos), ("test", full.lp_test_pos)):
            if pos is None or pos.numel() == 0:
                out[split] = float("nan")
                continue
            neg = evaluation_negatives(
                full.edge_index,
                full.num_nodes,
                max(pos.size(1), 4 * HITS_K),
                seed=self.seed + (1 if split == "val" else 2),
            )
            ps, ns = pair_scores(z, pos), pair_scores(z, neg)
            out[split] = auc(ps, ns)
            out[f"{split}_hits@{HITS_K}"] = hits_at_k(ps, ns, HITS_K)
        return out


TASKS = {"node": NodeClassification, "link": LinkPrediction}


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """The task layer's answer for ``ctx.task``."""
    return TASKS[ctx.task].unavailable(flags, ctx)


def link_loss(z: Tensor, edge_label_index: Tensor, edge_label: Tensor) -> Tensor:
    """Binary cross-entropy of dot-product scores against positive (1) / negative (0) labels.

    The mean runs over every pair, as PyG's link-prediction examples compute it:
    with ``Flags.negative_ratio`` k a batch holds k negatives per positive (labels
    from PyG's binary negative sampling), each pair weighing the same.

    Raises:
        ValueError: if ``edge_label`` does not hold one label per pair of ``edge_label_index``.
    """
    if edge_label.shape != edge_label_index.shape[1:]:
        raise ValueError(
            f"edge_label must hold one label per pair: edge_label_index has "
            f"{edge_label_index.size(1)} pairs (got labels of shape {list(edge_label.shape)})"
        )
    scores = (z[edge_label_index[0]] * z[edge_label_index[1]]).sum(-1).float()
    return F.binary_cross_entropy_with_logits(scores, edge_label.float())


def pair_scores(z: Tensor, pairs: Tensor, *, chunk: int = 2**18) -> Tensor:
    """Dot-product scores ``z[u] . z[v]`` of ``pairs`` (``[2, k]``), ``chunk`` pairs at a time, so the gathered
    rows take ``2 * chunk x width`` at most instead of ``2 * k x width`` (each score is the same either way)."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1 (got {chunk!r})")
    out = torch.empty(pairs.size(1), dtype=z.dtype, device=z.device)
    for start in range(0, pairs.size(1), chunk):
        u, v = pairs[0, start : start + chunk], pairs[1, start : start + chunk]
        out[start : start + chunk] = (z[u] * z[v]).sum(-1)
    return out


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
