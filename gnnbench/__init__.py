"""gnnbench: measure which GNN training optimizations pay off on your hardware and graph."""

__version__ = "0.1.0"
