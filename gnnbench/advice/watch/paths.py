"""The code paths of a watched loop, marked as gnnbench's profiler ranges while the watch profiles
(:func:`mark_pyg_paths`): PyG's ``GCNConv`` / ``SAGEConv`` gather, per-edge normalization, aggregation and GCN
normalization, and dropout, under the names gnnbench's own model uses (:data:`gnnbench.timing.CODE_PATHS`), so
that ``gnnbench diagnose`` and ``gnnbench.watch`` attribute an operator alike (:mod:`gnnbench.advice.op_profile`).
The loader's sampler and gather are marked where the watch times them (``Patches._inside_wait``)."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import torch

from gnnbench.timing import in_code_path


def _mark(stack: ExitStack, obj: Any, attr: str, path: str) -> None:
    """``obj.attr`` (a module's function, or an instance's method) runs inside code path ``path`` until ``stack``
    closes: written into ``obj.__dict__`` (an instance attribute shadows the class's method; ``nn.Module``'s
    ``__setattr__`` is not involved) and put back as it was."""
    current = getattr(obj, attr, None)
    if current is None:
        return
    holder = obj.__dict__
    had, before = attr in holder, holder.get(attr)
    holder[attr] = in_code_path(path)(current)

    def restore() -> None:
        if had:
            holder[attr] = before
        else:
            holder.pop(attr, None)

    stack.callback(restore)


def mark_pyg_paths(stack: ExitStack, model: torch.nn.Module | None) -> list[str]:
    """Mark the code paths of ``model``'s PyG convolutions and of dropout until ``stack`` closes; the paths
    marked. ``GCNConv`` and ``SAGEConv`` (the convolutions gnnbench's twin models reproduce): the message
    passing's gather of source rows (``collect``) as ``aggregate.gather``, GCN's message (the per-edge
    normalization multiply) as ``aggregate.edge_norm``, the aggregation as ``aggregate.scatter``, ``gcn_norm`` as
    ``norm.build``; ``torch.nn.functional.dropout`` (what ``nn.Dropout`` and PyG's models call) as
    ``dropout``."""
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv, SAGEConv
    from torch_geometric.nn.conv import gcn_conv

    marked: list[str] = []
    convs = [m for m in (model.modules() if model is not None else []) if isinstance(m, (GCNConv, SAGEConv))]
    for conv in convs:
        for attr in ("collect", "_collect"):
            if hasattr(type(conv), attr):
                _mark(stack, conv, attr, "aggregate.gather")
        _mark(stack, conv, "aggregate", "aggregate.scatter")
        if isinstance(conv, GCNConv):
            _mark(stack, conv, "message", "aggregate.edge_norm")
    if convs:
        marked += ["aggregate.gather", "aggregate.scatter"]
    if any(isinstance(c, GCNConv) for c in convs):
        _mark(stack, gcn_conv, "gcn_norm", "norm.build")
        marked += ["aggregate.edge_norm", "norm.build"]
    _mark(stack, F, "dropout", "dropout")
    marked.append("dropout")
    return marked
