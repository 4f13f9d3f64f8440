"""``gnnbench regress`` as library calls: :func:`run_gate` checks out two revisions and runs the gate between
them (:func:`gnnbench.measure.gate.regress.gate`); on a regression, :meth:`GateRun.bisect` names the first bad commit
between them with the same gate over the benchmarks that regressed (:func:`gnnbench.measure.gate.trees.bisect`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gnnbench.measure.gate.benches import Bench, default_benches, gate_config
from gnnbench.measure.gate.options import GateOptions
from gnnbench.measure.gate.regress import Progress, gate
from gnnbench.measure.gate.trees import WORKING_TREE, bisect, trees_for
from gnnbench.measure.gate.verdicts import GateResult

__all__ = ["GateRun", "run_gate"]


@dataclass
class GateRun:
    """A gate between two revisions: its result, and what a bisection needs to run the same gate again."""

    base: str  # the good revision
    head: str  # the revision checked (``"."``: the working tree)
    result: GateResult
    benches: list[Bench]
    options: GateOptions  # every probe runs with them

    @property
    def regressed(self) -> list[str]:
        """The names of the benchmarks that fail the gate: by wall time, accuracy or loss, or by counted
        instructions (each name once, in that order)."""
        names = [b.name for b in self.result.regressed]
        names += [c.name for c in getattr(self.result, "count_regressions", []) if c.name not in names]
        return names

    def bisect(self, *, log: Callable[[str], None] = lambda line: None) -> tuple[str, int]:
        """The first bad commit between :attr:`base` and :attr:`head` and the gate runs it took: each probe is the
        same gate, :attr:`base` against the commit, over the regressed benchmarks (counted again where the
        regression was in counted instructions: the options keep the counts); a commit is bad when the probe
        regresses by wall time or by counts, or its benchmark process crashes. ``log`` receives a line per probe.

        Raises:
            ValueError: when :attr:`head` is not a commit (the working tree is not in the history), or
                :attr:`base` is not an ancestor of it.
        """
        if self.head == WORKING_TREE:
            raise ValueError("--bisect needs a HEAD commit (the working tree is not in the history)")
        suspects = [b for b in self.benches if b.name in self.regressed]

        def is_bad(commit: str) -> bool:  # the same gate, the good end against this commit
            with trees_for(self.base, commit) as pair:
                probe = gate(pair, suspects, self.options)
            if probe.failure is not None:  # a commit whose benchmarks crash is bad for the lost ones
                log(f"{commit[:10]}: its benchmark process {probe.failure.kind}")
            counted = [c.name for c in getattr(probe, "count_regressions", [])]
            if counted:
                log(f"{commit[:10]}: counted instructions grew in {', '.join(counted)}")
            return bool(probe.regressed) or bool(counted) or probe.failure is not None

        return bisect(self.base, self.head, is_bad, log=log)


def run_gate(
    base: str, head: str = WORKING_TREE, options: GateOptions | None = None, progress: Progress | None = None
) -> GateRun:
    """Check out ``base`` and ``head`` side by side and run the gate between them.

    Args:
        base: The good revision (any git revision).
        head: The revision to check (default ``"."``: the working tree as it is).
        options: The gate's options (:class:`~gnnbench.measure.gate.options.GateOptions`: the benchmarks, the
            rounds and their design, the budget, the interpreters, the counts).
        progress: ``progress(round, rounds, side)`` as each benchmark process starts.

    Raises:
        ValueError: for options the gate refuses, an interpreter that is not one, or trees it cannot compare.
        OSError: when a revision cannot be checked out.
    """
    options = options or GateOptions()
    for role, exe in options.interpreters().items():
        if not shutil.which(exe) and not Path(exe).is_file():
            raise ValueError(f"--{role}-python {exe!r} is not an interpreter on this machine")
    skipped: dict[str, str] = {}
    config = gate_config(options.preset, warmup=options.warmup, device=options.device)
    bench = list(options.bench) if options.bench is not None else None
    benches = default_benches(config, bench, steps=options.steps, skipped=skipped)
    with trees_for(base, head) as trees:
        result = gate(trees, benches, options, labels=(base, head), skipped=skipped, progress=progress)
    return GateRun(base, head, result, benches, options)
