"""The committed asv history (issue 30, item 6): at least 20 commits of main measured in one environment on one
machine whose description matches every result, and a report history drawn from it."""

import json
import re
from pathlib import Path

from gnnbench.report.inputs import asv_series, load_inputs

ROOT = Path(__file__).resolve().parent.parent
ASV = ROOT / "results" / "asv"
MACHINE_FIELDS = ("arch", "cpu", "machine", "num_cpu", "os", "ram")


def _machines() -> list[Path]:
    return sorted(p for p in ASV.iterdir() if p.is_dir())


def _results(machine: Path) -> list[dict]:
    return [json.loads(f.read_text()) for f in sorted(machine.glob("*.json")) if f.name != "machine.json"]


def test_one_machine_whose_description_matches_every_result():
    machines = _machines()
    assert len(machines) == 1, f"one machine's history, got {[m.name for m in machines]}"
    desc = json.loads((machines[0] / "machine.json").read_text())
    assert desc.get("version") == 1 and desc["machine"] == machines[0].name
    for doc in _results(machines[0]):
        params = doc["params"]
        for k in MACHINE_FIELDS:
            assert str(params.get(k)) == str(desc[k]), (doc["commit_hash"][:8], k, params.get(k), desc[k])


def test_at_least_twenty_commits_in_one_environment():
    docs = _results(_machines()[0])
    envs = {d["env_name"] for d in docs}
    assert len(envs) == 1, f"one environment, got {sorted(envs)}"
    commits = {d["commit_hash"] for d in docs}
    assert len(commits) >= 20 and all(re.fullmatch(r"[0-9a-f]{40}", c) for c in commits)
    empty = [d["commit_hash"][:8] for d in docs if not any(_has_value(row) for row in d["results"].values())]
    assert not empty, f"commits with no measured benchmark: {empty}"


def _has_value(row) -> bool:
    """Whether an asv result row (compact format: the first column holds the value, or one per parameter)
    holds a measured value."""
    value = row[0] if isinstance(row, list) else row
    return any(v is not None for v in (value if isinstance(value, list) else [value]))


def test_the_reports_history_draws_one_series_per_benchmark_over_the_commits():
    inputs = load_inputs([], asv_results=ASV)
    series = asv_series(inputs.asv)
    steps = [k for k in series if ".time_step(" in k]
    assert steps, "the history carries the step benchmarks"
    assert not any(" [" in k for k in series), "one environment: nothing to split"
    longest = max(len(series[k]) for k in steps)
    assert longest >= 20, f"a step series spans at least 20 commits (got {longest})"
