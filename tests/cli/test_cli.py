import json
import subprocess
import sys

import pytest

from gnnbench.cli import main
from gnnbench.graphs.io import save_npz


def test_graph_command_prints_statistics(capsys):
    assert main(["graph", "--preset", "tiny"]) == 0
    out = capsys.readouterr().out
    for label in (
        "nodes",
        "10,000",
        "edges (directed)",
        "degree quantiles",
        "p99",
        "max degree",
        "tail exponent (Hill)",
        "index bytes int64",
        "index bytes int32",
        "generation time",
        "preparation (baseline)",
        "preparation (int32,csr)",
    ):
        assert label in out, label


def test_graph_command_json_and_overrides(capsys):
    assert (
        main(
            [
                "graph",
                "--preset",
                "tiny",
                "--nodes",
                "2000",
                "--avg-degree",
                "8",
                "--exponent",
                "2.5",
                "--flags",
                "int32",
                "--json",
            ]
        )
        == 0
    )
    r = json.loads(capsys.readouterr().out)
    assert r["stats"]["num_nodes"] == 2000
    assert r["stats"]["num_edges"] == 16_000
    assert r["spec"]["exponent"] == 2.5
    assert r["prepare"]["index_bytes_after"] * 2 == r["prepare"]["index_bytes_before"]
    assert r["stats"]["index_bytes"]["int32"]["total"] * 2 == r["stats"]["index_bytes"]["int64"]["total"]


