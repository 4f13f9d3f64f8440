"""Sampling where the model computes (``Flags.sampler_device``: ``"device"`` or ``"uva"``): the device batch
source and the reasons it cannot run (:func:`device_sampling_reasons`, part of
:func:`gnnbench.sampling.sources.unavailable`).
"""

from __future__ import annotations

from typing import Iterator

import torch
from torch import Tensor

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs.prepare import PreparedGraph
from gnnbench.host_memory import uva_view
from gnnbench.sampling.batch import Batch, BatchSource, target_rowptr
from gnnbench.sampling.labor import LaborSampleCore
from gnnbench.sampling.neighbor import NeighborSampleCore
from gnnbench.text import human_bytes

__all__ = ["DeviceNeighborBatches", "device_sampling_reasons"]


class DeviceNeighborBatches(BatchSource):
    """Neighbour-sampled node batches drawn where the model computes (``Flags.sampler_device``): the CSR on the
    device (``"device"``), or in pinned host memory read by device kernels (``"uva"``, for a graph larger than
    device memory), sampled by :class:`~gnnbench.sampling.neighbor.NeighborSampleCore` (device-agnostic torch);
    the seeds are shuffled on the device per epoch. Ids, edges and the batch's CSR never visit the host (the
    features do only when they live there: ``feature_placement``).

    Args:
        prepared: The prepared graph.
        flags: Sampling flags (``fanout``, ``batch_size``, ``sample_replace``, ``keep_csr``, ``sampler_device``).
        device: Where sampling runs.
        input_nodes: Seed nodes (default: the training nodes).
        seed: Seed of the sampler and of the per-epoch shuffle.
    """

    norm_mode = "batch"

    def __init__(
        self,
        prepared: PreparedGraph,
        flags: Flags,
        *,
        device: torch.device | str,
        input_nodes: Tensor | None = None,
        seed: int = 0,
    ) -> None:
        self.device = torch.device(device)
        csr = prepared.neighbours()
        if flags.sampler_device == "uva":
            self._pinned = (csr.rowptr.contiguous().pin_memory(), csr.col.contiguous().pin_memory())
            rowptr, col = (uva_view(t, self.device, "sampler_device") for t in self._pinned)
        else:
            rowptr, col = csr.rowptr.to(self.device), csr.col.to(self.device)
        core = LaborSampleCore if flags.sampler == "labor" else NeighborSampleCore
        self.core = core(rowptr, col, flags.fanout, replace=flags.sample_replace, seed=seed)
        seeds = input_nodes if input_nodes is not None else prepared.graph.train_mask.nonzero().view(-1)
        n = rowptr.numel() - 1
        if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= n):
            raise ValueError(
                f"input_nodes must be node ids in [0, {n - 1}] (got min {int(seeds.min())}, max {int(seeds.max())})"
            )
        if seeds.unique().numel() != seeds.numel():
            raise ValueError("input_nodes must be distinct (got repeated ids)")
        self.seeds = seeds.to(self.device, rowptr.dtype)  # checked once: batches sample them unchecked
        self.batch_size = flags.batch_size
        self.csr = flags.keep_csr
        self.seed = seed

    def steps_per_epoch(self) -> int | None:
        return -(-self.seeds.numel() // self.batch_size)

    def epoch(self, epoch: int) -> Iterator[Batch]:
        g = torch.Generator(device=self.device)
        g.manual_seed(self.seed * 1_000_003 + epoch)
        perm = torch.randperm(self.seeds.numel(), generator=g, device=self.device)
        for chunk in perm.split(self.batch_size):
            seeds = self.seeds.index_select(0, chunk)
            out = self.core.sample(seeds, check=False)  # a slice of a permutation of the source's own seeds
            n = out.node.numel()
            yield Batch(
                n_id=out.node,
                edge_index=torch.stack([out.row, out.col]),
                e_id=out.edge,
                target=torch.arange(seeds.numel(), dtype=out.node.dtype, device=self.device),
                num_sampled_nodes=out.num_sampled_nodes,
                num_sampled_edges=out.num_sampled_edges,
                rowptr=target_rowptr(out.col, n) if self.csr else None,
                edge_weight=getattr(out, "weight", None),
            )


def device_sampling_reasons(flags: Flags, ctx: RunContext, kind: str) -> list[Unavailable]:
    """Why ``flags.sampler_device`` cannot run here (empty for ``"host"``)."""
    if flags.sampler_device == "host":
        return []
    what = {
        "device": "gpu_sampling keeps the CSR on a CUDA device and samples there",
        "uva": "uva_sampling maps the pinned CSR into a CUDA device's address space",
    }[flags.sampler_device]
    out = []
    device = torch.device(ctx.device)
    if device.type != "cuda":
        out.append(f"{what}; on a CPU host and device memory are the same (device is {device.type})")
    if kind != "neighbor":
        out.append(
            f"sampling on the device draws neighbour-sampled node batches (batch_source='neighbor', node "
            f"classification); this run's batches are {kind!r}"
        )
    if flags.sampler_backend != "gnnbench":
        out.append(
            f"sampling on the device is gnnbench's sampler (device-agnostic torch); got "
            f"sampler_backend={flags.sampler_backend!r}"
        )
    if flags.num_workers:
        out.append(
            f"loader workers are CPU processes; sampling on the device runs in the training process "
            f"(num_workers=0, got {flags.num_workers})"
        )
    if flags.batch_cache_epochs:
        out.append(
            "the batch cache stores host batches; sampling on the device keeps them on the device "
            "(batch_cache_epochs=0)"
        )
    if flags.parallel != "none":
        out.append(f"sampling on the device has no per-rank split (parallel={flags.parallel!r})")
    if (
        flags.sampler_device == "device"
        and device.type == "cuda"
        and torch.cuda.is_available()
        and ctx.num_nodes
        and ctx.num_edges
    ):
        need = (ctx.num_nodes + 1 + ctx.num_edges) * (4 if flags.index_dtype == "int32" else 8)
        free = torch.cuda.mem_get_info(device)[0]
        if need > free // 2:
            out.append(
                f"the CSR needs {human_bytes(need)}, more than half the free device memory "
                f"({human_bytes(free)}): use uva_sampling (the CSR stays in pinned host memory)"
            )
    return [Unavailable("sampler_device", r) for r in out]
