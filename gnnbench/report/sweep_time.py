"""Where a sweep's wall time went, read from its progress log (``compare.log``: the lines ``compare`` prints on
stderr, one ``HH:MM:SS`` line per finished run).

A sweep runs one configuration at a time, so a run took the time from the line before it to its own line. The
log can hold several invocations of one sweep folder (a sweep stopped and resumed: each invocation begins with
its ``calibration:`` line, and a hand-written ``#`` line may note the resume); the time between invocations is
no one's, so it is left out. An invocation whose first line carries no time (logs written before it was
stamped) leaves its first run untimed, and says so.

Each run is charged to what it measured (:func:`run_kind`): the calibration, the baseline, the A/A rows, the
entries derived from short runs (their pair included), the entries trained to the target because they change
the numerics or the work per step, all recommended together, and the best set's own rounds (choosing the set
included in its first run).

    python -m gnnbench.report.sweep_time results/reference/compare-small-cpu
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LoggedRun", "SweepTime", "logged_runs", "run_kind", "sweep_time", "KINDS", "NOT_RUN"]

_STAMP = r"(\d\d):(\d\d):(\d\d)"
_START = re.compile(rf"^(?:{_STAMP} )?calibration: ")
_CALIBRATION = re.compile(rf"^{_STAMP} calibration (\d+)/(\d+): (\w+)")
_RUN = re.compile(rf"^{_STAMP} runs (\d+)/(\d+): round (\d+) (.+?): (\w+)(?:;|$)")
_BEST_SET = re.compile(rf"^{_STAMP} best set: ")

NOT_RUN = ("kept", "settled", "unavailable")  # statuses of a line whose run did not run in this invocation

KINDS = (
    "calibration",
    "baseline",
    "A/A and end-to-end baselines",
    "derived from short runs",
    "trained to the target: numerics change",
    "trained to the target: work per step changes",
    "all recommended",
    "also measured to the target",
    "best set",
    "other",
)


@dataclass(frozen=True)
class LoggedRun:
    """One finished run of a sweep's log.

    Attributes:
        label: The row it belongs to (``"calibration"`` for a calibration run).
        round: Its round (``None`` for a calibration run).
        status: What the line says of it (``ok``, ``failed``, ``kept``, ``unavailable``, ``settled``, ...).
        best_set: Whether it ran in the best set's own rounds.
        seconds: The wall time it took; ``None`` when the log does not say (the first run of an invocation whose
            start carries no time).
    """

    label: str
    round: int | None
    status: str
    best_set: bool
    seconds: float | None


def _seconds(m: re.Match) -> int:
    return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))


def logged_runs(text: str) -> tuple[list[LoggedRun], int]:
    """The runs of a sweep's log, each with the wall time it took, and the number of invocations the log holds.
    Midnight crossings are counted; the gaps between invocations are not."""
    runs: list[LoggedRun] = []
    last: int | None = None
    day = 0
    invocations = 0
    best_set = False
    prev_clock = None
    last_index = 0  # the last sweep run's number: counted afresh by a new invocation

    def clock(m: re.Match) -> int:
        nonlocal day, prev_clock
        t = _seconds(m)
        if prev_clock is not None and t < prev_clock:
            day += 86400
        prev_clock = t
        return t + day

    for line in text.splitlines():
        if line.startswith("#"):
            last = None  # a note between invocations: what follows starts afresh
            continue
        m = _START.match(line)
        if m:
            invocations += 1
            best_set = False
            last_index = 0
            last = clock(m) if m.group(1) else None
            continue
        m = _CALIBRATION.match(line) or _RUN.match(line) or _BEST_SET.match(line)
        if not m:
            continue
        invocations = max(invocations, 1)  # a log that opens with a run: its first invocation printed no start
        if m.re is _RUN and not best_set and int(m.group(4)) <= last_index:
            last = None  # the runs counted afresh: a new invocation whose start the log does not show
            invocations += 1
        if m.re is _RUN:
            last_index = int(m.group(4))
        t = clock(m)
        if m.re is _BEST_SET:  # choosing the set: charged to its first run, which starts from the last line's time
            best_set = True
            last_index = 10**9  # the set's runs are counted from 1 again: not a new invocation
            continue
        took = None if last is None else float(t - last)
        last = t
        if m.re is _CALIBRATION:
            runs.append(LoggedRun("calibration", None, m.group(6), False, took))
        else:
            runs.append(LoggedRun(m.group(7), int(m.group(6)), m.group(8), best_set, took))
    return runs, invocations


def run_kind(run: LoggedRun) -> str:
    """What a run measured, one of :data:`KINDS`."""
    from gnnbench import registry
    from gnnbench.measure.compare import AA_DUET_LABEL, AA_INPROCESS_LABEL, AA_LABEL, BASELINE, E2E_BASELINE
    from gnnbench.measure.sweep.plan import ALL_RECOMMENDED

    if run.label == "calibration":
        return "calibration"
    if run.best_set:
        return "best set"
    if run.label == BASELINE:
        return "baseline"
    if run.label in (AA_LABEL, AA_INPROCESS_LABEL, AA_DUET_LABEL, E2E_BASELINE):
        return "A/A and end-to-end baselines"
    if run.label == ALL_RECOMMENDED:
        return "all recommended"
    if run.label.endswith(" (measured)"):
        return "also measured to the target"
    try:
        opt = registry.get(run.label)
    except (KeyError, ValueError):
        return "other"
    if opt.same_trajectory:  # derived from a short run unless the sweep ran --no-derive
        return "derived from short runs"
    return (
        "trained to the target: work per step changes" if opt.changes_work else "trained to the target: numerics change"
    )


@dataclass(frozen=True)
class SweepTime:
    """Where a sweep's wall time went.

    Attributes:
        seconds: The timed runs' wall time in all.
        by_kind: Per kind of run (:data:`KINDS`, in that order, only those with runs): ``(runs that ran,
            seconds)``; a run kept from an earlier invocation, settled or unavailable ran nothing.
        by_round: Per round of the comparison (the best set's rounds apart): seconds.
        invocations: Invocations the log holds (a resumed sweep: more than one; the gaps are left out).
        untimed: Runs whose wall time the log does not give (see :class:`LoggedRun`).
    """

    seconds: float
    by_kind: dict[str, tuple[int, float]]
    by_round: dict[int, float]
    invocations: int
    untimed: int

    @property
    def minutes(self) -> float:
        return self.seconds / 60

    def text(self) -> str:
        """One sentence: the minutes in all, and each kind's minutes with its runs."""
        parts = [f"{kind} {s / 60:.0f} min ({n} run{'s' if n != 1 else ''})" for kind, (n, s) in self.by_kind.items()]
        notes = []
        if self.invocations > 1:
            notes.append(f"{self.invocations} invocations, the gaps between them left out")
        if self.untimed:
            notes.append(
                f"{self.untimed} run{'s' if self.untimed != 1 else ''} untimed: the first of an invocation whose "
                "start the log does not time"
            )
        note = f" ({'; '.join(notes)})" if notes else ""
        return f"{self.minutes:.0f} minutes of measuring{note}: " + ", ".join(parts)


def sweep_time(log: str | Path) -> SweepTime | None:
    """Where the wall time of the sweep whose log is ``log`` went; ``None`` without a log or a timed run."""
    try:
        text = Path(log).read_text()
    except OSError:
        return None
    runs, invocations = logged_runs(text)
    timed = [r for r in runs if r.seconds is not None]
    if not timed:
        return None
    by_kind: dict[str, tuple[int, float]] = {}
    for r in timed:
        n, s = by_kind.get(run_kind(r), (0, 0.0))
        by_kind[run_kind(r)] = (n + (r.status not in NOT_RUN), s + r.seconds)
    by_round: dict[int, float] = {}
    for r in timed:
        if r.round is not None and not r.best_set:
            by_round[r.round] = by_round.get(r.round, 0.0) + r.seconds
    return SweepTime(
        seconds=sum(r.seconds for r in timed),
        by_kind={k: by_kind[k] for k in KINDS if k in by_kind and by_kind[k][0]},
        by_round=dict(sorted(by_round.items())),
        invocations=invocations,
        untimed=len(runs) - len(timed),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sweep", help="a sweep folder (its compare.log) or a log file")
    args = p.parse_args(argv)
    path = Path(args.sweep)
    t = sweep_time(path / "compare.log" if path.is_dir() else path)
    if t is None:
        print(f"no timed run in {path}")
        return 1
    print(t.text())
    print("by round: " + ", ".join(f"{r} {s / 60:.0f} min" for r, s in t.by_round.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
