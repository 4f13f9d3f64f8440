"""Public datasets by name: PyG's (``KarateClub``, ``Planetoid:Cora``, ``Reddit``, ...) and OGB's ``ogbn-*``.

``load_dataset("Planetoid:Cora")`` reads the dataset from its root, downloading it first when the root
has no copy and the machine is online (each network operation is bounded by
:data:`DOWNLOAD_TIMEOUT_S`). Offline with an empty root it raises one :class:`GraphError` line naming the
dataset, the root and how to fetch it. ``KarateClub`` and ``FakeDataset`` need no files.

Root: ``root`` if given, else ``$GNNBENCH_DATA``, else ``~/.cache/gnnbench/datasets``
(:data:`DEFAULT_ROOT`). Each dataset keeps its own folder below it (see :data:`DATASETS`).
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gnnbench.graphs.clean import CleanOptions
from gnnbench.graphs.container import Graph, GraphError

__all__ = [
    "DATASETS",
    "DEFAULT_ROOT",
    "DOWNLOAD_TIMEOUT_S",
    "FAKE_DATASET",
    "FAKE_SEED",
    "OGB_DATASETS",
    "dataset_names",
    "dataset_root",
    "load_dataset",
]

DEFAULT_ROOT = Path("~/.cache/gnnbench/datasets")  # overridden by $GNNBENCH_DATA, then by root=
DOWNLOAD_TIMEOUT_S = 15.0  # socket timeout of each network operation during a download
FAKE_SEED = 0  # torch and Python seeds around FakeDataset's construction
# FakeDataset's fixed shape: one undirected node-classification graph (the node count is drawn around
# avg_num_nodes with FAKE_SEED, so it is the same every time).
FAKE_DATASET = {
    "num_graphs": 1,
    "avg_num_nodes": 2000,
    "avg_degree": 10.0,
    "num_channels": 32,
    "num_classes": 5,
    "task": "node",
    "is_undirected": True,
}
OGB_DATASETS = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")  # single-label node classification


@dataclass(frozen=True)
class DatasetEntry:
    """How to build one named dataset.

    Args:
        build: ``build(folder) -> PyG dataset`` (``folder`` is the dataset's own folder under the root).
        folder: The dataset's folder under the root.
        raw: Where its raw files go, relative to ``folder`` (for the offline message).
        offline: Whether it needs no files at all (no root is used).
    """

    build: Callable[[Path], Any]
    folder: str
    raw: str = "raw"
    offline: bool = False


def _pyg(cls_name: str, **kwargs: Any) -> Callable[[Path], Any]:
    def build(folder: Path) -> Any:
        import torch_geometric.datasets as pyg_datasets

        return getattr(pyg_datasets, cls_name)(root=str(folder), **kwargs)

    return build


def _fake(_: Path) -> Any:
    from torch_geometric.datasets import FakeDataset

    state = random.getstate()
    try:
        random.seed(FAKE_SEED)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(FAKE_SEED)
            return FakeDataset(**FAKE_DATASET)
    finally:
        random.setstate(state)


def _karate(_: Path) -> Any:
    from torch_geometric.datasets import KarateClub

    return KarateClub()


DATASETS: dict[str, DatasetEntry] = {
    "KarateClub": DatasetEntry(_karate, "", offline=True),
    "FakeDataset": DatasetEntry(_fake, "", offline=True),
    **{
        f"Planetoid:{n}": DatasetEntry(_pyg("Planetoid", name=n), "Planetoid", f"{n}/raw")
        for n in ("Cora", "CiteSeer", "PubMed")
    },
    "Reddit": DatasetEntry(_pyg("Reddit"), "Reddit"),
    "Reddit2": DatasetEntry(_pyg("Reddit2"), "Reddit2"),
    "Flickr": DatasetEntry(_pyg("Flickr"), "Flickr"),
    **{
        f"Amazon:{n}": DatasetEntry(_pyg("Amazon", name=n), "Amazon", f"{n.lower()}/raw")
        for n in ("Computers", "Photo")
    },
    **{f"Coauthor:{n}": DatasetEntry(_pyg("Coauthor", name=n), "Coauthor", f"{n}/raw") for n in ("CS", "Physics")},
}


def dataset_names() -> list[str]:
    """Every accepted name: :data:`DATASETS` then :data:`OGB_DATASETS`."""
    return [*DATASETS, *OGB_DATASETS]


def dataset_root(root: str | os.PathLike | None = None) -> Path:
    """``root``, else ``$GNNBENCH_DATA``, else :data:`DEFAULT_ROOT`, user-expanded."""
    chosen = root if root is not None else os.environ.get("GNNBENCH_DATA") or DEFAULT_ROOT
    return Path(chosen).expanduser()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _build_bounded(build: Callable[[Path], Any], folder: Path) -> Any:
    """Run ``build`` with every socket operation bounded by :data:`DOWNLOAD_TIMEOUT_S`."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)  # urllib downloads (PyG's download_url, ogb)
    saved = None
    try:  # fsspec's HTTP filesystem (aiohttp) ignores the socket default: give it its own bounds
        import aiohttp
        from fsspec.config import conf

        saved = {proto: conf.get(proto) for proto in ("http", "https")}
        bound = aiohttp.ClientTimeout(total=None, sock_connect=DOWNLOAD_TIMEOUT_S, sock_read=DOWNLOAD_TIMEOUT_S)
        for proto, old in saved.items():
            conf[proto] = {**(old or {}), "client_kwargs": {**(old or {}).get("client_kwargs", {}), "timeout": bound}}
    except ImportError:
        pass
    try:
        return build(folder)
    finally:
        socket.setdefaulttimeout(previous)
        if saved is not None:
            from fsspec.config import conf

            for proto, old in saved.items():
                if old is None:
                    conf.pop(proto, None)
                else:
                    conf[proto] = old


def _ogb(name: str, root: Path) -> tuple[Any, dict[str, torch.Tensor]]:
    import importlib.util

    if importlib.util.find_spec("ogb") is None:
        raise GraphError(f"dataset {name!r} needs the ogb package: pip install 'gnnbench[ogb]'")
    try:
        from ogb.nodeproppred import PygNodePropPredDataset
    except ImportError as exc:
        raise GraphError(
            f"dataset {name!r} needs the ogb package, which is installed but fails to import "
            f"({_first_line(exc)}): pip install 'gnnbench[ogb]'"
        ) from None
    dataset = _build_bounded(lambda folder: PygNodePropPredDataset(name=name, root=str(folder)), root)
    split = dataset.get_idx_split()
    data = dataset[0]
    n = data.num_nodes
    masks = {}
    for key, ogb_key in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[split[ogb_key]] = True
        masks[key] = mask
    return data, masks


def load_dataset(
    name: str, root: str | None = None, *, clean: CleanOptions = CleanOptions(), split_seed: int = 0
) -> Graph:
    """Load a public dataset by name as a :class:`Graph`.

    Args:
        name: One of :func:`dataset_names` (case-insensitive): ``KarateClub``, ``FakeDataset``,
            ``Planetoid:Cora|CiteSeer|PubMed``, ``Reddit``, ``Reddit2``, ``Flickr``,
            ``Amazon:Computers|Photo``, ``Coauthor:CS|Physics``, ``ogbn-arxiv``, ``ogbn-products``,
            ``ogbn-papers100M`` (the last three need ``pip install 'gnnbench[ogb]'``).
        root: Dataset root (default: ``$GNNBENCH_DATA`` or ``~/.cache/gnnbench/datasets``).
        clean: Cleaning applied to the edges.
        split_seed: Seed of the random split for datasets without one (KarateClub, FakeDataset,
            Amazon, Coauthor).

    Returns:
        The graph; ``meta["source"] = "dataset:NAME"``, ``meta["root"]`` and ``meta["split"]``
        (``"dataset"`` or ``"random"``).

    Raises:
        GraphError: one line, for an unknown name, a missing ``ogb`` package, or a dataset that is
            neither under the root nor downloadable (offline): it names the dataset, the root and
            where to copy the raw files.
    """
    canonical = {n.lower(): n for n in dataset_names()}.get(str(name).lower())
    if canonical is None:
        raise GraphError(f"unknown dataset {name!r}; accepted: {', '.join(dataset_names())}")
    base = dataset_root(root)
    masks: dict[str, torch.Tensor] = {}
    if canonical in OGB_DATASETS:
        folder, raw = base, f"{canonical.replace('-', '_')} (the unzipped ogb archive: raw/ and split/)"
        build: Callable[[], Any] = lambda: _ogb(canonical, base)  # noqa: E731
    else:
        entry = DATASETS[canonical]
        folder, raw = base / entry.folder, entry.raw
        build = lambda: (_build_bounded(entry.build, folder), {})  # noqa: E731
    try:
        dataset, masks = build()
    except GraphError:
        raise
    except BaseException as exc:  # noqa: BLE001 - download/extract/processing failures all mean "no data"
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise GraphError(
            f"cannot load dataset {canonical!r}: no usable copy under {folder} and the download failed "
            f"({_first_line(exc)}); run once on a machine with internet (it downloads into {folder}), "
            f"or copy the {'dataset files' if canonical in OGB_DATASETS else 'raw files'} into {folder / raw}"
        ) from None
    data = dataset[0] if not masks else dataset
    if getattr(data, "y", None) is not None and data.y.is_floating_point():
        # ogbn-papers100M: unlabeled nodes are NaN and in no split; give them class 0.
        data.y = torch.nan_to_num(data.y, nan=0.0).to(torch.int64)
    if masks:
        for key, mask in masks.items():
            data[key] = mask
    try:
        graph = Graph.from_pyg(data, clean=clean, split_seed=split_seed)
    except GraphError as exc:
        raise GraphError(f"dataset {canonical!r}: {exc}") from None
    has_split = all(getattr(data, k, None) is not None for k in ("train_mask", "val_mask", "test_mask"))
    graph.meta.update(
        {"source": f"dataset:{canonical}", "root": str(base), "split": "dataset" if has_split else "random"}
    )
    return graph
