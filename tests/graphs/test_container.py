import numpy as np
import pytest
import torch

from gnnbench.graphs import CleanOptions, Graph, GraphError
from gnnbench.graphs.io import load_graph, save_npz


def make(edge_index, n=4, **kw):
    return Graph.from_edges(torch.tensor(edge_index), torch.zeros(n, 3), torch.zeros(n, dtype=torch.long), **kw)


def edge_set(g):
    return sorted(map(tuple, g.edge_index.t().tolist()))


def test_cleaning_options():
    raw = [[0, 0, 1, 2, 2], [1, 1, 1, 3, 3]]  # (0,1) twice, self loop (1,1), (2,3) twice
    assert edge_set(make(raw)) == [(0, 1), (1, 1), (2, 3)]
    assert len(edge_set(make(raw, clean=CleanOptions(dedupe=False)))) == 5
    assert edge_set(make(raw, clean=CleanOptions(self_loops="remove"))) == [(0, 1), (2, 3)]
    assert edge_set(make(raw, clean=CleanOptions(self_loops="add"))) == [(0, 0), (0, 1), (1, 1), (2, 2), (2, 3), (3, 3)]
    und = make(raw, clean=CleanOptions(to_undirected=True, self_loops="remove"))
    assert edge_set(und) == [(0, 1), (1, 0), (2, 3), (3, 2)]
    assert und.is_undirected() and not make(raw).is_undirected()
    with pytest.raises(ValueError, match=r"self_loops must be one of 'keep', 'remove', 'add' \(got 'drop'\)"):
        CleanOptions(self_loops="drop")


@pytest.mark.parametrize(
    "edge_index,match",
    [
        ([[0, 5], [1, 2]], r"node id 5, out of range for num_nodes=4; ids must be in \[0, 3\]"),
        ([[0, -1], [1, 2]], "negative node id -1"),
        ([[0, 1, 2]], r"edge_index must have shape \[2, num_edges\] \(got \[1, 3\]\)"),
    ],
)
def test_bad_edges_are_named(edge_index, match):
    with pytest.raises(GraphError, match=match):
        make(edge_index)


def test_float_edge_index_rejected():
    with pytest.raises(GraphError, match="must hold integers"):
        Graph.from_edges(torch.tensor([[0.0], [1.0]]), torch.zeros(2, 1), torch.zeros(2, dtype=torch.long))


def test_bad_features_and_labels_are_named():
    ei = torch.tensor([[0], [1]])
    x = torch.zeros(3, 2)
    x[1, 1] = float("nan")
    with pytest.raises(GraphError, match="contain NaN values .*row 1, column 1"):
        Graph.from_edges(ei, x, torch.zeros(3, dtype=torch.long))
    x[1, 1] = float("inf")
    with pytest.raises(GraphError, match="Inf"):
        Graph.from_edges(ei, x, torch.zeros(3, dtype=torch.long))
    with pytest.raises(GraphError, match=r"labels y must have shape \[3\] \(got \[2\]\)"):
        Graph.from_edges(ei, torch.zeros(3, 2), torch.zeros(2, dtype=torch.long))
    with pytest.raises(GraphError, match=r"features x have 3 rows but num_nodes is 5"):
        Graph.from_edges(ei, torch.zeros(3, 2), torch.zeros(3, dtype=torch.long), num_nodes=5)
    with pytest.raises(GraphError, match="labels y must be >= 0"):
        Graph.from_edges(ei, torch.zeros(3, 2), torch.tensor([0, -1, 2]))
    with pytest.raises(GraphError, match=r"train_mask must have shape \[3\]"):
        Graph.from_edges(
            ei,
            torch.zeros(3, 2),
            torch.zeros(3, dtype=torch.long),
            train_mask=torch.ones(2, dtype=torch.bool),
            val_mask=torch.ones(3),
            test_mask=torch.ones(3),
        )


def test_pyg_round_trip(tiny_graph):
    data = tiny_graph.to_pyg()
    assert data.num_nodes == tiny_graph.num_nodes
    back = Graph.from_pyg(data)
    for name in ("edge_index", "rowptr", "x", "y", "train_mask", "val_mask", "test_mask", "lp_val_pos"):
        assert torch.equal(getattr(back, name), getattr(tiny_graph, name)), name


def test_load_npz_and_pt(tmp_path, tiny_graph):
    path = tmp_path / "g.npz"
    save_npz(tiny_graph, path)
    g = load_graph(path)
    assert torch.equal(g.edge_index, tiny_graph.edge_index) and torch.equal(g.test_mask, tiny_graph.test_mask)
    assert torch.equal(g.lp_test_pos, tiny_graph.lp_test_pos) and g.meta["spec"] == tiny_graph.meta["spec"]
    assert g.link_split().num_edges == tiny_graph.link_split().num_edges
    pt = tmp_path / "g.pt"
    torch.save(tiny_graph.to_pyg(), pt)
    g2 = load_graph(pt)
    assert torch.equal(g2.x, tiny_graph.x) and torch.equal(g2.lp_test_pos, tiny_graph.lp_test_pos)


def test_load_npz_with_aliases_edge_list_and_random_split(tmp_path):
    path = tmp_path / "raw.npz"
    edges = np.array([[0, 1], [1, 2], [2, 0]])  # [E, 2]
    np.savez(path, edges=edges, features=np.ones((3, 4), dtype=np.float64), labels=np.array([0, 1, 0]))
    g = load_graph(path, clean=CleanOptions(to_undirected=True))
    assert g.num_edges == 6 and g.x.dtype == torch.float32
    total = g.train_mask.long() + g.val_mask.long() + g.test_mask.long()
    assert torch.equal(total, torch.ones(3, dtype=torch.long))


def test_load_errors(tmp_path):
    with pytest.raises(GraphError, match="does not exist"):
        load_graph(tmp_path / "missing.npz")
    bad = tmp_path / "g.xyz"
    bad.write_text("0,1\n")
    with pytest.raises(GraphError, match=r"unsupported graph file suffix '.xyz'.*accepted: .npz, .pt, .pth"):
        load_graph(bad)
    no_y = tmp_path / "noy.npz"
    np.savez(no_y, edge_index=np.zeros((2, 1), dtype=np.int64), x=np.zeros((1, 1)))
    with pytest.raises(GraphError, match="no 'y' array .*accepted names: y, labels"):
        load_graph(no_y)
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(GraphError, match="cannot read"):
        load_graph(garbage)
    garbage_pt = tmp_path / "garbage.pt"
    garbage_pt.write_bytes(b"not a pickle")
    with pytest.raises(GraphError, match="cannot load"):
        load_graph(garbage_pt)
    not_data = tmp_path / "tensor.pt"
    torch.save(torch.zeros(3), not_data)
    with pytest.raises(GraphError, match="not a torch_geometric.data.Data"):
        load_graph(not_data)
    oob = tmp_path / "oob.npz"
    np.savez(oob, edge_index=np.array([[0], [7]]), x=np.zeros((2, 1)), y=np.zeros(2, dtype=np.int64))
    with pytest.raises(GraphError, match="node id 7, out of range for num_nodes=2"):
        load_graph(oob)
