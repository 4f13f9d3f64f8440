"""A plain PyG node-classification loop, as a user writes it: NeighborLoader + GraphSAGE on gnnbench's `small`
synthetic power-law graph (100k nodes)."""

import sys

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE

from gnnbench.graphs.generate import generate
from gnnbench.graphs.spec import GraphSpec

torch.manual_seed(0)
g = generate(GraphSpec.preset("small"))
data = Data(x=g.x, edge_index=g.edge_index, y=g.y, train_mask=g.train_mask)
loader = NeighborLoader(data, num_neighbors=[15, 10], batch_size=1024, input_nodes=data.train_mask, shuffle=True)
model = GraphSAGE(data.num_features, 128, num_layers=2, out_channels=int(g.y.max()) + 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _epoch in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    model.train()
    for batch in loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        opt.step()
