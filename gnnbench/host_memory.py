"""The process's memory: its resident set now and at its peak (one reader of ``/proc``, one of ``getrusage``,
one resident-set sampling thread), how far a call raised it (:func:`measure_peak`), and the peak memory of
evaluation apart from everything else (:class:`PeakMemory`).

On CUDA the peaks are torch's allocator statistics; on the host (Linux) the process's resident set, whose
high-water mark (``VmHWM``) is never reset, since a reset is process-wide and would erase the peak that
``getrusage`` and a parent's ``wait4`` report for the whole run. Where evaluation did not raise that mark,
its peak is the largest resident set a sampling thread saw (a lower bound). Without ``/proc`` (not Linux)
the split is not measured.

How each peak is read, and when it is exact: ``docs/memory.md``.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

import torch

from gnnbench.flags import Unavailable, UnavailableError

__all__ = [
    "PeakMemory",
    "RssSampler",
    "SAMPLE_SECONDS",
    "hwm_bytes",
    "rss_bytes",
    "peak_bytes",
    "measure_peak",
    "uva_view",
]

T = TypeVar("T")

SAMPLE_SECONDS = 1e-3  # host RSS sampling interval during evaluation
_STATUS, _STATM = "/proc/self/status", "/proc/self/statm"


def hwm_bytes() -> int:
    """The process's peak resident set (``VmHWM``)."""
    with open(_STATUS) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no VmHWM line in {_STATUS}")


def rss_bytes(fd: int | None = None) -> int:
    """The process's resident set now (``/proc/self/statm``'s second field, in pages)."""
    if fd is None:
        with open(_STATM, "rb") as f:
            text = f.read()
    else:
        text = os.pread(fd, 256, 0)
    return int(text.split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    """The process's peak resident set since it started, on any POSIX system: ``getrusage``'s ``ru_maxrss``
    (KiB on Linux, bytes on macOS; the same figure as ``VmHWM`` on Linux)."""
    import resource

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _procfs() -> bool:
    try:
        hwm_bytes(), rss_bytes()
    except (OSError, ValueError, IndexError):
        return False
    return True


class RssSampler:
    """A daemon thread reading the resident set every ``interval`` seconds; ``peak`` is the largest seen."""

    def __init__(self, interval: float = SAMPLE_SECONDS) -> None:
        self.interval = interval
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gnnbench-rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = os.open(_STATM, os.O_RDONLY)
        try:
            while not self._stop.wait(self.interval):
                self.peak = max(self.peak, rss_bytes(fd))
        finally:
            os.close(fd)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())
        return self.peak


def measure_peak(fn: Callable[[], T]) -> tuple[T, float, int]:
    """Run ``fn()`` and return ``(result, seconds, peak_bytes)``.

    ``peak_bytes`` is how far the process's resident set rose above its size just before the call.
    On Linux: ``VmHWM`` after the call minus ``VmRSS`` before it when the call raised the process's
    high-water mark (exact), otherwise the largest ``VmRSS`` a :class:`RssSampler` saw (a lower bound).
    Nothing is reset (a reset would erase the process-wide peak others report).
    Without ``/proc``: the :func:`peak_bytes` delta, 0 when the call stayed under an earlier peak.
    """
    if not _procfs():
        before = peak_bytes()
        t0 = time.perf_counter()
        result = fn()
        return result, time.perf_counter() - t0, max(0, peak_bytes() - before)
    before, hwm0 = rss_bytes(), hwm_bytes()
    sampler = RssSampler()
    t0 = time.perf_counter()
    try:
        result = fn()
    finally:
        seconds = time.perf_counter() - t0
        top = sampler.stop()
    hwm = hwm_bytes()
    return result, seconds, max(0, (hwm if hwm > hwm0 else top) - before)