def test_graph_command_loads_a_file(tmp_path, tiny_graph, capsys):
    path = tmp_path / "mine.npz"
    save_npz(tiny_graph, path)
    assert main(["graph", "--load", str(path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["source"] == str(path) and r["stats"]["num_edges"] == tiny_graph.num_edges


def test_bad_input_gives_clear_errors(tmp_path, capsys):
    assert main(["graph", "--preset", "tiny", "--exponent", "1.5"]) == 2
    assert "exponent must be a number in (2, 5] (got 1.5)" in capsys.readouterr().err
    assert main(["graph", "--load", str(tmp_path / "nope.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["graph", "--flags", "int32,warp"])
    assert "unknown optimization 'warp'; accepted: int32, cached_norm, csr, fanout" in capsys.readouterr().err


def test_console_script_entry_point():
    out = subprocess.run([sys.executable, "-m", "gnnbench.cli", "flags"], capture_output=True, text=True, check=True)
    assert "cached_norm" in out.stdout and "expected:" in out.stdout


def test_pipeline_command_reports_all_three_sections(capsys):
    assert (
        main(["pipeline", "--preset", "tiny", "--nodes", "3000", "--cache-epochs", "2", "--fanout", "3,2", "--json"])
        == 0
    )
    r = json.loads(capsys.readouterr().out)
    assert all(row["p_value"] > 1e-4 and row["seen"] == row["subsets"] for row in r["uniformity"])
    assert {(row["mode"], row["strict"]) for row in r["negatives"]} == {
        ("uniform", True),
        ("uniform", False),
        ("degree", True),
        ("degree", False),
    }
    assert all(row["ms_per_1k"] > 0 for row in r["negatives"])
    epochs = r["batch_cache"]
    assert [e["window"] for e in epochs] == [0, 0, 1, 1]
    assert epochs[0]["misses"] == epochs[0]["batches"] and epochs[1]["hits"] == epochs[1]["batches"]
    assert epochs[2]["misses"] == epochs[2]["batches"]


def test_cache_command_reports_and_cleans(tmp_path, capsys):
    from gnnbench.sampling.cache import BatchCache

    BatchCache(tmp_path, {"k": 1})
    assert main(["cache", "--dir", str(tmp_path)]) == 0
    assert "batch cache at" in capsys.readouterr().out
    assert main(["cache", "--dir", str(tmp_path), "--clean"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())


def test_sampler_compare_command(capsys):
    assert main(["sampler-compare", "--nodes", "3000", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "gnnbench" in out and "seeds/s" in out and "nodes/batch" in out
    from gnnbench.graphs import GraphSpec
    from gnnbench.microbench.sampler_compare import compare_samplers

    r = compare_samplers(
        GraphSpec.preset("tiny", num_nodes=3000), batch_size=256, fanouts=(10, 5), rounds=1, batches_per_round=3
    )
    ours, labor = r["samplers"]["gnnbench"], r["samplers"]["gnnbench_labor"]
    assert labor["nodes_per_batch"] < ours["nodes_per_batch"], "same seeds and budget: fewer distinct vertices"
    assert labor["speedup_of_gnnbench"]["median"] > 0


def test_run_command_prints_phase_breakdown(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--preset",
                "tiny",
                "--nodes",
                "3000",
                "--batch-size",
                "96",
                "--fanout",
                "5,3",
                "--epochs",
                "1",
                "--max-steps",
                "5",
                "--warmup",
                "1",
                "--flags",
                "sparse_agg",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    for label in (
        "phase",
        "sample",
        "gather",
        "transfer",
        "forward",
        "backward",
        "optimizer",
        "step",
        "data wait",
        "accuracy",
        "memory",
        "aggregation=sparse",
    ):
        assert label in text, label
    r = json.loads(out.read_text())
    assert r["status"] == "ok" and r["steps"]["measured"] == 4


def test_run_command_prints_the_neighbour_explosion(tmp_path, capsys):
    """``run`` prints what a batch sampled: nodes per batch with their share of the graph, edges, and the
    per-hop figures, the same numbers its result records."""
    import re

    out = tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--preset",
                "tiny",
                "--nodes",
                "3000",
                "--batch-size",
                "96",
                "--fanout",
                "5,3",
                "--epochs",
                "1",
                "--max-steps",
                "3",
                "--warmup",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    line = next((x for x in text.splitlines() if x.startswith("sampled")), None)
    assert line is not None, text
    m = re.fullmatch(
        r"sampled\s+(\d+) nodes per batch \((\d+)% of the graph's 3000 nodes\), (\d+) edges; "
        r"per hop: nodes (\d+) / (\d+) / (\d+), edges (\d+) / (\d+)",
        line,
    )
    assert m, line
    nodes, share, edges, *hops = (int(g) for g in m.groups())
    assert hops[0] == 96, "hop 0: the batch's seeds"
    s = json.loads(out.read_text())["sampled"]
    assert nodes == round(s["nodes_per_batch"]) and edges == round(s["edges_per_batch"])
    assert share == round(100 * s["coverage"]) and 0 < share <= 100
    assert hops[:3] == [round(v) for v in s["nodes_per_hop"]] and hops[3:] == [round(v) for v in s["edges_per_hop"]]


def test_run_command_errors(capsys):
    assert main(["run", "--preset", "tiny", "--fanout", "5,3", "--layers", "3"]) == 2
    assert "has 2 hops but the model has 3 layers" in capsys.readouterr().err
    assert main(["run", "--preset", "tiny", "--fanout", "5,x"]) == 2
    assert "--fanout must be comma-separated integers" in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():  # docs/commands.md: CUDA-only flags on a CPU are refused, exit 2 with the reason
        assert main(["run", "--preset", "tiny", "--flags", "uva", "--epochs", "1"]) == 2
        captured = capsys.readouterr()
        assert "unavailable" in captured.out and "cannot run here" in captured.err and "CUDA" in captured.err


def test_a_measured_run_that_failed_makes_the_command_exit_1_and_an_unavailable_entry_does_not(capsys):
    from gnnbench.cli.commands import _failures
    from gnnbench.measure.run import RunResult
    from gnnbench.measure.sweep import SweepResults

    results = SweepResults(
        [
            RunResult(status="ok", config={}, label="baseline", round=0),
            RunResult(status="unavailable", config={}, unavailable={"x": "CUDA"}, label="uva", round=0),
        ]
    )
    assert results.failed() == [] and _failures(results, "compare") == 0
    results.append(
        RunResult(status="failed", config={}, error="RuntimeError: broken kernel", label="sparse_agg", round=1)
    )
    assert _failures(results, "compare") == 1
    assert "gnnbench compare: run failed: sparse_agg (round 1): RuntimeError: broken kernel" in capsys.readouterr().err


@pytest.mark.slow
def test_compare_command_table(tmp_path, capsys):
    assert (
        main(
            [
                "compare",
                "--preset",
                "tiny",
                "--nodes",
                "3000",
                "--batch-size",
                "96",
                "--fanout",
                "5,3",
                "--epochs",
                "1",
                "--max-steps",
                "5",
                "--warmup",
                "1",
                "--flags",
                "int32,pin_memory",
                "--repeats",
                "2",
                "--out-dir",
                str(tmp_path),
                "--in-process",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "baseline" in text and "int32" in text and "all_recommended" in text
    assert "speedup [95% CI]" in text
    if "pinned" not in text:
        import torch

        assert torch.cuda.is_available()


def test_env_command(capsys):
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "torch_geometric" in out and "optional_backends" in out


def test_profile_command_writes_a_chrome_trace(tmp_path, capsys):
    trace = tmp_path / "trace.json"
    assert (
        main(
            [
                "profile",
                "--preset",
                "tiny",
                "--nodes",
                "3000",
                "--batch-size",
                "96",
                "--fanout",
                "5,3",
                "--active-steps",
                "2",
                "--trace",
                str(trace),
                "--top",
                "5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Self CPU" in out and "Chrome trace" in out
    assert json.loads(trace.read_text())["traceEvents"]


def test_run_options_are_resolved_once_and_nothing_is_kept_on_args(tmp_path, tiny_graph, monkeypatch):
    import gnnbench.cli.options as options
    import gnnbench.graphs.source as source
    from gnnbench.cli.parser import build_parser

    looked_up, opened = [], []
    get_scenario, open_source = options.get_scenario, source.open_source
    monkeypatch.setattr(options, "get_scenario", lambda name: looked_up.append(name) or get_scenario(name))
    monkeypatch.setattr(source, "open_source", lambda *a, **k: opened.append(a) or open_source(*a, **k))
    monkeypatch.setenv("GNNBENCH_GRAPH_CACHE", str(tmp_path / "cache"))

    args = build_parser().parse_args(["compare", "--scenario", "kernel-bound"])
    given = dict(vars(args))
    config, chosen = options.resolve_run(args, [])
    assert looked_up == ["kernel-bound"] and vars(args) == given
    assert chosen.name == "kernel-bound" and chosen.source is None and chosen.graph is None
    assert config.spec == chosen.spec and chosen.spec.num_nodes == 20_000 and config.flags.batch_source == "full"

    path = tmp_path / "mine.npz"
    save_npz(tiny_graph, path)
    args = build_parser().parse_args(["compare", "--load", str(path)])
    given = dict(vars(args))
    config, chosen = options.resolve_run(args, [])
    assert len(opened) == 1 and vars(args) == given
    assert config.spec is None and config.source == chosen.source
    assert chosen.graph.num_edges == tiny_graph.num_edges
    assert chosen.name == chosen.source.label.replace("@", "-") and chosen.name.startswith("mine.npz-")


def test_smoothing_is_read_by_the_commands_that_read_a_target():
    from gnnbench.cli import options
    from gnnbench.cli.parser import build_parser
    from gnnbench.measure.compare import DEFAULT_SMOOTHING

    config, _ = options.resolve_run(build_parser().parse_args(["compare", "--preset", "tiny"]), [])
    assert config.smoothing == DEFAULT_SMOOTHING == 3
    config, _ = options.resolve_run(build_parser().parse_args(["compare", "--preset", "tiny", "--smoothing", "1"]), [])
    assert config.smoothing == 1
    config, _ = options.resolve_run(build_parser().parse_args(["run", "--preset", "tiny"]), [])
    assert config.smoothing == 1, "a run that reads no target reads each point alone"
    for bad in ("0", "-2", "2.5", "three"):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["compare", "--smoothing", bad])
