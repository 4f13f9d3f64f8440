"""Phase timing for measured training steps.

:class:`PhaseTimer` splits each step into the phases of :data:`PHASES`. In the default ``sync`` mode the
device is synchronized at every phase boundary and each phase is timed on the host clock (with CUDA events
for its device time); in ``end_to_end`` mode only whole steps are timed, so work overlapped on other CUDA
streams is not serialized. :class:`NullTimer` times nothing, and :func:`summarize` gives a median with its
spread.

The two modes, and how nested and overlapped work is attributed: ``docs/measurement.md``.

:func:`code_path` marks the code paths that issue the hot generic operators (the scatter path's per-edge
normalization multiply, dropout, the sampler, ...) as profiler ranges named ``gnnbench.path:<name>``
(:data:`CODE_PATHS`), so that an operator profile attributes each operator to the code that issued it
(:mod:`gnnbench.advice.op_profile`) and registry entries name the paths they remove or change
(``Optimization.paths``).
"""

from __future__ import annotations

import functools
import statistics
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import torch

__all__ = [
    "PHASES",
    "PhaseTimer",
    "NullTimer",
    "StopClock",
    "summarize",
    "CODE_PATHS",
    "PATH_RANGE",
    "code_path",
    "in_code_path",
]

PHASE_RANGE = "phase:"  # prefix of the profiler range of a phase (PhaseTimer.label)
PHASES = ("sample", "negatives", "gather", "transfer", "forward", "backward", "optimizer")

PATH_RANGE = "gnnbench.path:"  # prefix of the profiler range of a code path (code_path)
# The code paths marked as profiler ranges: name -> what runs in it. An operator's time belongs to the innermost
# path it ran in (its backward to the path its forward ran in); registry entries name the paths they remove or
# change (``Optimization.paths``). ``gnnbench.watch`` marks the same paths in PyG's own layers.
CODE_PATHS = {
    "sample": "the neighbour sampler drawing a batch's multi-hop neighbourhood",
    "gather": "the feature rows of a batch's nodes gathered (and copied to the device)",
    "norm.build": "the GCN normalization of a batch or graph: degrees and per-edge and self-loop weights",
    "dropout": "dropout on hidden representations: the mask drawn and applied",
    "linear": "the dense transforms (x W)",
    "aggregate.gather": "the scatter path's per-edge gather of source rows (index_select)",
    "aggregate.edge_norm": "the scatter path's per-edge normalization multiply (messages times GCN weights)",
    "aggregate.scatter": "the scatter path's sum of messages into their targets (index_add_ / scatter)",
    "aggregate.mean_scale": "the scatter path's mean: the sum scaled by each target's inverse degree",
    "aggregate.self_weight": "GCN's self-loop term: each target's row times its self weight",
    "aggregate.csr_build": "a batch's CSR built in the step (edges sorted by target, offsets, values permuted)",
    "aggregate.spmm": "the CSR sparse-matrix product over the batch's own CSR",
    "aggregate.spmm_converting": "the sparse-matrix product through torch.sparse, which converts the "
    "adjacency per call (a transposition sort in backward)",
}


def code_path(name: str):
    """A context manager marking code path ``name`` (:data:`CODE_PATHS`) as the profiler range
    ``gnnbench.path:<name>``, only while a profiler records: otherwise (and while ``torch.compile`` traces, which
    would ignore the range anyway) a ``nullcontext``, so the measured clocks pay one check and no profiler call
    (``torch.profiler.record_function`` itself calls into the dispatcher at every entry and exit, profiler or
    not)."""
    if not torch.compiler.is_compiling() and torch.autograd._profiler_enabled():
        if name not in CODE_PATHS:
            raise ValueError(f"unknown code path {name!r}; accepted: {', '.join(CODE_PATHS)}")
        return torch.profiler.record_function(PATH_RANGE + name)
    return nullcontext()


def in_code_path(name: str):
    """Decorator: the function runs inside :func:`code_path` ``name``."""
    if name not in CODE_PATHS:
        raise ValueError(f"unknown code path {name!r}; accepted: {', '.join(CODE_PATHS)}")

    def wrap(fn):
        @functools.wraps(fn)
        def marked(*args, **kwargs):
            with code_path(name):
                return fn(*args, **kwargs)

        return marked

    return wrap


