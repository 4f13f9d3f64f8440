"""gnnbench: measure which GNN training optimizations pay off on your hardware and graph.

``gnnbench.watch(loader, model, optimizer)`` diagnoses a training loop of your own
(:mod:`gnnbench.advice.watch`); it is imported on first use, so ``import gnnbench`` stays light.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "watch":
        from gnnbench.advice.watch import watch

        return watch
    raise AttributeError(f"module 'gnnbench' has no attribute {name!r}")
