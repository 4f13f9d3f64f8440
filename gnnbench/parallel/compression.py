"""Gradient compression as DDP communication hooks, and the recorder that times and counts them.

Each ``Flags.grad_compression`` value is a row of :data:`HOOKS`: a state factory, the DDP
communication hook, and the payload formula (bytes this rank puts into collectives for one
bucket): ``none`` (dense all-reduce), ``topk`` (Deep Gradient Compression with error
feedback, :class:`TopKState`), ``fp16`` and ``powersgd`` (PyTorch's hooks). :func:`make_hook`
builds the row of a run's flags; :func:`timed_hook` wraps its hook to record, per bucket, the
seconds from the hook's call until its future completes and the payload bytes, and
:class:`CommRecorder` folds them into per-step figures.

The payload formula of each value and what the timing includes: ``docs/distributed.md``.
"""

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd

__all__ = [
    "HOOKS",
    "Hook",
    "TopKState",
    "topk_count",
    "topk_compress",
    "topk_hook",
    "make_hook",
    "timed_hook",
    "CommRecorder",
    "POWERSGD_START_ITER",
    "dense_payload",
]

POWERSGD_START_ITER = 2  # vanilla all-reduce for the first steps (PyTorch's minimum with error feedback)


def topk_count(numel: int, ratio: float) -> int:
    """Entries a top-k bucket of ``numel`` entries sends: ``max(1, ceil(ratio * numel))``, at most ``numel``."""
    return min(numel, max(1, math.ceil(ratio * numel)))


