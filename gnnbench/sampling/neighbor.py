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
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from gnnbench.timing import in_code_path

# a hop's edge choice: (hop, fanout, the frontier's CSR starts, its degrees) -> (owner, edge id, neighbour)
HopDraw = Callable[[int, int, Tensor, Tensor], "tuple[Tensor, Tensor, Tensor]"]

__all__ = ["SampledSubgraph", "NeighborSampleCore", "sample_positions", "distinct_positions", "FLOYD_LOOP_MAX_FANOUT"]

# Up to this fanout, rows of degree > 2k run Floyd's algorithm step by step (at most 12 comparisons per sampled
# edge); above it, with one row-wise sort (O(k log k) per row). Same positions either way; the two cost the
# same near k = 24 on one core of this 2-core CPU (scripts/sampler_fanout.py --method, docs/data-pipeline.md).
FLOYD_LOOP_MAX_FANOUT = 24


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
        pos.index_copy_(
            0, (start.index_select(0, big).unsqueeze(1) + torch.arange(k, device=device)).view(-1), chosen.view(-1)
        )
    return owner, pos


def distinct_positions(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """``[B, k]`` distinct positions in ``[0, deg[i])`` per row, each k-subset equally likely (``deg > k``).

    Rows with ``deg <= 2k`` keep the ``k`` smallest of ``deg`` uniform keys (:func:`_smallest_keys`); the
    others run Robert Floyd's algorithm: step by step up to :data:`FLOYD_LOOP_MAX_FANOUT` (:func:`_floyd`),
    above it with every step's membership test resolved at once (:func:`_floyd_sorted`). The two give the
    same positions from the same random numbers.
    """
    far = _floyd if k <= FLOYD_LOOP_MAX_FANOUT else _floyd_sorted
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


def _floyd_draws(deg: Tensor, k: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """Floyd's random numbers: ``(j, t)``, ``[B, k]`` each, ``j[:, s] = deg - k + s`` and ``t[:, s]`` uniform in
    ``[0, j[:, s]]``."""
    device = deg.device
    j = deg.unsqueeze(1) + torch.arange(-k, 0, device=device)
    u = torch.rand(deg.numel(), k, device=device, generator=generator, dtype=torch.float64)
    return j, torch.minimum((u * (j + 1)).to(torch.int64), j)


def _floyd(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """Robert Floyd's algorithm, vectorized across rows: ``k`` steps, step ``s`` keeping ``t_s`` unless an
    earlier step chose it, else ``j_s``. Its membership test costs ``s`` comparisons, so ``k / 2`` per sampled
    edge in ``k`` kernel launches: the cheapest method while ``k`` is small."""
    j, chosen = _floyd_draws(deg, k, generator)
    for step in range(1, k):
        seen = (chosen[:, :step] == chosen[:, step : step + 1]).any(dim=1)
        chosen[:, step] = torch.where(seen, j[:, step], chosen[:, step])
    return chosen


def _floyd_sorted(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """Floyd's algorithm with every step's membership test resolved at once: one row-wise sort and a few
    gathers, ``O(k log k)`` per row in a fixed number of launches.

    Step ``s`` finds ``t_s`` already chosen exactly when an earlier step drew the same ``t`` (whatever it then
    kept, that value is in the set), or when step ``i = t_s - (deg - k) < s`` found its own ``t_i`` chosen and
    kept ``j_i = t_s``. The first is a duplicate among the ``t`` (the sort); the second a pointer to an earlier
    step's outcome, followed until nothing changes (chains are rare: ``t_s`` must hit one value of ``deg``).
    Same numbers in, same positions out as :func:`_floyd` (tested).
    """
    j, t = _floyd_draws(deg, k, generator)
    values, order = torch.sort(t, dim=1, stable=True)
    repeat_sorted = torch.zeros_like(values, dtype=torch.bool)
    repeat_sorted[:, 1:] = values[:, 1:] == values[:, :-1]  # a later draw of a value an earlier step drew
    seen = repeat_sorted.scatter(1, order, repeat_sorted)
    back = t - (deg - k).unsqueeze(1)  # the step whose j equals t, where 0 <= back < s
    points = (back >= 0) & (back < torch.arange(k, device=deg.device))
    if bool(points.any()):
        back.clamp_(0, k - 1)
        repeated = seen
        while True:
            following = repeated | (points & seen.gather(1, back))
            if torch.equal(following, seen):
                break
            seen = following
    return torch.where(seen, j, t)


def _smallest_keys(deg: Tensor, k: int, generator: torch.Generator | None) -> Tensor:
    """The positions of the ``k`` smallest of ``deg`` uniform keys per row (a uniform random k-subset)."""
    width = int(deg.max())
    keys = torch.rand(deg.numel(), width, device=deg.device, generator=generator, dtype=torch.float64)
    keys.masked_fill_(torch.arange(width, device=deg.device) >= deg.unsqueeze(1), float("inf"))
    return keys.topk(k, dim=1, largest=False, sorted=False).indices


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

    def __init__(
        self, rowptr: Tensor, col: Tensor, fanouts: Sequence[int], *, replace: bool = False, seed: int = 0
    ) -> None:
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
        self._first = torch.full((self.num_nodes,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=self.device)

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

    def _place_seeds(self, seeds: Tensor, check: bool) -> Tensor:
        """``seeds`` as int64 on the device, given local ids ``0..S-1`` in the scratch map; with ``check``, ids out
        of range or repeated are refused (the map is restored first)."""
        seeds = seeds.to(self.device, torch.int64)
        if check and seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= self.num_nodes):
            raise ValueError(
                f"seed node ids must be in [0, {self.num_nodes - 1}] "
                f"(got min {int(seeds.min())}, max {int(seeds.max())})"
            )
        seed_ids = torch.arange(seeds.numel(), device=self.device)
        self._local.index_copy_(0, seeds, seed_ids)
        if check and not bool((self._local.index_select(0, seeds) == seed_ids).all()):
            self._local.index_fill_(0, seeds, -1)
            raise ValueError("seed nodes must be distinct (got repeated ids)")
        return seeds

    @in_code_path("sample")
    def sample(self, seeds: Tensor, *, check: bool = True) -> SampledSubgraph:
        """Sample the multi-hop neighbourhood of distinct ``seeds`` (global ids).

        ``check=False`` skips the range and distinctness checks, three reads of device values back to the host
        per batch: for a caller whose seeds are a slice of a permutation of valid ids (the device batch source).
        """

        def draw(hop: int, k: int, start: Tensor, deg: Tensor) -> tuple[Tensor, Tensor, Tensor]:
            owner, pos = sample_positions(deg, k, self.replace, self.generator)
            eid = start.index_select(0, owner).add_(pos)
            return owner, eid, self.col.index_select(0, eid).to(torch.int64)

        return SampledSubgraph(**self.walk_hops(seeds, check, draw))

    def walk_hops(self, seeds: Tensor, check: bool, draw: HopDraw) -> dict[str, Any]:
        """The hop loop every sampler of this CSR shares: place ``seeds``, then per hop ``draw(hop, k, start,
        deg)`` (the frontier's CSR offsets and degrees) picks the hop's edges as ``(owner, eid, nbr)`` (each
        edge's frontier position, edge id and neighbour, grouped by owner); the neighbours are relabelled and the
        next frontier is the nodes first seen in this hop. Returns the fields of a
        :class:`SampledSubgraph`."""
        seeds = self._place_seeds(seeds, check)
        nodes = [seeds]
        touched = [seeds]  # every node with a scratch entry, restored in `finally`
        rows, cols, edges = [], [], []
        num_nodes, num_edges = [seeds.numel()], []
        # The frontier's local ids are always one contiguous range (seeds: 0..S-1; then each hop's new
        # nodes, numbered in order), so a draw's target is its owner's position plus the range's start.
        frontier, frontier_base = seeds, 0
        n = seeds.numel()
        try:
            for hop, k in enumerate(self.fanouts):
                start = self.rowptr.index_select(0, frontier).to(torch.int64)
                deg = self.rowptr.index_select(0, frontier + 1).to(torch.int64) - start
                owner, eid, nbr = draw(hop, k, start, deg)
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
        return {
            "node": torch.cat(nodes).to(idx),
            "row": torch.cat(rows).to(idx),
            "col": torch.cat(cols).to(idx),
            "edge": torch.cat(edges).to(idx),
            "num_sampled_nodes": num_nodes,
            "num_sampled_edges": num_edges,
        }
