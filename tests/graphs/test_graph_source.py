"""A user's graph as the source of runs and sweeps: identity by content, one load, prepared copies that are
rebuilt when corrupt, a changed file refused, and the measuring commands taking --load."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnbench.cli import main
from gnnbench.graphs import GraphError, GraphSpec, generate
from gnnbench.graphs.io import save_npz
from gnnbench.graphs.source import (
    LINK_HOLDOUT,
    GraphSource,
    content_fingerprint,
    hold_out_links,
    load_source,
    open_source,
    prepared_path,
)
from gnnbench.measure.run import graph_label
from gnnbench.training import RunConfig


@pytest.fixture(autouse=True)
def _graph_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNBENCH_GRAPH_CACHE", str(tmp_path / "graph-cache"))


@pytest.fixture(scope="module")
def small_graph():
    return generate(GraphSpec(num_nodes=1500, avg_degree=8.0, feature_dim=8, num_classes=4, seed=3))


def _user_file(graph, path: Path, *, held_out: bool = False) -> Path:
    """The graph as a user would hand it over: no spec, and (by default) no held-out link edges."""
    g = dataclasses.replace(
        graph,
        meta={},
        lp_val_pos=graph.lp_val_pos if held_out else None,
        lp_test_pos=graph.lp_test_pos if held_out else None,
    )
    save_npz(g, path)
    return path


def test_fingerprint_follows_content(small_graph):
    fp = content_fingerprint(small_graph)
    assert fp == content_fingerprint(dataclasses.replace(small_graph, meta={"other": 1}))  # meta is not content
    x = small_graph.x.clone()
    x[17, 3] += 1e-3
    assert content_fingerprint(dataclasses.replace(small_graph, x=x)) != fp
    ei = small_graph.edge_index.clone()
    ei[0, 5] = (ei[0, 5] + 1) % small_graph.num_nodes
    assert content_fingerprint(dataclasses.replace(small_graph, edge_index=ei)) != fp
    y = small_graph.y.clone()
    y[0] = (y[0] + 1) % 4
    assert content_fingerprint(dataclasses.replace(small_graph, y=y)) != fp
    assert content_fingerprint(small_graph.with_index_dtype(torch.int32)) != fp  # dtype shows


def test_open_then_load_uses_the_prepared_copy(small_graph, tmp_path):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    source, graph = open_source("file", str(path))
    assert source.fingerprint == content_fingerprint(graph) and source.num_nodes == 1500
    assert source.location == str(path.resolve())
    assert prepared_path(source).is_file()
    again = load_source(source)
    assert again.meta["loaded_from"] == "prepared copy"
    assert torch.equal(again.edge_index, graph.edge_index) and torch.equal(again.x, graph.x)
    assert torch.equal(again.lp_test_pos, graph.lp_test_pos)
    assert again.meta["fingerprint"] == source.fingerprint


def test_corrupt_prepared_copy_is_rebuilt(small_graph, tmp_path):
    source, graph = open_source("file", str(_user_file(small_graph, tmp_path / "mine.npz")))
    copy = prepared_path(source)
    data = copy.read_bytes()
    copy.write_bytes(data[: len(data) // 2])  # truncated
    rebuilt = load_source(source)
    assert rebuilt.meta["loaded_from"] == "original" and torch.equal(rebuilt.x, graph.x)
    assert load_source(source).meta["loaded_from"] == "prepared copy"  # written again
    # a copy whose bytes were altered but still parses is caught by the hash
    blob = torch.load(copy, weights_only=True)
    blob["x"][0, 0] += 1.0
    torch.save(blob, copy)
    assert load_source(source).meta["loaded_from"] == "original"


def test_changed_file_is_refused(small_graph, tmp_path):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    source, _ = open_source("file", str(path))
    prepared_path(source).unlink()
    x = small_graph.x.clone()
    x[0] += 1.0
    _user_file(dataclasses.replace(small_graph, x=x), path)
    with pytest.raises(GraphError, match="changed since this configuration was made"):
        load_source(source)


def test_link_holdout_is_seeded_disjoint_and_not_in_message_passing(small_graph):
    g = dataclasses.replace(small_graph, lp_val_pos=None, lp_test_pos=None, meta={})
    a = hold_out_links(dataclasses.replace(g), seed=5)
    b = hold_out_links(dataclasses.replace(g), seed=5)
    c = hold_out_links(dataclasses.replace(g), seed=6)
    assert torch.equal(a.lp_test_pos, b.lp_test_pos) and not torch.equal(a.lp_test_pos, c.lp_test_pos)
    pairs = torch.cat([a.lp_val_pos, a.lp_test_pos], 1)
    n = g.num_nodes
    keys = pairs[0] * n + pairs[1]
    assert keys.unique().numel() == keys.numel()  # disjoint, no repeats
    assert bool((pairs[0] < pairs[1]).all())  # undirected pairs, no self loops
    undirected = int((g.edge_index[0] < g.edge_index[1]).sum())
    assert a.lp_val_pos.size(1) == int(LINK_HOLDOUT[0] * undirected)
    split = a.link_split()
    kept = split.edge_index[1].to(torch.int64) * n + split.edge_index[0]
    held = torch.cat([keys, pairs[1] * n + pairs[0]])
    assert not bool(torch.isin(kept, held).any())
    kept_graph = hold_out_links(small_graph, seed=1)
    assert kept_graph.lp_test_pos is small_graph.lp_test_pos  # a graph that has held-out edges keeps them


def test_run_config_round_trip_with_a_source(small_graph, tmp_path):
    source, _ = open_source("file", str(_user_file(small_graph, tmp_path / "mine.npz")))
    cfg = RunConfig(source=source, epochs=1)
    assert cfg.spec is None and cfg.graph_size == (1500, source.num_edges)
    d = json.loads(json.dumps(cfg.to_dict()))
    assert RunConfig.from_dict(d) == cfg
    assert graph_label(d) == cfg.graph_name == f"mine.npz@{source.fingerprint.split(':')[1][:8]}"
    assert cfg.graph_key() != RunConfig(epochs=1).graph_key()
    with pytest.raises(ValueError, match="needs a graph"):
        RunConfig(spec=None)
    with pytest.raises(ValueError, match="GraphSource.kind"):
        GraphSource(kind="url", location="x")


def _result(path: Path) -> dict:
    return json.loads(path.read_text())


def test_cli_run_on_a_loaded_graph_records_source_and_fingerprint(small_graph, tmp_path, capsys):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--load",
                str(path),
                "--epochs",
                "2",
                "--warmup",
                "1",
                "--fanout",
                "5,5",
                "--batch-size",
                "128",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    r = _result(out)
    assert r["status"] == "ok" and r["config"]["spec"] is None
    assert r["config"]["source"]["location"] == str(path.resolve())
    assert r["graph"]["fingerprint"] == r["config"]["source"]["fingerprint"]
    assert r["graph"]["num_nodes"] == 1500 and r["steps"]["measured"] >= 1
    assert "mine.npz@" in capsys.readouterr().out


def test_cli_link_task_on_a_loaded_graph_uses_the_seeded_holdout(small_graph, tmp_path):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--load",
                str(path),
                "--task",
                "link",
                "--epochs",
                "1",
                "--warmup",
                "1",
                "--fanout",
                "5,5",
                "--batch-size",
                "256",
                "--max-steps",
                "3",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    r = _result(out)
    assert r["status"] == "ok" and "seeded split" in r["graph"]["link_holdout"]
    assert np.isfinite(r["accuracy"]["test"])


@pytest.mark.slow
def test_cli_compare_on_a_loaded_graph_in_separate_processes(small_graph, tmp_path):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    out_dir = tmp_path / "sweep"
    assert (
        main(
            [
                "compare",
                "--load",
                str(path),
                "--flags",
                "int32",
                "--repeats",
                "1",
                "--epochs",
                "1",
                "--warmup",
                "1",
                "--fanout",
                "5,5",
                "--batch-size",
                "128",
                "--out-dir",
                str(out_dir),
            ]
        )
        == 0
    )
    results = [_result(p) for p in out_dir.glob("*-r0-*.json")]
    assert {r["label"] for r in results} >= {"baseline", "int32"}
    fps = {r["config"]["source"]["fingerprint"] for r in results}
    assert len(fps) == 1
    # every child memory-mapped the parent's prepared copy instead of parsing and cleaning the file again
    assert {r["graph"]["loaded_from"] for r in results if r["status"] == "ok"} == {"prepared copy"}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--preset", "tiny"], "cannot be combined with --load"),
        (["--nodes", "500"], "do not apply to --load"),
        (["--dataset", "KarateClub"], "not both"),
    ],
)
def test_cli_refuses_contradicting_graph_options(small_graph, tmp_path, capsys, extra, message):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    assert main(["run", "--load", str(path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_cli_missing_file_is_one_line(tmp_path, capsys):
    assert main(["compare", "--load", str(tmp_path / "nope.npz"), "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "nope.npz" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()  # nothing written


@pytest.mark.slow
def test_edge_list_without_labels_is_judged_by_epoch_time_only(small_graph, tmp_path, capsys):
    path = tmp_path / "edges.csv"
    np.savetxt(path, small_graph.edge_index.numpy().T, fmt="%d", delimiter=",", header="src,dst", comments="")
    assert (
        main(
            [
                "compare",
                "--load",
                str(path),
                "--flags",
                "int32",
                "--repeats",
                "2",
                "--epochs",
                "1",
                "--warmup",
                "1",
                "--fanout",
                "5,5",
                "--batch-size",
                "128",
                "--in-process",
                "--json",
                "--out-dir",
                str(tmp_path / "sweep"),
            ]
        )
        == 0
    )
    comparison = json.loads(capsys.readouterr().out)
    assert comparison["target"] is None and "labels were substituted" in comparison["target_source"]
    rows = [r for r in comparison["rows"] if r["label"] != "baseline" and r.get("status") == "ok"]
    assert rows and all(r["primary"] == "epoch time" and r["acc_verdict"] == "n/a: labels substituted" for r in rows)
    result = _result(next((tmp_path / "sweep").glob("baseline-r0-*.json")))
    assert result["graph"]["labels_substituted"] is True and "labels" in result["graph"]["substituted"]


def test_graph_command_reports_load_cost_and_the_synthetic_twin(small_graph, tmp_path, capsys):
    path = _user_file(small_graph, tmp_path / "mine.npz")
    assert main(["graph", "--load", str(path), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (
        r["load_seconds"] > 0
        and r["load_peak_bytes"] >= 0
        and r["graph_bytes"]
        == small_graph.nbytes() - sum(t.nbytes for t in (small_graph.lp_val_pos, small_graph.lp_test_pos))
    )
    assert r["twin"]["preset"] == "tiny" and r["twin"]["cli"].startswith("--preset tiny --nodes 1500")
    assert main(["graph", "--load", str(path)]) == 0
    text = capsys.readouterr().out
    assert "closest preset" in text and "gnnbench run --preset tiny" in text and "load peak memory" in text


def _networkx_graph():
    """A power-law community graph built by another library (networkx), as a user would bring one."""
    nx = pytest.importorskip("networkx")
    g = nx.powerlaw_cluster_graph(1500, 4, 0.1, seed=0)
    edges = np.array(list(g.edges()), dtype=np.int64)
    edges = np.concatenate([edges, edges[:, ::-1]])  # both directions, as an undirected graph is stored
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 1500)
    x = (rng.standard_normal((1500, 8)) + y[:, None]).astype(np.float32)
    return edges, x, y


def _write_format(tmp_path: Path, fmt: str) -> Path:
    """A networkx graph as a user hands it over in ``fmt``: .npz, an edge list with .npy features and labels,
    or a saved PyG Data."""
    from torch_geometric.data import Data

    edges, x, y = _networkx_graph()
    if fmt == "npz":
        np.savez(tmp_path / "g.npz", edge_index=edges.T, x=x, y=y)
        return tmp_path / "g.npz"
    if fmt == "edgelist":
        path = tmp_path / "g.tsv"
        np.savetxt(path, edges, fmt="%d", delimiter="\t")
        np.save(tmp_path / "g.features.npy", x)
        np.save(tmp_path / "g.labels.npy", y)
        return path
    torch.save(
        Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=torch.from_numpy(edges.T.copy())),
        tmp_path / "g.pt",
    )
    return tmp_path / "g.pt"


@pytest.mark.parametrize("fmt", ["npz", "edgelist", "pt"])
@pytest.mark.slow
def test_each_format_goes_through_compare_and_report(tmp_path, fmt):
    path = _write_format(tmp_path, fmt)
    out_dir = tmp_path / "sweep"
    assert (
        main(
            [
                "compare",
                "--load",
                str(path),
                "--flags",
                "int32",
                "--repeats",
                "1",
                "--epochs",
                "1",
                "--warmup",
                "1",
                "--fanout",
                "5,5",
                "--batch-size",
                "256",
                "--in-process",
                "--out-dir",
                str(out_dir),
            ]
        )
        == 0
    )
    base = _result(next(out_dir.glob("baseline-r0-*.json")))
    assert base["status"] == "ok" and not base["graph"].get("labels_substituted")
    assert base["graph"]["num_nodes"] == 1500
    report = tmp_path / "report.html"
    assert main(["report", str(out_dir), "--asv", str(tmp_path / "no-asv"), "--out", str(report)]) == 0
    assert f"{path.name}@{base['config']['source']['fingerprint'].split(':')[1][:8]}" in report.read_text()
