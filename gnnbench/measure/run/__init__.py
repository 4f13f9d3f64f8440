"""One configuration measured: the run itself (single), its result schema (results), a run on N ranks (launch,
rank), the step's peak memory, the device's busy share, the one benchmark workload, and two configurations timed
in one process with their steps interleaved (interleaved; a sweep's run followed by its pair: paired)."""

# ``from gnnbench.measure.run import run`` works in every tree, before and after this package existed: the gate's
# worker and the asv suites run against older commits too
from gnnbench.measure.run.single import run

__all__ = ["run"]
