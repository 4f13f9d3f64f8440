"""One configuration measured: the run itself (single), its result schema (results), a run on N ranks (launch,
rank), the step's peak memory, the device's busy share, and the one benchmark workload."""

# ``from gnnbench.measure.run import run`` works in every tree, before and after this package existed: the gate's
# worker and the asv suites run against older commits too
from gnnbench.measure.run.single import run

__all__ = ["run"]
