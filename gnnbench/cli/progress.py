"""What the commands show on stderr while they measure: a training run's step bar (:func:`training_bar`), a
sweep's calibration lines and run bar with its time left (:class:`SweepLines`), and ``gpu-check``'s line per run
(:class:`RunLines`). The library reports through :class:`~gnnbench.measure.sweep.full.SweepProgress`; only
this module prints it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from gnnbench.cli.eta import Eta, duration
from gnnbench.measure.run import RunResult
from gnnbench.measure.sweep import SweepProgress

__all__ = ["training_bar", "SweepLines", "RunLines", "run_seconds"]


def training_bar(desc: str):
    """A step bar on stderr and the ``progress(step, total)`` callback that moves it (``run``)."""
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit="step", file=sys.stderr, leave=False, disable=None)

    def update(step: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.n = step
        bar.refresh()

    return bar, update


def run_seconds(runs: list[RunResult]) -> float | None:
    """A run's duration estimated from stored results (graph, setup, training and evaluation clocks): the first
    guess of the time left, before a sweep run has finished."""
    d = [r.clock_seconds for r in runs if r.ok]
    return sum(d) / len(d) if d else None


class SweepLines(SweepProgress):
    """``compare`` and ``diagnose --verify``: the calibration's lines and its target, then a progress line of
    the sweep: runs done, the entry running, and an estimate of the time left (:class:`~gnnbench.cli.eta.Eta`:
    each remaining run at the mean duration of its label's runs so far, else of all; settled rows' rounds drop
    out as they settle).

    Args:
        seed_eta: Take the calibration runs' mean duration as the first guess of a sweep run's (``compare``).
        log: A file that every line is appended to as well (``compare``: the sweep folder's ``compare.log``, so
            the folder keeps its own timed log across resumes, read by :mod:`gnnbench.report.sweep_time`); the
            run lines go there even where a terminal shows the bar instead.
    """

    def __init__(self, *, seed_eta: bool = True, log: str | Path | None = None) -> None:
        self._seed_eta = seed_eta
        self._started = time.perf_counter()
        self._bar = None
        self._eta: Eta | None = None
        self._log = Path(log) if log is not None else None
        self._calibration_runs: list[float] = []  # stored durations of the calibration runs kept from disk
        self._calibration_measured = 0

    def _line(self, text: str, *, stderr: bool = True) -> None:
        if stderr:
            print(text, file=sys.stderr, flush=True)
        if self._log is not None:
            self._log.parent.mkdir(parents=True, exist_ok=True)
            with open(self._log, "a") as f:
                f.write(text + "\n")

    def calibration_started(self, runs: int) -> None:
        if runs:
            # stamped: the sweep's start, where the log's wall time begins (gnnbench.report.sweep_time)
            self._line(
                f"{time.strftime('%H:%M:%S')} calibration: the baseline on {runs} seed(s) of its own, to a plateau"
            )
        self._started = time.perf_counter()
        self._calibration_runs, self._calibration_measured = [], 0

    def calibration_run(self, done: int, total: int, entry, status: str, seconds: float | None = None) -> None:
        if status == "running":
            return
        if status == "kept":  # from an earlier invocation: its stored duration, not this clock's
            if seconds is not None:
                self._calibration_runs.append(seconds)
        else:
            self._calibration_measured += 1
        spent, measured, kept = time.perf_counter() - self._started, self._calibration_measured, self._calibration_runs
        per = spent / measured if measured else (sum(kept) / len(kept) if kept else None)
        left = per * (total - done) if per is not None else None
        self._line(
            f"{time.strftime('%H:%M:%S')} calibration {done}/{total}: {status}"
            + (f"; calibration left about {duration(left)}, then the sweep (its estimate follows)" if left else "")
        )

    def calibrated(self, calibration) -> None:
        if calibration is not None and calibration.target is not None:
            self._line(
                f"target: validation {calibration.target:.4f} ({calibration.source}); validation every "
                f"{calibration.eval_every} steps; time-to-accuracy budget {calibration.budget_seconds:.1f} s per "
                f"run ({calibration.budget_factor:g}x the calibrated time to the target; it censors, it stops "
                f"nothing); step budget {calibration.step_budget}, no plateau stop before step "
                f"{calibration.min_steps}; patience at most each run's own steps to the target"
            )

    def sweep_started(self, entries, calibration_runs: list[RunResult]) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=len(entries),
            desc="runs",
            unit="run",
            file=sys.stderr,
            disable=None,
            bar_format="{desc}: {n}/{total} [{elapsed}] {postfix}",
        )
        self._eta = Eta(
            [e.label for e in entries], seed_seconds=run_seconds(calibration_runs) if self._seed_eta else None
        )

    def sweep_run(self, done: int, total: int, entry, status: str, seconds: float | None = None) -> None:
        bar, eta = self._bar, self._eta
        eta.update(entry.label, status, seconds)
        bar.n = done
        bar.set_postfix_str(f"round {entry.round}: {entry.label}: {status}; {eta.text()}")
        bar.refresh()
        if status != "running":  # one line per finished run: on stderr where no terminal shows the bar, and in the log
            self._line(
                f"{time.strftime('%H:%M:%S')} runs {done}/{total}: round {entry.round} {entry.label}: "
                f"{status}; {eta.text()}",
                stderr=bool(bar.disable),
            )

    def best_set_chosen(self, choice, measured: bool) -> None:
        left = "; ".join(f"left out: {k} ({v})" for k, v in choice.left_out.items())
        if measured:
            text = f"best set: {choice.label}, measured against the baseline in rounds of its own"
        elif choice.measurable:
            text = f"best set: {choice.label} chosen, not measured (no target fixed before the rounds)"
        else:
            text = (
                f"best set: none to measure ({len(choice.names)} entr{'y' if len(choice.names) == 1 else 'ies'} paid)"
            )
        self._line(f"{time.strftime('%H:%M:%S')} {text}" + (f"; {left}" if left else ""))

    def sweep_ended(self) -> None:
        if self._bar is not None:
            self._bar.close()


class RunLines(SweepProgress):
    """``gpu-check``: ``header()`` printed when the sweep starts, then one line per finished run with the
    seconds since (:attr:`started`)."""

    def __init__(self, header: Callable[[], str]) -> None:
        self._header = header
        self.started = time.perf_counter()

    def sweep_started(self, entries, calibration_runs: list[RunResult]) -> None:
        print(self._header(), flush=True)
        self.started = time.perf_counter()

    def sweep_run(self, done: int, total: int, entry, status: str, seconds: float | None = None) -> None:
        if status != "running":
            print(
                f"  [{done}/{total}] {entry.label}: {status} ({time.perf_counter() - self.started:.0f} s)", flush=True
            )
