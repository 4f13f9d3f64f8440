"""The committed asv history (results/asv/) is one machine's and one environment's, measured over at least 20
of the project's commits, with the baseline's step time at every one of them; the report draws it as one
series per benchmark."""

import json

from gnnbench.report import load_inputs
from gnnbench.report.inputs import asv_series
from tests.helpers import ROOT

ASV = ROOT / "results" / "asv"
MACHINE_FIELDS = ("arch", "cpu", "machine", "num_cpu", "os", "ram")
MIN_COMMITS = 20
BASELINE_STEP = "bench_optimizations.Optimization.time_step(baseline)"


def _docs() -> tuple[dict, list[dict]]:
    machines = [p for p in ASV.iterdir() if p.is_dir()]
    assert len(machines) == 1, f"one machine's history, got {[p.name for p in machines]}"
    machine = json.loads((machines[0] / "machine.json").read_text())
    docs = [json.loads(p.read_text()) for p in sorted(machines[0].glob("*.json")) if p.name != "machine.json"]
    return machine, docs


def test_the_history_is_one_machine_and_one_environment_over_twenty_commits():
    machine, docs = _docs()
    for doc in docs:
        for field in MACHINE_FIELDS:
            assert doc["params"][field] == machine[field], (doc["commit_hash"][:8], field)
    assert len({d["env_name"] for d in docs}) == 1, sorted({d["env_name"] for d in docs})
    assert len({d["commit_hash"] for d in docs}) >= MIN_COMMITS


def test_the_baseline_step_has_a_value_and_an_interval_at_every_commit():
    inputs = load_inputs(asv_results=ASV)
    series = asv_series(inputs.asv)
    points = series[BASELINE_STEP]
    _, docs = _docs()
    assert len(points) == len({d["commit_hash"] for d in docs}) >= MIN_COMMITS
    assert all(value > 0 for _, _, value, _, _ in points)
    assert all(low is not None and high is not None and low <= value <= high for _, _, value, low, high in points)
