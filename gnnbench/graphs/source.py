"""A user's graph as the source of a run: a file or a dataset, identified by its content.

A loaded graph is named by a :class:`GraphSource`: where it came from (a file path or a dataset name), how
it was cleaned and split, and a **content fingerprint** (:func:`content_fingerprint`), on which results,
resume and the batch cache key. Load once, measure many times: :func:`open_source` loads, cleans and
fingerprints the graph in the parent process and writes a prepared copy; each process of a sweep reads it
with :func:`load_source`, which memory-maps that copy and uses it only when it still hashes to the
fingerprint.

Why the fingerprint, and how the prepared copy is kept honest: ``docs/graphs.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gnnbench.atomic import write_bytes_atomic
from gnnbench.graphs.clean import CleanOptions, SelfLoops
from gnnbench.graphs.container import Graph, GraphError

__all__ = [
    "GraphSource",
    "open_source",
    "load_source",
    "content_fingerprint",
    "prepared_path",
    "hold_out_links",
    "SOURCE_KINDS",
    "LINK_HOLDOUT",
]

SOURCE_KINDS = ("file", "dataset")
_TENSORS = ("edge_index", "rowptr", "x", "y", "train_mask", "val_mask", "test_mask", "lp_val_pos", "lp_test_pos")
_PREPARED_FORMAT = 2  # bump when the prepared copy's layout changes


@dataclass(frozen=True)
class GraphSource:
    """Where a run's graph comes from, and what it holds.

    Args:
        kind: ``"file"`` (a path :func:`gnnbench.graphs.io.load_graph` reads) or
            ``"dataset"`` (a name :func:`gnnbench.graphs.datasets.load_dataset` resolves).
        location: The file's absolute path, or the dataset name.
        root: The dataset's directory (datasets only; ``None``: the default root).
        fingerprint: Content hash of the cleaned graph (:func:`content_fingerprint`).
        num_nodes, num_edges: Size of the cleaned graph (stored, directed edges).
        split_seed: Seed of the random node split (and of the link-prediction held-out
            edges) drawn when the source has none.
        dedupe, to_undirected, self_loops: The cleaning applied (:class:`~gnnbench.graphs.clean.CleanOptions`).
    """

    kind: str
    location: str
    root: str | None = None
    fingerprint: str = ""
    num_nodes: int = 0
    num_edges: int = 0
    split_seed: int = 0
    dedupe: bool = True
    to_undirected: bool = False
    self_loops: str = "keep"

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"GraphSource.kind must be one of {SOURCE_KINDS} (got {self.kind!r})")
        if not isinstance(self.location, str) or not self.location:
            raise ValueError(f"GraphSource.location must be a non-empty path or dataset name (got {self.location!r})")
        SelfLoops(self.self_loops)  # raises naming the accepted values

    @property
    def clean(self) -> CleanOptions:
        return CleanOptions(dedupe=self.dedupe, to_undirected=self.to_undirected, self_loops=self.self_loops)

    @property
    def label(self) -> str:
        """A short human name: the file's name or the dataset's, with the fingerprint's head."""
        name = Path(self.location).name if self.kind == "file" else self.location
        return f"{name}@{self.fingerprint.split(':')[-1][:8]}" if self.fingerprint else name

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GraphSource":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def _hasher():
    """xxh3-128 where the ``xxhash`` package is installed (an order of magnitude faster than BLAKE2b:
    ``docs/data-pipeline.md``), else BLAKE2b; the algorithm is part of the fingerprint, so the two never
    compare equal by accident."""
    try:
        import xxhash

        return "xxh3", xxhash.xxh3_128()
    except ImportError:  # pragma: no cover - xxhash is a dependency; this keeps a bare install working
        return "b2", hashlib.blake2b(digest_size=16)


