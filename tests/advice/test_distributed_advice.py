"""The distributed rules of thumb (pure) and how compare shows multi-rank rows."""

from gnnbench.advice.distributed import distributed_advice
from gnnbench.advice.rules import RULES, Rules
from gnnbench.cli.tables import format_distributed
from gnnbench.measure.compare import ComparisonRow, PairedRatio
from gnnbench.measure.compare import distributed_summary as _distributed_summary
from gnnbench.measure.run import Accuracy, RunResult
from tests.helpers import result_of

GiB = 2**30
STEP = PairedRatio(ratio=1.2, low=1.0, high=1.4, significant=True, rounds=2, p=0.01, log_ratios=[])  # 2 ranks


def test_compression_is_advised_only_above_the_communication_threshold():
    low = distributed_advice(
        {"parallel": "data", "grad_compression": "none", "comm_share": 0.25}, graph_bytes=GiB, device_bytes=64 * GiB
    )
    assert len(low) == 1 and "not worth its complexity" in low[0] and "25%" in low[0]
    high = distributed_advice(
        {"parallel": "data", "grad_compression": "none", "comm_share": 0.55}, graph_bytes=GiB, device_bytes=64 * GiB
    )
    assert "try gradient compression" in high[0] and f"{RULES.compress_at:.0%}" in high[0]
    on = distributed_advice(
        {"parallel": "data", "grad_compression": "topk", "comm_share": 0.2, "compression_ratio": 0.02},
        graph_bytes=GiB,
        device_bytes=64 * GiB,
    )
    assert "2.0% of the dense bytes" in on[0] and "not worth" in on[0]
    tuned = distributed_advice(
        {"parallel": "data", "grad_compression": "none", "comm_share": 0.25},
        graph_bytes=GiB,
        device_bytes=64 * GiB,
        rules=Rules(compress_at=0.2),
    )
    assert "try gradient compression" in tuned[0]


def test_a_graph_that_fits_one_device_is_replicated_not_partitioned():
    fits = distributed_advice({"parallel": "partition", "comm_share": None}, graph_bytes=2 * GiB, device_bytes=80 * GiB)
    assert fits == [fits[0]] and "data parallel" in fits[0] and "instead of partitioning" in fits[0]
    big = distributed_advice({"parallel": "partition"}, graph_bytes=70 * GiB, device_bytes=80 * GiB)
    assert "does not fit" in big[0]
    replicated = distributed_advice({"parallel": "data"}, graph_bytes=70 * GiB, device_bytes=80 * GiB)
    assert "partition it" in replicated[0]
    assert distributed_advice({"parallel": "data"}, graph_bytes=GiB, device_bytes=80 * GiB) == []


def _run(step: float, share: float) -> RunResult:
    return result_of(
        {
            "graph": {"num_nodes": 1000, "index_bytes": 16_000},
            "config": {"spec": {"feature_dim": 8}},
            "environment": {"device": "cpu"},
            "distributed": {
                "world_size": 2,
                "backend": "gloo",
                "parallel": "data",
                "grad_compression": "none",
                "comm_share": share,
                "bytes_per_step": 4096.0,
                "dense_bytes_per_step": 4096.0,
                "compression_ratio": 1.0,
            },
        }
    )


def test_compare_rows_carry_scaling_efficiency_and_the_advice():
    summary = _distributed_summary([_run(1.0, 0.3), _run(1.0, 0.5)], STEP)
    assert summary["world_size"] == 2 and abs(summary["comm_share"] - 0.4) < 1e-12
    assert summary["scaling_efficiency"] == {"ratio": 0.6, "low": 0.5, "high": 0.7}
    assert summary["graph_bytes"] == 16_000 + 1000 * 8 * 4
    assert _distributed_summary([result_of({"graph": {}})], None) is None
    lines = format_distributed([ComparisonRow(label="data_parallel", distributed=summary)])
    text = "\n".join(lines)
    assert "2 ranks (gloo)" in text and "scaling efficiency 0.60 [0.50, 0.70]" in text
    assert "communication is 40% of the step" in text


def test_report_has_a_distributed_section_for_multi_rank_rows():
    from gnnbench.measure.compare import Comparison
    from gnnbench.report.sections.table import distributed_html

    summary = _distributed_summary([_run(1.0, 0.5)], STEP)
    c = Comparison(
        [ComparisonRow(label="baseline"), ComparisonRow(label="data_parallel", distributed=summary)], 1, None, "", {}
    )
    html = distributed_html(c)
    assert "Distributed training" in html and "0.60 [0.50, 0.70]" in html and "50%" in html
    assert "try gradient compression" in html
    assert distributed_html(Comparison([ComparisonRow(label="baseline")], 1, None, "", {})) == ""


def test_a_stored_multi_rank_result_is_reused_with_the_ranks_thread_count(tmp_path, monkeypatch):
    """Ranks compute with torchrun's OMP_NUM_THREADS (1 unless set), the parent with its own threads: a stored
    multi-rank result is compared with the ranks' environment, so resume keeps it."""
    import dataclasses

    from gnnbench import registry
    from gnnbench.atomic import write_json_atomic
    from gnnbench.env import environment
    from gnnbench.graphs import GraphSpec
    from gnnbench.measure.run import RunResult, rank_threads
    from gnnbench.measure.sweep import Entry
    from gnnbench.measure.sweep.rounds import _stored
    from gnnbench.training import RunConfig

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert rank_threads() == 1 and rank_threads({"OMP_NUM_THREADS": "3"}) == 3
    assert rank_threads({"OMP_NUM_THREADS": "x"}) == 1
    base = RunConfig(spec=GraphSpec.preset("tiny"), nproc=2)
    env = {**environment("cpu"), "threads": 2}
    ranks_env = {**env, "threads": 1}
    for flags, kept in ((registry.flags_for(["data_parallel"], base.flags), True), (base.flags, False)):
        cfg = dataclasses.replace(base, flags=flags)
        path = tmp_path / f"{kept}.json"
        write_json_atomic(
            path,
            RunResult(
                status="unavailable", config=cfg.to_dict(), environment=ranks_env, unavailable={"x": "stored"}
            ).to_dict(),
        )
        assert (_stored(path, Entry("e", cfg, ()), env) is not None) is kept


