"""The report's sections, one module each, in page order: the first screen (:mod:`.summary`: the A/A check and the
headline), one section per sweep (:mod:`.sweep`, with its :mod:`.table` tables and :mod:`.charts` charts), the
history across commits (:mod:`.history`), the gate's measured error rates (:mod:`.gate_rates`) and the appendix
(:mod:`.appendix`: pytest-benchmark and the registry). Each builder returns HTML; :mod:`gnnbench.report.build`
puts them on one page."""

from gnnbench.report.sections.appendix import pytest_benchmark_section, registry_section
from gnnbench.report.sections.gate_rates import gate_rates_section
from gnnbench.report.sections.history import asv_section, gate_history_section
from gnnbench.report.sections.summary import aa_summary, first_screen
from gnnbench.report.sections.sweep import Sweep, load_sweeps, sweep_section

__all__ = [
    "Sweep",
    "load_sweeps",
    "aa_summary",
    "first_screen",
    "sweep_section",
    "asv_section",
    "gate_history_section",
    "gate_rates_section",
    "pytest_benchmark_section",
    "registry_section",
]
