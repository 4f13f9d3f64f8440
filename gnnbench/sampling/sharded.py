"""Data parallel's batches: each rank samples its share of every global batch of training seeds.

:class:`SeedShards` splits each epoch's global batches over the ranks (the same permutation on every rank);
:class:`ShardedNeighborBatches` samples this rank's share with the neighbour sampler;
:func:`rank_and_world` reads the ranks from the initialized process group. The batch source table picks them
for ``parallel="data"`` (:data:`gnnbench.sampling.sources.SHARDED_SOURCES`).
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import Tensor

from gnnbench.flags import Flags
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.sampling.batch import Batch
from gnnbench.sampling.loaders import NeighborBatches, worker_settings

__all__ = ["SeedShards", "ShardedNeighborBatches", "rank_and_world"]


class SeedShards:
    """Data parallel: this rank's share of every global batch of training seeds (a DataLoader batch sampler).

    Each epoch the ``n`` seeds are permuted from ``(seed, epoch)`` (the same permutation on every
    rank), cut into global batches of ``batch_size``, and each global batch into ``world_size``
    contiguous parts of near-equal size (``tensor_split``): rank ``r`` takes part ``r``. So the
    ranks' batches are disjoint and together cover every seed each epoch, the global batch is the
    single-process batch size, and every rank takes the same number of steps (DDP needs that). A last
    global batch smaller than ``world_size`` is merged into the one before it, so no rank gets an
    empty batch.
    """

    def __init__(self, n: int, batch_size: int, rank: int, world_size: int, seed: int = 0) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}) (got {rank})")
        if n < world_size or batch_size < world_size:
            raise ValueError(
                f"{world_size} ranks need at least {world_size} seeds and a batch size of at least "
                f"{world_size} (got {n} seeds, batch size {batch_size})"
            )
        self.n, self.batch_size, self.rank, self.world_size, self.seed = n, batch_size, rank, world_size, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def global_batches(self, epoch: int) -> list[Tensor]:
        """The epoch's global batches (positions into the seed list), the same on every rank."""
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        batches = list(torch.randperm(self.n, generator=g).split(self.batch_size))
        if len(batches) > 1 and batches[-1].numel() < self.world_size:
            batches[-2:] = [torch.cat(batches[-2:])]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        for b in self.global_batches(self.epoch):
            yield b.tensor_split(self.world_size)[self.rank].tolist()

    def __len__(self) -> int:
        full, rest = divmod(self.n, self.batch_size)
        return full + (1 if rest >= self.world_size or full == 0 else 0)


class ShardedNeighborBatches(NeighborBatches):
    """Neighbour-sampled batches of this rank's share of each global batch (:class:`SeedShards`): the
    loader's shuffle is replaced by the shared per-epoch split, everything else is :class:`NeighborBatches`."""

    def __init__(
        self,
        prepared: PreparedGraph,
        flags: Flags,
        *,
        input_nodes: Tensor | None = None,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        from torch_geometric.data import Data
        from torch_geometric.loader import NodeLoader

        super().__init__(prepared, flags, input_nodes=input_nodes, seed=seed)
        if input_nodes is None:
            input_nodes = prepared.graph.train_mask.nonzero().view(-1)
        self.shards = SeedShards(input_nodes.numel(), flags.batch_size, rank, world_size, seed=seed)
        data = Data(edge_index=prepared.edge_index, num_nodes=prepared.num_nodes)
        self.loader = NodeLoader(
            data,
            node_sampler=self.sampler,
            input_nodes=input_nodes,
            batch_sampler=self.shards,
            # no worker placement, as before: split places one process's threads and is refused for several ranks
            **worker_settings(flags, place_workers=False),
        )

    def epoch(self, epoch: int) -> Iterator[Batch]:
        self.shards.set_epoch(epoch)  # read by the loader's batch sampler, in this process
        return super().epoch(epoch)


def rank_and_world() -> tuple[int, int]:
    """``(rank, world size)`` of the initialized default process group, ``(0, 1)`` without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
