"""Where the step's threads and the loader's worker processes run: ``Flags.thread_placement``.

PyTorch's defaults give the training process one intra-op thread per usable core, and loader workers (one
thread each) are scheduled on the same cores, so on a machine with few cores the workers compete with the step
instead of overlapping it. ``"split"`` divides the cores this process may use (its affinity) instead: the last
``num_workers`` cores go one to each worker (the worker pins itself when it starts, as PyG's
``enable_cpu_affinity`` does), the others to the training process, whose intra-op thread count becomes their
number. ``"shared"`` (the baseline) leaves PyTorch's defaults.

:class:`ThreadPlan` is the placement; :func:`apply` puts it into effect for the process and returns what undoes
it; :func:`threads_in_effect` reads back what the process and its workers really run with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch

__all__ = [
    "ThreadPlan",
    "plan_for",
    "apply",
    "WorkerPin",
    "threads_in_effect",
    "usable_cores",
    "placement_unavailable",
    "affinity_of",
]


def usable_cores() -> list[int]:
    """The cores this process may run on (its affinity; every core where the platform has no affinity)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def placement_unavailable(
    placement: str, num_workers: int, world_size: int = 1, cores: Iterable[int] | None = None
) -> str | None:
    """Why ``placement`` cannot run with ``num_workers`` loader workers here, or ``None`` if it can."""
    if placement == "shared":
        return None
    if not hasattr(os, "sched_setaffinity"):
        return "split pins threads and workers to cores (sched_setaffinity), which this platform does not have"
    if world_size > 1:
        return (
            f"split places one process's threads; with {world_size} ranks torchrun gives each rank its own "
            "thread count (OMP_NUM_THREADS)"
        )
    n = len(list(cores) if cores is not None else usable_cores())
    if n < num_workers + 1:
        return (
            f"split gives each of the {num_workers} loader workers its own core and keeps at least one for "
            f"training, which needs {num_workers + 1} usable cores (this process may use {n}); use fewer "
            "workers"
        )
    return None


@dataclass(frozen=True)
class ThreadPlan:
    """A placement: the training process's cores and intra-op threads, and one core per loader worker."""

    placement: str  # "shared" | "split"
    intra_op: int | None  # intra-op threads of the training process (None: PyTorch's default, untouched)
    main_cores: tuple[int, ...] | None  # cores of the training process's threads (None: untouched)
    worker_cores: tuple[int, ...] | None  # worker i runs on worker_cores[i] (None: untouched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "placement": self.placement,
            "intra_op": self.intra_op,
            "main_cores": list(self.main_cores) if self.main_cores is not None else None,
            "worker_cores": list(self.worker_cores) if self.worker_cores is not None else None,
        }


def plan_for(placement: str, num_workers: int, cores: Iterable[int] | None = None) -> ThreadPlan:
    """The placement ``placement`` for ``num_workers`` workers over ``cores`` (default: :func:`usable_cores`).

    Raises:
        ValueError: when it cannot run here (:func:`placement_unavailable`'s reason).
    """
    cores = sorted(cores) if cores is not None else usable_cores()
    reason = placement_unavailable(placement, num_workers, cores=cores)
    if reason:
        raise ValueError(reason)
    if placement == "shared" or num_workers == 0:
        return ThreadPlan(placement, None, None, None)
    main, workers = tuple(cores[:-num_workers]), tuple(cores[-num_workers:])
    return ThreadPlan(placement, len(main), main, workers)


def _thread_ids() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def affinity_of(pid: int) -> list[int] | None:
    """The cores process or thread ``pid`` may run on, or ``None`` when it cannot be read (gone, no platform
    support)."""
    try:
        return sorted(os.sched_getaffinity(pid))
    except (OSError, AttributeError):
        return None


def _pin_all(cores: Iterable[int]) -> None:
    cores = set(cores)
    for tid in _thread_ids():  # every thread of the process: the intra-op pool exists already
        try:
            os.sched_setaffinity(tid, cores)
        except OSError:
            pass  # a thread that ended meanwhile


def apply(plan: ThreadPlan) -> Callable[[], None]:
    """Put ``plan`` into effect for this process (intra-op threads, every thread's cores); returns the function
    that restores what it changed."""
    if plan.intra_op is None and plan.main_cores is None:
        return lambda: None
    threads = torch.get_num_threads()
    before = usable_cores()
    if plan.intra_op is not None:
        torch.set_num_threads(plan.intra_op)
    if plan.main_cores is not None:
        _pin_all(plan.main_cores)

    def restore() -> None:
        torch.set_num_threads(threads)
        if plan.main_cores is not None:
            _pin_all(before)

    return restore


class WorkerPin:
    """A DataLoader ``worker_init_fn`` that pins worker ``i`` to ``cores[i % len(cores)]``, then calls the
    ``worker_init_fn`` it wraps (if any)."""

    def __init__(self, cores: Iterable[int], then: Callable[[int], None] | None = None) -> None:
        self.cores = tuple(cores)
        self.then = then

    def __call__(self, worker_id: int) -> None:
        os.sched_setaffinity(0, {self.cores[worker_id % len(self.cores)]})
        if self.then is not None:
            self.then(worker_id)


def threads_in_effect(
    plan: ThreadPlan | None = None, worker_cores: list[list[int] | None] | None = None
) -> dict[str, Any]:
    """What the process runs with now, read back: its intra-op threads and its cores, with the ``plan`` that
    asked for them and each loader worker's cores as read from the live worker (``worker_cores``)."""
    return {
        "placement": plan.placement if plan is not None else "shared",
        "planned": plan.to_dict() if plan is not None else None,
        "intra_op": torch.get_num_threads(),
        "main_cores": affinity_of(0),
        "worker_cores": worker_cores,
        "usable_cores": len(usable_cores()),
    }
