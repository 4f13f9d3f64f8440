"""Link prediction: the ``negatives`` phase, negatives per positive, and positives kept out of their own
message-passing subgraph."""

import dataclasses
import json
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnbench.cli.tables import format_run
from gnnbench.flags import Flags, RunContext
from gnnbench.graphs.prepare import prepare
from gnnbench.measure.compare import ComparisonRow, compare
from gnnbench.measure.run import RunResult, run
from gnnbench.models.tasks import NodeClassification, link_loss
from gnnbench.report.inputs import load_inputs
from gnnbench.report.sections.charts import phases_present
from gnnbench.sampling.loaders import LinkBatches, training_pairs
from gnnbench.sampling.neighbor import NeighborSampleCore
from gnnbench.sampling.sampler import drop_pair_edges
from gnnbench.timing import PHASES, PhaseTimer
from gnnbench.training import Trainer
from tests.helpers import DATA, QUICK

NODE = dataclasses.replace(QUICK, max_steps_per_epoch=5, warmup_steps=1)
LINK = dataclasses.replace(NODE, task="link", flags=QUICK.flags.replace(batch_size=256))
V1_SWEEP = DATA / "v1_sweep"


@pytest.fixture(scope="module")
def link_prepared(quick_graph):
    """QUICK's graph without its held-out link positives, prepared."""
    return prepare(quick_graph.link_split(), Flags())


def _keys(src: torch.Tensor, dst: torch.Tensor, n: int) -> set[int]:
    return set((dst.to(torch.int64) * n + src.to(torch.int64)).tolist())


# ----------------------------------------------------------------------------- phase accounting
def test_negatives_is_a_phase_after_sample():
    assert PHASES.index("negatives") == PHASES.index("sample") + 1


def test_move_reattributes_nested_work_and_keeps_the_step_total():
    timer = PhaseTimer(torch.device("cpu"))
    timer.start_step()
    with timer.phase("sample"):
        time.sleep(0.01)
    first = timer.move(0.002, src="sample", dst="negatives")
    timer.end_step()
    timer.start_step()
    with timer.phase("sample"):
        time.sleep(0.01)
    whole = timer.move(0.002, src="sample", dst="negatives") + timer.move(10.0, src="sample", dst="negatives")
    timer.end_step()
    partial, clamped = timer.steps
    assert first == 0.002 and partial["negatives"] == 0.002 and partial["sample"] >= 0.008
    # at most what "sample" held moves: the old sample time is now sample + negatives
    assert clamped["sample"] == 0.0 and clamped["negatives"] == pytest.approx(whole) and whole >= 0.01
    assert sum(partial.values()) <= timer.step_seconds[0]
    with pytest.raises(ValueError, match="unknown phase 'negative'; accepted: sample, negatives"):
        timer.move(1.0, src="sample", dst="negative")


def test_end_to_end_mode_moves_nothing_and_workers_are_recorded_apart():
    timer = PhaseTimer(torch.device("cpu"), sync=False)
    timer.start_step()
    with timer.phase("sample"):
        time.sleep(0.002)
    assert timer.move(0.001, src="sample", dst="negatives") == 0.0  # no phase is host-timed end to end
    timer.record_apart("negatives", 0.003)
    timer.end_step(record=False)  # burn-in: its worker time goes with it
    timer.start_step()
    timer.record_apart("negatives", 0.004)
    timer.end_step()
    assert timer.apart == [{"negatives": 0.004}] and timer.steps[0]["negatives"] == 0.0


def test_link_steps_move_exactly_the_drawn_negatives_out_of_sample(quick_graph):
    trainer = Trainer(dataclasses.replace(LINK, warmup_steps=0), quick_graph)
    try:
        for _ in trainer.steps():
            pass
    finally:
        trainer.close()
    steps = trainer.timer.steps
    assert len(steps) == 5 and trainer.timer.apart == [{}] * 5
    assert all(s["negatives"] > 0 and s["sample"] >= 0 for s in steps)
    # every second the negative sampler clocked in this process left "sample" for "negatives"
    assert sum(s["negatives"] for s in steps) == pytest.approx(
        trainer.pipeline.batches.negatives.stats.seconds, rel=1e-9
    )


def test_negatives_phase_is_positive_for_link_runs_and_zero_for_node_runs(quick_graph):
    link = run(LINK, graph=quick_graph)
    node = run(NODE, graph=quick_graph)
    assert link.status == node.status == "ok"
    assert set(link.phases) == set(node.phases) == set(PHASES)
    assert link.phases["negatives"].min > 0 and link.worker_phases is None
    assert node.phases["negatives"].max == 0.0 and node.worker_phases is None
    wait = link.data_wait_fraction * link.step_seconds.median
    assert wait >= link.phases["negatives"].min  # data wait counts the negatives drawn in this process
    assert RunResult.from_dict(json.loads(json.dumps(link.to_dict()))).phases == link.phases


def test_negatives_drawn_by_loader_workers_are_reported_apart(quick_graph):
    cfg = dataclasses.replace(LINK, flags=dataclasses.replace(LINK.flags, num_workers=1))
    r = run(cfg, graph=quick_graph)
    assert r.status == "ok"
    assert r.phases["negatives"].max == 0.0  # nothing subtracted from the main process's wait
    assert r.worker_phases["negatives"].min > 0 and r.worker_phases["negatives"].n == r.steps.measured
    assert "in loader workers" in format_run(r)


