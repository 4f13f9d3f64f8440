"""Keeping evaluation off the clock of background producers too.

Evaluation is off the training clock. Producers that run beside the training loop (the pipelined loader's
thread, the feature prefetch thread, loader worker processes) would otherwise keep working while the loop
evaluates, and the batches they finish then would reach the next steps for free: an overlap entry would gain
from evaluation pauses that real training does not have. :class:`BackgroundWork` stops them for the duration:

- **worker processes** are suspended (``SIGSTOP``) when evaluation starts and continued (``SIGCONT``) when it
  ends, so they do no work at all meanwhile (:meth:`BackgroundWork.suspend_processes`);
- **threads** check :meth:`BackgroundWork.wait_if_paused` before each item (or enter it through
  :meth:`BackgroundWork.item`, which waits and registers the item in one step), so they start nothing new
  while evaluation runs; the part of an item already in progress that falls inside the pause is measured
  (:meth:`BackgroundWork.busy`) and charged back to the training clock by :meth:`BackgroundWork.resume`.

A pair timed in one process (:mod:`gnnbench.measure.run.interleaved`) holds a side's producers the same way
while the other side steps, and :meth:`BackgroundWork.drain` waits, on the held side's own clock, for the item a
thread had in progress: nothing of that side's work runs on the other side's time.

The training loop calls :meth:`BackgroundWork.pause` before each evaluation and adds what
:meth:`BackgroundWork.resume` returns to its clock.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = ["BackgroundWork", "can_suspend_processes"]

_CAN_SUSPEND = hasattr(signal, "SIGSTOP") and hasattr(signal, "SIGCONT")


def can_suspend_processes() -> bool:
    """Whether this platform can suspend a process outright and continue it (``SIGSTOP`` / ``SIGCONT``)."""
    return _CAN_SUSPEND


class BackgroundWork:
    """The background producers of one training run, paused together while the loop evaluates.

    Attributes:
        charged_seconds: Producer work that overlapped evaluations (summed over threads), charged back to the
            training clock so far.
        pauses: Evaluations the producers were paused for.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified whenever a thread's item ends
        self._running = threading.Event()
        self._running.set()
        self._busy: dict[int, float] = {}  # thread id -> start of the item it is producing
        self._pids: dict[int, Callable[[], list[int]]] = {}  # handle -> the live worker pids of a source
        self._stopped: list[int] = []
        self._paused_at: float | None = None
        self._pending = 0.0  # work of items that finished during the current pause
        self._next_handle = 0
        self.charged_seconds = 0.0
        self.pauses = 0

    # ------------------------------------------------------------------ producers
    def wait_if_paused(self, stop: threading.Event | None = None) -> None:
        """Called by a producer thread between items: returns at once while no evaluation runs, else when it
        ends (or when ``stop`` is set)."""
        while not self._running.wait(timeout=0.05):
            if stop is not None and stop.is_set():
                return

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Wrap one item of a producer thread's work; the part of it that falls inside an evaluation is
        charged back to the training clock."""
        me = threading.get_ident()
        start = time.perf_counter()
        with self._lock:
            self._busy[me] = start
        try:
            yield
        finally:
            self._leave(me, start)

    @contextmanager
    def item(self, stop: threading.Event | None = None) -> Iterator[bool]:
        """Enter one item of a producer thread's work once the producers run: the wait and the registration
        are one step under the lock, so an item either started before a :meth:`pause` (and :meth:`drain` waits
        for it) or starts after the next :meth:`resume`, never in between. Yields ``False`` without entering
        when ``stop`` is set while paused (the thread should end)."""
        me = threading.get_ident()
        while True:
            with self._lock:
                if self._running.is_set():
                    start = time.perf_counter()
                    self._busy[me] = start
                    break
            if stop is not None and stop.is_set():
                yield False
                return
            self._running.wait(timeout=0.05)
        try:
            yield True
        finally:
            self._leave(me, start)

    def _leave(self, me: int, start: float) -> None:
        end = time.perf_counter()
        with self._lock:
            self._busy.pop(me, None)
            if self._paused_at is not None:  # finished during an evaluation: its part inside it
                self._pending += end - max(start, self._paused_at)
            # an item that spanned a whole evaluation was charged up to its end by resume()
            self._idle.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no producer thread has an item in progress (after :meth:`pause`, none starts a new one);
        ``False`` when ``timeout`` seconds passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._busy, timeout)

    def suspend_processes(self, live_pids: Callable[[], list[int]]) -> Callable[[], None]:
        """Register a source of worker processes (``live_pids()`` gives the pids alive now) to be suspended
        during evaluations; returns the function that unregisters it."""
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            self._pids[handle] = live_pids

        def unregister() -> None:
            with self._lock:
                self._pids.pop(handle, None)

        return unregister

    @property
    def has_processes(self) -> bool:
        """Whether worker processes produce batches (a thread reading from them only waits for them: its
        wait is not work, so it wraps only its own work in :meth:`busy`)."""
        with self._lock:
            return bool(self._pids)

    # ------------------------------------------------------------------ the training loop
    def pause(self) -> None:
        """Evaluation starts: threads start no new item, worker processes are suspended."""
        with self._lock:
            if self._paused_at is not None:
                return
            self._running.clear()
            self._paused_at = time.perf_counter()
            self._pending = 0.0
            self.pauses += 1
            sources = list(self._pids.values())
        if _CAN_SUSPEND:
            for live in sources:
                for pid in live():
                    try:
                        os.kill(pid, signal.SIGSTOP)
                        self._stopped.append(pid)
                    except (ProcessLookupError, PermissionError):
                        pass

    def resume(self) -> float:
        """Evaluation ended: continue the producers; returns the seconds of producer work done during the
        pause (to add to the training clock)."""
        for pid in self._stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
        self._stopped = []
        with self._lock:
            if self._paused_at is None:
                return 0.0
            now = time.perf_counter()
            charged = self._pending
            for start in self._busy.values():  # items still in progress: their part inside the pause
                charged += now - max(start, self._paused_at)
            self._paused_at = None
            self._running.set()
        self.charged_seconds += charged
        return charged
