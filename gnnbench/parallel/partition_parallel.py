"""Partition-parallel training (``Flags.parallel="partition"``): each rank trains on its own part of the graph.

The case for a graph too large for one device (``docs/rules.md``): split the nodes into ``N`` parts
(:func:`gnnbench.parallel.partition.partition`), give each rank one part and exchange, at every
layer, the rows of the nodes whose edges cross parts. :func:`partition_for` is the layer's factory;
:class:`PartitionParallel` holds this rank's part and runs the step's collectives (a halo exchange per
layer, forward and backward, then one all-reduce of the gradients and the loss), and
:class:`PartitionComm` records them per step. A step is full-graph training, one step per epoch, and
computes the same as single-process full-batch training. :func:`unavailable` answers for ``parallel="partition"``
and ``partitioner``.

The step layer by layer, the setup and what the run measures (training, not the memory saving):
``docs/distributed.md``.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from gnnbench.flags import Flags, RunContext, Unavailable
from gnnbench.graphs.norm import GCNNorm
from gnnbench.models.aggregation import Aggregator
from gnnbench.models.precision import Precision
from gnnbench.parallel.compression import CommRecorder
from gnnbench.parallel.halo import HaloExchange, HaloPlan
from gnnbench.parallel.partition import Partition, partition

__all__ = ["PartitionComm", "PartitionParallel", "FORMULA", "partition_for", "unavailable"]

FORMULA = (
    "halo rows x row bytes sent per layer in forward and again in backward (all_to_all_single), plus "
    "the fp32 gradients and the loss in one all_reduce"
)


class PartitionComm(CommRecorder):
    """:class:`CommRecorder` with the halo exchanges and the gradient all-reduce told apart.

    Per measured step: ``seconds`` (union of every collective's interval), ``bytes`` (sent by this rank),
    and in :attr:`kinds` the same split by kind (``"halo"``, ``"grad"``), with the halo rows sent.
    """

    def __init__(self, world_size: int) -> None:
        super().__init__(world_size, FORMULA)
        self._step: dict[str, list[float]] = {}
        self.kinds: dict[str, dict[str, list[float]]] = {}

    def add_kind(self, kind: str, start: float, end: float, nbytes: int, rows: int = 0) -> None:
        self.add(start, end, nbytes, nbytes)
        acc = self._step.setdefault(kind, [0.0, 0.0, 0.0])
        acc[0] += end - start
        acc[1] += nbytes
        acc[2] += rows

    def end_step(self, measured: bool) -> None:
        super().end_step(measured)
        if measured:
            for kind, (seconds, nbytes, rows) in self._step.items():
                k = self.kinds.setdefault(kind, {"seconds": [], "bytes": [], "rows": []})
                k["seconds"].append(seconds)
                k["bytes"].append(nbytes)
                k["rows"].append(rows)
        self._step = {}

    def figures(self) -> dict[str, Any]:
        """Medians per measured step, by kind: ``{kind}_seconds``, ``{kind}_bytes`` and ``halo_rows``."""
        out: dict[str, Any] = {}
        for kind, k in self.kinds.items():
            out[f"{kind}_seconds_median"] = statistics.median(k["seconds"]) if k["seconds"] else None
            out[f"{kind}_bytes_per_step"] = statistics.median(k["bytes"]) if k["bytes"] else None
            if kind == "halo":
                out["halo_rows_per_step"] = statistics.median(k["rows"]) if k["rows"] else None
        return out


class _HaloRows(torch.autograd.Function):
    """The halo rows of ``local`` (forward all-to-all) whose gradient returns to the owners (reverse)."""

    @staticmethod
    def forward(ctx, local: Tensor, runner: "PartitionParallel", layer: int) -> Tensor:
        ctx.runner, ctx.layer, ctx.owned = runner, layer, local.size(0)
        return runner.send_rows(local.index_select(0, runner.plan.send_index).contiguous(), layer, backward=False)

    @staticmethod
    def backward(ctx, grad: Tensor):
        runner = ctx.runner
        sent = runner.send_rows(grad.contiguous(), ctx.layer, backward=True)
        out = grad.new_zeros((ctx.owned, *grad.shape[1:])).index_add_(0, runner.plan.send_index, sent)
        return out, None, None


class PartitionParallel:
    """This rank's part: its features, local edges, halo plan and the collectives of a step.

    Args:
        graph: The whole (prepared) graph, the same on every rank.
        norm: The whole graph's GCN coefficients (``PreparedGraph.gcn_norm()``), in ``graph``'s edge order.
        flags: ``partitioner`` (``"metis"`` or ``"degree"``) and ``aggregation`` are read.
        device: This rank's device (CUDA with NCCL, CPU with gloo).
        precision: The run's precision policy (aggregation dtype).
        seed: METIS's seed.
        verify: Check the halo plans against the peers at setup (one small collective).

    Raises:
        ValueError: without an initialized process group.
    """

    def __init__(
        self,
        graph: Any,
        norm: GCNNorm,
        flags: Flags,
        device: torch.device,
        precision: Precision,
        *,
        seed: int = 0,
        verify: bool = True,
    ) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError(
                "partition-parallel training runs on ranks started by gnnbench.measure.run.launch "
                "(torchrun); no process group here"
            )
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.device = device
        comm_device = device if device.type == "cuda" else torch.device("cpu")
        n = graph.num_nodes
        # rank 0 partitions; every rank gets the same owner vector (and rank 0's partition time)
        parts = torch.empty(n, dtype=torch.int64, device=comm_device)
        seconds = torch.zeros(1, dtype=torch.float64, device=comm_device)
        if self.rank == 0:
            made = partition(graph, self.world, flags.partitioner, seed=seed)
            parts.copy_(made.parts)
            seconds.fill_(made.seconds)
        dist.broadcast(parts, src=0)
        dist.broadcast(seconds, src=0)
        self.partition = Partition(
            parts=parts.cpu(),
            method=flags.partitioner,
            num_parts=self.world,
            seconds=float(seconds.item()),
            edge_index=graph.edge_index,
        )
        plan = HaloPlan.build(graph, self.partition, self.rank)
        self.exchange = HaloExchange(plan, device=device, verify=verify)
        self.plan = self.exchange.plan  # on the device
        self.comm = PartitionComm(self.world)

        owned = plan.owned
        self.x = graph.x.index_select(0, owned).to(device)
        mine = self.partition.parts.index_select(0, graph.edge_index[1].to(torch.int64)) == self.rank
        local = GCNNorm(norm.edge_weight[mine].to(device), norm.self_weight.index_select(0, owned).to(device))
        self.agg = Aggregator(
            self.plan.edge_index,
            plan.num_owned,
            mode=flags.aggregation,
            dtype=precision.aggregation_dtype,
            gcn_weights=lambda: local,
            target_start=0,
        )
        train = graph.train_mask.index_select(0, owned)
        self.train_rows = train.nonzero().view(-1).to(device)
        self.labels = graph.y.index_select(0, owned)[train].to(device)
        self.train_total = int(graph.train_mask.sum())
        if self.train_total == 0:
            raise ValueError("partition-parallel training needs training nodes (train_mask is empty)")

    # ------------------------------------------------------------------ collectives
    def send_rows(self, send: Tensor, layer: int, *, backward: bool) -> Tensor:
        """One all-to-all of rows: forward sends ``send_index`` rows and receives the halo; backward sends
        the halo's gradient and receives the gradient of the rows this rank sent (splits reversed)."""
        plan = self.plan
        out_splits, in_splits = list(plan.recv_counts), list(plan.send_counts)
        if backward:
            out_splits, in_splits = in_splits, out_splits
        recv = send.new_empty((sum(out_splits), *send.shape[1:]))
        what = f"{'backward' if backward else 'forward'} halo exchange, layer {layer}"
        start = time.perf_counter()
        self.exchange._collective(
            what, lambda: dist.all_to_all_single(recv, send, output_split_sizes=out_splits, input_split_sizes=in_splits)
        )
        self.comm.add_kind("halo", start, time.perf_counter(), send.nbytes, rows=send.size(0))
        return recv

    def allreduce(self, params: list[nn.Parameter], loss: Tensor) -> Tensor:
        """Sum every gradient and the loss over the ranks in one all-reduce; returns the global loss."""
        grads = [p.grad for p in params if p.grad is not None]
        flat = _flatten_dense_tensors([g.float() for g in grads] + [loss.detach().float().view(1)])
        start = time.perf_counter()
        self.exchange._collective("gradient all-reduce", lambda: dist.all_reduce(flat))
        self.comm.add_kind("grad", start, time.perf_counter(), flat.nbytes)
        for g, summed in zip(grads, _unflatten_dense_tensors(flat[:-1], grads)):
            g.copy_(summed)
        return flat[-1]

    # ------------------------------------------------------------------ the step
    def forward(self, model: nn.Module, precision: Precision) -> Tensor:
        """The owned nodes' outputs: per layer, node-wise part, halo exchange, aggregation."""
        x = self.x
        for i in range(model.num_layers):
            m = model.messages(i, x, precision)
            halo = _HaloRows.apply(m, self, i)
            x = model.combine(i, torch.cat([m, halo.to(m.dtype)]), self.agg, precision)
        return x

    def loss(self, out: Tensor) -> Tensor:
        """This rank's share of the whole graph's mean cross-entropy over the training nodes."""
        logits = out.index_select(0, self.train_rows).float()
        return F.cross_entropy(logits, self.labels, reduction="sum") / self.train_total

    def summary(self) -> dict[str, Any]:
        """The partition's quality and this rank's halo (for the result's ``distributed`` block)."""
        p = self.partition
        return {
            **p.summary(),
            "halo_rows": self.plan.num_halo,
            "owned_rows": self.plan.num_owned,
            "send_rows": int(self.plan.send_index.numel()),
        }


def partition_for(
    graph: Any, norm: Callable[[], GCNNorm], flags: Flags, device: torch.device, precision: Precision, *, seed: int = 0
) -> PartitionParallel | None:
    """This rank's part when ``flags.parallel`` is ``"partition"``, else ``None`` (the layer's factory).

    Args:
        graph: The whole prepared graph.
        norm: Gives the whole graph's GCN coefficients (called only when partitioning).
        flags: The run's flags.
        device: This rank's device.
        precision: The run's precision policy.
        seed: METIS's seed.
    """
    if flags.parallel != "partition":
        return None
    return PartitionParallel(graph, norm(), flags, device, precision, seed=seed)


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """What partition-parallel training (full-graph steps, one halo exchange per layer) cannot run in ``ctx``, and
    a partitioner set without it."""
    out = []
    if flags.parallel == "partition":
        if ctx.world_size < 2:
            out.append(Unavailable("parallel", f"partitioning needs --nproc >= 2 (got {ctx.world_size})"))
        if flags.batch_source != "full":
            out.append(
                Unavailable(
                    "batch_source",
                    "partition-parallel training is full-graph (each step is one "
                    "epoch over every rank's part, with a halo exchange per layer): it needs "
                    f"batch_source='full' (got {flags.batch_source!r}; the partition entries set it)",
                )
            )
        if ctx.task != "node":
            out.append(
                Unavailable(
                    "parallel",
                    "partition-parallel training trains node classification; link "
                    "prediction's held-out edges have no per-part split",
                )
            )
        if flags.compile:
            out.append(
                Unavailable(
                    "compile",
                    "partition-parallel layers run a collective between their two "
                    "halves; torch.compile is not applied to them",
                )
            )
        if flags.feature_placement != "host" or flags.pin_memory or flags.feature_prefetch:
            out.append(
                Unavailable(
                    "feature_placement",
                    "a part's features live on its rank's device from "
                    "setup; feature placement, pinning and prefetch apply to sampled batches",
                )
            )
        if flags.pipeline_depth or flags.feature_dtype != "float32":
            out.append(
                Unavailable(
                    "pipeline_depth" if flags.pipeline_depth else "feature_dtype",
                    "a part's features are set up once on its rank; the pipelined loader and fp16 "
                    "feature storage apply to the feature store of sampled batches",
                )
            )
        if flags.partitioner == "metis" and importlib.util.find_spec("pymetis") is None:
            out.append(Unavailable("partitioner", "METIS partitioning needs pymetis: pip install pymetis"))
    elif flags.partitioner != "metis":
        out.append(
            Unavailable(
                "partitioner", f"a partitioner applies to parallel='partition' (got parallel={flags.parallel!r})"
            )
        )
    return out
