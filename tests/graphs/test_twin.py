"""Synthetic twins: a preset's own graph is closest to that preset, and its twin reproduces its statistics."""

import math

import torch

from gnnbench.graphs import Graph, GraphSpec, generate
from gnnbench.graphs.spec import PRESETS
from gnnbench.graphs.twin import closest_preset, graph_signature, preset_distance, twin_spec


def test_tiny_is_closest_to_tiny_and_its_twin_reproduces_it(tiny_graph):
    twin = closest_preset(tiny_graph)
    assert twin["preset"] == "tiny"
    assert twin["distance"] == min(twin["distances"].values()) and set(twin["distances"]) == set(PRESETS)
    o = twin["overrides"]
    assert o["num_nodes"] == tiny_graph.num_nodes and o["num_classes"] == tiny_graph.num_classes
    assert o["feature_dim"] == tiny_graph.num_features and 2.0 < o["exponent"] <= 5.0
    assert twin["cli"] == (
        f"--preset tiny --nodes {o['num_nodes']} --avg-degree {o['avg_degree']} "
        f"--exponent {o['exponent']} --homophily {o['homophily']} --classes {o['num_classes']} "
        f"--feature-dim {o['feature_dim']}"
    )
    original = graph_signature(tiny_graph)
    again = graph_signature(generate(twin_spec(tiny_graph, seed=1)))  # another draw of the twin
    assert math.isclose(again["num_nodes"], original["num_nodes"])
    assert abs(again["avg_degree"] / original["avg_degree"] - 1) < 0.02
    assert abs(again["exponent"] - original["exponent"]) < 0.35
    assert abs(again["homophily"] - original["homophily"]) < 0.05


def test_twin_of_a_different_graph_mimics_it():
    spec = GraphSpec.preset(
        "tiny", num_nodes=60_000, avg_degree=6.0, exponent=3.2, homophily=0.8, num_classes=4, feature_dim=8, seed=5
    )
    graph = generate(spec)
    twin = closest_preset(graph)
    assert twin["preset"] == "small"  # log10(100k / 60k) = 0.22 < log10(60k / 10k) = 0.78
    o = twin["overrides"]
    assert (o["num_nodes"], o["num_classes"], o["feature_dim"]) == (60_000, 4, 8)
    assert abs(o["avg_degree"] - 6.0) < 0.1 and abs(o["exponent"] - 3.2) < 0.35 and abs(o["homophily"] - 0.8) < 0.05
    mimic = graph_signature(generate(twin_spec(graph)))
    original = graph_signature(graph)
    assert abs(mimic["exponent"] - original["exponent"]) < 0.35
    assert abs(mimic["homophily"] - original["homophily"]) < 0.05
    assert abs(mimic["avg_degree"] / original["avg_degree"] - 1) < 0.02


def test_distance_definition_and_degenerate_graphs():
    sig = {"num_nodes": 1e5, "avg_degree": 2.0, "exponent": 4.3, "homophily": 0.05}
    small = PRESETS["small"]
    # |log10(1)| + |log10(2 / 20)| + |4.3 - 2.3| / 2 + |0.05 - 0.55| = 0 + 1 + 1 + 0.5
    assert math.isclose(preset_distance(sig, small), 2.5)
    # A path of 34 nodes: no Hill estimate; the exponent keeps the preset's value and a note says so.
    n = 34
    src = torch.arange(n - 1)
    ei = torch.cat([torch.stack([src, src + 1]), torch.stack([src + 1, src])], dim=1)
    path = Graph.from_edges(ei, torch.zeros(n, 3), torch.arange(n) % 2)
    twin = closest_preset(path)
    assert twin["preset"] == "tiny" and twin["overrides"]["exponent"] == PRESETS["tiny"].exponent
    assert any("Hill" in note for note in twin["notes"])
    assert twin_spec(path).num_nodes == n


def test_calibrated_twin_is_closer(tiny_graph):
    """One pilot generation corrects the generator's small-graph bias in exponent and homophily."""
    original = graph_signature(tiny_graph)
    plain = closest_preset(tiny_graph)["overrides"]
    calibrated = closest_preset(tiny_graph, calibrate=True)["overrides"]
    assert calibrated["exponent"] < plain["exponent"] and calibrated["homophily"] > plain["homophily"]
    mimic = graph_signature(generate(twin_spec(tiny_graph, seed=1, calibrate=True)))
    assert abs(mimic["exponent"] - original["exponent"]) < 0.2
    assert abs(mimic["homophily"] - original["homophily"]) < 0.02
