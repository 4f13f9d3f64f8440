"""The regression gate (``gnnbench regress``), by idea: its benchmarks (:mod:`.benches`), its rounds (:mod:`.rounds`,
in duet: :mod:`.duet`; the benchmark process :mod:`.worker`), counted instructions (:mod:`.counts`), the verdict
(:mod:`.regress`, :mod:`.verdicts`, its table :mod:`.text`), its options (:mod:`.options`), the trees
(:mod:`.trees`), run as a library (:mod:`.run`), history steps (:mod:`.history`) and its measured error rates
(:mod:`.rates`). Code outside the room imports these names from here.
"""

from gnnbench.measure.gate.benches import MICRO, Bench, default_benches, fit_steps, gate_config
from gnnbench.measure.gate.counts import (
    COUNT_BENCHES,
    COUNT_CALLS,
    COUNT_PROCESSES,
    CountVerdict,
    count_gate,
    counts_markdown,
    judge_counts,
    per_unit,
)
from gnnbench.measure.gate.duet import ALTERNATING, DESIGNS, DUET, duet_cores, duet_refusal
from gnnbench.measure.gate.history import available, change_points
from gnnbench.measure.gate.options import (
    DEFAULT_BUDGET_SECONDS,
    DEFAULT_ROUNDS,
    DEFAULT_TIMEOUT_S,
    MAX_ROUNDS,
    GateOptions,
)
from gnnbench.measure.gate.rates import CARRIERS, TARGETS, rate_text, summarize
from gnnbench.measure.gate.regress import gate
from gnnbench.measure.gate.run import GateRun, run_gate
from gnnbench.measure.gate.text import format_gate
from gnnbench.measure.gate.trees import WORKING_TREE
from gnnbench.measure.gate.verdicts import DEFAULT_SENSITIVITY, NOT_WORK, BenchVerdict, GateResult, WorkerFailure

__all__ = [
    "MICRO",
    "Bench",
    "default_benches",
    "fit_steps",
    "gate_config",
    "COUNT_BENCHES",
    "COUNT_CALLS",
    "COUNT_PROCESSES",
    "CountVerdict",
    "count_gate",
    "counts_markdown",
    "judge_counts",
    "per_unit",
    "ALTERNATING",
    "DESIGNS",
    "DUET",
    "duet_cores",
    "duet_refusal",
    "available",
    "change_points",
    "DEFAULT_BUDGET_SECONDS",
    "DEFAULT_ROUNDS",
    "DEFAULT_TIMEOUT_S",
    "MAX_ROUNDS",
    "GateOptions",
    "CARRIERS",
    "TARGETS",
    "rate_text",
    "summarize",
    "gate",
    "GateRun",
    "run_gate",
    "format_gate",
    "WORKING_TREE",
    "DEFAULT_SENSITIVITY",
    "BenchVerdict",
    "GateResult",
    "NOT_WORK",
    "WorkerFailure",
]