class StopClock:
    """A clock that runs only while it is on: :meth:`start`, :meth:`stop`, ``with clock.off():`` around time that
    must not count (evaluation, the consumer of a generator), and :meth:`charge` for time measured elsewhere
    that must. :attr:`seconds` is the time counted up to the last stop; a running stretch counts once stopped."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._since: float | None = None

    @property
    def running(self) -> bool:
        return self._since is not None

    def start(self) -> None:
        """Run from now (a running clock restarts its stretch here without losing what it counted)."""
        self.stop()
        self._since = time.perf_counter()

    def stop(self) -> None:
        """Add the stretch since :meth:`start` (nothing when stopped)."""
        if self._since is not None:
            self.seconds += time.perf_counter() - self._since
            self._since = None

    @contextmanager
    def off(self):
        """Stopped inside the block, running again after it (also when the block is left by an exception or
        a generator's close)."""
        self.stop()
        try:
            yield self
        finally:
            self.start()

    def charge(self, seconds: float) -> None:
        """Count ``seconds`` measured elsewhere (work done off the clock that belongs on it)."""
        self.seconds += float(seconds)


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
    apart: list[dict[str, float]] = field(default_factory=list)  # per recorded step: work done in loader workers
    label: bool = False  # mark each phase as a profiler range ("phase:<name>"), to attribute operators to phases
    _current: dict[str, float] | None = None
    _apart: dict[str, float] | None = None
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
        self._apart = {}
        self._events = []
        self._t0 = time.perf_counter()

    @contextmanager
    def phase(self, name: str):
        """Time one phase: CUDA events on the device always; in ``sync`` mode also the host clock, with the
        device synchronized at both boundaries (end to end: no synchronization inside the step). With
        :attr:`label` the phase is also a profiler range named ``phase:<name>`` (:data:`PHASE_RANGE`)."""
        if self.label:
            with torch.profiler.record_function(PHASE_RANGE + name):
                yield from self._timed(name)
            return
        yield from self._timed(name)

    def _timed(self, name: str):
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

    def move(self, seconds: float, *, src: str, dst: str) -> float:
        """Re-attribute ``seconds`` of work timed inside phase ``src`` of the current step to phase ``dst``.

        For work nested inside another phase's clock (negatives drawn by the
        sampler inside ``sample``). At most what ``src`` holds is moved, so the
        step's phase total is unchanged; nothing moves in ``end_to_end`` mode
        (no phase is host-timed) or outside a step.

        Args:
            seconds: Seconds measured for the nested work.
            src: Phase whose clock contained the work.
            dst: Phase the work belongs to.

        Returns:
            The seconds actually moved.
        """
        for name in (src, dst):
            if name not in PHASES:
                raise ValueError(f"unknown phase {name!r}; accepted: {', '.join(PHASES)}")
        if self._current is None or not self.sync:
            return 0.0
        moved = min(max(float(seconds), 0.0), self._current[src])
        self._current[src] -= moved
        self._current[dst] += moved
        return moved

    def record_apart(self, name: str, seconds: float) -> None:
        """Record ``seconds`` of the current step's batch spent in phase ``name`` in a loader worker process.

        Kept apart from :attr:`steps` (the worker ran it overlapped with
        training, so it is not part of this process's wait); stored per
        recorded step in :attr:`apart`, on the worker's clock.
        """
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; accepted: {', '.join(PHASES)}")
        if self._apart is not None:
            self._apart[name] = self._apart.get(name, 0.0) + float(seconds)

    def end_step(self, record: bool = True) -> None:
        if self._cuda():
            torch.cuda.synchronize(self.device)
        elapsed = time.perf_counter() - self._t0
        if record:
            self.step_seconds.append(elapsed)
            self.steps.append(self._current or {})
            self.apart.append(self._apart or {})
            if self._events:
                dev: dict[str, float] = {}
                for name, s, e in self._events:
                    dev[name] = dev.get(name, 0.0) + s.elapsed_time(e)
                self.device_ms.append(dev)
        self._current = None
        self._apart = None
        self._events = None


def summarize(values: list[float]) -> dict[str, float]:
    """Median with spread: quartiles and min-max."""
    if not values:
        return {
            "median": float("nan"),
            "q1": float("nan"),
            "q3": float("nan"),
            "min": float("nan"),
            "max": float("nan"),
            "n": 0,
        }
    v = sorted(values)
    if len(v) >= 2:
        q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive")
    else:
        q1 = q3 = v[0]
    return {"median": statistics.median(v), "q1": q1, "q3": q3, "min": v[0], "max": v[-1], "n": len(v)}
