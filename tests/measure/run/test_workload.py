"""The one benchmark workload (gnnbench/measure/run/workload.py) and the copy asv's suites keep for older commits
(benchmarks/common.py, used only where the package predates the workload module) say the same thing."""

import importlib.util
import sys
from unittest import mock

from gnnbench import registry
from gnnbench.measure.run import workload
from tests.helpers import ROOT

COMMON = ROOT / "benchmarks" / "common.py"


def _load_common(*, without_workload: bool):
    spec = importlib.util.spec_from_file_location("bench_common_under_test", COMMON)
    module = importlib.util.module_from_spec(spec)
    blocked = {"gnnbench.measure.run.workload": None} if without_workload else {}
    with mock.patch.dict(sys.modules, blocked):  # None in sys.modules makes the import raise ImportError
        spec.loader.exec_module(module)
    return module


def test_the_suites_use_the_package_workload_when_it_exists():
    common = _load_common(without_workload=False)
    assert common.bench_config is workload.bench_config and common.BENCH_FLAGS is workload.BENCH_FLAGS


def test_the_fallback_for_older_commits_is_the_same_workload():
    old = _load_common(without_workload=True)
    assert old.bench_config is not workload.bench_config  # the fallback really ran
    assert old.BENCH_FLAGS == workload.BENCH_FLAGS and old.BENCH_SPEC == workload.bench_spec()
    for name in ("baseline", "csr", "labor", "cluster_gcn"):
        opt = None if name == "baseline" else registry.get(name)
        flags = opt.apply(workload.BENCH_FLAGS) if opt else workload.BENCH_FLAGS
        fields = dict(task=opt.task if opt else "node", epochs=2, warmup_steps=2, device="cpu")
        assert old.bench_config(flags, **fields) == workload.bench_config(flags, **fields), name
