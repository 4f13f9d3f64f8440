"""Phase timing for measured training steps.

On the CPU phases are timed with ``perf_counter``. On CUDA, in the default
``sync`` mode, the device is synchronized at every phase boundary, phases are
timed on the host clock and CUDA events give each phase's device time too; in
``end_to_end`` mode whole steps are timed with one synchronization per step,
and on CUDA events recorded at the phase boundaries (never waited on inside the
step) still give the device-time breakdown, so work overlapped on other streams
is not serialized. Every result says which mode it came from.
"""

from __future__ import annotations

import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

__all__ = ["PHASES", "PhaseTimer", "NullTimer", "summarize"]

PHASES = ("sample", "gather", "transfer", "forward", "backward", "optimizer")


class NullTimer:
    """A timer that records nothing (for code paths used outside measured steps)."""

    @contextmanager
    def phase(self, name: str):
        yield


@dataclass
class PhaseTimer:
    """Accumulates per-step phase times.

    Args:
        device: The compute device.
        sync: Synchronize CUDA at phase boundaries (per-phase numbers); when
            False only whole steps are timed.
    """

    device: torch.device
    sync: bool = True
    steps: list[dict[str, float]] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    device_ms: list[dict[str, float]] = field(default_factory=list)
    _current: dict[str, float] | None = None
    _events: list | None = None
    _t0: float = 0.0

    @property
    def mode(self) -> str:
        return "sync" if self.sync else "end_to_end"

    def _cuda(self) -> bool:
        return self.device.type == "cuda"

    def start_step(self) -> None:
        if self._cuda():
            torch.cuda.synchronize(self.device)
        self._current = {p: 0.0 for p in PHASES}
        self._events = []
        self._t0 = time.perf_counter()

    @contextmanager
    def phase(self, name: str):
        """Time one phase: CUDA events on the device always; in ``sync`` mode also the host clock, with the
        device synchronized at both boundaries (end to end: no synchronization inside the step)."""
        if self._current is None:
            yield
            return
        cuda, sync = self._cuda(), self.sync
        if cuda:
            if sync:
                torch.cuda.synchronize(self.device)
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        t = time.perf_counter()
        try:
            yield
        finally:
            if cuda:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                if sync:
                    torch.cuda.synchronize(self.device)
                self._events.append((name, start, end))
            if sync:
                self._current[name] = self._current.get(name, 0.0) + time.perf_counter() - t

    def end_step(self, record: bool = True) -> None:
        if self._cuda():
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - self._t0
        if record:
            self.step_seconds.append(elapsed)
            self.steps.append(self._current or {})
            if self._events:
                dev: dict[str, float] = {}
                for name, s, e in self._events:
                    dev[name] = dev.get(name, 0.0) + s.elapsed_time(e)
                self.device_ms.append(dev)
        self._current = None
        self._events = None


def summarize(values: list[float]) -> dict[str, float]:
    """Median with spread: quartiles and min-max."""
    if not values:
        return {"median": float("nan"), "q1": float("nan"), "q3": float("nan"), "min": float("nan"),
                "max": float("nan"), "n": 0}
    v = sorted(values)
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"median": statistics.median(v), "q1": q1, "q3": q3, "min": v[0], "max": v[-1], "n": len(v)}
