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


def test_asv_tracks_each_in_process_entry_as_an_interleaved_ratio():
    """Every entry that can share a process and keeps the work per step has a ratio asv can track; the others are
    skipped with their reason; the tracked figure is a ratio of one pair in one process."""
    import pytest

    from benchmarks import bench_optimizations

    suite = bench_optimizations.InterleavedRatio
    assert suite.params == [registry.names()] and suite.track_speedup.unit == "x"
    for name in registry.names():
        opt, bench = registry.get(name), suite()
        if opt.shares_process and not opt.changes_work and not opt.unavailable("cpu"):
            bench.setup(name)
            assert bench.other.flags == opt.apply(bench.base.flags) or bench.other.task != "node"
        else:
            with pytest.raises(NotImplementedError):
                bench.setup(name)
    bench = suite()
    bench.setup(next(o.name for o in registry.REGISTRY.values() if o.same_trajectory and o.shares_process))
    assert bench.track_speedup(bench.other) > 0


def test_asv_tracks_each_entry_that_sets_its_process_as_a_duet_ratio():
    """asv's ``DuetRatio``: every entry declared ``duet`` whose allocator runs here is set up (on a runner with two
    usable cores), every other one skipped with its reason; the tracked figure is one duet's ratio."""
    import pytest

    from benchmarks import bench_optimizations
    from gnnbench.measure.sweep.duet import duet_pair_refusal
    from gnnbench.process.allocators import allocator_unavailable

    suite = bench_optimizations.DuetRatio
    assert suite.params == [registry.names()] and suite.track_speedup.unit == "x"
    base = bench_optimizations.common.config_for("baseline")
    ready = []
    for name in registry.names():
        opt, bench = registry.get(name), suite()
        other = bench_optimizations.common.config_for(name)
        if opt.duet and not allocator_unavailable(other.flags.allocator) and duet_pair_refusal(base, other) is None:
            bench.setup(name)
            assert bench.other.flags == opt.apply(bench.base.flags)
            ready.append(name)
        else:
            with pytest.raises(NotImplementedError):
                bench.setup(name)
    if "glibc_tuned" in ready:  # needs no library
        bench = suite()
        bench.setup("glibc_tuned")
        assert bench.track_speedup("glibc_tuned") > 0


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
