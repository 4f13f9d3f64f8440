"""A sampling-bound PyG loop, as a user writes it: a costly per-batch transform (30 ms) in front of a step of
about the same length; loader workers overlap the two. `gnnbench diagnose --verify --script` measures that."""

import time

import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader
from torch_geometric.nn import GraphSAGE


def slow(batch):  # a costly user transform: loader-side work that workers overlap with the step
    time.sleep(0.03)
    return batch


n = 4000
g = torch.Generator().manual_seed(0)
data = Data(
    x=torch.randn(n, 64, generator=g),
    edge_index=torch.randint(0, n, (2, 40000), generator=g),
    y=torch.randint(0, 4, (n,), generator=g),
)
loader = NeighborLoader(data, num_neighbors=[10, 5], batch_size=128, shuffle=True, transform=slow)
model = GraphSAGE(64, 256, num_layers=2, out_channels=4)  # about as long a step as the transform
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _epoch in range(3):
    for batch in loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        F.cross_entropy(out, batch.y[: batch.batch_size]).backward()
        opt.step()
