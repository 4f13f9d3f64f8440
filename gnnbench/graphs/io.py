"""Loading a user's own graph: a saved PyG ``Data``, an ``.npz`` archive or an edge list (``.csv``/``.tsv``/``.txt``)."""

from __future__ import annotations

import json
import math
import struct
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from gnnbench.graphs.clean import CleanOptions
from gnnbench.graphs.container import Graph, GraphError, check_held_out
from gnnbench.graphs.edgelist import EDGE_LIST_SUFFIXES, load_edge_list
from gnnbench.host_memory import measure_peak

__all__ = ["load_graph", "measure_load", "save_npz", "NPZ_KEYS"]


# Accepted .npz keys: canonical name -> aliases, first match wins.
NPZ_KEYS = {
    "edge_index": ("edge_index", "edges"),
    "x": ("x", "features"),
    "y": ("y", "labels"),
}
_NPZ_OPTIONAL = ("train_mask", "val_mask", "test_mask", "num_nodes", "lp_val_pos", "lp_test_pos", "spec_json")


def _read_stored(archive: Any, name: str, path: Path) -> np.ndarray | None:
    """An uncompressed ``.npy`` member read straight from the file with one ``np.fromfile``, CRC checked.

    ``NpzFile[name]`` copies a stored member through 256 KiB reads and buffers (most of a load's time:
    ``docs/graphs.md``); this reads it in place. ``None`` (use ``NpzFile``) for compressed, encrypted,
    object or unusual members; a short or CRC-mismatched member is refused.
    """
    try:
        info = archive.zip.getinfo(f"{name}.npy")
    except (KeyError, AttributeError):
        return None
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
        return None
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            return None
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        start = info.header_offset + 30 + name_len + extra_len
        fh.seek(start)
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            return None
        if dtype.hasobject:
            return None
        header_len = fh.tell() - start
        count = math.prod(shape)
        if header_len + count * dtype.itemsize != info.file_size:
            raise ValueError(f"member size {info.file_size} does not match its header ({list(shape)} {dtype})")
        fh.seek(start)
        crc = zlib.crc32(fh.read(header_len))
        arr = np.fromfile(fh, dtype=dtype, count=count)
    if arr.size != count:
        raise ValueError(f"member holds {arr.size} of {count} values (truncated)")
    crc = zlib.crc32(memoryview(arr).cast("B"), crc)
    if crc != info.CRC:
        raise ValueError(f"CRC mismatch in {info.filename} (corrupt file)")
    return arr.reshape(shape, order="F" if fortran else "C")


