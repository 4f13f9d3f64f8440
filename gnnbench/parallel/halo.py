"""Partition-parallel aggregation: each rank owns one part and fetches its halo from the others.

Rank ``r`` owns the nodes of part ``r`` (:class:`~gnnbench.parallel.partition.Partition`) and
aggregates over their in-edges, whose sources are its own nodes or *halo* nodes owned by peers.
:class:`HaloPlan` (built once, no communication) holds one rank's owned ids, halo ids, per-peer
send lists and local edges; :class:`HaloExchange` sends every peer the owned rows its halo holds
in one ``all_to_all_single`` and records each call (:class:`HaloStep`), optionally reusing a halo
for ``cache_steps`` calls (stale rows); :func:`partition_aggregate` is the exchange plus
:func:`aggregate_local`, equal for the owned rows to aggregation over the whole graph on one
process. The process group is the caller's: gloo for CPU tensors, NCCL for CUDA (:func:`backend_for`).

How the plans agree without an exchange, what is recorded and the halo cache's staleness:
``docs/distributed.md``.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn
from torch import Tensor

from gnnbench.graphs.container import Graph
from gnnbench.parallel.partition import Partition

__all__ = [
    "REDUCES",
    "HaloExchange",
    "HaloExchangeError",
    "HaloPlan",
    "HaloStep",
    "aggregate_local",
    "backend_for",
    "partition_aggregate",
]

REDUCES = ("sum", "mean")


class HaloExchangeError(RuntimeError):
    """A halo exchange failed (a peer died, timed out, or disagrees on the plan); names rank and step."""


def backend_for(device: torch.device | str) -> str:
    """The torch.distributed backend for tensors on ``device``: NCCL for CUDA, gloo otherwise."""
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


@dataclass(frozen=True, eq=False)
class HaloPlan:
    """One rank's share of a partitioned graph, built once at setup.

    Args:
        rank: This rank's part.
        num_parts: Number of parts (= world size).
        owned: ``[n_own]`` global ids this rank owns, ascending; local row ``i`` is ``owned[i]``.
        halo: ``[n_halo]`` global ids of the remote sources, grouped by owner rank, ascending
            inside a group; the order of the rows :meth:`HaloExchange.exchange` returns.
        recv_counts: Halo rows coming from each rank (0 for this rank).
        send_index: ``[n_send]`` local rows (positions in ``owned``) to send, grouped by peer,
            ascending global id inside a group.
        send_counts: Rows going to each rank (0 for this rank).
        edge_index: ``[2, e]`` local edges: source in ``[0, n_own + n_halo)`` (own rows, then
            halo rows), target in ``[0, n_own)``, sorted by target.
        in_degree: ``[n_own]`` in-degree of every owned node.
    """

    rank: int
    num_parts: int
    owned: Tensor
    halo: Tensor
    recv_counts: tuple[int, ...]
    send_index: Tensor
    send_counts: tuple[int, ...]
    edge_index: Tensor
    in_degree: Tensor

    @classmethod
    def build(cls, graph: Graph, partition: Partition, rank: int) -> "HaloPlan":
        """The plan of ``rank`` (vectorized: a few passes over the edges, no loop over nodes or edges)."""
        n, k = graph.num_nodes, partition.num_parts
        if partition.num_nodes != n:
            raise ValueError(f"partition has {partition.num_nodes} nodes but the graph has {n}")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < k:
            raise ValueError(f"rank must be an integer in [0, {k - 1}] (got {rank!r})")
        parts = partition.parts
        src, dst = graph.edge_index.to(torch.int64)
        src_part, dst_part = parts[src], parts[dst]

        owned = (parts == rank).nonzero().view(-1)
        mine = dst_part == rank  # in-edges of owned nodes
        cross_in = mine & (src_part != rank)
        recv_keys = torch.unique(src_part[cross_in] * n + src[cross_in])  # sorted by (owner, id)
        halo = recv_keys % n
        recv_counts = torch.bincount(recv_keys // n, minlength=k)

        slot = torch.full((n,), -1, dtype=torch.int64)  # global id -> row of [own; halo]
        slot[owned] = torch.arange(owned.numel())
        slot[halo] = owned.numel() + torch.arange(halo.numel())
        local_src, local_dst = slot[src[mine]], slot[dst[mine]]  # targets stay sorted: owned is ascending

        cross_out = (src_part == rank) & (dst_part != rank)  # my rows that peers' targets read
        send_keys = torch.unique(dst_part[cross_out] * n + src[cross_out])  # sorted by (peer, id)
        send_index = slot[send_keys % n]
        send_counts = torch.bincount(send_keys // n, minlength=k)

        return cls(
            rank=rank,
            num_parts=k,
            owned=owned,
            halo=halo,
            recv_counts=tuple(recv_counts.tolist()),
            send_index=send_index,
            send_counts=tuple(send_counts.tolist()),
            edge_index=torch.stack([local_src, local_dst]),
            in_degree=torch.bincount(local_dst, minlength=owned.numel()),
        )

    @property
    def num_owned(self) -> int:
        return self.owned.numel()

    @property
    def num_halo(self) -> int:
        return self.halo.numel()

    def to(self, device: torch.device | str) -> "HaloPlan":
        """The plan with its tensors on ``device``."""
        return replace(
            self,
            owned=self.owned.to(device),
            halo=self.halo.to(device),
            send_index=self.send_index.to(device),
            edge_index=self.edge_index.to(device),
            in_degree=self.in_degree.to(device),
        )


@dataclass(frozen=True)
class HaloStep:
    """What one call of :meth:`HaloExchange.exchange` moved.

    Args:
        step: Call number, from 0.
        rows_received, rows_sent: Halo rows received from / sent to all peers (0 when cached).
        bytes_received, bytes_sent: The same in bytes.
        seconds: Wall time in the collective (0 when cached).
        cached: Whether the halo came from the cache (stale) instead of the peers.
    """

    step: int
    rows_received: int
    rows_sent: int
    bytes_received: int
    bytes_sent: int
    seconds: float
    cached: bool


class HaloExchange:
    """Sends every peer the owned rows it needs and returns this rank's halo rows.

    Args:
        plan: This rank's :class:`HaloPlan`; its rank and part count must equal the
            process group's rank and size.
        group: Process group (default: the default group).
        device: Device of the rows exchanged (default CPU); the plan moves there. NCCL
            needs CUDA, gloo CPU.
        cache_steps: Reuse an exchanged halo for this many following calls with the same key
            (stale rows, see ``docs/distributed.md``). Default 0: exchange on every call.
        verify: Exchange the per-peer counts once at setup and check that every peer
            expects what this rank sends (one small collective). Default True.

    Raises:
        ValueError: for a plan that does not match the process group, or ``cache_steps < 0``.
        HaloExchangeError: when the setup check fails or a peer is gone.
    """

    def __init__(
        self,
        plan: HaloPlan,
        *,
        group: dist.ProcessGroup | None = None,
        device: torch.device | str = "cpu",
        cache_steps: int = 0,
        verify: bool = True,
    ) -> None:
        if not dist.is_initialized():
            raise ValueError("HaloExchange needs an initialized process group (torch.distributed.init_process_group)")
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        if world != plan.num_parts or rank != plan.rank:
            raise ValueError(
                f"plan is for rank {plan.rank} of {plan.num_parts} parts but this process is "
                f"rank {rank} of a group of {world}; build the plan with the group's rank and size"
            )
        if isinstance(cache_steps, bool) or not isinstance(cache_steps, int) or cache_steps < 0:
            raise ValueError(f"cache_steps must be an integer >= 0 (got {cache_steps!r})")
        self.device = torch.device(device)
        self.plan = plan.to(self.device)
        self.group = group
        self.cache_steps = cache_steps
        self.steps: list[HaloStep] = []
        self._cache: dict[Hashable, tuple[Tensor, int]] = {}  # key -> (halo rows, calls served since)
        if verify:
            self._verify_counts()

    def _collective(self, what: str, fn) -> float:
        """Run ``fn`` (a collective), return its seconds; wrap failures in :class:`HaloExchangeError`."""
        sync = self.device.type == "cuda"
        try:
            if sync:
                torch.cuda.synchronize(self.device)
            t0 = time.perf_counter()
            fn()
            if sync:
                torch.cuda.synchronize(self.device)
            return time.perf_counter() - t0
        except RuntimeError as exc:  # DistBackendError is a RuntimeError
            raise HaloExchangeError(
                f"halo {what} failed on rank {self.plan.rank} of {self.plan.num_parts} "
                f"(a peer died, timed out or is not in the same call): {type(exc).__name__}: {exc}"
            ) from exc

    def _verify_counts(self) -> None:
        sent = torch.tensor(self.plan.send_counts, dtype=torch.int64, device=self.device)
        expected = torch.empty_like(sent)
        self._collective("setup (count check)", lambda: dist.all_to_all_single(expected, sent, group=self.group))
        if tuple(expected.tolist()) != self.plan.recv_counts:
            raise HaloExchangeError(
                f"halo plans disagree on rank {self.plan.rank}: peers send {expected.tolist()} rows but this "
                f"rank expects {list(self.plan.recv_counts)}; build every rank's plan from the same graph and partition"
            )

    def exchange(self, local_x: Tensor, key: Hashable = 0) -> Tensor:
        """This rank's halo rows, ``[n_halo, *local_x.shape[1:]]``, in the order of ``plan.halo``.

        Args:
            local_x: ``[n_own, ...]`` rows of the owned nodes, in the order of ``plan.owned``,
                on the exchange's device. Differentiable: when it requires grad, the halo's
                gradient flows back to its owners (a reverse all-to-all in backward).
            key: Cache slot (used only with ``cache_steps > 0``): exchanges of different
                tensors, such as the inputs of different layers, need different keys.
        """
        plan = self.plan
        if local_x.size(0) != plan.num_owned:
            raise ValueError(f"local_x must have one row per owned node ({plan.num_owned}) (got {local_x.size(0)})")
        step = len(self.steps)
        cached, age = self._cache.get(key, (None, 0))
        if (
            cached is not None
            and age < self.cache_steps
            and cached.dtype == local_x.dtype
            and cached.shape[1:] == local_x.shape[1:]
        ):
            self._cache[key] = (cached, age + 1)
            self.steps.append(HaloStep(step, 0, 0, 0, 0, 0.0, cached=True))
            return cached
        send = local_x.index_select(0, plan.send_index).contiguous()
        recv = local_x.new_empty((plan.num_halo, *local_x.shape[1:]))
        out_splits, in_splits = list(plan.recv_counts), list(plan.send_counts)
        if local_x.requires_grad and torch.is_grad_enabled():
            result: list[Tensor] = []
            seconds = self._collective(
                f"exchange step {step}",
                lambda: result.append(
                    dist_fn.all_to_all_single(
                        recv, send, output_split_sizes=out_splits, input_split_sizes=in_splits, group=self.group
                    )
                ),
            )
            recv = result[0]
        else:
            seconds = self._collective(
                f"exchange step {step}",
                lambda: dist.all_to_all_single(
                    recv, send, output_split_sizes=out_splits, input_split_sizes=in_splits, group=self.group
                ),
            )
        self.steps.append(HaloStep(step, plan.num_halo, send.size(0), recv.nbytes, send.nbytes, seconds, cached=False))
        if self.cache_steps:
            self._cache[key] = (recv.detach(), 0)
        return recv

    def totals(self) -> dict[str, float | int]:
        """Sums over the recorded steps: rows and bytes each way, collective seconds, cached calls."""
        return {
            "steps": len(self.steps),
            "cached_steps": sum(s.cached for s in self.steps),
            "rows_received": sum(s.rows_received for s in self.steps),
            "rows_sent": sum(s.rows_sent for s in self.steps),
            "bytes_received": sum(s.bytes_received for s in self.steps),
            "bytes_sent": sum(s.bytes_sent for s in self.steps),
            "seconds": sum(s.seconds for s in self.steps),
        }


def aggregate_local(plan: HaloPlan, local_x: Tensor, halo_x: Tensor, reduce: str = "sum") -> Tensor:
    """Sum or mean over the in-edges of the owned nodes, from own rows and halo rows.

    Args:
        plan: This rank's plan (tensors on ``local_x``'s device).
        local_x: ``[n_own, F]`` owned rows, in the order of ``plan.owned``.
        halo_x: ``[n_halo, F]`` halo rows, in the order of ``plan.halo``.
        reduce: ``"sum"`` (default) or ``"mean"`` (0 for a node without in-edges).

    Returns:
        ``[n_own, F]`` aggregated rows of the owned nodes.
    """
    if reduce not in REDUCES:
        raise ValueError(f"unknown reduce {reduce!r}; accepted: {', '.join(REDUCES)}")
    table = torch.cat([local_x, halo_x], dim=0)
    src, dst = plan.edge_index
    out = local_x.new_zeros((plan.num_owned, *local_x.shape[1:])).index_add(0, dst, table.index_select(0, src))
    if reduce == "mean":
        deg = plan.in_degree.clamp(min=1).to(out.dtype)
        out = out / deg.view(-1, *([1] * (out.dim() - 1)))
    return out


def partition_aggregate(exchange: HaloExchange, local_x: Tensor, reduce: str = "sum", *, key: Hashable = 0) -> Tensor:
    """Exchange the halo, then aggregate over the owned nodes' in-edges (:func:`aggregate_local`).

    For the owned rows the result equals aggregation over the whole graph on one process
    (with a cache, up to the staleness of the halo rows). ``key`` is the cache slot
    (see :meth:`HaloExchange.exchange`).
    """
    if reduce not in REDUCES:
        raise ValueError(f"unknown reduce {reduce!r}; accepted: {', '.join(REDUCES)}")
    return aggregate_local(exchange.plan, local_x, exchange.exchange(local_x, key=key), reduce)
