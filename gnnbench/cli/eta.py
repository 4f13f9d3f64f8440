"""The time a sweep has left, estimated from the runs it has finished: each remaining run at the mean duration of
its label's finished runs (configurations differ by several fold: a short derived run against a run to a
plateau), else at the mean of every finished run, else at a first guess (a calibration run's). Runs of rows whose
verdict settled drop out as they settle, so the estimate is an upper bound that falls faster than the clock."""

from __future__ import annotations

import statistics
import time

__all__ = ["Eta", "duration"]


def duration(x: float) -> str:
    """A duration for a person: ``45 s``, ``12.5 min``, ``1 h 05 min``."""
    if x < 120:
        return f"{x:.0f} s"
    if x < 3600:
        return f"{x / 60:.1f} min"
    return f"{int(x // 3600)} h {int(x % 3600 // 60):02d} min"


class Eta:
    """Remaining-time estimate of a list of runs, updated from the sweep's progress callback.

    Args:
        labels: Every run's label, in any order (one per run).
        seed_seconds: A first guess of one run's duration, used until a run has finished.
    """

    def __init__(self, labels: list[str], *, seed_seconds: float | None = None) -> None:
        self._left: dict[str, int] = {}
        for label in labels:
            self._left[label] = self._left.get(label, 0) + 1
        self._seconds: dict[str, list[float]] = {}
        self._seed = seed_seconds
        self._started: float | None = None

    def update(self, label: str, status: str, seconds: float | None = None) -> None:
        """A run of ``label`` started (``status == "running"``) or ended (any other status); a run ``kept`` from
        an earlier invocation brings its stored duration in ``seconds``, so that a resumed sweep's estimate
        starts from its own runs, not from the first guess."""
        if status == "running":
            self._started = time.perf_counter()
            return
        if self._left.get(label):
            self._left[label] -= 1
        if status == "kept":
            if seconds is not None:
                self._seconds.setdefault(label, []).append(seconds)
        elif status != "settled" and self._started is not None:
            self._seconds.setdefault(label, []).append(time.perf_counter() - self._started)
        self._started = None

    def seconds_left(self) -> float | None:
        """The estimate, or ``None`` before anything is known."""
        every = [s for v in self._seconds.values() for s in v]
        fallback = statistics.mean(every) if every else self._seed
        total = 0.0
        for label, n in self._left.items():
            if not n:
                continue
            known = self._seconds.get(label)
            per = statistics.mean(known) if known else fallback
            if per is None:
                return None
            total += n * per
        return total

    def text(self) -> str:
        """``"about 12.0 min left (at most)"``, or what is not known yet."""
        left = self.seconds_left()
        runs = sum(self._left.values())
        if left is None:
            return f"{runs} runs left, time not estimated yet"
        return f"{runs} runs left at most, about {duration(left)} (an upper bound: settled rows drop out)"