def _array(archive: Any, name: str, path: Path) -> np.ndarray:
    try:
        direct = _read_stored(archive, name, path)
        return direct if direct is not None else archive[name]
    except Exception as exc:  # noqa: BLE001 - truncated or corrupt member: zlib, CRC, header errors alike
        raise GraphError(
            f"cannot read array {name!r} from {path} (truncated or corrupt .npz?): "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None


def _load_npz(path: Path) -> dict[str, Any]:
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - any failure to open an untrusted file is a bad file
        raise GraphError(
            f"cannot read {path} as an .npz archive: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise GraphError(f"{path} holds a single .npy array, not an .npz archive of edge_index, x and y")
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
            out[key] = _array(archive, found, path)
        for key in _NPZ_OPTIONAL:
            if key in present:
                out[key] = _array(archive, key, path)
    edges = out["edge_index"]
    if edges.ndim == 2 and edges.shape[1] == 2 and edges.shape[0] != 2:
        edges = edges.T  # accept [E, 2] edge lists too (a view: cleaning copies anyway)
    out["edge_index"] = edges
    if "num_nodes" in out:
        nn = out["num_nodes"]
        if nn.ndim != 0 or nn.dtype.kind not in "iu":
            raise GraphError(
                f"{path}: num_nodes must be a single integer (got dtype {nn.dtype}, shape {list(nn.shape)})"
            )
        out["num_nodes"] = int(nn)
    if "spec_json" in out:
        try:
            out["spec"] = json.loads(str(out.pop("spec_json")))
        except ValueError as exc:
            raise GraphError(f"{path}: spec_json is not valid JSON ({exc})") from None
    return out


def _with_file(path: Path, exc: GraphError) -> GraphError:
    """``exc`` with the file's name in front, unless the message names it already."""
    msg = str(exc)
    return GraphError(msg if str(path) in msg or path.name in msg else f"{path}: {msg}")


def load_graph(
    path: str | Path, *, clean: CleanOptions = CleanOptions(), split_seed: int = 0, allow_empty_edges: bool = False
) -> Graph:
    """Load a graph from ``path``.

    Accepted formats (by suffix, case-insensitive):
        - ``.pt`` / ``.pth``: a ``torch_geometric.data.Data`` saved with ``torch.save``,
          holding ``x``, ``y`` and ``edge_index`` (masks optional);
        - ``.npz``: arrays ``edge_index`` (``[2, E]`` or ``[E, 2]``; alias ``edges``),
          ``x`` (alias ``features``), ``y`` (alias ``labels``), optional
          ``train_mask``/``val_mask``/``test_mask`` and ``num_nodes``;
        - ``.csv`` / ``.tsv`` / ``.txt``: an edge list, two integer columns ``src dst``
          (comma, tab or space separated, optional header line, ``#`` comments), with
          optional ``STEM.features.npy`` (or ``STEM_x.npy``), ``STEM.labels.npy`` (or
          ``STEM_y.npy``) and ``STEM.{train,val,test}_mask.npy`` beside it; missing features
          and labels are substituted (see :mod:`gnnbench.graphs.edgelist`) and recorded in
          ``graph.meta["substituted"]``, ``meta["labels_substituted"]`` and ``meta["notes"]``.

    Missing masks are replaced by a random split drawn with ``split_seed``.

    Args:
        path: The graph file.
        clean: Cleaning applied to the edges (dedupe, to_undirected, self loops).
        split_seed: Seed of the random split when the file has no masks.
        allow_empty_edges: Accept a graph without edges (default: refuse it with a GraphError
            that says the edge list is empty; the caller decides per task).

    Raises:
        GraphError: one line naming the file, the problem and the accepted form, for a missing
            file, an unknown suffix or any malformed content.
    """
    p = Path(path)
    if not p.is_file():
        raise GraphError(f"graph file {str(p)!r} does not exist")
    suffix = p.suffix.lower()
    if suffix in EDGE_LIST_SUFFIXES:
        return load_edge_list(p, clean=clean, split_seed=split_seed, allow_empty_edges=allow_empty_edges)
    meta: dict[str, Any] = {"source": str(p)}
    if suffix == ".npz":
        arrays = _load_npz(p)
        masks = {k: arrays.pop(k) for k in ("train_mask", "val_mask", "test_mask") if k in arrays}
        if "spec" in arrays:
            meta["spec"] = arrays["spec"]
        try:
            graph = Graph.from_edges(
                arrays.pop("edge_index"),
                arrays.pop("x"),
                arrays.pop("y"),
                num_nodes=arrays.get("num_nodes"),
                clean=clean,
                split_seed=split_seed,
                meta=meta,
                **masks,
            )
            for key in ("lp_val_pos", "lp_test_pos"):
                if key in arrays:
                    setattr(graph, key, check_held_out(arrays[key], key, graph.num_nodes))
        except GraphError as exc:
            raise _with_file(p, exc) from None
    elif suffix in (".pt", ".pth"):
        from torch_geometric.data import Data
        from torch_geometric.io import fs

        try:
            with warnings.catch_warnings():  # PyG retries with weights_only=False after this warning
                warnings.filterwarnings("ignore", message="Weights only load failed")
                data = fs.torch_load(str(p))
        except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
            raise GraphError(
                f"cannot load {p} as a saved PyG Data: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
            ) from None
        if not isinstance(data, Data):
            raise GraphError(
                f"{p} holds a {type(data).__name__}, not a torch_geometric.data.Data "
                "(save one with torch.save(Data(x=..., y=..., edge_index=...), path))"
            )
        try:
            graph = Graph.from_pyg(data, clean=clean, split_seed=split_seed)
        except GraphError as exc:
            raise _with_file(p, exc) from None
        graph.meta.update(meta)
    else:
        raise GraphError(
            f"unsupported graph file suffix {suffix!r} for {p}; accepted: .npz, .pt, .pth, "
            f"{', '.join(EDGE_LIST_SUFFIXES)}"
        )
    if graph.num_edges == 0 and not allow_empty_edges:
        options = f"dedupe={clean.dedupe}, to_undirected={clean.to_undirected}, self_loops={clean.self_loops.value!r}"
        raise GraphError(f"{p}: the graph has no edges (after cleaning with {options}); the edge list is empty")
    return graph


def save_npz(graph: Graph, path: str | Path) -> None:
    """Write ``graph`` as an ``.npz`` that :func:`load_graph` reads back (held-out edges and spec included)."""
    arrays = {
        name: getattr(graph, name).cpu().numpy()
        for name in ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")
    }
    for name in ("lp_val_pos", "lp_test_pos"):
        if getattr(graph, name) is not None:
            arrays[name] = getattr(graph, name).cpu().numpy()
    if graph.meta.get("spec") is not None:
        arrays["spec_json"] = np.array(json.dumps(graph.meta["spec"]))
    np.savez(path, num_nodes=np.int64(graph.num_nodes), **arrays)


def measure_load(
    source: str | Path,
    *,
    clean: CleanOptions = CleanOptions(),
    split_seed: int = 0,
    root: str | None = None,
    allow_empty_edges: bool = False,
) -> tuple[Graph, float, int]:
    """Load a graph file or a named dataset and measure it.

    Args:
        source: A graph file (see :func:`load_graph`), or a dataset name
            (see :func:`gnnbench.graphs.datasets.load_dataset`) when no such file exists
            and the name has no graph-file suffix.
        clean, split_seed, allow_empty_edges: As for :func:`load_graph`.
        root: Dataset root for named datasets.

    Returns:
        ``(graph, seconds, peak_bytes)``: wall time of the load, and how far the process's resident
        memory rose above its size before the load (see :func:`measure_peak`: the process
        high-water mark, exact when the load raised it; call it early in a fresh process).
    """
    p = Path(source)
    if p.is_file() or p.suffix.lower() in (".npz", ".pt", ".pth", *EDGE_LIST_SUFFIXES):
        return measure_peak(
            lambda: load_graph(p, clean=clean, split_seed=split_seed, allow_empty_edges=allow_empty_edges)
        )
    from gnnbench.graphs.datasets import load_dataset

    return measure_peak(lambda: load_dataset(str(source), root, clean=clean, split_seed=split_seed))
