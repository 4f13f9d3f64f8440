"""``gnnbench regress`` as library calls: :func:`run_gate` checks out two revisions and runs the gate between
them (:func:`gnnbench.measure.gate.regress.gate`); on a regression, :meth:`GateRun.bisect` names the first bad commit
between them with the same gate over the benchmarks that regressed (:func:`gnnbench.measure.gate.trees.bisect`).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gnnbench.measure.gate.regress import DEFAULT_BUDGET_SECONDS, MAX_ROUNDS, Bench, default_benches, gate, gate_config
from gnnbench.measure.gate.trees import WORKING_TREE, bisect, trees_for
from gnnbench.measure.gate.verdicts import DEFAULT_SENSITIVITY, GateResult

__all__ = ["GateRun", "run_gate"]


@dataclass
class GateRun:
    """A gate between two revisions: its result, and what a bisection needs to run the same gate again."""

    base: str  # the good revision
    head: str  # the revision checked (``"."``: the working tree)
    result: GateResult
    benches: list[Bench]
    options: dict[str, Any]  # the gate's options (rounds, threads, pythons, ...): every probe runs with them

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
                probe = gate(pair, suspects, **self.options)
            if probe.failure is not None:  # a commit whose benchmarks crash is bad for the lost ones
                log(f"{commit[:10]}: its benchmark process {probe.failure.kind}")
            counted = [c.name for c in getattr(probe, "count_regressions", [])]
            if counted:
                log(f"{commit[:10]}: counted instructions grew in {', '.join(counted)}")
            return bool(probe.regressed) or bool(counted) or probe.failure is not None

        return bisect(self.base, self.head, is_bad, log=log)


def run_gate(
    base: str,
    head: str = WORKING_TREE,
    *,
    preset: str = "tiny",
    warmup: int = 3,
    device: str = "cpu",
    bench: list[str] | None = None,
    steps: int | None = None,
    rounds: int = 5,
    threads: int = 1,
    order_seed: int = 0,
    sensitivity: float = DEFAULT_SENSITIVITY,
    budget_seconds: float | None = DEFAULT_BUDGET_SECONDS,
    max_rounds: int = MAX_ROUNDS,
    timeout: float = 1800.0,
    base_python: str | None = None,
    head_python: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    counts: int = 0,
    cache_sim: bool = False,
) -> GateRun:
    """Check out ``base`` and ``head`` side by side and run the gate between them.

    Args:
        base: The good revision (any git revision).
        head: The revision to check (default ``"."``: the working tree as it is).
        preset: The benchmarks' graph preset (:func:`gate_config`).
        warmup: Warm-up steps per benchmark.
        device: Where the benchmarks run.
        bench: Benchmark names (:func:`default_benches`; default: every one that runs here).
        steps: Measured steps per benchmark.
        rounds, threads, order_seed, sensitivity, budget_seconds, max_rounds, timeout: The gate's
            (:func:`gnnbench.measure.gate.regress.gate`); ``budget_seconds=None``: no extra rounds.
        base_python, head_python: Each side's interpreter (default: this one).
        progress: ``progress(round, rounds, role)`` as each benchmark process starts.
        counts, cache_sim: Counted instructions (:func:`gnnbench.measure.gate.regress.count_gate`), processes per tree.

    Raises:
        ValueError: for options the gate refuses, an interpreter that is not one, or trees it cannot compare.
        OSError: when a revision cannot be checked out.
    """
    skipped: dict[str, str] = {}
    benches = default_benches(gate_config(preset, warmup=warmup, device=device), bench, steps=steps, skipped=skipped)
    with trees_for(base, head) as trees:
        pythons = {"base": base_python or sys.executable, "head": head_python or sys.executable}
        for role, exe in pythons.items():
            if not shutil.which(exe) and not Path(exe).is_file():
                raise ValueError(f"--{role}-python {exe!r} is not an interpreter on this machine")
        options = dict(
            rounds=rounds,
            threads=threads,
            order_seed=order_seed,
            pythons=pythons,
            sensitivity=sensitivity,
            budget_seconds=budget_seconds,
            max_rounds=max_rounds,
            timeout=timeout,
            counts=counts,
            cache_sim=cache_sim,
        )
        result = gate(trees, benches, labels=(base, head), skipped=skipped, progress=progress, **options)
    return GateRun(base, head, result, benches, options)