def content_fingerprint(graph: Graph) -> str:
    """Hash of the graph's content: every tensor's name, dtype, shape and bytes, hashed in place (chunked by
    the hash's own streaming; no copy of a contiguous tensor). Held-out link-prediction edges are included.

    Two graphs have equal fingerprints exactly when they would train identically; index dtype and
    cleaning show in the bytes.
    """
    algo, h = _hasher()
    for name in _TENSORS:
        t = getattr(graph, name)
        if t is None:
            h.update(f"{name}:none;".encode())
            continue
        t = t.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        if t.numel():
            h.update(
                memoryview(t.view(torch.uint8).numpy() if t.dtype != torch.bool else t.to(torch.uint8).numpy()).cast(
                    "B"
                )
            )
    return f"{algo}:{h.hexdigest()[:32]}"


def _cache_root() -> Path:
    env = os.environ.get("GNNBENCH_GRAPH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "gnnbench" / "graphs"


def prepared_path(source: GraphSource) -> Path:
    """Where the prepared (cleaned, mmap-able) copy of ``source`` lives (``$GNNBENCH_GRAPH_CACHE`` or
    ``~/.cache/gnnbench/graphs``)."""
    return _cache_root() / f"{source.fingerprint.replace(':', '-')}.pt"


def _read_original(kind: str, location: str, root: str | None, clean: CleanOptions, split_seed: int) -> Graph:
    if kind == "file":
        from gnnbench.graphs.io import load_graph

        return load_graph(location, clean=clean, split_seed=split_seed)
    from gnnbench.graphs.datasets import load_dataset

    return load_dataset(location, root, clean=clean, split_seed=split_seed)


LINK_HOLDOUT = (0.05, 0.10)  # validation, test: fractions of the undirected non-loop pairs held out for link prediction


def hold_out_links(graph: Graph, seed: int) -> Graph:
    """Give a loaded graph without held-out link-prediction positives one documented, seeded split.

    The undirected pairs ``{u, v}`` (``u != v``, each counted once whichever directions are stored) are
    drawn without replacement with ``torch.Generator().manual_seed(seed)``: the first
    ``LINK_HOLDOUT[0]`` of them become validation positives and the next ``LINK_HOLDOUT[1]`` test
    positives, as ``[2, k]`` tensors ``(min, max)``. Link prediction removes both directions of each from
    message passing (:meth:`Graph.link_split`). A graph that already carries held-out edges is returned as is.
    """
    if graph.lp_val_pos is not None or graph.lp_test_pos is not None:
        return graph
    n = graph.num_nodes
    ei = graph.edge_index.to(torch.int64)
    lo, hi = torch.minimum(ei[0], ei[1]), torch.maximum(ei[0], ei[1])
    keep = lo != hi
    keys = torch.unique(lo[keep] * n + hi[keep])
    g = torch.Generator().manual_seed(seed)
    n_val, n_test = int(LINK_HOLDOUT[0] * keys.numel()), int(LINK_HOLDOUT[1] * keys.numel())
    pick = keys[torch.randperm(keys.numel(), generator=g)[: n_val + n_test]]
    pairs = torch.stack([pick // n, pick % n])
    graph.lp_val_pos = pairs[:, :n_val].contiguous()
    graph.lp_test_pos = pairs[:, n_val:].contiguous()
    graph.meta["link_holdout"] = f"seeded split (seed {seed}): {n_val} validation, {n_test} test pairs"
    return graph


def _plain(value: Any) -> bool:
    """Meta values the prepared copy keeps (what ``torch.load(weights_only=True)`` reads back as they were)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float, bool)) for v in value)


def _write_prepared(graph: Graph, source: GraphSource) -> None:
    import io

    blob = {name: getattr(graph, name) for name in _TENSORS if getattr(graph, name) is not None}
    blob["format"] = _PREPARED_FORMAT
    blob["fingerprint"] = source.fingerprint
    blob["meta"] = {k: v for k, v in graph.meta.items() if _plain(v)}
    buf = io.BytesIO()
    torch.save(blob, buf)
    write_bytes_atomic(prepared_path(source), buf.getvalue())


def _read_prepared(source: GraphSource) -> Graph | None:
    """The prepared copy, or ``None`` when it is missing, unreadable or does not hash to the fingerprint."""
    path = prepared_path(source)
    if not path.is_file():
        return None
    try:
        blob = torch.load(path, mmap=True, weights_only=True)
        if blob.get("format") != _PREPARED_FORMAT or blob.get("fingerprint") != source.fingerprint:
            return None
        meta = dict(blob["meta"])
        graph = Graph(**{name: blob.get(name) for name in _TENSORS}, meta=meta)
    except Exception:  # noqa: BLE001 - a truncated or foreign file is rebuilt, never trusted
        return None
    return graph if content_fingerprint(graph) == source.fingerprint else None


def _describe(graph: Graph, source: GraphSource, seconds: float, how: str) -> Graph:
    graph.meta.update(
        source=source.location if source.kind == "file" else f"dataset:{source.location}",
        fingerprint=source.fingerprint,
        load_seconds=seconds,
        loaded_from=how,
    )
    return graph


def open_source(
    kind: str, location: str, *, root: str | None = None, clean: CleanOptions = CleanOptions(), split_seed: int = 0
) -> tuple[GraphSource, Graph]:
    """Load a user's graph once: clean it, fingerprint it and write the prepared copy sweeps memory-map.

    Returns:
        ``(source, graph)``: the source (with fingerprint and size) to put in each
        :class:`~gnnbench.training.config.RunConfig`, and the loaded graph.

    Raises:
        GraphError: for a missing, unreadable or malformed file or an unknown or unfetched dataset
            (one line naming it, the problem and the accepted form).
    """
    if kind not in SOURCE_KINDS:
        raise ValueError(f"graph source kind must be one of {SOURCE_KINDS} (got {kind!r})")
    if kind == "file":
        location = str(Path(location).expanduser().resolve())
    t0 = time.perf_counter()
    graph = hold_out_links(_read_original(kind, location, root, clean, split_seed), split_seed)
    seconds = time.perf_counter() - t0
    t1 = time.perf_counter()
    fp = content_fingerprint(graph)
    graph.meta["fingerprint_seconds"] = time.perf_counter() - t1
    source = GraphSource(
        kind=kind,
        location=location,
        root=root,
        fingerprint=fp,
        num_nodes=graph.num_nodes,
        num_edges=graph.num_edges,
        split_seed=split_seed,
        dedupe=clean.dedupe,
        to_undirected=clean.to_undirected,
        self_loops=clean.self_loops.value,
    )
    try:
        if not prepared_path(source).is_file():
            _write_prepared(graph, source)
    except OSError as exc:  # a read-only cache only costs each child a full load
        graph.meta["prepared_copy_error"] = str(exc)
    return source, _describe(graph, source, seconds, "original")


def load_source(source: GraphSource) -> Graph:
    """The graph of ``source``: its prepared copy when present and intact, else the original file or
    dataset, which must still hash to ``source.fingerprint``.

    Raises:
        GraphError: when the original no longer matches the fingerprint (the file changed since the
            configuration was made), or cannot be read.
    """
    if not source.fingerprint:
        raise ValueError("GraphSource has no fingerprint: build it with gnnbench.graphs.source.open_source")
    t0 = time.perf_counter()
    graph = _read_prepared(source)
    if graph is not None:
        return _describe(graph, source, time.perf_counter() - t0, "prepared copy")
    graph = hold_out_links(
        _read_original(source.kind, source.location, source.root, source.clean, source.split_seed), source.split_seed
    )
    fp = content_fingerprint(graph)
    if fp != source.fingerprint:
        where = source.location if source.kind == "file" else f"dataset {source.location} (root {source.root})"
        raise GraphError(
            f"{where} changed since this configuration was made (content fingerprint {fp}, "
            f"expected {source.fingerprint}); start the run or sweep again to measure the new content"
        )
    try:
        _write_prepared(graph, source)
    except OSError:
        pass
    return _describe(graph, source, time.perf_counter() - t0, "original")
