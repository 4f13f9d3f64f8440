"""Explicit input cleaning: deduplication, symmetrization, self-loop handling."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor

__all__ = ["SelfLoops", "CleanOptions", "clean_edges"]


class SelfLoops(str, Enum):
    """What to do with self loops ``(i, i)``."""

    KEEP = "keep"  # leave them as they are
    REMOVE = "remove"  # drop every self loop
    ADD = "add"  # ensure every node has exactly one self loop


@dataclass(frozen=True)
class CleanOptions:
    """How raw edges are cleaned before they become a :class:`~gnnbench.graphs.Graph`."""

    dedupe: bool = True  # drop repeated (src, dst) pairs
    to_undirected: bool = False  # add the reverse of every edge
    self_loops: SelfLoops = SelfLoops.KEEP  # keep | remove | add

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "self_loops", SelfLoops(self.self_loops))
        except ValueError:
            accepted = ", ".join(repr(s.value) for s in SelfLoops)
            raise ValueError(f"CleanOptions.self_loops must be one of {accepted} (got {self.self_loops!r})") from None


def clean_edges(edge_index: Tensor, num_nodes: int, options: CleanOptions) -> Tensor:
    """Apply ``options`` and return the edges sorted by (target, source) as a new int64 ``[2, E]`` tensor.

    The input must already be validated (ids in ``[0, num_nodes)``); it may be any integer dtype and
    any layout (a transposed ``[E, 2]`` view is fine) and is never modified.

    Memory: every edge becomes one 64-bit key ``target * num_nodes + source``; the keys are sorted in
    place (numpy's in-place sort, several times faster than ``torch.sort`` and without its index
    array), deduplicated by comparing neighbours, and split back into the output. Beyond the input and
    the output this holds one key array (two while dropping duplicates). An input that is already
    sorted and duplicate-free (as :func:`gnnbench.graphs.io.save_npz` writes it) is not sorted again.
    """
    n = int(num_nodes)
    src, dst = edge_index[0], edge_index[1]
    key = dst.to(torch.int64) * n
    key += src
    if options.self_loops in (SelfLoops.REMOVE, SelfLoops.ADD):
        loop = src == dst
        if bool(loop.any()):
            key = key[~loop]
        del loop
    if options.to_undirected:
        rev = src.to(torch.int64) * n
        rev += dst
        if options.self_loops in (SelfLoops.REMOVE, SelfLoops.ADD):
            rev = rev[src != dst]
        key = torch.cat([key, rev])
        del rev
    if options.self_loops is SelfLoops.ADD:
        key = torch.cat([key, torch.arange(n, dtype=torch.int64, device=key.device) * (n + 1)])
    key = _sort_keys(key)
    if options.dedupe and key.numel() > 1:
        new = torch.ones(key.numel(), dtype=torch.bool, device=key.device)
        torch.ne(key[1:], key[:-1], out=new[1:])
        if not bool(new.all()):
            key = key[new]
        del new
    out = torch.empty((2, key.numel()), dtype=torch.int64, device=key.device)
    if n > 0:
        torch.div(key, n, rounding_mode="floor", out=out[1])
        torch.mul(out[1], n, out=out[0])
        torch.sub(key, out[0], out=out[0])
    return out


def _sort_keys(key: Tensor) -> Tensor:
    """``key`` sorted ascending: in place through numpy on the CPU, skipped when already sorted."""
    if key.numel() < 2 or bool((key[1:] >= key[:-1]).all()):
        return key
    if key.device.type == "cpu":
        key = key.contiguous()
        key.numpy().sort()
        return key
    return torch.sort(key).values