def topk_compress(acc: Tensor, ratio: float, sizes: list[int] | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(indices int32, values, residual)``: the largest-magnitude entries of ``acc`` and what is left.

    With ``sizes`` (the flattened tensors ``acc`` concatenates, one per parameter) each tensor keeps its own
    ``topk_count(size, ratio)`` entries, as Deep Gradient Compression selects per layer: one threshold over
    a whole bucket would starve the layers whose gradients are small (biases, the first layer) for many
    steps. Without ``sizes``, one selection over all of ``acc``.
    ``values`` scattered at ``indices`` plus ``residual`` equals ``acc`` exactly (a partition of its entries).
    """
    sizes = [acc.numel()] if sizes is None else list(sizes)
    if sum(sizes) != acc.numel():
        raise ValueError(f"sizes add up to {sum(sizes)} but acc has {acc.numel()} entries")
    parts, offset = [], 0
    for n in sizes:
        k = topk_count(n, ratio) if n else 0
        seg = acc[offset : offset + n]
        pick = torch.arange(n, device=acc.device) if k == n else seg.abs().topk(k, sorted=False).indices
        parts.append(pick + offset)
        offset += n
    idx = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64, device=acc.device)
    values = acc[idx]
    residual = acc.clone()
    residual[idx] = 0
    return idx.to(torch.int32), values, residual


class TopKState:
    """Top-k with error feedback, per parameter: what has not been sent so far (the residual ``v``).

    Args:
        ratio: Share of each parameter's entries sent per step (``Flags.topk_ratio``).
        momentum: DGC's momentum correction (Lin et al. 2018, section 3.2) when > 0: each rank keeps
            a local velocity ``u = momentum * u + g`` and accumulates ``v += u`` (not ``v += g``), so
            an entry sent late carries the momentum it would have had; the optimizer then steps
            plain SGD on the averaged sparse update (no momentum of its own). ``0``: ``v += g``.
        mask_momentum: DGC's momentum factor masking: an entry's velocity is reset when the entry
            is sent, so stale momentum does not push it again (only with ``momentum > 0``).
        process_group: The group to all-gather in (default: the world).

    State is kept per parameter, so DDP rebuilding its buckets after the first step (by
    gradient-ready order) keeps each entry's residual and velocity with its entry.
    """

    def __init__(
        self, ratio: float, momentum: float = 0.0, mask_momentum: bool = True, process_group: Any = None
    ) -> None:
        if not 0 < ratio <= 1:
            raise ValueError(f"top-k ratio must be in (0, 1] (got {ratio!r})")
        if not 0 <= momentum < 1:
            raise ValueError(f"top-k momentum correction must be in [0, 1) (got {momentum!r})")
        self.ratio = ratio
        self.momentum = momentum
        self.mask_momentum = mask_momentum
        self.process_group = process_group
        self.residuals: dict[int, Tensor] = {}  # id(parameter) -> residual v (flattened, fp32)
        self.velocities: dict[int, Tensor] = {}  # id(parameter) -> local velocity u (momentum correction)

    def accumulate(self, params: list[Tensor], grads: list[Tensor]) -> Tensor:
        """This step's ``v``, flattened over the bucket: the residuals plus the gradients (or, with momentum
        correction, plus the updated velocities)."""
        parts = []
        for p, g in zip(params, grads):
            flat = g.detach().reshape(-1).float()
            if self.momentum:
                u = self.velocities.get(id(p))
                flat = flat.clone() if u is None else u.mul_(self.momentum).add_(flat)
                self.velocities[id(p)] = flat
            r = self.residuals.get(id(p))
            parts.append(flat + r if r is not None else flat.clone())
        return torch.cat(parts) if parts else torch.zeros(0)

    def keep(self, params: list[Tensor], grads: list[Tensor], residual: Tensor, sent: Tensor | None = None) -> None:
        """Store ``residual`` (flattened over the bucket) back per parameter; reset the velocity of the entries
        at ``sent`` (flat bucket indices) when masking momentum."""
        mask = None
        if self.momentum and self.mask_momentum and sent is not None:
            mask = torch.zeros(residual.numel(), dtype=torch.bool, device=residual.device)
            mask[sent.long()] = True
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            self.residuals[id(p)] = residual[offset : offset + n]
            if mask is not None:
                self.velocities[id(p)].masked_fill_(mask[offset : offset + n], 0.0)
            offset += n

    def step(self, params: list[Tensor], grads: list[Tensor]) -> tuple[Tensor, Tensor]:
        """One bucket's call: ``(indices int32, values)`` to send (each parameter's largest entries of ``v``);
        residuals and velocities updated."""
        acc = self.accumulate(params, grads)
        idx, values, residual = topk_compress(acc, self.ratio, [g.numel() for g in grads])  # per parameter
        self.keep(params, grads, residual, idx)
        return idx, values


def topk_hook(state: TopKState, bucket):
    """DDP communication hook: top-k sparsification with error feedback, all-gathered, averaged.

    Per bucket: add the residual (see :class:`TopKState`), keep each parameter's ``k_p``
    largest-magnitude entries, all-gather their values (fp32) and indices (int32, sent bit-for-bit
    in the same fp32 tensor) from every rank, sum them into a dense tensor and divide by the
    world size; the unsent rest becomes the residual.
    """
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    buffer = bucket.buffer()
    idx, values = state.step(bucket.parameters(), bucket.gradients())
    packed = torch.cat([values.float(), idx.view(torch.float32)])  # one collective: values then indices
    gathered = [torch.empty_like(packed) for _ in range(world)]
    fut = dist.all_gather(gathered, packed, group=group, async_op=True).get_future()
    k = values.numel()

    def decompress(_fut):
        dense = torch.zeros(buffer.numel(), dtype=torch.float32, device=buffer.device)
        for part in gathered:  # the same order on every rank: every replica gets the same sum
            dense.index_add_(0, part[k:].view(torch.int32).long(), part[:k])
        buffer.copy_(dense.div_(world))
        return buffer

    return fut.then(decompress)


def dense_payload(bucket) -> int:
    """Bytes of a bucket sent as is (dense all-reduce)."""
    buf = bucket.buffer()
    return buf.numel() * buf.element_size()


def _topk_payload(state: TopKState, bucket) -> int:
    # per parameter, fp32 value + int32 index of each entry sent
    return sum(topk_count(g.numel(), state.ratio) for g in bucket.gradients() if g.numel()) * (4 + 4)


def _fp16_payload(state: Any, bucket) -> int:
    return bucket.buffer().numel() * 2


def _powersgd_payload(state: "powersgd.PowerSGDState", bucket) -> int:
    """PowerSGD's own split (``powerSGD_hook``): vanilla before ``start_powerSGD_iter``, else P and Q per
    compressible matrix and the rest dense; read before the hook runs (it advances ``state.iter``)."""
    size = bucket.buffer().element_size()
    if state.iter < state.start_powerSGD_iter:
        return dense_payload(bucket)
    elements = 0
    for g in bucket.gradients():
        a = g.shape[0] if g.dim() else 1
        b = g.numel() // max(a, 1)
        r = min(a, b, state.matrix_approximation_rank)
        compress, dense, compressed = powersgd._should_compress(a, b, r, state.min_compression_rate)
        elements += compressed if compress else dense
    return elements * size


@dataclass(frozen=True)
class Hook:
    """One ``Flags.grad_compression`` value: its state, DDP hook and payload formula."""

    state: Callable[[Any, float], Any]  # (flags, momentum correction) -> hook state
    hook: Callable  # DDP communication hook (state, bucket) -> Future[Tensor]
    payload: Callable[[Any, Any], int]  # (state, bucket) -> bytes this rank sends for the bucket
    formula: str  # the payload formula, for results


HOOKS: dict[str, Hook] = {
    "none": Hook(
        lambda flags, momentum: None,
        default_hooks.allreduce_hook,
        lambda state, bucket: dense_payload(bucket),
        "4 n (dense fp32 all-reduce)",
    ),
    "topk": Hook(
        lambda flags, momentum: TopKState(flags.topk_ratio, momentum=momentum),
        topk_hook,
        _topk_payload,
        "8 sum_p k_p, k_p = max(1, ceil(topk_ratio n_p)) per parameter (fp32 values + int32 indices, all-gathered)",
    ),
    "fp16": Hook(
        lambda flags, momentum: None, default_hooks.fp16_compress_hook, _fp16_payload, "2 n (fp16 all-reduce)"
    ),
    "powersgd": Hook(
        lambda flags, momentum: powersgd.PowerSGDState(
            process_group=None,
            matrix_approximation_rank=flags.powersgd_rank,
            start_powerSGD_iter=POWERSGD_START_ITER,
            min_compression_rate=2,
            use_error_feedback=True,
            warm_start=True,
            random_seed=0,
        ),
        powersgd.powerSGD_hook,
        _powersgd_payload,
        "4 sum((a + b) r) over compressible a x b gradients + 4 n for the rest (vanilla for the first "
        f"{POWERSGD_START_ITER} steps)",
    ),
}


class CommRecorder:
    """Per-step communication figures of a DDP model: all-reduce seconds and payload bytes.

    ``seconds`` per step is the union of the buckets' [hook call, future completed] intervals,
    so buckets in flight together are not counted twice.
    """

    def __init__(self, world_size: int, formula: str) -> None:
        self.world_size = world_size
        self.formula = formula
        self._lock = threading.Lock()
        self._intervals: list[tuple[float, float]] = []
        self._bytes = 0
        self._dense = 0
        self.seconds: list[float] = []  # per measured step
        self.bytes: list[int] = []  # payload per measured step
        self.dense_bytes: list[int] = []  # what a dense fp32 all-reduce would have sent

    def add(self, start: float, end: float, nbytes: int, dense: int) -> None:
        with self._lock:
            self._intervals.append((start, end))
            self._bytes += nbytes
            self._dense += dense

    def end_step(self, measured: bool) -> None:
        """Close the step's figures (kept when ``measured``)."""
        with self._lock:
            spans = sorted(self._intervals)
            total, cur_start, cur_end = 0.0, None, None
            for s, e in spans:
                if cur_end is None or s > cur_end:
                    if cur_end is not None:
                        total += cur_end - cur_start
                    cur_start, cur_end = s, e
                else:
                    cur_end = max(cur_end, e)
            if cur_end is not None:
                total += cur_end - cur_start
            if measured:
                self.seconds.append(total)
                self.bytes.append(self._bytes)
                self.dense_bytes.append(self._dense)
            self._intervals, self._bytes, self._dense = [], 0, 0


