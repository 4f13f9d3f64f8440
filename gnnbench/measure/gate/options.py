"""Every option of a gate run, in one frozen object checked once (:class:`GateOptions`): the CLI builds it from its
arguments (:func:`gnnbench.cli.options.gate_options`), :func:`gnnbench.measure.gate.run.run_gate` picks the
benchmarks and trees with it, :func:`gnnbench.measure.gate.regress.gate` runs the rounds with it, and a bisection
probes each commit with the same object. Adding an option is one field here, one argument in the parser and one
line where the CLI builds it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from gnnbench.measure.gate.duet import DESIGNS, DUET
from gnnbench.measure.gate.verdicts import DEFAULT_SENSITIVITY

__all__ = ["GateOptions", "DEFAULT_BUDGET_SECONDS", "DEFAULT_ROUNDS", "MAX_ROUNDS", "DEFAULT_TIMEOUT_S"]

# the CLI's wall-clock budget for a gate run, extra rounds included: a default run's goal is 5 minutes, and
# duet rounds catch 10% and 5% non-work slowdowns within it (docs/regression-gate.md)
DEFAULT_BUDGET_SECONDS = 300.0
DEFAULT_ROUNDS = 8  # rounds every benchmark receives (docs/regression-gate.md: what 8 resolve at this spread)
MAX_ROUNDS = 20  # extra rounds stop here whatever the budget
DEFAULT_TIMEOUT_S = 1800.0  # one benchmark process past this is killed (the gate then fails, exit 2)


def _count(value: object, name: str, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least} (got {value!r})")


@dataclass(frozen=True)
class GateOptions:
    """A gate run's options.

    Attributes:
        preset: The benchmarks' graph preset (:func:`gnnbench.measure.gate.benches.gate_config`).
        warmup: Warm-up steps per benchmark.
        device: Where the benchmarks run.
        bench: Benchmark names (default: every one that runs here, :func:`~gnnbench.measure.gate.benches.default_benches`).
        steps: Measured steps per benchmark (None: the workload's epochs).
        rounds: Rounds every benchmark receives (at least 2: an interval).
        threads: Intra-op threads per benchmark process.
        order_seed: Seeds the sides' order in alternating rounds.
        sensitivity: The slowdown a run must be able to see, a fraction (0.1: 10%).
        budget_seconds: The run's wall-clock budget, extra rounds included (None: no extra rounds).
        max_rounds: Extra rounds stop here.
        timeout: Seconds a benchmark process may run before it is killed.
        pythons: ``(base, head)`` interpreters (None: this one for both).
        counts: Counting processes per tree under callgrind (0: none).
        cache_sim: Counts also simulate the caches.
        design: ``"duet"`` (both trees at once, one per core; the default) or ``"alternating"``.
        cores: The two cores a duet uses (None: the first two usable).
    """

    preset: str = "tiny"
    warmup: int = 3
    device: str = "cpu"
    bench: tuple[str, ...] | None = None
    steps: int | None = None
    rounds: int = DEFAULT_ROUNDS
    threads: int = 1
    order_seed: int = 0
    sensitivity: float = DEFAULT_SENSITIVITY
    budget_seconds: float | None = None
    max_rounds: int = MAX_ROUNDS
    timeout: float = DEFAULT_TIMEOUT_S
    pythons: tuple[str, str] | None = None
    counts: int = 0
    cache_sim: bool = False
    design: str = DUET
    cores: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.rounds, int) or isinstance(self.rounds, bool) or self.rounds < 2:
            raise ValueError(f"the gate needs at least 2 rounds for an interval (got {self.rounds!r})")
        _count(self.threads, "threads", 1)
        _count(self.warmup, "warmup", 0)
        _count(self.max_rounds, "max_rounds", 2)
        if not isinstance(self.counts, int) or isinstance(self.counts, bool) or self.counts < 0:
            raise ValueError(f"counts must be a number of processes per tree >= 0 (got {self.counts!r})")
        if not (isinstance(self.sensitivity, (int, float)) and 0 < self.sensitivity < 1):
            raise ValueError(f"sensitivity must be a fraction in (0, 1), e.g. 0.1 for 10% (got {self.sensitivity!r})")
        if self.budget_seconds is not None and not self.budget_seconds >= 0:
            raise ValueError(f"budget_seconds must be None or >= 0 (got {self.budget_seconds!r})")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds (got {self.timeout!r})")
        if self.design not in DESIGNS:
            raise ValueError(f"design must be one of {', '.join(DESIGNS)} (got {self.design!r})")
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps < 2):
            raise ValueError(f"the gate needs at least 2 measured steps per benchmark (got {self.steps!r})")
        if self.pythons is not None and len(self.pythons) != 2:
            raise ValueError(f"pythons must be (base, head) interpreters (got {self.pythons!r})")

    def interpreters(self) -> dict[str, str]:
        """Each side's interpreter: ``{"base": exe, "head": exe}`` (this one where none is given)."""
        base, head = self.pythons or (sys.executable, sys.executable)
        return {"base": base, "head": head}
