"""Loading a user's own graph: a saved PyG ``Data`` or an ``.npz`` archive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gnnbench.graphs.clean import CleanOptions
from gnnbench.graphs.container import Graph, GraphError

__all__ = ["load_graph", "save_npz", "NPZ_KEYS"]

# Accepted .npz keys: canonical name -> aliases, first match wins.
NPZ_KEYS = {
    "edge_index": ("edge_index", "edges"),
    "x": ("x", "features"),
    "y": ("y", "labels"),
}
_NPZ_OPTIONAL = ("train_mask", "val_mask", "test_mask", "num_nodes", "lp_val_pos", "lp_test_pos", "spec_json")


def _load_npz(path: Path) -> dict[str, Any]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise GraphError(f"cannot read {path} as an .npz archive: {exc}") from None
    with archive:
        present = set(archive.files)
        out: dict[str, Any] = {}
        for key, aliases in NPZ_KEYS.items():
            found = next((a for a in aliases if a in present), None)
            if found is None:
                raise GraphError(
                    f"{path} has no {key!r} array (accepted names: {', '.join(aliases)}; "
                    f"found: {', '.join(sorted(present)) or 'none'})"
                )
            out[key] = archive[found]
        for key in _NPZ_OPTIONAL:
            if key in present:
                out[key] = archive[key]
    edges = out["edge_index"]
    if edges.ndim == 2 and edges.shape[1] == 2 and edges.shape[0] != 2:
        edges = edges.T  # accept [E, 2] edge lists too
    out["edge_index"] = torch.from_numpy(np.ascontiguousarray(edges))
    out["x"] = torch.from_numpy(np.ascontiguousarray(out["x"]))
    out["y"] = torch.from_numpy(np.ascontiguousarray(out["y"]))
    if "num_nodes" in out:
        out["num_nodes"] = int(out["num_nodes"])
    for key in ("lp_val_pos", "lp_test_pos"):
        if key in out:
            out[key] = torch.from_numpy(np.ascontiguousarray(out[key]))
    if "spec_json" in out:
        out["spec"] = json.loads(str(out.pop("spec_json")))
    for key in ("train_mask", "val_mask", "test_mask"):
        if key in out:
            out[key] = torch.from_numpy(out[key].astype(bool))
    return out


def load_graph(path: str | Path, *, clean: CleanOptions = CleanOptions(), split_seed: int = 0) -> Graph:
    """Load a graph from ``path``.

    Accepted formats:
        - ``.pt`` / ``.pth``: a ``torch_geometric.data.Data`` saved with ``torch.save``,
          holding ``x``, ``y`` and ``edge_index`` (masks optional);
        - ``.npz``: arrays ``edge_index`` (``[2, E]`` or ``[E, 2]``; alias ``edges``),
          ``x`` (alias ``features``), ``y`` (alias ``labels``), optional
          ``train_mask``/``val_mask``/``test_mask`` and ``num_nodes``.

    Missing masks are replaced by a random split drawn with ``split_seed``.

    Raises:
        GraphError: for a missing file, an unknown suffix or malformed content.
    """
    p = Path(path)
    if not p.is_file():
        raise GraphError(f"graph file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    meta = {"source": str(p)}
    if suffix == ".npz":
        arrays = _load_npz(p)
        masks = {k: arrays.pop(k) for k in ("train_mask", "val_mask", "test_mask") if k in arrays}
        if "spec" in arrays:
            meta["spec"] = arrays["spec"]
        graph = Graph.from_edges(arrays["edge_index"], arrays["x"], arrays["y"],
                                 num_nodes=arrays.get("num_nodes"), clean=clean,
                                 split_seed=split_seed, meta=meta, **masks)
        graph.lp_val_pos = arrays.get("lp_val_pos")
        graph.lp_test_pos = arrays.get("lp_test_pos")
        return graph
    if suffix in (".pt", ".pth"):
        from torch_geometric.data import Data
        from torch_geometric.io import fs

        try:
            data = fs.torch_load(str(p))
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
            raise GraphError(f"cannot load {p} as a saved PyG Data: {exc}") from None
        if not isinstance(data, Data):
            raise GraphError(f"{p} holds a {type(data).__name__}, not a torch_geometric.data.Data")
        graph = Graph.from_pyg(data, clean=clean, split_seed=split_seed)
        graph.meta.update(meta)
        return graph
    raise GraphError(f"unsupported graph file suffix {suffix!r} for {p}; accepted: .npz, .pt, .pth")


def save_npz(graph: Graph, path: str | Path) -> None:
    """Write ``graph`` as an ``.npz`` that :func:`load_graph` reads back (held-out edges and spec included)."""
    arrays = {name: getattr(graph, name).cpu().numpy()
              for name in ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")}
    for name in ("lp_val_pos", "lp_test_pos"):
        if getattr(graph, name) is not None:
            arrays[name] = getattr(graph, name).cpu().numpy()
    if graph.meta.get("spec") is not None:
        arrays["spec_json"] = np.array(json.dumps(graph.meta["spec"]))
    np.savez(path, num_nodes=np.int64(graph.num_nodes), **arrays)
