"""Duet rounds: BASE and HEAD timed at the same moment, one per core, so a drift of the machine's speed lands on
both sides of a ratio (Bulej et al., "Duet Benchmarking", 2020; DESIGN.md §3, "Measure where the noise cancels").

A round of the gate runs one benchmark process per tree. Alternating, the two processes run one after the other
and the machine's speed can change between them; in a duet they start together, each pinned to a core of its own
at one thread (round ``r``: BASE on the ``r % 2``-th of the two cores, HEAD on the other, so a faster core
cancels over rounds), and before each benchmark both wait at a barrier (:func:`gnnbench.measure.gate.worker.barrier`),
so both trees run benchmark ``n`` in the same window. A process that fails has the driver write the abort file,
and its peer leaves its next barrier at once (exit :data:`~gnnbench.measure.gate.worker.DUET_ABORTED`) instead of
waiting for a partner that will not come.

:func:`duet_refusal` says why a runner cannot hold a duet (then the gate alternates, and says so);
:func:`duet_cores` assigns the cores of a round; :func:`run_both` runs the two sides at once.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, TypeVar

from gnnbench.process.threads import usable_cores

__all__ = ["DESIGNS", "DUET", "ALTERNATING", "duet_refusal", "duet_cores", "run_both", "BARRIER_TIMEOUT_S"]

DUET, ALTERNATING = "duet", "alternating"
DESIGNS = (DUET, ALTERNATING)  # how a round times the two trees: at once, one per core; or one after the other
BARRIER_TIMEOUT_S = 600.0  # a peer that does not reach a barrier within this is taken as lost

T = TypeVar("T")


def duet_refusal(threads: int, cores: list[int] | None = None) -> str | None:
    """Why the two trees cannot be timed at once here, or ``None``: a duet pins each side to one core at one
    thread, so it needs ``threads == 1`` and two usable cores (``cores``: default this process's)."""
    cores = sorted(usable_cores()) if cores is None else sorted(cores)
    if threads != 1:
        return (
            f"a duet runs each tree on one core at one thread, and the gate was asked for {threads} threads a "
            "side: the sides alternate"
        )
    if len(cores) < 2:
        return f"this runner gives the gate {len(cores)} usable core(s); a duet needs two: the sides alternate"
    return None


def duet_cores(r: int, cores: list[int] | None = None) -> dict[str, int]:
    """Round ``r``'s cores: BASE on the ``r % 2``-th of the first two usable cores, HEAD on the other (swapped
    every round, so a faster core favours neither side)."""
    cores = sorted(usable_cores()) if cores is None else sorted(cores)
    if len(cores) < 2:
        raise ValueError(f"a duet needs two usable cores (got {cores})")
    first, second = cores[0], cores[1]
    return {"base": first, "head": second} if r % 2 == 0 else {"base": second, "head": first}


def run_both(
    call: Callable[[str], T], barrier_dir: Path, failed: Callable[[BaseException], bool] | None = None
) -> dict[str, T | BaseException]:
    """``call("base")`` and ``call("head")`` at once (two threads, each starting its own process); an
    exception is returned in its side's place. As soon as one side raises (``failed(exc)``: whether the
    exception is a failure, default every exception), the abort file is written in ``barrier_dir`` so the other
    leaves its next barrier instead of waiting."""
    failed = failed or (lambda exc: True)
    abort = Path(barrier_dir) / "abort"

    def one(role: str) -> T | BaseException:
        try:
            return call(role)
        except Exception as exc:  # returned in its place; the peer is told to stop
            if failed(exc):
                abort.touch()
            return exc

    os.makedirs(barrier_dir, exist_ok=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {role: pool.submit(one, role) for role in ("base", "head")}
        return {role: f.result() for role, f in futures.items()}
