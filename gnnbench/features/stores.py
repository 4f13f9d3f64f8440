"""The feature stores: one class per placement (:data:`PLACEMENTS`), each holding the node features where its
placement says and serving a batch's rows on the device, counting what it moves (:class:`TransferStats`);
with :func:`prefetch_features`, the side-stream prefetch of a store's gathers (it stages the store's copies in
pinned memory). Each placement: ``docs/data-pipeline.md``.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Union

import torch
from torch import Tensor

from gnnbench.background import BackgroundWork
from gnnbench.features.pipelined import pipelined
from gnnbench.features.transfer_stats import TransferStats
from gnnbench.flags import Unavailable, UnavailableError
from gnnbench.host_memory import uva_view
from gnnbench.timing import NullTimer, code_path

__all__ = [
    "PlacedFeatures",
    "HostFeatures",
    "DeviceFeatures",
    "HotColdFeatures",
    "UvaFeatures",
    "PLACEMENTS",
    "HotNodes",
    "prefetch_features",
]

# The hot_cold placement's hot rows: the ids, or a function (device, row_bytes) -> ids that chooses them.
HotNodes = Union[Tensor, Callable[[torch.device, int], Tensor]]


def _needs_cuda(what: str, device: torch.device) -> str | None:
    return None if device.type == "cuda" else f"{what} (device is {device.type})"


class PlacedFeatures:
    """Serve the features of a batch's nodes on ``device``; one subclass per placement.

    Args:
        x: ``[N, F]`` host features.
        device: Where batches are computed.
        hot_nodes: Node ids the ``hot_cold`` placement keeps on the device, or
            a function ``(device, row_bytes) -> ids`` it calls to choose them
            (see :func:`~gnnbench.features.hot_set.hot_set_chooser`); other placements ignore it.
        pin_memory: Stage host-gathered rows in pinned memory before the copy.
    """

    name = ""
    prefetch = False  # gather the next batch's features on a side stream (features_for sets it from the flags)
    pipeline_depth = 0  # batches sampled and gathered ahead by a background thread (0: off)
    full_batch = False  # full-batch training (features_for sets it): every step reads every row in order

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        """Why this placement cannot run on ``device``, or ``None``."""
        return None

    def __init__(
        self, x: Tensor, device: torch.device | str, *, hot_nodes: HotNodes | None = None, pin_memory: bool = False
    ) -> None:
        self.device = torch.device(device)
        items = [Unavailable(f, r) for f, r in field_reasons(self.name, pin_memory, False, self.device)]
        if items:
            raise UnavailableError(items)
        if x.device.type != "cpu":
            raise ValueError(f"feature placement takes host features (got a tensor on {x.device})")
        self.pin_memory = pin_memory
        self.staging_pinned = False  # set by prefetch: asynchronous copies need pinned staging
        # the run's background producers, paused while the training loop evaluates (the trainer sets it)
        self.background: BackgroundWork | None = None
        self.num_nodes, self.num_features = x.shape
        self.stats = TransferStats()
        self._host = x

    @property
    def placement(self) -> str:
        return self.name

    def device_bytes(self) -> int:
        """Feature bytes resident on the device (excluding per-batch buffers)."""
        return 0

    def feed(self, batches: Iterable) -> Iterator[tuple]:
        """``(batch, features or None)`` per batch: with :attr:`prefetch` the next batch's features are gathered
        on a side stream while this one computes (:func:`prefetch_features`); otherwise ``None``, and the step
        gathers them. Closing the iterator closes ``batches``. Each call is one epoch of :attr:`stats`."""
        self.stats.new_epoch()
        if self.prefetch:
            yield from prefetch_features(batches, self)
            return
        if self.pipeline_depth:
            yield from pipelined(batches, self, self.pipeline_depth)
            return
        try:
            for batch in batches:
                yield batch, None
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

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

    _resident_full: Tensor | None = None  # full batch on a GPU: the whole table, copied once

    def gather(self, n_id: Tensor, timer=None) -> Tensor:
        timer = timer or NullTimer()
        if self.full_batch and self.device.type == "cuda" and n_id.numel() == self._host.size(0):
            return self._whole_table(timer)
        ids = n_id.cpu()
        if self.device.type != "cuda":
            with timer.phase("gather"):
                rows = self._host.index_select(0, ids)
            self.stats.record(0, ids.numel())
            return rows
        pinned = self.pin_memory or self.staging_pinned
        with timer.phase("gather"):
            rows = _gather_rows(self._host, ids, pinned=pinned)
        with timer.phase("transfer"):
            out = rows.to(self.device, non_blocking=pinned)
        self.stats.record(rows.nbytes, ids.numel())
        return out

    def _whole_table(self, timer) -> Tensor:
        """Full batch on a GPU: every step reads every row in order (the batch's ids are ``arange(N)``), so the
        table is copied to the device once and kept there, instead of once per step. Copied on the first step
        (its bytes counted then), served from device memory afterwards."""
        if self._resident_full is None:
            with timer.phase("transfer"):
                self._resident_full = self._host.to(self.device)
            self.stats.record(self._resident_full.nbytes, self._host.size(0))
            return self._resident_full
        self.stats.record(0, self._host.size(0), self._host.size(0))
        return self._resident_full

    def device_bytes(self) -> int:
        return self._resident_full.nbytes if self._resident_full is not None else 0


class DeviceFeatures(PlacedFeatures):
    """All rows resident on the device; only the ids cross the bus."""

    name = "device"
    resident = True  # rows are read from device memory (False for uva: zero-copy reads host memory)

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        return _needs_cuda(
            "feature_placement='device' keeps features on a CUDA device; on a CPU host and device memory are the same",
            device,
        )

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
        self.stats.record(self._moved(n_id, ids), ids.numel(), ids.numel() if self.resident else 0)
        return out

    def _moved(self, n_id: Tensor, ids: Tensor) -> int:
        return n_id.nbytes if n_id.device.type == "cpu" else 0


class UvaFeatures(DeviceFeatures):
    """All rows in pinned host memory, read by device kernels directly (zero-copy through UVA)."""

    name = "uva"
    resident = False

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        return _needs_cuda(
            "feature_placement='uva' maps pinned host memory into a CUDA device's address "
            "space; on a CPU host and device memory are the same",
            device,
        )

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
    """``hot_nodes`` rows on the device, the others ("cold") in pinned host memory, copied per batch.

    ``hot_nodes`` is the ids, or a function ``(device, row_bytes) -> ids``
    (:func:`~gnnbench.features.hot_set.hot_set_chooser`) called here, where the device and the row size
    are known. :attr:`hot_rows` is the size of the hot set.
    """

    name = "hot_cold"

    @classmethod
    def unavailable(cls, device: torch.device) -> str | None:
        return _needs_cuda(
            "feature_placement='hot_cold' keeps hot rows on a CUDA device; on a CPU host and "
            "device memory are the same",
            device,
        )

    def __init__(
        self, x: Tensor, device: torch.device | str, *, hot_nodes: HotNodes | None = None, pin_memory: bool = False
    ) -> None:
        super().__init__(x, device, hot_nodes=hot_nodes, pin_memory=pin_memory)
        if hot_nodes is None:
            raise ValueError("hot_cold placement needs hot_nodes (the node ids to keep on the device)")
        chooser = hot_nodes if callable(hot_nodes) else None
        if chooser is not None:
            hot_nodes = chooser(self.device, self.num_features * x.element_size())
        self.hot_info = getattr(chooser, "info", None)  # what a HotSetChooser chose, when one was given
        hot = torch.unique(hot_nodes.to(torch.int64).cpu())
        self.hot_rows = hot.numel()
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
        self.stats.record(
            cold_rows.nbytes + hot_slot_dev.nbytes + hot_pos_dev.nbytes + cold_pos_dev.nbytes,
            ids.numel(),
            hot_pos.numel(),
        )
        return out


PLACEMENTS: dict[str, type[PlacedFeatures]] = {
    cls.name: cls for cls in (HostFeatures, DeviceFeatures, HotColdFeatures, UvaFeatures)
}


def field_reasons(placement: str, pin_memory: bool, prefetch: bool, device: torch.device):
    reason = PLACEMENTS[placement].unavailable(device)
    if reason:
        yield "feature_placement", reason
    if pin_memory and device.type != "cuda":
        yield "pin_memory", f"pinned (page-locked) memory only exists with CUDA (device is {device.type})"
    if prefetch and device.type != "cuda":
        yield "feature_prefetch", f"side-stream prefetch needs CUDA streams (device is {device.type})"


def _gather_rows(table: Tensor, ids: Tensor, *, pinned: bool) -> Tensor:
    """``table[ids]`` gathered straight into a (pinned, when asked) host buffer: one copy, not two."""
    out = torch.empty((ids.numel(), table.size(1)), dtype=table.dtype, pin_memory=pinned)
    return torch.index_select(table, 0, ids, out=out)


def prefetch_features(batches: Iterable, store: PlacedFeatures, n_id_of=lambda b: b.n_id) -> Iterator[tuple]:
    """Yield ``(batch, features)`` with the next batch's features prepared while this one computes.

    A background thread gathers batch ``i + 1``'s rows (into pinned host memory: asynchronous copies need
    pinned staging, so this implies ``pin_memory``) and issues their copy on a side CUDA stream, recording
    an event; meanwhile the main thread samples the batch after it and queues batch ``i``'s compute. The
    consumer's stream waits on the event only (no host synchronization); the host waits just for the
    thread to have issued the copy, inside the caller's "sample" phase (the wait for data). CUDA only.
    Timed end to end (the registry marks it as overlap), since per-phase synchronization would serialize it.
    """
    items = [Unavailable(f, r) for f, r in field_reasons("host", False, True, store.device)]
    if items:
        raise UnavailableError(items)
    from concurrent.futures import ThreadPoolExecutor

    device = store.device
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))  # resident tables were made on the consumer's stream
    store.staging_pinned = True

    work = getattr(store, "background", None) or BackgroundWork()  # a store outside a trainer: its own

    def prepare(batch):  # runs in the worker thread; the stream context is thread-local
        with work.busy(), torch.cuda.device(device), torch.cuda.stream(side), code_path("gather"):
            feats = store.gather(n_id_of(batch))
            ready = torch.cuda.Event()
            ready.record(side)
        return feats, ready

    it = iter(batches)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gnnbench-prefetch")
    try:
        nxt = next(it, None)
        pending = (nxt, pool.submit(prepare, nxt)) if nxt is not None else None
        while pending is not None:
            batch, future = pending
            nxt = next(it, None)  # sample the following batch while the worker gathers this one
            pending = (nxt, pool.submit(prepare, nxt)) if nxt is not None else None
            feats, ready = future.result()
            consumer = torch.cuda.current_stream(device)
            consumer.wait_event(ready)
            feats.record_stream(consumer)  # the side stream's allocation is used on the consumer's stream
            yield batch, feats
    finally:
        pool.shutdown(wait=True)
        store.staging_pinned = False
        if hasattr(it, "close"):
            it.close()
