"""Every registered optimization must appear in the asv suite, the pytest-benchmark suite and the report."""

import inspect

from gnnbench import registry
from gnnbench.report import build_report
from gnnbench.report.inputs import ReportInputs


def test_asv_suite_covers_the_registry():
    from benchmarks import bench_optimizations, common

    assert set(registry.names()) <= set(common.OPTIMIZATIONS)
    for cls in (bench_optimizations.Optimization, bench_optimizations.OptimizationResults):
        assert cls.params == [common.OPTIMIZATIONS]
    methods = {n for n, _ in inspect.getmembers(bench_optimizations.Optimization)}
    assert {"time_step"} <= methods
    assert bench_optimizations.Optimization.rounds >= 2 and bench_optimizations.Optimization.repeat[0] >= 5
    tracks = {n for n, _ in inspect.getmembers(bench_optimizations.OptimizationResults)}
    assert {"track_accuracy", "track_index_bytes", "track_transfer_bytes", "track_peak_host_memory"} <= tracks


def test_pytest_benchmark_suite_covers_the_registry():
    from tests.perf import test_optimizations_perf as perf

    for fn in (perf.test_step_baseline, perf.test_step_optimized):
        marks = [m for m in fn.pytestmark if m.name == "parametrize"]
        assert marks and list(marks[0].args[1]) == registry.names()


def test_report_covers_the_registry(tmp_path):
    path = build_report(ReportInputs(), tmp_path / "r.html")
    text = path.read_text()
    table = text[text.index("id='registry'") :]
    for name in registry.names():
        assert f"<td>{name}</td>" in table, name
