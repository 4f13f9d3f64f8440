"""The statistics: paired intervals and the noise floor (intervals), the stopping rule (sequential), and their
simulations (intervals_sim, sequential_sim). Code outside the room imports these names from here.

The names of :mod:`.sequential_sim` load when first used (``__getattr__``): it is a program too (``python -m
gnnbench.measure.stats.sequential_sim``), which a package that imported it would import once as a module before
running it.
"""

from typing import TYPE_CHECKING

from gnnbench.lazy import lazy_names
from gnnbench.measure.stats.intervals import (
    DEFAULT_REPEATS,
    Equivalence,
    RatioInterval,
    detectable_shift,
    equivalence,
    holm,
    noise_floor,
    paired_ratio,
    t_quantile,
    t_test_power,
    t_upper_tail,
)
from gnnbench.measure.stats.intervals_sim import simulate_calibration, simulate_step_times
from gnnbench.measure.stats.sequential import (
    BELOW_FLOOR,
    CORRECTIONS,
    CURTAIL,
    EQUIVALENCE_FUTILITY,
    FINAL_SHARE,
    FUTILE,
    MAX_ROUNDS,
    MIN_ROUNDS,
    SD_FLOOR_QUANTILE,
    SIGNIFICANT,
    Stop,
    StoppingRule,
    conditional_power,
    equivalence_power,
    family_p_values,
    final_alpha,
    final_significant,
    floored_interval,
    open_rows,
    sd_floor,
    settled,
)

if TYPE_CHECKING:
    from gnnbench.measure.stats.sequential_sim import (
        Simulation,
        inprocess_tables,
        load_sweeps,
        simulate,
        simulate_equivalence,
        simulate_fwer,
        simulate_rule_equivalence,
        tables,
    )

_HOME = {  # a name that loads when first used -> the module of this room that defines it
    "Simulation": "sequential_sim",
    "inprocess_tables": "sequential_sim",
    "load_sweeps": "sequential_sim",
    "simulate": "sequential_sim",
    "simulate_equivalence": "sequential_sim",
    "simulate_fwer": "sequential_sim",
    "simulate_rule_equivalence": "sequential_sim",
    "tables": "sequential_sim",
}

__all__ = [
    "DEFAULT_REPEATS",
    "Equivalence",
    "RatioInterval",
    "detectable_shift",
    "equivalence",
    "holm",
    "noise_floor",
    "paired_ratio",
    "t_quantile",
    "t_test_power",
    "t_upper_tail",
    "simulate_calibration",
    "simulate_step_times",
    "BELOW_FLOOR",
    "CORRECTIONS",
    "CURTAIL",
    "EQUIVALENCE_FUTILITY",
    "FINAL_SHARE",
    "FUTILE",
    "MAX_ROUNDS",
    "MIN_ROUNDS",
    "SD_FLOOR_QUANTILE",
    "SIGNIFICANT",
    "Stop",
    "StoppingRule",
    "conditional_power",
    "equivalence_power",
    "family_p_values",
    "final_alpha",
    "final_significant",
    "floored_interval",
    "open_rows",
    "sd_floor",
    "settled",
    "Simulation",
    "inprocess_tables",
    "load_sweeps",
    "simulate",
    "simulate_equivalence",
    "simulate_fwer",
    "simulate_rule_equivalence",
    "tables",
]


__getattr__, __dir__ = lazy_names(__name__, _HOME, __all__, globals())
