"""Peak memory of training steps, measured: what a memory budget is compared with.

:func:`step_peak` gives the context manager that measures a region (:class:`StepPeak`). On CUDA it is the
allocator's peak over the region, the resident state (model, optimizer state, device-resident features)
included: what the device must hold. On a CPU the process's resident set is not a step's memory, so
:class:`AllocationTracker`, a ``TorchDispatchMode``, counts the tensor storages the region's operators
create and free: the memory the steps allocate on top of what already existed. The tracker costs a
Python call per operator, so measure a few steps outside timed ones.

What the CPU tracker sees and does not see: ``docs/memory.md``.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gnnbench.flags import Flags, RunContext, Unavailable

__all__ = ["AllocationTracker", "StepPeak", "step_peak", "MEMORY_SOURCES", "unavailable"]

# How a peak was measured, by device type.
MEMORY_SOURCES = {
    "cuda": "torch.cuda.max_memory_allocated (resident state included)",
    "cpu": "tensor storages allocated during the steps (dispatch-mode tracker)",
}


class AllocationTracker(TorchDispatchMode):
    """Running total and peak of the bytes of tensor storages created inside ``with tracker:``.

    Args:
        device_type: Count storages on this device type only (default ``"cpu"``).

    Attributes:
        current_bytes: Bytes of storages created in the region and still alive.
        peak_bytes: Largest ``current_bytes`` seen.
    """

    def __init__(self, device_type: str = "cpu") -> None:
        super().__init__()
        self.device_type = device_type
        self.current_bytes = 0
        self.peak_bytes = 0
        self._live: dict[int, int] = {}  # id of a live storage object -> its bytes as counted

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {id(s) for s in map(_storage, tree_leaves((args, kwargs))) if s is not None}
        for storage in map(_storage, tree_leaves(out)):
            if storage is not None:
                self._see(storage, is_input=id(storage) in inputs)
        return out

    def _see(self, storage: torch.UntypedStorage, *, is_input: bool) -> None:
        if storage.device.type != self.device_type:
            return
        key, nbytes = id(storage), storage.nbytes()
        counted = self._live.get(key)
        if counted is None:
            if is_input:  # a view of, or in place on, storage that existed before the region
                return
            weakref.finalize(storage, self._free, key)
            self._live[key] = 0
            counted = 0
        if nbytes != counted:  # new, or resized in place by an out= operator
            self._live[key] = nbytes
            self.current_bytes += nbytes - counted
            self.peak_bytes = max(self.peak_bytes, self.current_bytes)

    def _free(self, key: int) -> None:
        self.current_bytes -= self._live.pop(key, 0)


def unavailable(flags: Flags, ctx: RunContext) -> list[Unavailable]:
    """What the step peak cannot be measured for: compiled models off CUDA. Under a dispatch mode dynamo does
    not compile (the frame runs eagerly, and stays uncompiled after the mode exits), and inductor's kernels
    allocate their buffers without an operator the tracker could see."""
    if flags.compile and ctx.device.type != "cuda":
        return [
            Unavailable(
                "compile",
                "the step-memory tracker off CUDA is a dispatch mode: torch.compile does "
                "not compile under it, and compiled kernels allocate buffers it cannot see; leave "
                "compile out (the eager model's memory) or run on CUDA",
            )
        ]
    return []


def _storage(x) -> torch.UntypedStorage | None:
    """The storage behind a plain strided tensor (``None`` for anything else)."""
    if not isinstance(x, torch.Tensor) or x.layout != torch.strided or type(x) is not torch.Tensor:
        return None
    return x.untyped_storage()


@dataclass
class StepPeak:
    """``with StepPeak(device) as m: ...`` then ``m.peak_bytes``: the region's peak (see ``docs/memory.md``).

    Args:
        device: Where the steps run: CUDA reads the caching allocator's peak, anything else is tracked by
            :class:`AllocationTracker` for that device type.
    """

    device: torch.device
    peak_bytes: int | None = None

    def __post_init__(self) -> None:
        self.device = torch.device(self.device)
        self._tracker: AllocationTracker | None = None

    @property
    def source(self) -> str:
        """How the peak is measured, in words."""
        return MEMORY_SOURCES.get(self.device.type, MEMORY_SOURCES["cpu"])

    def __enter__(self) -> "StepPeak":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._tracker = AllocationTracker(self.device.type)
            self._tracker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._tracker is None:
            torch.cuda.synchronize(self.device)
            self.peak_bytes = int(torch.cuda.max_memory_allocated(self.device))
        else:
            self._tracker.__exit__(*exc)
            self.peak_bytes = self._tracker.peak_bytes
            self._tracker = None


def step_peak(device: torch.device | str) -> StepPeak:
    """A context manager measuring the peak memory of the steps it wraps on ``device``: :class:`StepPeak`."""
    return StepPeak(torch.device(device))
