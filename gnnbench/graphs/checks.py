"""Checks of a graph's input arrays: masks, splits and held-out pairs, each refused with a GraphError that
names the bad value; and the random split a graph gets when it brings none."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["GraphError", "check_disjoint", "check_held_out", "check_mask", "random_split_masks", "as_tensor_checked"]


class GraphError(ValueError):
    """Raised for malformed graph input; the message names the problem."""


def random_split_masks(
    num_nodes: int, train_frac: float, val_frac: float, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """Disjoint random train/val/test node masks; test takes the remainder."""
    perm = torch.randperm(num_nodes, generator=generator)
    n_train = max(1, int(round(train_frac * num_nodes)))
    n_val = int(round(val_frac * num_nodes))
    masks = []
    for lo, hi in ((0, n_train), (n_train, n_train + n_val), (n_train + n_val, num_nodes)):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[perm[lo:hi]] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]


def as_tensor_checked(value: Any, name: str) -> Tensor:
    """``torch.as_tensor(value)``, refusing dtypes torch cannot hold (strings, objects) with a GraphError."""
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind == "u" and value.dtype.itemsize > 1:  # numpy uint16/32/64: torch supports them only partly
        if value.size and int(value.max()) > torch.iinfo(torch.int64).max:
            raise GraphError(f"{name} holds {int(value.max())}, beyond the int64 range")
        value = value.astype("int64")
    try:
        return torch.as_tensor(value)
    except (TypeError, RuntimeError, ValueError) as exc:
        dtype = getattr(value, "dtype", type(value).__name__)
        raise GraphError(f"{name} must be a numeric array (got dtype {dtype}: {str(exc).splitlines()[0]})") from None


def check_mask(mask: Any, name: str, num_nodes: int) -> Tensor:
    """A ``[num_nodes]`` bool mask from ``mask`` (bool, or integers 0/1); refuses other shapes and values."""
    m = as_tensor_checked(mask, name)
    if m.shape != (num_nodes,):
        raise GraphError(f"{name} must have shape [{num_nodes}], one bool per node (got {list(m.shape)})")
    if m.dtype != torch.bool:
        if m.is_floating_point() or m.is_complex():
            raise GraphError(f"{name} must be bool or 0/1 integers (got dtype {m.dtype})")
        if m.numel() and (int(m.min()) < 0 or int(m.max()) > 1):
            raise GraphError(f"{name} must be bool or 0/1 integers (got values in [{int(m.min())}, {int(m.max())}])")
        m = m.to(torch.bool)
    return m


def check_disjoint(masks: list[Tensor]) -> None:
    """Refuse an empty train/val/test mask and any node in two of them."""
    names = ("train_mask", "val_mask", "test_mask")
    for name, m in zip(names, masks):
        if not bool(m.any()):
            raise GraphError(f"{name} selects no node; train, val and test masks must each select at least one node")
    for i in range(3):
        for j in range(i + 1, 3):
            both = masks[i] & masks[j]
            if bool(both.any()):
                first = int(both.nonzero()[0, 0])
                raise GraphError(
                    f"{names[i]} and {names[j]} overlap ({int(both.sum())} nodes, first node {first}); "
                    "the splits must be disjoint"
                )


def check_held_out(pairs: Any, name: str, num_nodes: int) -> Tensor:
    """Validate held-out link-prediction positives: ``[2, k]`` integer node ids in ``[0, num_nodes)``."""
    t = as_tensor_checked(pairs, name)
    if t.dim() != 2 or t.size(0) != 2:
        raise GraphError(f"{name} must have shape [2, k], (u, v) node pairs (got {list(t.shape)})")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise GraphError(f"{name} must hold integer node ids (got dtype {t.dtype})")
    if t.numel():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise GraphError(f"{name} holds node id {bad}; ids must be in [0, {num_nodes - 1}]")
    return t.to(torch.int64)