# ----------------------------------------------------------------------------- negatives per positive
@pytest.mark.parametrize("ratio", [1, 3])
def test_negative_ratio_draws_k_negatives_per_positive(link_prepared, ratio):
    src = LinkBatches(link_prepared, Flags(fanout=(4, 2), batch_size=128, negative_ratio=ratio))
    try:
        batch = next(src.epoch(0))
    finally:
        src.close()
    pos = batch.edge_label == 1
    assert int(pos.sum()) == 128 and int((batch.edge_label == 0).sum()) == ratio * 128
    ends = batch.n_id[batch.edge_label_index]
    assert not src.negatives.is_edge(ends[0, ~pos], ends[1, ~pos]).any()
    assert batch.negatives_seconds > 0 and not batch.sampled_in_worker
    z = torch.randn(batch.num_nodes, 8)
    assert torch.isfinite(link_loss(z, batch.edge_label_index, batch.edge_label))


def test_negative_ratio_is_validated_and_refused_for_node_classification():
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=rf"Flags.negative_ratio must be an integer >= 1 \(got {bad!r}\)"):
            Flags(negative_ratio=bad)
    (reason,) = NodeClassification.unavailable(Flags(negative_ratio=4), RunContext(task="node"))
    assert reason.field == "negative_ratio" and "(got 4)" in reason.reason and "link prediction" in reason.reason
    with pytest.raises(
        ValueError, match=r"one label per pair: edge_label_index has 4 pairs \(got labels of shape \[3\]\)"
    ):
        link_loss(torch.randn(5, 2), torch.zeros(2, 4, dtype=torch.long), torch.ones(3))


def test_a_link_run_with_many_negatives_per_positive_trains(quick_graph):
    r = run(dataclasses.replace(LINK, flags=dataclasses.replace(LINK.flags, negative_ratio=4)), graph=quick_graph)
    assert r.status == "ok" and 0 <= r.accuracy.test <= 1 and r.phases["negatives"].min > 0


# ----------------------------------------------------------------------------- supervision split
@settings(max_examples=15)
@given(seed=st.integers(0, 2**16), num_pairs=st.integers(1, 40))
def test_drop_pair_edges_removes_exactly_the_pair_edges(link_prepared, seed, num_pairs):
    p = link_prepared
    n = p.num_nodes
    pairs = training_pairs(p)
    pick = torch.randperm(pairs.size(1), generator=torch.Generator().manual_seed(seed))[:num_pairs]
    a, b = pairs[:, pick]
    seeds = torch.cat([a, b]).unique()
    csr = p.neighbours()
    out = NeighborSampleCore(csr.rowptr, csr.col, (-1, 2), seed=seed).sample(seeds)  # hop 0 takes every edge
    kept = drop_pair_edges(out, a, b, n)
    pair_keys = _keys(a, b, n) | _keys(b, a, n)
    before = _keys(out.node[out.row], out.node[out.col], n)
    after = _keys(kept.node[kept.row], kept.node[kept.col], n)
    assert not after & pair_keys  # disjoint: no pair is a message-passing edge of its subgraph
    assert before - after == pair_keys  # both directions of every pair, nothing else
    assert out.row.numel() - kept.row.numel() == 2 * len(set(zip(a.tolist(), b.tolist())))
    assert kept.num_sampled_edges[0] == out.num_sampled_edges[0] - 2 * num_pairs
    assert kept.num_sampled_edges[1:] == out.num_sampled_edges[1:] and kept.num_sampled_nodes == out.num_sampled_nodes
    assert bool((kept.col[1:] >= kept.col[:-1]).all())  # still sorted by target
    assert torch.equal(p.edge_index[:, kept.edge], torch.stack([kept.node[kept.row], kept.node[kept.col]]))


def test_link_epoch_covers_every_training_edge_once_and_keeps_positives_out_of_their_subgraph(link_prepared):
    p = link_prepared
    n = p.num_nodes
    src = LinkBatches(p, Flags(fanout=(4, 2), batch_size=512))
    seen = []
    try:
        for batch in src.epoch(0):
            pos = batch.edge_label == 1
            ends = batch.n_id[batch.edge_label_index[:, pos]].to(torch.int64)
            seen.append(torch.stack([ends.min(0).values, ends.max(0).values]))
            mp = _keys(batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]], n)
            assert mp and not mp & (_keys(ends[0], ends[1], n) | _keys(ends[1], ends[0], n))
            assert torch.equal(p.edge_index[:, batch.e_id], batch.n_id[batch.edge_index])
    finally:
        src.close()
    seen = torch.cat(seen, dim=1)
    expected = training_pairs(p)
    assert seen.size(1) == expected.size(1)  # each training edge is a positive once per epoch ...
    assert _keys(seen[0], seen[1], n) == _keys(expected[0], expected[1], n)  # ... and every one of them


# ----------------------------------------------------------------------------- older results
def test_schema_2_results_without_negatives_still_load_and_compare(tmp_path):
    for f in V1_SWEEP.glob("*.json"):
        data = json.loads(f.read_text())
        data["schema_version"] = 2
        (tmp_path / f.name).write_text(json.dumps(data))
    runs = load_inputs(runs=[tmp_path]).runs
    measured = [r for r in runs if r.ok]
    assert measured and all(r.schema_version == 2 and "negatives" not in r.phases for r in measured)
    rows = [r for r in compare(runs).rows if r.status == "ok"]
    assert rows and all("negatives" not in r.phases for r in rows)
    assert "negatives" not in phases_present(rows) and "sample" in phases_present(rows)
    assert "negatives" in phases_present(rows + [ComparisonRow(label="x", phases={"negatives": 0.001})])
    text = format_run(measured[0])
    assert "sample" in text and "negatives" not in text
