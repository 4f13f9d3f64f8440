"""One networkx graph written as .npz, edge lists (+ .npy) and a saved PyG Data loads identically from each."""

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnbench.graphs import CleanOptions, GraphError
from gnnbench.graphs.edgelist import SUBSTITUTE_CLASSES, SUBSTITUTE_FEATURE_DIM
from gnnbench.graphs.io import load_graph, measure_load, save_npz


@pytest.fixture(scope="module")
def reference():
    """A 3-block SBM: both directions of every edge, seeded features, labels = block."""
    sizes = [40, 30, 50]
    probs = [[0.2, 0.02, 0.01], [0.02, 0.25, 0.02], [0.01, 0.02, 0.15]]
    g = nx.stochastic_block_model(sizes, probs, seed=3)
    und = np.array(list(g.edges()), dtype=np.int64)
    edges = np.concatenate([und, und[:, ::-1]])  # [E, 2], both directions
    n = g.number_of_nodes()
    x = np.random.default_rng(0).standard_normal((n, 5)).astype(np.float32)
    y = np.array([g.nodes[i]["block"] for i in range(n)], dtype=np.int64)
    return edges, x, y


def _check(graph, reference):
    edges, x, y = reference
    n = x.shape[0]
    expected = np.unique(edges[:, 1] * n + edges[:, 0])  # sorted by (target, source)
    got = graph.edge_index[1].numpy() * n + graph.edge_index[0].numpy()
    assert np.array_equal(got, expected)
    assert torch.equal(graph.x, torch.from_numpy(x)) and torch.equal(graph.y, torch.from_numpy(y))
    assert graph.is_undirected()


def _write_text(path, edges, delimiter, header=None, comment=False):
    lines = ([header] if header else []) + ([f"# {len(edges)} edges"] if comment else [])
    lines += [f"{s}{delimiter}{d}" for s, d in edges]
    path.write_text("\n".join(lines) + "\n")


def test_npz_round_trip(tmp_path, reference):
    edges, x, y = reference
    np.savez(tmp_path / "g.npz", edge_index=edges.T, x=x, y=y)
    _check(load_graph(tmp_path / "g.npz"), reference)
    np.savez(tmp_path / "alias.npz", edges=edges, features=x, labels=y)  # [E, 2] and alias names
    _check(load_graph(tmp_path / "alias.npz"), reference)


def test_pyg_data_round_trip(tmp_path, reference):
    edges, x, y = reference
    torch.save(
        Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=torch.from_numpy(edges.T.copy())),
        tmp_path / "g.pt",
    )
    _check(load_graph(tmp_path / "g.pt"), reference)


@pytest.mark.parametrize(
    "name,delimiter,header,comment,side",
    [
        ("g.csv", ",", None, False, ("features", "labels")),
        ("g.csv", ",", "src,dst", True, ("features", "labels")),
        ("g.tsv", "\t", None, True, ("x", "y")),
        ("g.tsv", "\t", "source\ttarget", False, ("x", "y")),
        ("g.txt", " ", None, False, ("features", "y")),
        ("g.txt", "  ", "# src dst\nfrom to", True, ("x", "labels")),
    ],
)
def test_edge_list_round_trip(tmp_path, reference, name, delimiter, header, comment, side):
    edges, x, y = reference
    path = tmp_path / name
    _write_text(path, edges, delimiter, header, comment)
    stem = path.stem
    np.save(tmp_path / (f"{stem}.features.npy" if side[0] == "features" else f"{stem}_x.npy"), x)
    np.save(tmp_path / (f"{stem}.labels.npy" if side[1] == "labels" else f"{stem}_y.npy"), y)
    graph = load_graph(path)
    _check(graph, reference)
    assert graph.meta["substituted"] == [] and graph.meta["labels_substituted"] is False


def test_edge_list_masks_and_cleaning(tmp_path, reference):
    edges, x, y = reference
    n = x.shape[0]
    half = edges[edges[:, 0] < edges[:, 1]]  # one direction only
    _write_text(tmp_path / "h.csv", half, ",")
    np.save(tmp_path / "h.features.npy", x)
    np.save(tmp_path / "h.labels.npy", y)
    split = np.arange(n) % 3
    for i, name in enumerate(("train_mask", "val_mask", "test_mask")):
        np.save(tmp_path / f"h.{name}.npy", split == i)
    graph = load_graph(tmp_path / "h.csv", clean=CleanOptions(to_undirected=True))
    _check(graph, reference)
    assert torch.equal(graph.val_mask, torch.from_numpy(split == 1))


def test_missing_features_and_labels_are_substituted(tmp_path, reference):
    edges, x, _ = reference
    _write_text(tmp_path / "bare.csv", edges, ",")
    graph = load_graph(tmp_path / "bare.csv")
    assert graph.meta["substituted"] == ["features", "labels"] and graph.meta["labels_substituted"] is True
    assert any("accuracy is meaningless" in note for note in graph.meta["notes"])
    assert graph.num_features == SUBSTITUTE_FEATURE_DIM and graph.num_nodes == int(edges.max()) + 1
    assert torch.allclose(graph.x[:, 0], torch.log1p(graph.deg.float()))
    assert graph.num_classes == SUBSTITUTE_CLASSES
    # Degree quartiles: a higher class never has a lower degree.
    deg = graph.deg
    for c in range(SUBSTITUTE_CLASSES - 1):
        assert int(deg[graph.y == c].max()) <= int(deg[graph.y == c + 1].min())
    again = load_graph(tmp_path / "bare.csv")
    assert torch.equal(again.x, graph.x) and torch.equal(again.y, graph.y)  # deterministic
    # Labels only: features substituted, labels kept.
    np.save(tmp_path / "bare.labels.npy", reference[2])
    graph = load_graph(tmp_path / "bare.csv")
    assert graph.meta["substituted"] == ["features"] and graph.meta["labels_substituted"] is False


def test_save_npz_and_measure_load(tmp_path, reference):
    edges, x, y = reference
    np.savez(tmp_path / "g.npz", edge_index=edges.T, x=x, y=y)
    graph, seconds, peak = measure_load(tmp_path / "g.npz")
    _check(graph, reference)
    assert seconds > 0 and peak >= 0
    save_npz(graph, tmp_path / "again.npz")
    _check(load_graph(tmp_path / "again.npz"), reference)


def test_empty_edge_list_is_refused_unless_allowed(tmp_path, reference):
    x = reference[1]
    (tmp_path / "e.csv").write_text("src,dst\n")
    with pytest.raises(GraphError, match=r"e\.csv holds only a header line and no edge rows: the edge list is empty"):
        load_graph(tmp_path / "e.csv")
    np.save(tmp_path / "e.features.npy", x)
    graph = load_graph(tmp_path / "e.csv", allow_empty_edges=True)
    assert graph.num_edges == 0 and graph.num_nodes == x.shape[0]
