"""Measuring children: one way to start a process that measures something, wait for it, and leave nothing behind.

:func:`run_child` starts a command in a session of its own (its own process group, so nothing it starts is
missed: loader workers, a torchrun agent), its output captured in temporary files (a child that leaves a
process holding its output open cannot block the wait) or written to a log, and waits for it at most
``timeout`` seconds. Then nothing of its group is left running:

* it exited: whatever it left behind in its group (loader workers of a crashed run) is killed;
* it ran past ``timeout``, or the wait was interrupted (Ctrl-C, any exception): the whole group gets SIGTERM,
  ``grace`` seconds to end what it started, then SIGKILL; the child is reaped, and an interruption is raised
  again.

The :class:`ChildOutcome` says how it ended; :meth:`ChildOutcome.error_text` says why it failed in a few lines:
the end of its stderr, or that it timed out after N s, naming the command.

A measuring child's timeout: :func:`budget_timeout` of its run's time budget (a generous multiple plus a margin
for imports, setup and evaluation), or :data:`DEFAULT_CHILD_TIMEOUT_S` when nothing bounds its clock. The places
that start a measuring process use it: a run in a process started with its allocator and the sweep's isolated
runs (:mod:`gnnbench.measure.run.single`, :mod:`gnnbench.measure.sweep.rounds`), torchrun's launcher
(:mod:`gnnbench.measure.run.launch`), the gate's benchmark processes (:mod:`gnnbench.measure.gate.rounds`) and
``--verify``'s runs of a user's script (:mod:`gnnbench.advice.watch.verify`).
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Mapping, Sequence, Union

__all__ = [
    "run_child",
    "run_json_child",
    "ChildOutcome",
    "budget_timeout",
    "DEFAULT_CHILD_TIMEOUT_S",
    "GRACE_S",
    "BUDGET_FACTOR",
    "BUDGET_MARGIN_S",
]

DEFAULT_CHILD_TIMEOUT_S = 3600.0  # a measuring child whose clock no budget bounds is killed after an hour
GRACE_S = 15.0  # seconds a child's group has after SIGTERM to end what it started (a torchrun it launched)
BUDGET_FACTOR = 3.0  # a child with a time budget: this many times the budget ...
BUDGET_MARGIN_S = 900.0  # ... plus this margin (imports, building the graph, evaluation off the run clock)
TAIL_LINES = 20  # lines of stderr an error text keeps
TAIL_CHARS = 4000  # ... and characters at most

Stdin = Union[None, int, IO]


@dataclass(frozen=True)
class ChildOutcome:
    """How a child started by :func:`run_child` ended.

    Args:
        argv: The command.
        returncode: Its exit status (negative: the signal that ended it; after a timeout, the kill's).
        stdout: What it wrote to stdout (empty when it went to a log).
        stderr: What it wrote to stderr (empty when it went to a log).
        timed_out: It ran past ``timeout`` and was killed with its group.
        seconds: Wall seconds from its start until it ended (and, after a timeout, was reaped).
        timeout: The timeout it ran under, in seconds.
    """

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    timeout: float

    @property
    def ok(self) -> bool:
        """It exited with status 0 within its timeout."""
        return self.returncode == 0 and not self.timed_out

    @property
    def command(self) -> str:
        """The command as a shell would read it (at most 300 characters)."""
        text = shlex.join(self.argv)
        return text if len(text) <= 300 else text[:297] + "..."

    def tail(self, n_lines: int = TAIL_LINES, max_chars: int = TAIL_CHARS) -> str:
        """The last ``n_lines`` non-blank lines of its stderr (at most their last ``max_chars`` characters)."""
        if not isinstance(n_lines, int) or isinstance(n_lines, bool) or n_lines < 1:
            raise ValueError(f"n_lines must be an integer >= 1 (got {n_lines!r})")
        lines = [ln.rstrip() for ln in self.stderr.splitlines() if ln.strip()]
        return "\n".join(lines[-n_lines:])[-max_chars:]

    def error_text(self, n_lines: int = TAIL_LINES, max_chars: int = TAIL_CHARS) -> str:
        """Why it failed, in at most ``n_lines`` lines: ``timed out after N s`` with the command after a
        timeout, else the end of its stderr, else its exit status with the command; empty when it succeeded
        and wrote nothing to stderr."""
        if self.timed_out:
            return f"timed out after {self.timeout:g} s and was killed with every process it started: {self.command}"
        tail = self.tail(n_lines, max_chars)
        if tail or self.returncode == 0:
            return tail
        return f"{self.command} exited with {_status(self.returncode)} and wrote nothing to stderr"


def budget_timeout(budget_seconds: float | None, *, default: float = DEFAULT_CHILD_TIMEOUT_S) -> float:
    """The timeout of a measuring child whose run stops after ``budget_seconds`` on its clock:
    :data:`BUDGET_FACTOR` times the budget plus :data:`BUDGET_MARGIN_S` (its imports, its graph and evaluation
    run off that clock); ``default`` when no budget bounds it (``None``).

    Raises:
        ValueError: a budget or default that is not a number of seconds > 0.
    """
    default = _seconds("default", default)
    if budget_seconds is None:
        return default
    return BUDGET_FACTOR * _seconds("budget_seconds", budget_seconds) + BUDGET_MARGIN_S


def run_child(
    argv: Sequence[str | os.PathLike],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    stdin: Stdin = None,
    log: str | os.PathLike | None = None,
    grace: float = GRACE_S,
) -> ChildOutcome:
    """Run ``argv`` in a session of its own, wait for it at most ``timeout`` seconds, and leave no process of its
    group behind (see the module's docstring).

    Args:
        argv: The command and its arguments (a list, not a shell string).
        timeout: Seconds it may run; past them its group is ended (SIGTERM, ``grace``, SIGKILL) and the
            outcome says ``timed_out``.
        env: Its environment (default: this process's).
        cwd: Its working directory (default: this process's).
        stdin: Its standard input, as :class:`subprocess.Popen` takes it (default: this process's).
        log: A file that receives its stdout and stderr together as it writes them (the outcome's ``stdout``
            and ``stderr`` are then empty); default: both captured.
        grace: Seconds between SIGTERM and SIGKILL when its group is ended (default :data:`GRACE_S`).

    Returns:
        The :class:`ChildOutcome`. A child that fails or times out is an outcome, never an exception.

    Raises:
        ValueError: an empty or malformed ``argv``, a ``timeout`` or ``grace`` that is not a number of seconds
            (> 0 and >= 0), a ``cwd`` that is not a directory, an ``env`` with a value that is not a string.
        OSError: the command cannot be started (no such program).
        KeyboardInterrupt: the wait was interrupted (the child's group was ended first), as any other exception.
    """
    args = _argv(argv)
    timeout = _seconds("timeout", timeout)
    grace = _seconds("grace", grace, allow_zero=True)
    if cwd is not None and not Path(cwd).is_dir():
        raise ValueError(f"cwd must be an existing directory (got {str(cwd)!r})")
    if env is not None:
        bad = [f"{k!r}={v!r}" for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise ValueError(f"env must map names to strings (got {', '.join(bad[:3])})")
    with tempfile.TemporaryDirectory(prefix="gnnbench-child-") as tmp, contextlib.ExitStack() as files:
        # files, not pipes: a process it leaves holding its output open cannot block the wait
        out_path = Path(log) if log is not None else Path(tmp) / "stdout"
        err_path = None if log is not None else Path(tmp) / "stderr"
        out = files.enter_context(open(out_path, "wb"))
        err = subprocess.STDOUT if err_path is None else files.enter_context(open(err_path, "wb"))
        started = time.monotonic()
        proc = subprocess.Popen(
            args,
            stdin=stdin,
            stdout=out,
            stderr=err,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,  # its own process group: everything it starts is ended with it
        )
        timed_out = False
        try:
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                _end_group(proc, grace)
            else:
                _signal_group(proc.pid, signal.SIGKILL)  # whatever it left behind (loader workers)
        except BaseException:  # interrupted (Ctrl-C) or any error here: its group must not outlive us
            _end_group(proc, grace)
            raise
        seconds = time.monotonic() - started
        files.close()
        stdout = "" if log is not None else out_path.read_text(errors="replace")
        stderr = "" if err_path is None else err_path.read_text(errors="replace")
    return ChildOutcome(
        argv=tuple(args),
        returncode=proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        seconds=seconds,
        timeout=timeout,
    )


def _end_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM to ``proc``'s group, up to ``grace`` seconds for ``proc`` to exit, SIGKILL to what is left of the
    group, and ``proc`` reaped (the SIGKILL is sent even when the wait is interrupted)."""
    try:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    finally:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):  # the group is gone (or a zombie's)
        pass


def _status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"status {returncode}"


def _argv(argv: Sequence[str | os.PathLike]) -> list[str]:
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence) or not argv:
        raise ValueError(f"argv must be a non-empty list of strings, the command and its arguments (got {argv!r})")
    bad = [a for a in argv if not isinstance(a, (str, os.PathLike))]
    if bad:
        raise ValueError(f"argv must hold strings or paths (got {bad[0]!r} in {list(argv)!r})")
    return [os.fspath(a) for a in argv]


def _seconds(name: str, value: object, *, allow_zero: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a number of seconds {bound} (got {value!r})")
    return float(value)


def run_json_child(argv: list[str], timeout: float, *, prefix: str = "gnnbench-child-") -> dict:
    """The JSON a child writes to the file named by the ``--out`` it is given (appended to ``argv``), the child
    started through :func:`run_child`; a child that fails or writes nothing raises ``RuntimeError`` with why
    (the measuring scripts' children: ``scripts/inprocess_aa.py``, ``scripts/pair_carryover.py``)."""
    import json

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        out = Path(tmp) / "out.json"
        outcome = run_child([*argv, "--out", str(out)], timeout=timeout)
        if not outcome.ok or not out.exists():
            raise RuntimeError(outcome.error_text())
        return json.loads(out.read_text())
