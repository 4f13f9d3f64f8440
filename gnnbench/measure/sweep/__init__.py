"""A sweep: how it measures (options: ``SweepOptions``), its plan (plan: ``sweep_entries``, ``Entry``), its
interleaved rounds (rounds: ``run_sweep``, ``run_calibration``), the whole sweep in one call (full:
``sweep_and_compare``, ``SweepProgress``), executors (``RoundExecutor``) and the measured best set (best_set:
``choose``). Code outside the room imports these names from here.
"""

from gnnbench.measure.sweep.best_set import (
    BEST_SET_DIR,
    BEST_SET_SEED_OFFSET,
    MIN_SET_ROUNDS,
    BestSetChoice,
    BestSetOutcome,
    choose,
    outcome_line,
    set_base,
)
from gnnbench.measure.sweep.executors import EXECUTORS, RoundExecutor
from gnnbench.measure.sweep.full import MeasuredSweep, SweepProgress, store_outcome, sweep_and_compare
from gnnbench.measure.sweep.options import SweepOptions
from gnnbench.measure.sweep.plan import (
    ALL_RECOMMENDED,
    Entry,
    check_also_measured,
    derivable_base,
    on_ranks,
    sweep_entries,
    time_to_accuracy_config,
    validate_base,
)
from gnnbench.measure.sweep.rounds import MANIFEST, SweepResults, run_calibration, run_round, run_sweep

__all__ = [
    "BEST_SET_DIR",
    "BEST_SET_SEED_OFFSET",
    "MIN_SET_ROUNDS",
    "BestSetChoice",
    "BestSetOutcome",
    "choose",
    "outcome_line",
    "set_base",
    "EXECUTORS",
    "RoundExecutor",
    "MeasuredSweep",
    "SweepProgress",
    "store_outcome",
    "sweep_and_compare",
    "SweepOptions",
    "ALL_RECOMMENDED",
    "Entry",
    "check_also_measured",
    "derivable_base",
    "on_ranks",
    "sweep_entries",
    "time_to_accuracy_config",
    "validate_base",
    "MANIFEST",
    "SweepResults",
    "run_calibration",
    "run_round",
    "run_sweep",
]
