"""Feature placement: where node features live and how a batch's rows reach the device.

Placements (``Flags.feature_placement``), one class each in :data:`PLACEMENTS`:

- ``host`` (baseline): all features in host memory; each batch's rows are
  gathered on the host and copied to the device (pinned first when
  ``pin_memory``);
- ``device``: all features resident on the device; gathered there;
- ``hot_cold``: the rows of training nodes ("hot") resident on the device,
  the rest ("cold": val/test) in pinned host memory, copied per batch;
- ``uva``: all features in pinned host memory, read by the device directly
  (zero-copy over the interconnect through unified virtual addressing).

The placements other than ``host`` need CUDA; this layer answers for its
fields (``feature_placement``, ``pin_memory``, ``feature_prefetch``) in
:func:`unavailable`, and building a placement that cannot run raises
:class:`~gnnbench.flags.UnavailableError` naming the field, so nothing is
silently measured as a no-op. Bytes moved host -> device are counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator

import torch
from torch import Tensor

from gnnbench.flags import Flags, RunContext, Unavailable, UnavailableError
from gnnbench.timing import NullTimer

__all__ = ["PlacedFeatures", "HostFeatures", "DeviceFeatures", "HotColdFeatures", "UvaFeatures", "PLACEMENTS",
           "place_features", "unavailable", "TransferStats", "prefetch_features", "uva_view"]


@dataclass
class TransferStats:
    """Host -> device traffic of the feature store."""

    batches: int = 0  # gathers served
    bytes_h2d: int = 0  # total bytes moved host -> device
    last_bytes_h2d: int = 0  # bytes moved by the latest gather

    def record(self, nbytes: int) -> None:
        self.batches += 1
        self.bytes_h2d += nbytes
        self.last_bytes_h2d = nbytes

    @property
    def mean_bytes_per_batch(self) -> float:
        return self.bytes_h2d / self.batches if self.batches else 0.0


class _CudaArrayView:
    """Expose a pinned host buffer through ``__cuda_array_interface__``.

    Under unified virtual addressing, memory from ``cudaHostAlloc`` (which
    PyTorch's pinned allocator uses) is addressable by kernels at its host
    address, so a CUDA tensor over that address reads host memory directly.
    """

    def __init__(self, host: Tensor) -> None:
        if host.dtype != torch.float32:
            raise TypeError(f"uva_view supports float32 features (got {host.dtype})")
        self._host = host
        self.__cuda_array_interface__ = {
            "shape": tuple(host.shape), "typestr": "<f4", "data": (host.data_ptr(), False),
            "version": 3, "strides": None,
        }


def uva_view(host: Tensor, device: torch.device) -> Tensor:
    """A zero-copy CUDA view of the pinned, contiguous tensor ``host``; keep ``host`` alive."""
    if not host.is_pinned() or not host.is_contiguous():
        raise ValueError("uva_view needs pinned, contiguous host memory (call .contiguous().pin_memory() first)")
    view = torch.as_tensor(_CudaArrayView(host), device=device)
    if view.data_ptr() != host.data_ptr():
        # torch copied the buffer instead of viewing it (e.g. pinned under another current device).
        raise UnavailableError([Unavailable(
            "feature_placement", f"zero-copy (UVA) view of pinned memory is not possible on {device}: torch made "
            "a device copy instead")])
    probe = min(host.size(0), 4)
    if probe and not torch.equal(view[:probe].cpu(), host[:probe]):
        raise UnavailableError([Unavailable(
            "feature_placement", "zero-copy (UVA) access returned different values than host memory on this system")])
    return view


def _needs_cuda(what: str, device: torch.device) -> str | None:
    return None if device.type == "cuda" else f"{what} (device is {device.type})"


class PlacedFeatures:
    """Serve the features of a batch's nodes on ``device``; one subclass per placement.

    Args:
        x: ``[N, F]`` host features.
        device: Where batches are computed.
        hot_nodes: Node ids the ``hot_cold`` placement keeps on the device.
        pin_memory: Stage host-gathered rows in pinned memory before the copy.
    """

    name = ""

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        """Why this placement cannot run on ``device``, or ``None``."""
        return None

    def __init__(self, x: Tensor, device: torch.device | str, *, hot_nodes: Tensor | None = None,
                 pin_memory: bool = False) -> None:
        self.device = torch.device(device)
        items = [Unavailable(f, r) for f, r in _field_reasons(self.name, pin_memory, False, self.device)]
        if items:
            raise UnavailableError(items)
        if x.device.type != "cpu":
            raise ValueError(f"feature placement takes host features (got a tensor on {x.device})")
        self.pin_memory = pin_memory
        self.num_nodes, self.num_features = x.shape
        self.stats = TransferStats()
        self._host = x

    @property
    def placement(self) -> str:
        return self.name

    def device_bytes(self) -> int:
        """Feature bytes resident on the device (excluding per-batch buffers)."""
        return 0

    def gather(self, n_id: Tensor, timer=None) -> Tensor:
        """Rows ``x[n_id]`` on the device; records the host -> device bytes.

        Args:
            n_id: Global node ids.
            timer: Optional :class:`~gnnbench.timing.PhaseTimer`; the host or
                device gather is timed as ``gather`` and the copies as ``transfer``.
        """
        raise NotImplementedError


class HostFeatures(PlacedFeatures):
    """Baseline: all rows in host memory, gathered there and copied (pinned first with ``pin_memory``)."""

    name = "host"

    def gather(self, n_id: Tensor, timer=None) -> Tensor:
        timer = timer or NullTimer()
        ids = n_id.cpu()
        if self.device.type != "cuda":
            with timer.phase("gather"):
                rows = self._host.index_select(0, ids)
            self.stats.record(0)
            return rows
        with timer.phase("gather"):
            rows = _gather_rows(self._host, ids, pinned=self.pin_memory)
        with timer.phase("transfer"):
            out = rows.to(self.device, non_blocking=self.pin_memory)
        self.stats.record(rows.nbytes)
        return out


class DeviceFeatures(PlacedFeatures):
    """All rows resident on the device; only the ids cross the bus."""

    name = "device"

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        return _needs_cuda("feature_placement='device' keeps features on a CUDA device; on a CPU host and "
                           "device memory are the same", device)

    def __init__(self, x: Tensor, device: torch.device | str, **kwargs) -> None:
        super().__init__(x, device, **kwargs)
        self._table = x.to(self.device)

    def device_bytes(self) -> int:
        return self._table.nbytes

    def gather(self, n_id: Tensor, timer=None) -> Tensor:
        timer = timer or NullTimer()
        with timer.phase("transfer"):
            ids = n_id.to(self.device, non_blocking=True)
        with timer.phase("gather"):
            out = self._table.index_select(0, ids)
        self.stats.record(self._moved(n_id, ids))
        return out

    def _moved(self, n_id: Tensor, ids: Tensor) -> int:
        return n_id.nbytes if n_id.device.type == "cpu" else 0


class UvaFeatures(DeviceFeatures):
    """All rows in pinned host memory, read by device kernels directly (zero-copy through UVA)."""

    name = "uva"

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        return _needs_cuda("feature_placement='uva' maps pinned host memory into a CUDA device's address "
                           "space; on a CPU host and device memory are the same", device)

    def __init__(self, x: Tensor, device: torch.device | str, **kwargs) -> None:
        PlacedFeatures.__init__(self, x, device, **kwargs)
        with torch.cuda.device(self.device):  # pin under the target device so the view is zero-copy
            self._pinned = x.contiguous().pin_memory()
        self._table = uva_view(self._pinned, self.device)

    def device_bytes(self) -> int:
        return 0

    def _moved(self, n_id: Tensor, ids: Tensor) -> int:
        # the rows themselves cross the bus inside the gather kernel
        return super()._moved(n_id, ids) + ids.numel() * self.num_features * self._pinned.element_size()


class HotColdFeatures(PlacedFeatures):
    """``hot_nodes`` rows on the device, the others ("cold") in pinned host memory, copied per batch."""

    name = "hot_cold"

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        return _needs_cuda("feature_placement='hot_cold' keeps hot rows on a CUDA device; on a CPU host and "
                           "device memory are the same", device)

    def __init__(self, x: Tensor, device: torch.device | str, *, hot_nodes: Tensor | None = None,
                 pin_memory: bool = False) -> None:
        super().__init__(x, device, hot_nodes=hot_nodes, pin_memory=pin_memory)
        if hot_nodes is None:
            raise ValueError("hot_cold placement needs hot_nodes (the node ids to keep on the device)")
        hot = torch.unique(hot_nodes.to(torch.int64).cpu())
        is_hot = torch.zeros(self.num_nodes, dtype=torch.bool)
        is_hot[hot] = True
        cold = (~is_hot).nonzero().view(-1)
        # slot >= 0: row in the device table; slot < 0: row -(slot + 1) of the pinned cold table.
        slot = torch.empty(self.num_nodes, dtype=torch.int64)
        slot[hot] = torch.arange(hot.numel())
        slot[cold] = -1 - torch.arange(cold.numel())
        self._slot_host = slot
        self._hot = x[hot].to(self.device)
        self._cold = x[cold].pin_memory()

    def device_bytes(self) -> int:
        return self._hot.nbytes

    def gather(self, n_id: Tensor, timer=None) -> Tensor:
        timer = timer or NullTimer()
        with timer.phase("gather"):
            ids = n_id.cpu()
            slot = self._slot_host.index_select(0, ids)
            hot_mask = slot >= 0
            hot_pos = hot_mask.nonzero().view(-1)
            cold_pos = hot_mask.logical_not().nonzero().view(-1)
            cold_rows = _gather_rows(self._cold, -1 - slot.index_select(0, cold_pos), pinned=True)
        with timer.phase("transfer"):
            hot_slot_dev = slot.index_select(0, hot_pos).to(self.device, non_blocking=True)
            hot_pos_dev = hot_pos.to(self.device, non_blocking=True)
            cold_pos_dev = cold_pos.to(self.device, non_blocking=True)
            cold_dev = cold_rows.to(self.device, non_blocking=True)
        with timer.phase("gather"):
            out = torch.empty(ids.numel(), self.num_features, dtype=self._hot.dtype, device=self.device)
            out[hot_pos_dev] = self._hot.index_select(0, hot_slot_dev)
            out[cold_pos_dev] = cold_dev
        self.stats.record(cold_rows.nbytes + hot_slot_dev.nbytes + hot_pos_dev.nbytes + cold_pos_dev.nbytes)
        return out


PLACEMENTS: dict[str, type[PlacedFeatures]] = {
    cls.name: cls for cls in (HostFeatures, DeviceFeatures, HotColdFeatures, UvaFeatures)}


def _field_reasons(placement: str, pin_memory: bool, prefetch: bool, device: torch.device):
    reason = PLACEMENTS[placement].unavailable(device)
    if reason:
        yield "feature_placement", reason
    if pin_memory and device.type != "cuda":
        yield "pin_memory", f"pinned (page-locked) memory only exists with CUDA (device is {device.type})"
    if prefetch and device.type != "cuda":
        yield "feature_prefetch", f"side-stream prefetch needs CUDA streams (device is {device.type})"


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """This layer's answer: which of its fields ``flags`` sets to something ``ctx.device`` cannot run."""
    return [Unavailable(f, r) for f, r in _field_reasons(flags.feature_placement, flags.pin_memory,
                                                         flags.feature_prefetch, ctx.device)]


def place_features(x: Tensor, device: torch.device | str, placement: str = "host", *,
                   hot_nodes: Tensor | None = None, pin_memory: bool = False) -> PlacedFeatures:
    """Put ``x`` where ``placement`` says (a key of :data:`PLACEMENTS`)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"unknown feature placement {placement!r}; accepted: {', '.join(PLACEMENTS)}")
    return PLACEMENTS[placement](x, device, hot_nodes=hot_nodes, pin_memory=pin_memory)


def _gather_rows(table: Tensor, ids: Tensor, *, pinned: bool) -> Tensor:
    """``table[ids]`` gathered straight into a (pinned, when asked) host buffer: one copy, not two."""
    out = torch.empty((ids.numel(), table.size(1)), dtype=table.dtype, pin_memory=pinned)
    return torch.index_select(table, 0, ids, out=out)


def prefetch_features(batches: Iterable, store: PlacedFeatures, n_id_of=lambda b: b.n_id) -> Iterator[tuple]:
    """Yield ``(batch, features)`` with the next batch's features gathered on a side CUDA stream.

    While the caller computes on batch ``i``, batch ``i + 1``'s gather and
    host -> device copy run on a separate stream; the consumer's stream waits
    on an event before using them. CUDA only.
    """
    items = [Unavailable(f, r) for f, r in _field_reasons("host", False, True, store.device)]
    if items:
        raise UnavailableError(items)
    side = torch.cuda.Stream(device=store.device)
    it = iter(batches)
    try:
        yield from _prefetch_loop(it, store, side, n_id_of)
    finally:
        if hasattr(it, "close"):
            it.close()


def _prefetch_loop(it, store: PlacedFeatures, side, n_id_of) -> Iterator[tuple]:

    def launch(batch):
        # Everything the gather reads (resident tables, ids) was made on the consumer's stream.
        side.wait_stream(torch.cuda.current_stream(store.device))
        with torch.cuda.stream(side):
            feats = store.gather(n_id_of(batch))
            ready = torch.cuda.Event()
            ready.record(side)
        return batch, feats, ready

    try:
        pending = launch(next(it))
    except StopIteration:
        return
    for nxt in it:
        batch, feats, ready = pending
        pending = launch(nxt)
        torch.cuda.current_stream(store.device).wait_event(ready)
        feats.record_stream(torch.cuda.current_stream(store.device))
        yield batch, feats
    batch, feats, ready = pending
    torch.cuda.current_stream(store.device).wait_event(ready)
    feats.record_stream(torch.cuda.current_stream(store.device))
    yield batch, feats