class PeakMemory:
    """Peak memory of the compute device, split into evaluation and the rest (see ``docs/memory.md``).

    Wrap every evaluation in :meth:`evaluation`; :meth:`summary` gives the split at the end.

    Args:
        device: The compute device: its allocator's peaks on CUDA, the process's resident set on the CPU.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.available = self.cuda or _procfs()
        self.train_peak = 0  # largest peak seen outside evaluation
        self.eval_peak: int | None = None  # largest peak seen during an evaluation
        self.eval_rise: int | None = None  # largest rise of an evaluation above its starting memory
        self.eval_method: str | None = None  # how the largest evaluation peak was measured
        self._hwm_after_eval: int | None = None

    @contextmanager
    def evaluation(self) -> Iterator[None]:
        """Record the peak of the enclosed evaluation, and the training peak up to it."""
        if not self.available:
            yield
            return
        if self.cuda:
            self.train_peak = max(self.train_peak, torch.cuda.max_memory_allocated(self.device))
            start = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            try:
                yield
            finally:
                peak = torch.cuda.max_memory_allocated(self.device)
                torch.cuda.reset_peak_memory_stats(self.device)
                self._record(peak, start, "torch.cuda.max_memory_allocated, reset around evaluation")
            return
        before = hwm_bytes()
        if self._hwm_after_eval is None or before > self._hwm_after_eval:
            self.train_peak = max(self.train_peak, before)
        start = rss_bytes()
        sampler = RssSampler()
        try:
            yield
        finally:
            sampled = sampler.stop()
            after = hwm_bytes()
            self._hwm_after_eval = after
            if after > before:
                self._record(after, start, "VmHWM (evaluation raised the process peak: exact)")
            else:
                self._record(sampled, start, f"VmRSS sampled every {SAMPLE_SECONDS * 1e3:g} ms (a lower bound)")

    def _record(self, peak: int, start: int, method: str) -> None:
        if self.eval_peak is None or peak > self.eval_peak:
            self.eval_peak, self.eval_method = peak, method
        self.eval_rise = max(self.eval_rise or 0, peak - start)

    def device_peak(self) -> int | None:
        """The whole run's peak allocated CUDA memory (both phases); ``None`` on the CPU."""
        if not self.cuda:
            return None
        return max(self.train_peak, self.eval_peak or 0, torch.cuda.max_memory_allocated(self.device))

    def summary(self) -> dict[str, int | str | None]:
        """``train_peak_bytes``, ``eval_peak_bytes``, ``eval_rise_bytes`` and ``peak_method`` (the compute
        device's memory: allocated CUDA memory, or the host's resident set on the CPU)."""
        if not self.available:
            return {
                "train_peak_bytes": None,
                "eval_peak_bytes": None,
                "eval_rise_bytes": None,
                "peak_method": "not measured: the host split needs Linux's /proc/self/status and statm",
            }
        train = self.train_peak
        if self.cuda:
            train = max(train, torch.cuda.max_memory_allocated(self.device))
        else:
            now = hwm_bytes()
            if self._hwm_after_eval is None or now > self._hwm_after_eval:
                train = max(train, now)
        scope = "CUDA allocated memory" if self.cuda else "host resident set"
        return {
            "train_peak_bytes": train,
            "eval_peak_bytes": self.eval_peak,
            "eval_rise_bytes": self.eval_rise,
            "peak_method": f"{scope}; evaluation: {self.eval_method or 'no evaluation ran'}",
        }


# ------------------------------------------------------------------ zero-copy views of pinned host memory
class _CudaArrayView:
    """Expose a pinned host buffer through ``__cuda_array_interface__``.

    Under unified virtual addressing, memory from ``cudaHostAlloc`` (which
    PyTorch's pinned allocator uses) is addressable by kernels at its host
    address, so a CUDA tensor over that address reads host memory directly.
    """

    _TYPESTR = {torch.float32: "<f4", torch.float16: "<f2", torch.int32: "<i4", torch.int64: "<i8"}

    def __init__(self, host: torch.Tensor) -> None:
        if host.dtype not in self._TYPESTR:
            raise TypeError(f"uva_view supports float32, float16, int32 and int64 tensors (got {host.dtype})")
        self._host = host
        self.__cuda_array_interface__ = {
            "shape": tuple(host.shape),
            "typestr": self._TYPESTR[host.dtype],
            "data": (host.data_ptr(), False),
            "version": 3,
            "strides": None,
        }


def uva_view(host: torch.Tensor, device: torch.device, field: str = "feature_placement") -> torch.Tensor:
    """A zero-copy CUDA view of the pinned, contiguous tensor ``host`` (features, or a CSR's offsets and
    columns); keep ``host`` alive. Raises :class:`~gnnbench.flags.UnavailableError` (field ``field``) when torch
    copies instead of viewing, or the view reads other values than host memory."""
    if not host.is_pinned() or not host.is_contiguous():
        raise ValueError("uva_view needs pinned, contiguous host memory (call .contiguous().pin_memory() first)")
    view = torch.as_tensor(_CudaArrayView(host), device=device)
    if view.data_ptr() != host.data_ptr():
        # torch copied the buffer instead of viewing it (e.g. pinned under another current device).
        raise UnavailableError(
            [
                Unavailable(
                    field,
                    f"zero-copy (UVA) view of pinned memory is not possible on {device}: torch made "
                    "a device copy instead",
                )
            ]
        )
    probe = min(host.size(0), 4)
    if probe and not torch.equal(view[:probe].cpu(), host[:probe]):
        raise UnavailableError(
            [Unavailable(field, "zero-copy (UVA) access returned different values than host memory on this system")]
        )
    return view
