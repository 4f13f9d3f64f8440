"""Hypothesis strategies: draw small integers and seeds, build graphs deterministically."""

import torch
from hypothesis import strategies as st


@st.composite
def random_edges(draw, max_nodes: int = 30, max_edges: int = 120, allow_isolated: bool = True):
    """``(edge_index int64 [2, E], num_nodes)`` with duplicates and self loops possible."""
    n = draw(st.integers(1, max_nodes))
    m = draw(st.integers(0, max_edges))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    # Restrict endpoints to a prefix so that some nodes stay isolated.
    active = draw(st.integers(1, n)) if allow_isolated else n
    edge_index = torch.randint(0, active, (2, m), generator=g)
    return edge_index, n
