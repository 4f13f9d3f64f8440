"""One configuration measured: the run itself (single), its result schema (results), a run on N ranks (launch,
rank), the step's peak memory, the device's busy share, the one benchmark workload, and two configurations timed
in one process with their steps interleaved (interleaved; a sweep's run followed by its pair: paired). Code outside
the room imports these names from here.

The names of :mod:`.single` and of the modules it imports (:mod:`.results`, :mod:`.launch`, :mod:`.device_busy`)
load with the package; the others (:mod:`.interleaved`, :mod:`.paired`, :mod:`.rank`, :mod:`.step_peak`,
:mod:`.workload`) when first used (``__getattr__``). Each measured run is a process of its own (``python -m
gnnbench.measure.run.single``, ``.paired``, ``.rank``): one that imported every module of the room would import
scipy, the step-peak tracker and the workload it never uses, and run ``paired`` or ``rank`` as a program after
importing it once as a module. ``launch`` and ``step_peak`` are functions named as their modules: import them
from :mod:`.launch` and :mod:`.step_peak`.
"""

from typing import TYPE_CHECKING

from gnnbench.lazy import lazy_names
from gnnbench.measure.run.device_busy import BusySampler
from gnnbench.measure.run.launch import (
    DEFAULT_TIMEOUT,
    DistributedRunError,
    free_port,
    local_env,
    rank_threads,
    run_local,
    survivors,
)
from gnnbench.measure.run.results import (
    SCHEMA_VERSION,
    Accuracy,
    CompileMetrics,
    GraphInfo,
    Memory,
    Point,
    RunResult,
    StepCounts,
    Summary,
    Transfer,
    graph_label,
    load_result,
    reuse_problem,
)

# ``from gnnbench.measure.run import run`` works in every tree, before and after this package existed: the gate's
# worker and the asv suites run against older commits too
from gnnbench.measure.run.single import child_argv, child_error, child_timeout, run

if TYPE_CHECKING:
    from gnnbench.measure.run.interleaved import (
        BUILD_ORDERS,
        DUET,
        INTERLEAVED,
        MIN_BLOCKS,
        PAIR_DESIGNS,
        PairRefused,
        PairTiming,
        block_orders,
        interleave,
        pair_refusal,
        time_pair,
    )
    from gnnbench.measure.run.paired import PAIR_BLOCKS, PAIR_TIMEOUT_S, add_pair, paired_argv, run_paired, with_pair
    from gnnbench.measure.run.rank import combine, rank_figures
    from gnnbench.measure.run.step_peak import MEMORY_SOURCES, AllocationTracker, StepPeak, unavailable
    from gnnbench.measure.run.workload import BENCH_FLAGS, bench_config, bench_spec

_HOME = {  # a name that loads when first used -> the module of this room that defines it
    "BUILD_ORDERS": "interleaved",
    "DUET": "interleaved",
    "INTERLEAVED": "interleaved",
    "PAIR_DESIGNS": "interleaved",
    "MIN_BLOCKS": "interleaved",
    "PairRefused": "interleaved",
    "PairTiming": "interleaved",
    "block_orders": "interleaved",
    "interleave": "interleaved",
    "pair_refusal": "interleaved",
    "time_pair": "interleaved",
    "PAIR_BLOCKS": "paired",
    "PAIR_TIMEOUT_S": "paired",
    "add_pair": "paired",
    "paired_argv": "paired",
    "run_paired": "paired",
    "with_pair": "paired",
    "combine": "rank",
    "rank_figures": "rank",
    "MEMORY_SOURCES": "step_peak",
    "AllocationTracker": "step_peak",
    "StepPeak": "step_peak",
    "unavailable": "step_peak",
    "BENCH_FLAGS": "workload",
    "bench_config": "workload",
    "bench_spec": "workload",
}

__all__ = [
    "BusySampler",
    "DEFAULT_TIMEOUT",
    "DistributedRunError",
    "free_port",
    "local_env",
    "rank_threads",
    "run_local",
    "survivors",
    "SCHEMA_VERSION",
    "Accuracy",
    "CompileMetrics",
    "GraphInfo",
    "Memory",
    "Point",
    "RunResult",
    "StepCounts",
    "Summary",
    "Transfer",
    "graph_label",
    "load_result",
    "reuse_problem",
    "child_argv",
    "child_error",
    "child_timeout",
    "run",
    "BUILD_ORDERS",
    "DUET",
    "INTERLEAVED",
    "PAIR_DESIGNS",
    "MIN_BLOCKS",
    "PairRefused",
    "PairTiming",
    "block_orders",
    "interleave",
    "pair_refusal",
    "time_pair",
    "PAIR_BLOCKS",
    "PAIR_TIMEOUT_S",
    "add_pair",
    "paired_argv",
    "run_paired",
    "with_pair",
    "combine",
    "rank_figures",
    "MEMORY_SOURCES",
    "AllocationTracker",
    "StepPeak",
    "unavailable",
    "BENCH_FLAGS",
    "bench_config",
    "bench_spec",
]


__getattr__, __dir__ = lazy_names(__name__, _HOME, __all__, globals())
