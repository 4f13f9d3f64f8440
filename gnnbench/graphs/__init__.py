"""Graphs: specs, the generator, the container, loading and preparation."""

from gnnbench.graphs.clean import CleanOptions, SelfLoops
from gnnbench.graphs.container import Graph, GraphError
from gnnbench.graphs.csr import CSR, coo_to_csr, csr_to_coo
from gnnbench.graphs.generate import generate
from gnnbench.graphs.spec import PRESETS, GraphSpec

__all__ = [
    "CSR",
    "CleanOptions",
    "Graph",
    "GraphError",
    "GraphSpec",
    "PRESETS",
    "SelfLoops",
    "coo_to_csr",
    "csr_to_coo",
    "generate",
]
