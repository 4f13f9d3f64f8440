"""Datasets by name: offline ones load deterministically; offline downloads fail in one line, for real."""

import importlib.util
import time

import pytest
import torch

from gnnbench.graphs import GraphError
from gnnbench.graphs.datasets import FAKE_DATASET, dataset_names, dataset_root, load_dataset
from gnnbench.graphs.io import measure_load

HAS_OGB = importlib.util.find_spec("ogb") is not None


def test_karate_club_loads_offline(tmp_path):
    g = load_dataset("KarateClub", str(tmp_path))
    assert (g.num_nodes, g.num_edges, g.num_classes) == (34, 156, 4)
    assert g.is_undirected()
    assert g.meta["source"] == "dataset:KarateClub" and g.meta["root"] == str(tmp_path)
    assert g.meta["split"] == "random"
    assert not bool((g.train_mask & g.test_mask).any())


def test_fake_dataset_is_deterministic_and_leaves_global_rng_alone(tmp_path):
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = load_dataset("FakeDataset", str(tmp_path))
    assert torch.equal(torch.rand(1), expected_next)  # global RNG untouched
    b = load_dataset("fakedataset", str(tmp_path))  # names are case-insensitive
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert a.num_features == FAKE_DATASET["num_channels"] and a.num_classes == FAKE_DATASET["num_classes"]
    assert a.is_undirected() and a.num_edges > 0


def test_dataset_root_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("GNNBENCH_DATA", raising=False)
    assert str(dataset_root()).endswith(".cache/gnnbench/datasets")
    monkeypatch.setenv("GNNBENCH_DATA", str(tmp_path / "env"))
    assert dataset_root() == tmp_path / "env"
    assert dataset_root(str(tmp_path / "arg")) == tmp_path / "arg"
    g = load_dataset("KarateClub")
    assert g.meta["root"] == str(tmp_path / "env")


def test_unknown_name_lists_accepted_names():
    with pytest.raises(GraphError) as info:
        load_dataset("Planetoid:Nope")
    msg = str(info.value)
    assert "\n" not in msg and "unknown dataset 'Planetoid:Nope'" in msg
    assert all(name in msg for name in dataset_names())


@pytest.mark.parametrize("name,raw", [("Planetoid:Cora", "Planetoid/Cora/raw"), ("Reddit", "Reddit/raw")])
def test_empty_root_offline_gives_one_line(tmp_path, name, raw):
    """This machine cannot reach dataset hosts: a real download attempt must fail fast, in one line."""
    t0 = time.perf_counter()
    with pytest.raises(GraphError) as info:
        load_dataset(name, str(tmp_path))
    assert time.perf_counter() - t0 < 60
    msg = str(info.value)
    assert "\n" not in msg
    assert f"cannot load dataset {name!r}" in msg and "download failed" in msg
    assert "run once on a machine with internet" in msg and str(tmp_path / raw) in msg


@pytest.mark.skipif(HAS_OGB, reason="ogb is installed: the missing-package path cannot be reached")
def test_ogb_missing_says_how_to_install(tmp_path):
    with pytest.raises(
        GraphError, match=r"^dataset 'ogbn-arxiv' needs the ogb package: pip install 'gnnbench\[ogb\]'$"
    ):
        load_dataset("ogbn-arxiv", str(tmp_path))


@pytest.mark.skipif(not HAS_OGB, reason="needs the optional ogb package")
def test_ogbn_arxiv_empty_root_offline(tmp_path):
    with pytest.raises(GraphError) as info:
        load_dataset("ogbn-arxiv", str(tmp_path))
    msg = str(info.value)
    assert "\n" not in msg and "cannot load dataset 'ogbn-arxiv'" in msg and str(tmp_path / "ogbn_arxiv") in msg


def test_measure_load_takes_a_dataset_name(tmp_path):
    graph, seconds, peak = measure_load("KarateClub", root=str(tmp_path))
    assert graph.num_nodes == 34 and seconds > 0 and peak >= 0