def timed_hook(hook: Callable, payload: Callable[[Any, Any], int], recorder: CommRecorder) -> Callable:
    """``hook`` with its bucket's seconds (call to future completion) and payload bytes recorded."""

    def timed(state, bucket):
        nbytes = payload(state, bucket)  # before the hook: PowerSGD advances its step counter inside
        dense = dense_payload(bucket)
        start = time.perf_counter()
        fut = hook(state, bucket)

        def done(f):
            recorder.add(start, time.perf_counter(), nbytes, dense)
            return f.value()

        return fut.then(done)

    timed.__name__ = f"timed_{getattr(hook, '__name__', 'hook')}"
    return timed


def make_hook(flags: Any, world_size: int, momentum: float = 0.0) -> tuple[Any, Callable, CommRecorder]:
    """``(state, timed hook, recorder)`` for ``flags.grad_compression``; ``momentum`` > 0 applies top-k's
    momentum correction in the hook (the optimizer then steps without momentum)."""
    if flags.grad_compression not in HOOKS:
        raise ValueError(f"unknown grad_compression {flags.grad_compression!r}; accepted: {', '.join(HOOKS)}")
    row = HOOKS[flags.grad_compression]
    recorder = CommRecorder(world_size, row.formula)
    return row.state(flags, momentum), timed_hook(row.hook, row.payload, recorder), recorder
