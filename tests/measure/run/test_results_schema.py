"""gnnbench.measure.run.results: one schema for a run's result. Its blocks are typed records, read from and
written to the JSON objects of the file; what gnnbench writes reads back to the same JSON, and every committed
result reads."""

import dataclasses
import json
import math

import pytest

from gnnbench.measure.run import (
    Accuracy,
    GraphInfo,
    Memory,
    Point,
    RunResult,
    StepCounts,
    Summary,
    Transfer,
    load_result,
    run,
)
from tests.helpers import DATA, QUICK, ROOT


def _is_result(data: object) -> bool:
    return isinstance(data, dict) and "status" in data and "config" in data


COMMITTED = [p for p in sorted((ROOT / "results").rglob("*.json")) if _is_result(json.loads(p.read_text()))]


def _same(a: object, b: object) -> bool:
    """JSON values equal, NaN equal to NaN (an empty summary's figures)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_a_measured_result_is_written_in_typed_blocks_and_reads_back_to_the_same_json(tmp_path):
    out = tmp_path / "r.json"
    r = run(dataclasses.replace(QUICK, task="link"), out=out)
    assert r.ok
    assert isinstance(r.graph, GraphInfo) and isinstance(r.steps, StepCounts) and isinstance(r.step_seconds, Summary)
    assert all(isinstance(v, Summary) for v in r.phases.values()) and isinstance(r.transfer, Transfer)
    assert isinstance(r.accuracy, Accuracy) and isinstance(r.memory, Memory)
    assert r.curve and all(isinstance(p, Point) for p in r.curve) and isinstance(r.converged, Point)
    assert r.accuracy.metric == "auc" and any("hits" in k for k in r.accuracy.extra), "a task's further metrics"
    written = json.loads(out.read_text())
    assert set(written["accuracy"]) >= {"metric", "val", "test", "final_loss", "val_hits@50", "test_hits@50"}
    assert set(written["graph"]) >= {"num_nodes", "num_edges", "index_bytes", "source"}
    assert "fingerprint" not in written["graph"], "a generated graph has no loaded graph's provenance"
    stored = load_result(out)
    assert _same(stored.to_dict(), written) and _same(r.to_dict(), written)
    assert stored.step_seconds == r.step_seconds and stored.curve == r.curve and stored.accuracy == r.accuracy


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_result_reads_and_writes_back_what_its_file_holds(path):
    data = json.loads(path.read_text())
    again = RunResult.from_dict(data).to_dict()
    # everything the file holds, as it holds it; a field an older file lacks comes back empty, never invented (a
    # file without a version is read, and written back, as version 1)
    added = {k: again.pop(k) for k in again.keys() - data.keys()}
    assert all(v in (None, [], {}) for k, v in added.items() if k != "schema_version"), added
    for name, block in data.items():
        if isinstance(block, dict) and isinstance(again[name], dict):
            extra = {k: again[name].pop(k) for k in again[name].keys() - block.keys()}
            assert all(v is None for v in extra.values()), (name, extra)
    assert _same(again, data)


def test_the_committed_references_are_runs_of_this_schema():
    assert len(COMMITTED) > 500, "the reference sweeps' results are where they were"


def test_a_version_1_result_reads_with_its_blocks_typed():
    r = load_result(DATA / "v1_sweep" / "baseline-seed0-b4a34eee1104.json")
    assert r is not None and r.schema_version == 1 and r.curve == [] and r.setup_seconds is None
    assert r.setup_clock == r.graph.setup_seconds > 0, "version 1 had the graph's setup seconds only"
    assert r.transfer.rows_gathered is None and r.memory.eval_peak_bytes is None
    failed = RunResult.from_dict({"status": "failed", "config": {}, "error": "x", "environment": None})
    assert failed.environment == {} and failed.schema_version == 1, "a file without an environment or a version"


def test_a_block_that_does_not_match_the_schema_is_refused_by_name_and_never_trusted(tmp_path):
    good = json.loads((DATA / "v1_sweep" / "baseline-seed0-b4a34eee1104.json").read_text())
    with pytest.raises(ValueError, match=r"Summary: unknown key\(s\) \['p99'\]"):
        RunResult.from_dict({**good, "step_seconds": {**good["step_seconds"], "p99": 1.0}})
    with pytest.raises(ValueError, match=r"GraphInfo: missing key\(s\) \['num_nodes',"):
        RunResult.from_dict({**good, "graph": {"num_edges": 3}})
    with pytest.raises(ValueError, match="StepCounts: expected a JSON object, got list"):
        RunResult.from_dict({**good, "steps": [1, 2]})
    with pytest.raises(ValueError, match="schema version 9 is not readable"):
        RunResult.from_dict({**good, "schema_version": 9})
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**good, "steps": {"measured": 1}}))
    assert load_result(path) is None, "a partial or foreign file is measured again"


def test_a_sweep_places_a_result_and_only_a_placed_result_writes_its_place():
    r = RunResult(status="unavailable", config={"seed": 0}, unavailable={"device": "needs CUDA"})
    assert set(r.to_dict()) == {"status", "config", "environment", "unavailable", "schema_version"}
    placed = dataclasses.replace(r, label="uva", round=2, optimizations=["uva"], derived=False)
    d = placed.to_dict()
    assert (d["label"], d["round"], d["optimizations"], d["derived"]) == ("uva", 2, ["uva"], False)
    assert RunResult.from_dict(d) == placed
