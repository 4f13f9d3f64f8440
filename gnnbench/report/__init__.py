"""The published report: one self-contained HTML file of optimization gains."""

from gnnbench.report.build import build_report
from gnnbench.report.inputs import ReportInputs, load_inputs

__all__ = ["build_report", "load_inputs", "ReportInputs"]
