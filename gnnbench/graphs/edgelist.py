"""Edge-list files (``.csv`` / ``.tsv`` / ``.txt``) with optional ``.npy`` features, labels and masks beside them.

:func:`load_edge_list` reads one edge per line, two integer columns ``src dst`` (comma, tab or space
separated, an optional header line, ``#`` comments; :func:`read_edge_list`), and the features, labels and
split masks found beside it in ``.npy`` files (:func:`side_files`: :data:`FEATURE_NAMES`,
:data:`LABEL_NAMES`, :data:`MASK_NAMES`). Missing features or labels are substituted, from the in-degree
and a fixed seed, so that training still runs, and the substitution is recorded in ``graph.meta``
(accuracy on substituted labels is meaningless). Parsing is numpy's C reader (``np.loadtxt``).

The accepted format in full, the substitutes and the parser measurement: ``docs/graphs.md``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnbench.graphs.clean import CleanOptions
from gnnbench.graphs.container import Graph, GraphError

__all__ = [
    "EDGE_LIST_SUFFIXES",
    "FEATURE_NAMES",
    "LABEL_NAMES",
    "MASK_NAMES",
    "SUBSTITUTE_CLASSES",
    "SUBSTITUTE_FEATURE_DIM",
    "SUBSTITUTE_SEED",
    "load_edge_list",
    "read_edge_list",
    "side_files",
]

EDGE_LIST_SUFFIXES = (".csv", ".tsv", ".txt")
FEATURE_NAMES = ("{stem}.features.npy", "{stem}_x.npy")  # float [N, F]
LABEL_NAMES = ("{stem}.labels.npy", "{stem}_y.npy")  # integer [N]
MASK_NAMES = {
    "train_mask": "{stem}.train_mask.npy",
    "val_mask": "{stem}.val_mask.npy",
    "test_mask": "{stem}.test_mask.npy",
}
SUBSTITUTE_FEATURE_DIM = 16  # log-degree column + 15 seeded standard-normal columns
SUBSTITUTE_SEED = 0  # seed of substituted random feature columns and of label tie breaking
SUBSTITUTE_CLASSES = 4  # substituted labels: in-degree quartiles

_ACCEPTED = (
    "accepted: two integer columns src,dst per line (comma, tab or space separated; optional header line; '#' comments)"
)
_SNIFF_BYTES = 1 << 16


def _first_data_line(path: Path) -> tuple[int, str | None]:
    """``(line index, text)`` of the first non-blank, non-comment line, or ``(-1, None)``."""
    with open(path, "rb") as fh:
        head = fh.read(_SNIFF_BYTES)
    if b"\x00" in head:
        raise GraphError(f"{path} holds binary data (NUL bytes), not a text edge list; {_ACCEPTED}")
    try:
        with open(path, encoding="utf-8-sig") as fh:
            for i, line in enumerate(fh):
                text = line.split("#", 1)[0].strip()
                if text:
                    return i, text
    except UnicodeDecodeError as exc:
        raise GraphError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); {_ACCEPTED}") from None
    return -1, None


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def read_edge_list(path: str | Path) -> tuple[np.ndarray, bool]:
    """Parse an edge-list file into an ``[E, 2]`` int64 array (``E`` may be 0).

    Returns:
        ``(edges, had_header)``.

    Raises:
        GraphError: one line naming the file, for binary or non-UTF-8 content, float or non-numeric
            ids, ragged rows and any column count other than two.
    """
    p = Path(path)
    index, first = _first_data_line(p)
    if first is None:
        return np.empty((0, 2), dtype=np.int64), False
    delimiter = "," if "," in first else None
    tokens = [t.strip() for t in (first.split(",") if delimiter else first.split())]
    header = not all(_is_number(t) for t in tokens)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": handled by the caller
            edges = np.loadtxt(
                p,
                dtype=np.int64,
                delimiter=delimiter,
                comments="#",
                ndmin=2,
                skiprows=index + 1 if header else 0,
                encoding="utf-8-sig",
            )
    except UnicodeDecodeError as exc:
        raise GraphError(f"{p} is not UTF-8 text ({exc.reason} at byte {exc.start}); {_ACCEPTED}") from None
    except (ValueError, OverflowError) as exc:
        detail = str(exc).split(";")[0].rstrip(".")
        raise GraphError(f"{p}: {detail} (numpy's count, skipped lines aside); {_ACCEPTED}") from None
    if edges.size and edges.shape[1] != 2:
        raise GraphError(f"{p}: rows have {edges.shape[1]} columns; {_ACCEPTED}")
    if edges.size == 0:
        edges = np.empty((0, 2), dtype=np.int64)
    return edges, header


def side_files(path: str | Path) -> dict[str, Path]:
    """The feature, label and mask files found beside edge list ``path`` (roles: x, y, *_mask)."""
    p = Path(path)
    found: dict[str, Path] = {}
    for role, names in (("x", FEATURE_NAMES), ("y", LABEL_NAMES)):
        hits = [p.with_name(n.format(stem=p.stem)) for n in names]
        hits = [h for h in hits if h.is_file()]
        if len(hits) > 1:
            raise GraphError(
                f"{p}: both {hits[0].name} and {hits[1].name} exist; keep one of "
                f"{' or '.join(n.format(stem=p.stem) for n in names)}"
            )
        if hits:
            found[role] = hits[0]
    for role, name in MASK_NAMES.items():
        hit = p.with_name(name.format(stem=p.stem))
        if hit.is_file():
            found[role] = hit
    masks = [r for r in MASK_NAMES if r in found]
    if masks and len(masks) != 3:
        missing = [MASK_NAMES[r].format(stem=p.stem) for r in MASK_NAMES if r not in found]
        raise GraphError(
            f"{p}: found {', '.join(found[r].name for r in masks)} but not {', '.join(missing)}; "
            "give all three split masks or none"
        )
    return found


def _load_npy(path: Path, what: str) -> np.ndarray:
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any failure to decode an untrusted file is a bad file
        raise GraphError(f"cannot read {path} as a .npy array of {what}: {str(exc).splitlines()[0]}") from None
    if not isinstance(arr, np.ndarray):
        raise GraphError(f"{path} is an .npz archive, not a single .npy array of {what}")
    return arr


def _substitute_features(deg: torch.Tensor) -> torch.Tensor:
    n = deg.numel()
    g = torch.Generator().manual_seed(SUBSTITUTE_SEED)
    x = torch.randn(n, SUBSTITUTE_FEATURE_DIM, generator=g)
    x[:, 0] = torch.log1p(deg.to(torch.float32))
    return x


def _substitute_labels(deg: torch.Tensor) -> torch.Tensor:
    n = deg.numel()
    g = torch.Generator().manual_seed(SUBSTITUTE_SEED)
    perm = torch.randperm(n, generator=g)
    order = perm[torch.argsort(deg[perm], stable=True)]  # by degree, ties in seeded random order
    y = torch.empty(n, dtype=torch.int64)
    y[order] = torch.arange(n, dtype=torch.int64) * SUBSTITUTE_CLASSES // max(n, 1)
    return y


def load_edge_list(
    path: str | Path,
    *,
    clean: CleanOptions = CleanOptions(),
    split_seed: int = 0,
    allow_empty_edges: bool = False,
) -> Graph:
    """Load an edge-list file and the ``.npy`` files beside it (names: ``docs/graphs.md``).

    Args:
        path: The ``.csv`` / ``.tsv`` / ``.txt`` edge list.
        clean: Cleaning options applied to the edges.
        split_seed: Seed of the random split when no masks are given.
        allow_empty_edges: Accept a file without any edge row (default: refuse it).

    Raises:
        GraphError: one line naming the file(s), the problem and the accepted form.
    """
    p = Path(path)
    try:
        return _load_edge_list(p, clean, split_seed, allow_empty_edges)
    except GraphError as exc:
        msg = str(exc)
        raise GraphError(msg if p.name in msg else f"{p}: {msg}") from None


def _load_edge_list(p: Path, clean: CleanOptions, split_seed: int, allow_empty_edges: bool) -> Graph:
    edges, header = read_edge_list(p)
    sides = side_files(p)
    described = p.name + "".join(f" + {sides[r].name}" for r in ("x", "y") if r in sides)
    if edges.shape[0] == 0 and not allow_empty_edges:
        what = "only a header line and no edge rows" if header else "no edge rows"
        raise GraphError(f"{p} holds {what}: the edge list is empty; {_ACCEPTED}")

    x = y = None
    if "x" in sides:
        x = _load_npy(sides["x"], "features")
        if x.ndim != 2:
            raise GraphError(
                f"{sides['x']}: features must be a 2-D float array [num_nodes, num_features] "
                f"(got shape {list(x.shape)})"
            )
    if "y" in sides:
        y = _load_npy(sides["y"], "labels")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise GraphError(
                f"{sides['y']}: labels must be a 1-D integer array [num_nodes] (got shape {list(y.shape)})"
            )
    if x is not None and y is not None and x.shape[0] != y.shape[0]:
        raise GraphError(
            f"{sides['x']} has {x.shape[0]} rows but {sides['y']} has {y.shape[0]} labels; "
            "both must describe the same nodes"
        )
    if x is not None:
        n = x.shape[0]
    elif y is not None:
        n = y.shape[0]
    else:
        n = int(edges.max()) + 1 if edges.size else 0
        if n <= 0:
            raise GraphError(
                f"{p}: no node ids (empty edge list and no {FEATURE_NAMES[0].format(stem=p.stem)} "
                "to say how many nodes there are)"
            )
    masks = {r: _load_npy(sides[r], r) for r in MASK_NAMES if r in sides}

    meta: dict[str, Any] = {"source": str(p), "files": [str(p)] + [str(sides[r]) for r in sides]}
    substituted: list[str] = []
    notes: list[str] = []
    ei = torch.from_numpy(edges).t()  # [2, E] view, no copy
    try:
        graph = Graph.from_edges(
            ei,
            torch.from_numpy(x) if x is not None else torch.zeros(n, 0),
            torch.from_numpy(y) if y is not None else torch.zeros(n, dtype=torch.int64),
            num_nodes=n,
            clean=clean,
            split_seed=split_seed,
            meta=meta,
            **{k: torch.from_numpy(v) for k, v in masks.items()},
        )
    except GraphError as exc:
        raise GraphError(f"{described}: {exc}") from None
    del ei, edges
    if x is None:
        graph.x = _substitute_features(graph.deg)
        substituted.append("features")
        notes.append(
            f"no features file beside {p.name} (looked for "
            f"{' or '.join(f.format(stem=p.stem) for f in FEATURE_NAMES)}): x is log(1 + in-degree) plus "
            f"{SUBSTITUTE_FEATURE_DIM - 1} seeded random columns"
        )
    if y is None:
        graph.y = _substitute_labels(graph.deg)
        substituted.append("labels")
        graph.meta["labels_substituted"] = True
        notes.append(
            f"no labels file beside {p.name} (looked for "
            f"{' or '.join(f.format(stem=p.stem) for f in LABEL_NAMES)}): labels are the in-degree "
            f"quartile ({SUBSTITUTE_CLASSES} classes), so accuracy is meaningless"
        )
    else:
        graph.meta["labels_substituted"] = False
    graph.meta["substituted"] = substituted
    if notes:
        graph.meta["notes"] = notes
    return graph
