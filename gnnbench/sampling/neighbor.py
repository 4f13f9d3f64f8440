"""A vectorized, exact multi-hop neighbour sampler over CSR (:class:`NeighborSampleCore`), on any device.

Per hop, every frontier node draws ``min(deg, k)`` distinct neighbours, each k-subset equally likely, with
the work per sampled edge bounded as ``k`` grows (:func:`sample_positions`); ``replace=True`` draws ``k``
independent neighbours.
Draws come out grouped by target, so a batch's CSR over targets is a cumulative count. Relabelling to local
ids uses two scratch tensors of ``num_nodes`` that are reset after each batch (``O(touched)`` work), so one
sampler object is not safe to share between threads; loader workers are processes, each with its own copy.
How the draws are made, and why they are exact: ``docs/data-pipeline.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

__all__ = ["SampledSubgraph", "NeighborSampleCore", "sample_positions", "distinct_positions", "FLOYD_MAX_FANOUT"]

# Up to this fanout, rows of degree > 2k draw with Floyd's algorithm (k / 2 comparisons per sampled edge, k
# kernel launches); above it, with rejection and one row-wise sort (linear in k). Where the two cross on a
# 2-core CPU (scripts/sampler_fanout.py --method, docs/data-pipeline.md).
FLOYD_MAX_FANOUT = 48


def sample_positions(deg: Tensor, k: int, replace: bool, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """Draw neighbour positions for nodes of degree ``deg`` with fanout ``k``.

    Args:
        deg: ``[M]`` int64 degrees of the frontier nodes.
        k: Fanout; ``-1`` takes every neighbour.
        replace: Draw with replacement (``k`` independent draws per node).
        generator: Random source on ``deg``'s device.

    Returns:
        ``(owner, pos)``: for each draw, the index of its frontier node in
        ``[0, M)`` and the neighbour position in ``[0, deg[owner])``; draws
        are grouped by owner, owners in ascending order.
    """
    device = deg.device
    m = deg.numel()
    if k < 0 or (not replace and m and int(deg.max()) <= k):
        return _take_all(deg)
    if replace:
        owner = (deg > 0).nonzero().view(-1).repeat_interleave(k)
        d = deg.index_select(0, owner)
        u = torch.rand(owner.numel(), device=device, generator=generator, dtype=torch.float64)
        pos = torch.minimum((u * d).to(torch.int64), d - 1)
        return owner, pos
    small = deg <= k
    own_a, pos_a = _take_all(torch.where(small, deg, torch.zeros_like(deg)))
    big = (~small).nonzero().view(-1)
    # Lay the draws out grouped by owner, owners ascending (no sort: each owner's slot range is known),
    # so the caller's edges come out sorted by target and a CSR over targets is a cumulative count.
    count = torch.where(small, deg, torch.full_like(deg, k))
    start = torch.cumsum(count, 0) - count
    owner = torch.repeat_interleave(torch.arange(m, device=device), count)
    pos = torch.empty_like(owner)
    pos.index_copy_(0, start.index_select(0, own_a) + pos_a, pos_a)
    if big.numel():
        chosen = distinct_positions(deg.index_select(0, big), k, generator)
        pos.index_copy_(0, (start.index_select(0, big).unsqueeze(1) + torch.arange(k, device=device)).view(-1),
                        chosen.view(-1))
    return owner, pos


def distinct_positions(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """``[B, k]`` distinct positions in ``[0, deg[i])`` per row, each k-subset equally likely (``deg > k``).

    Rows with ``deg <= 2k`` keep the ``k`` smallest of ``deg`` uniform keys (:func:`_smallest_keys`); the
    others draw with Floyd's algorithm up to :data:`FLOYD_MAX_FANOUT` (:func:`_floyd`), above it keep the
    first ``k`` distinct of positions drawn with replacement (:func:`_first_distinct`).
    """
    far = _floyd if k <= FLOYD_MAX_FANOUT else _first_distinct
    near = deg <= 2 * k
    rows = near.nonzero().view(-1)
    if rows.numel() == 0:
        return far(deg, k, generator)
    if rows.numel() == deg.numel():
        return _smallest_keys(deg, k, generator)
    out = torch.empty((deg.numel(), k), dtype=torch.int64, device=deg.device)
    out.index_copy_(0, rows, _smallest_keys(deg.index_select(0, rows), k, generator))
    rows = (~near).nonzero().view(-1)
    out.index_copy_(0, rows, far(deg.index_select(0, rows), k, generator))
    return out


def _floyd(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """Robert Floyd's algorithm, vectorized across rows: ``k`` steps, each drawing ``t`` uniform in ``[0, j]``
    for ``j = deg - k + step`` and keeping ``t`` unless an earlier step drew it, else ``j``. Exact; its
    membership test costs ``step`` comparisons, so ``k^2 / 2`` per row in ``k`` kernel launches: used up to
    :data:`FLOYD_MAX_FANOUT`, where that is still cheaper than a sort."""
    device = deg.device
    j = deg.unsqueeze(1) + torch.arange(-k, 0, device=device)  # j_step = deg - k + step, shape [B, k]
    u = torch.rand(deg.numel(), k, device=device, generator=generator, dtype=torch.float64)
    chosen = torch.minimum((u * (j + 1)).to(torch.int64), j)  # t_step uniform in [0, j_step]
    for step in range(1, k):
        seen = (chosen[:, :step] == chosen[:, step:step + 1]).any(dim=1)
        chosen[:, step] = torch.where(seen, j[:, step], chosen[:, step])
    return chosen


def _smallest_keys(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """The positions of the ``k`` smallest of ``deg`` uniform keys per row (a uniform random k-subset)."""
    width = int(deg.max())
    keys = torch.rand(deg.numel(), width, device=deg.device, generator=generator, dtype=torch.float64)
    keys.masked_fill_(torch.arange(width, device=deg.device) >= deg.unsqueeze(1), float("inf"))
    return keys.topk(k, dim=1, largest=False, sorted=False).indices


def _first_distinct(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """Per row, the first ``k`` distinct of positions drawn uniformly with replacement (``deg > 2k``).

    Keeping the first ``k`` distinct values of an i.i.d. uniform sequence is sampling without replacement, so
    every k-subset is equally likely; a row whose draws hold fewer than ``k`` distinct values draws again from
    scratch (the event is symmetric in the positions, so the kept subsets stay uniform).
    """
    device = deg.device
    out = torch.empty((deg.numel(), k), dtype=torch.int64, device=device)
    todo = torch.arange(deg.numel(), device=device)
    while todo.numel():
        d = deg.index_select(0, todo)
        # expected distinct of r draws from d: d (1 - exp(-r / d)) >= k with room when r = k + 2k^2/d + 2
        r = k + -(-2 * k * k // int(d.min())) + 2
        u = torch.rand(todo.numel(), r, device=device, generator=generator, dtype=torch.float64)
        draws = torch.minimum((u * d.unsqueeze(1)).to(torch.int64), (d - 1).unsqueeze(1))
        values, order = torch.sort(draws, dim=1, stable=True)  # equal values keep draw order: first comes first
        first_sorted = torch.ones_like(values, dtype=torch.bool)
        first_sorted[:, 1:] = values[:, 1:] != values[:, :-1]
        first = torch.empty_like(first_sorted).scatter_(1, order, first_sorted)
        rank = torch.cumsum(first, dim=1)
        done = rank[:, -1] >= k
        keep = first & (rank <= k)
        rows = done.nonzero().view(-1)
        out.index_copy_(0, todo.index_select(0, rows), draws.index_select(0, rows)[keep.index_select(0, rows)]
                        .view(-1, k))
        todo = todo.index_select(0, (~done).nonzero().view(-1))
    return out


def _take_all(deg: Tensor) -> tuple[Tensor, Tensor]:
    """Every position ``0..deg[i]-1`` of every node ``i``."""
    owner = torch.repeat_interleave(deg)
    starts = torch.cumsum(deg, 0) - deg
    pos = torch.arange(owner.numel(), device=deg.device) - starts.index_select(0, owner)
    return owner, pos


@dataclass
class SampledSubgraph:
    """One sampled computation graph, in PyG's ``SamplerOutput`` convention.

    Args:
        node: ``[n]`` global ids; the seeds come first, in input order.
        row: ``[e]`` local id of each sampled neighbour (message source).
        col: ``[e]`` local id of the node that sampled it (message target);
            non-decreasing, so edges are sorted by target.
        edge: ``[e]`` global edge ids (positions in the graph's ``edge_index``).
        All in the CSR's index dtype.
        num_sampled_nodes: nodes added per hop (hop 0 = seeds).
        num_sampled_edges: edges added per hop.
    """

    node: Tensor
    row: Tensor
    col: Tensor
    edge: Tensor
    num_sampled_nodes: list[int]
    num_sampled_edges: list[int]


class NeighborSampleCore:
    """Multi-hop sampling over a CSR ``(rowptr, col)`` on any device.

    Args:
        rowptr: ``[N + 1]`` CSR offsets (int32 or int64).
        col: ``[E]`` neighbour ids, grouped by node.
        fanouts: Neighbours per hop, e.g. ``(15, 10)``; ``-1`` takes all.
        replace: Sample with replacement.
        seed: Seed of the sampler's own generator.
    """

    def __init__(self, rowptr: Tensor, col: Tensor, fanouts: Sequence[int], *, replace: bool = False,
                 seed: int = 0) -> None:
        fanouts = tuple(int(k) for k in fanouts)
        if not fanouts or any(k == 0 or k < -1 for k in fanouts):
            raise ValueError(f"fanouts must be a non-empty list of positive ints or -1 (got {list(fanouts)})")
        if rowptr.device != col.device:
            raise ValueError(f"rowptr and col must be on one device (got {rowptr.device} and {col.device})")
        self.rowptr = rowptr
        self.col = col
        self.fanouts = fanouts
        self.replace = replace
        self.device = rowptr.device
        self.num_nodes = rowptr.numel() - 1
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self._local = torch.full((self.num_nodes,), -1, dtype=torch.int64, device=self.device)
        self._first = torch.full((self.num_nodes,), torch.iinfo(torch.int64).max, dtype=torch.int64,
                                 device=self.device)

    def reseed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def _relabel(self, cand: Tensor, n_so_far: int, touched: list[Tensor]) -> tuple[Tensor, Tensor]:
        """Local ids of ``cand``: nodes seen before keep theirs, new ones get ``n_so_far, n_so_far + 1, ...``
        in order of first occurrence. Returns ``(local ids of cand, the new nodes)``.

        Every node whose scratch entry is written is appended to ``touched``
        first, so the caller can restore the buffers even after an exception.
        One random-access read of the scratch buffer per candidate; the new
        ones (usually a minority at deeper hops) are filled in afterwards.
        """
        local = self._local.index_select(0, cand)
        at_new = (local < 0).nonzero().view(-1)
        if at_new.numel() == 0:
            return local, at_new
        new = cand.index_select(0, at_new)
        order = torch.arange(new.numel(), device=self.device)
        try:
            self._first.scatter_reduce_(0, new, order, reduce="amin")
            uniq = new.index_select(0, (self._first.index_select(0, new) == order).nonzero().view(-1))
        finally:
            self._first.index_fill_(0, new, torch.iinfo(torch.int64).max)
        touched.append(uniq)
        self._local.index_copy_(0, uniq, torch.arange(n_so_far, n_so_far + uniq.numel(), device=self.device))
        local.index_copy_(0, at_new, self._local.index_select(0, new))
        return local, uniq

    def sample(self, seeds: Tensor) -> SampledSubgraph:
        """Sample the multi-hop neighbourhood of distinct ``seeds`` (global ids)."""
        seeds = seeds.to(self.device, torch.int64)
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= self.num_nodes):
            raise ValueError(f"seed node ids must be in [0, {self.num_nodes - 1}] "
                             f"(got min {int(seeds.min())}, max {int(seeds.max())})")
        seed_ids = torch.arange(seeds.numel(), device=self.device)
        self._local.index_copy_(0, seeds, seed_ids)
        if not bool((self._local.index_select(0, seeds) == seed_ids).all()):
            self._local.index_fill_(0, seeds, -1)
            raise ValueError("seed nodes must be distinct (got repeated ids)")
        nodes = [seeds]
        touched = [seeds]  # every node with a scratch entry, restored in `finally`
        rows, cols, edges = [], [], []
        num_nodes, num_edges = [seeds.numel()], []
        # The frontier's local ids are always one contiguous range (seeds: 0..S-1; then each hop's new
        # nodes, numbered in order), so a draw's target is its owner's position plus the range's start.
        frontier, frontier_base = seeds, 0
        n = seeds.numel()
        try:
            for k in self.fanouts:
                start = self.rowptr.index_select(0, frontier).to(torch.int64)
                deg = self.rowptr.index_select(0, frontier + 1).to(torch.int64) - start
                owner, pos = sample_positions(deg, k, self.replace, self.generator)
                eid = start.index_select(0, owner).add_(pos)
                nbr = self.col.index_select(0, eid).to(torch.int64)
                local, uniq = self._relabel(nbr, n, touched)
                rows.append(local)
                cols.append(owner.add_(frontier_base))
                edges.append(eid)
                nodes.append(uniq)
                num_nodes.append(uniq.numel())
                num_edges.append(eid.numel())
                frontier, frontier_base = uniq, n
                n += uniq.numel()
        finally:
            self._local.index_fill_(0, torch.cat(touched), -1)
        # One cast to the graph's index dtype (int32 with Flags.index_dtype="int32"): the batch carries it
        # into the training step's kernels.
        idx = self.col.dtype
        return SampledSubgraph(
            node=torch.cat(nodes).to(idx), row=torch.cat(rows).to(idx), col=torch.cat(cols).to(idx),
            edge=torch.cat(edges).to(idx), num_sampled_nodes=num_nodes, num_sampled_edges=num_edges,
        )
