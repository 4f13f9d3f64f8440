"""What the measured steps cost the process outside the arithmetic: page faults and kernel CPU time.

A step that frees large temporaries to the kernel (glibc's defaults, :mod:`gnnbench.process.allocators`) maps and
first-touches them again at the next step: minor page faults, and CPU time in the kernel rather than in the
step's own code. :class:`StepUsage` reads the process's ``getrusage`` between consecutive measured steps, leaving
out every interval in which the loop evaluated, so ``diagnose`` and every result can say how much of a step's
CPU time the kernel took.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = ["Usage", "resource_usage", "StepUsage", "PAGE_BYTES"]

PAGE_BYTES = resource.getpagesize()


@dataclass(frozen=True)
class Usage:
    """A snapshot of the process's resource use (``getrusage``, every thread of the process)."""

    minor_faults: int  # page faults served without I/O: first touches of freshly mapped memory
    major_faults: int
    user_seconds: float
    kernel_seconds: float  # CPU time in the kernel: page faults, mmap / munmap, madvise ...

    def __sub__(self, other: "Usage") -> "Usage":
        return Usage(
            self.minor_faults - other.minor_faults,
            self.major_faults - other.major_faults,
            self.user_seconds - other.user_seconds,
            self.kernel_seconds - other.kernel_seconds,
        )


def resource_usage() -> Usage:
    """This process's page faults and user / kernel CPU time so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return Usage(r.ru_minflt, r.ru_majflt, r.ru_utime, r.ru_stime)


class StepUsage:
    """Page faults and user / kernel CPU time of the measured steps: the process's usage between consecutive
    steps after ``warmup_steps``, leaving out every interval in which the loop evaluated (a validation point was
    added)."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup = warmup_steps
        self.last: tuple[Usage, int] | None = None
        self.steps = 0
        self.total = Usage(0, 0, 0.0, 0.0)

    def tick(self, index: int, evaluations: int = 0) -> None:
        """After step ``index`` (0-based), with ``evaluations`` validation points so far."""
        now = resource_usage()
        if self.last is not None and index >= self.warmup and evaluations == self.last[1]:
            d = now - self.last[0]
            t = self.total
            self.total = Usage(
                t.minor_faults + d.minor_faults,
                t.major_faults + d.major_faults,
                t.user_seconds + d.user_seconds,
                t.kernel_seconds + d.kernel_seconds,
            )
            self.steps += 1
        self.last = (now, evaluations)

    def skip(self) -> None:
        """Forget the last snapshot: the next interval (a profiled or otherwise unmeasured step) is not counted."""
        self.last = None

    def summary(self) -> dict[str, float | None] | None:
        """Per measured step: minor and major page faults, the bytes those minor faults mapped, user and kernel
        CPU seconds, and the kernel's share of the CPU time; ``None`` before a measured step."""
        if not self.steps:
            return None
        t, n = self.total, self.steps
        cpu = t.user_seconds + t.kernel_seconds
        return {
            "steps": n,
            "minor_faults_per_step": t.minor_faults / n,
            "major_faults_per_step": t.major_faults / n,
            "faulted_bytes_per_step": t.minor_faults * PAGE_BYTES / n,
            "user_seconds_per_step": t.user_seconds / n,
            "kernel_seconds_per_step": t.kernel_seconds / n,
            "kernel_share": t.kernel_seconds / cpu if cpu > 0 else None,
        }