PART = {
    "method": "metis",
    "parts": 2,
    "seconds": 1.5,
    "edge_cut_fraction": 0.25,
    "node_balance": 1.01,
    "edge_balance": 1.1,
    "mean_halo_nodes": 300.0,
    "halo_rows_per_step": 1200.0,
    "halo_bytes_per_step": 4096.0,
    "halo_seconds": 0.03,
    "grad_bytes_per_step": 2048.0,
    "grad_seconds": 0.01,
}


def _partition_run(label: str, rnd: int, step: float, part: dict | None = None) -> RunResult:
    r = {
        "label": label,
        "round": rnd,
        "status": "ok",
        "optimizations": [label],
        "step_seconds": {"median": step},
        "step_seconds_all": [step] * 5,
        "steps": {"measured": 5},
        "accuracy": {"test": 0.5},
        "phases": {"forward": {"median": step}},
        "curve": [],
        "train_seconds": step * 10,
        "epoch_seconds": [step],
        "graph": {"num_nodes": 1000},
        "config": {"epochs": 1, "spec": {"feature_dim": 8}},
        "transfer": {"bytes_h2d_per_batch": 0},
    }
    if part is not None:
        r["distributed"] = {
            "world_size": 2,
            "backend": "gloo",
            "parallel": "partition",
            "grad_compression": "none",
            "comm_share": 0.6,
            "bytes_per_step": 6144.0,
            "dense_bytes_per_step": 6144.0,
            "compression_ratio": 1.0,
            "partition": part,
        }
    return result_of(r)


def test_partition_rows_show_the_partition_and_their_efficiency_against_full_batch():
    from gnnbench.measure.compare import compare

    runs = [
        _partition_run(label, k, step, PART if label == "partition_metis" else None)
        for k in range(3)
        for label, step in (("baseline", 0.1), ("full_batch", 1.0), ("partition_metis", 0.8))
    ]
    row = next(r for r in compare(runs).rows if r.label == "partition_metis")
    d = row.distributed
    assert d["efficiency_against"] == "full_batch" and abs(d["scaling_efficiency"]["ratio"] - 1.25 / 2) < 1e-9
    assert d["partition"]["edge_cut_fraction"] == 0.25 and d["partition"]["method"] == "metis"
    text = "\n".join(format_distributed([row]))
    assert "partition metis, 2 parts in 1.50 s: edge cut 25.0%, node balance 1.01, edge balance 1.10" in text
    assert "halo 1,200 rows (4.0 KiB sent), gradient all-reduce 2.0 KiB; efficiency against full_batch" in text
    assert "75% of it the halo exchange" in text and "gradient compression applies to data parallel's" in text
    assert "try gradient compression" not in text
    # without a full_batch entry in the sweep the efficiency is n/a, not a ratio against sampled steps
    alone = [r for r in runs if r.label != "full_batch"]
    d = next(r for r in compare(alone).rows if r.label == "partition_metis").distributed
    assert d["scaling_efficiency"] is None


def test_compression_rows_carry_their_accuracy_against_dense_data_parallel():
    from gnnbench.measure.compare import compare

    def run(label: str, rnd: int, test: float) -> dict:
        r = _partition_run(label, rnd, 0.1)
        r.accuracy = Accuracy(metric="accuracy", val=test, test=test)
        if label != "baseline":
            r.distributed = {
                "world_size": 2,
                "backend": "gloo",
                "parallel": "data",
                "grad_compression": "topk" if label == "topk_compression" else "none",
                "comm_share": 0.05,
                "bytes_per_step": 720.0,
                "dense_bytes_per_step": 36000.0,
                "compression_ratio": 0.02,
            }
        return r

    runs = [
        run(label, k, test)
        for k in range(3)
        for label, test in (
            ("baseline", 0.80),
            ("data_parallel", 0.80 + 0.001 * k),
            ("topk_compression", 0.799 + 0.001 * k),
        )
    ]
    rows = {r.label: r for r in compare(runs).rows}
    a = rows["topk_compression"].distributed["accuracy_vs_dense"]
    assert a["against"] == "data_parallel" and a["rounds"] == 3 and abs(a["delta"] + 0.001) < 1e-9
    assert a["verdict"] == "no accuracy cost" and abs(a["dense_test"] - 0.801) < 1e-9
    assert "accuracy_vs_dense" not in rows["data_parallel"].distributed
    text = "\n".join(format_distributed(list(rows.values())))
    assert "test accuracy 80.00% against 80.10% with dense data_parallel, each at convergence: -0.10 pp" in text
    assert "over 3 paired round(s): no accuracy cost" in text
    # without a data_parallel entry the row has no such figure (its delta against the baseline still stands)
    alone = [r for r in runs if r.label != "data_parallel"]
    d = next(r for r in compare(alone).rows if r.label == "topk_compression").distributed
    assert "accuracy_vs_dense" not in d
