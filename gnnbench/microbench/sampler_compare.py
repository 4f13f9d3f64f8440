"""Neighbour-sampler comparison: gnnbench's sampler against torch-sparse's
``neighbor_sample`` (and pyg-lib's, when installed), measured in one run, with gnnbench's LABOR-0 sampler
(``gnnbench_labor``) beside them: for the same seeds and per-hop budget, each sampler's speed and the nodes
and edges a batch samples (LABOR's point: fewer distinct vertices for the same budget).

Run: ``gnnbench sampler-compare`` or ``python -m gnnbench.microbench.sampler_compare``
(see ``--help``). torch-sparse is not a dependency; build it locally to compare
(``pip install --no-build-isolation torch-scatter torch-sparse``).
:func:`torch_sparse_sampler` and :func:`pyg_lib_sampler` are the one way the
peers are called (the asv benchmarks and the pytest-benchmark suite use them too).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from gnnbench.graphs import GraphSpec, generate
from gnnbench.text import ratio

__all__ = ["torch_sparse_sampler", "pyg_lib_sampler", "compare_samplers", "add_arguments", "run_from_args", "main"]

TORCH_SPARSE_INSTALL = "pip install --no-build-isolation torch-scatter torch-sparse"
PYG_LIB_INSTALL = "pip install pyg-lib -f https://data.pyg.org/whl/torch-<version>+<cpu|cuXYZ>.html"


def _load_torch_sparse_sampler() -> None:
    """Register ``torch.ops.torch_sparse.neighbor_sample``: through ``import torch_sparse``, or, when only
    its Python layer fails (it imports torch-scatter, which the sampler op does not need), by loading the
    op's own compiled library from the installed package."""
    try:
        import torch_sparse  # noqa: F401 - registers torch.ops.torch_sparse

        return
    except ImportError:
        pass
    import importlib.util
    import os

    try:
        spec = importlib.util.find_spec("torch_sparse")
    except (ValueError, AttributeError):  # a blocked or half-imported module
        spec = None
    libs = (
        [os.path.join(os.path.dirname(spec.origin), f"_{name}_cpu.so") for name in ("version", "neighbor_sample")]
        if spec is not None and spec.origin
        else []
    )
    if not libs or not all(os.path.exists(lib) for lib in libs):
        raise ImportError(f"torch-sparse is not installed; to compare against it: {TORCH_SPARSE_INSTALL}")
    for lib in libs:
        torch.ops.load_library(lib)


def torch_sparse_sampler(rowptr: Tensor, col: Tensor, fanouts: Sequence[int]) -> Callable[[Tensor], Any]:
    """torch-sparse's ``neighbor_sample`` over an in-neighbour CSR, as ``sample(seeds)``.

    Samples without replacement, directed (the sampled edges only), like
    gnnbench's :class:`~gnnbench.sampling.neighbor.NeighborSampleCore`.

    Args:
        rowptr: ``[N + 1]`` CSR offsets.
        col: ``[E]`` neighbour ids of each row.
        fanouts: Neighbours per hop (``-1`` = all).

    Returns:
        A function of the ``[B]`` seed nodes returning torch-sparse's output
        ``(node, row, col, edge)``.

    Raises:
        ImportError: When torch-sparse is not installed; the message says how to build it.
    """
    _load_torch_sparse_sampler()
    op = torch.ops.torch_sparse.neighbor_sample
    fanouts = list(fanouts)

    def sample(seeds: Tensor) -> Any:
        return op(rowptr, col, seeds, fanouts, False, True)  # replace, directed

    return sample


def pyg_lib_sampler(rowptr: Tensor, col: Tensor, fanouts: Sequence[int]) -> Callable[[Tensor], Any]:
    """pyg-lib's ``neighbor_sample`` over an in-neighbour CSR, as ``sample(seeds)``.

    Called the way PyG's ``NeighborSampler`` calls it for a homogeneous graph
    (``csc=True``, without replacement, directed, ``disjoint=False``: one
    shared subgraph per batch, like gnnbench's sampler, not a tree per seed),
    including PyG's check of which optional arguments the installed pyg-lib
    takes (``edge_time``, ``edge_weight``).

    Args:
        rowptr: ``[N + 1]`` CSR offsets.
        col: ``[E]`` neighbour ids of each row.
        fanouts: Neighbours per hop (``-1`` = all).

    Returns:
        A function of the ``[B]`` seed nodes returning pyg-lib's output
        ``(row, col, node, edge, ...)``.

    Raises:
        ImportError: When pyg-lib is not installed; the message says how to install it.
    """
    try:
        import pyg_lib  # noqa: F401 - registers torch.ops.pyg
    except ImportError:
        raise ImportError(f"pyg-lib is not installed; to compare against it: {PYG_LIB_INSTALL}") from None
    from torch_geometric import typing as pyg_typing

    op = torch.ops.pyg.neighbor_sample
    fanouts = list(fanouts)
    edge_time = (None,) if pyg_typing.WITH_EDGE_TIME_NEIGHBOR_SAMPLE else ()
    edge_weight = (None,) if pyg_typing.WITH_WEIGHTED_NEIGHBOR_SAMPLE else ()
    # After the optional ones: csc, replace, directed, disjoint, temporal_strategy, return_edge_id.
    tail = (True, False, True, False, "uniform", True)

    def sample(seeds: Tensor) -> Any:
        # rowptr, col, seed, num_neighbors, node_time, [edge_time], seed_time, [edge_weight], *tail
        return op(rowptr, col, seeds, fanouts, None, *edge_time, None, *edge_weight, *tail)

    return sample


def _peer_samplers(rowptr: Tensor, col: Tensor, fanouts: Sequence[int]) -> dict[str, Callable[[Tensor], Any]]:
    """The installed peers, by name; missing ones are left out."""
    peers: dict[str, Callable[[Tensor], Any]] = {}
    for name, make in (("torch_sparse", torch_sparse_sampler), ("pyg_lib", pyg_lib_sampler)):
        try:
            peers[name] = make(rowptr, col, fanouts)
        except ImportError:
            pass
    return peers


def _sizes(name: str, out: Any) -> tuple[int, int]:
    """``(distinct nodes, edges)`` of one sampler output: gnnbench's subgraph, torch-sparse's
    ``(node, row, col, edge)`` or pyg-lib's ``(row, col, node, edge, ...)``."""
    if hasattr(out, "node"):
        return int(out.node.numel()), int(out.row.numel())
    if name == "pyg_lib":
        return int(out[2].numel()), int(out[0].numel())
    return int(out[0].numel()), int(out[1].numel())


def compare_samplers(
    spec: GraphSpec,
    *,
    batch_size: int = 1024,
    fanouts=(15, 10),
    threads: int = 2,
    rounds: int = 7,
    batches_per_round: int = 10,
    seed: int = 0,
) -> dict:
    """Seeds per second of each available sampler, interleaved round by round.

    Returns:
        A dict with the graph's size, and per sampler the median seeds/s with
        min-max over rounds, plus each peer's speed ratio (ours / peer) as a
        median and a [min, max] interval over paired rounds.
    """
    from gnnbench.sampling.labor import LaborSampleCore
    from gnnbench.sampling.neighbor import NeighborSampleCore

    torch.set_num_threads(threads)
    graph = generate(spec)
    rowptr, col = graph.rowptr, graph.edge_index[0].contiguous()
    core = NeighborSampleCore(rowptr, col, fanouts, seed=seed)
    labor = LaborSampleCore(rowptr, col, fanouts, seed=seed)
    samplers = {"gnnbench": core.sample, "gnnbench_labor": labor.sample, **_peer_samplers(rowptr, col, fanouts)}
    perm = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    batches = [perm[i * batch_size : (i + 1) * batch_size] for i in range(batches_per_round)]
    sizes: dict[str, tuple[float, float]] = {}
    for name, fn in samplers.items():  # warm-up, excluded; the batches' sizes, on the same seeds for every sampler
        for b in batches[:2]:
            fn(b)
        counted = [_sizes(name, fn(b)) for b in batches]
        sizes[name] = (statistics.mean(n for n, _ in counted), statistics.mean(e for _, e in counted))
    per_round: dict[str, list[float]] = {name: [] for name in samplers}
    for _ in range(rounds):
        for name, fn in samplers.items():
            t0 = time.perf_counter()
            for b in batches:
                fn(b)
            per_round[name].append(batch_size * len(batches) / (time.perf_counter() - t0))
    result = {
        "graph": {"nodes": graph.num_nodes, "edges": graph.num_edges, "max_degree": int(graph.deg.max())},
        "batch_size": batch_size,
        "fanouts": list(fanouts),
        "threads": threads,
        "samplers": {},
    }
    for name, values in per_round.items():
        result["samplers"][name] = {
            "seeds_per_s": statistics.median(values),
            "min": min(values),
            "max": max(values),
            "nodes_per_batch": sizes[name][0],
            "edges_per_batch": sizes[name][1],
        }
        if name != "gnnbench":
            ratios = [a / b for a, b in zip(per_round["gnnbench"], values)]
            result["samplers"][name]["speedup_of_gnnbench"] = {
                "median": statistics.median(ratios),
                "min": min(ratios),
                "max": max(ratios),
            }
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the comparison's options to ``parser`` (its own, or a ``gnnbench`` subcommand's)."""
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--avg-degree", type=float, default=20.0)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", default="15,10")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)


def run_from_args(args: argparse.Namespace) -> int:
    """Run the comparison with the options of :func:`add_arguments` and print its table; returns 0."""
    spec = GraphSpec.preset("small", num_nodes=args.nodes, avg_degree=args.avg_degree)
    r = compare_samplers(
        spec,
        batch_size=args.batch_size,
        fanouts=tuple(int(f) for f in args.fanouts.split(",")),
        threads=args.threads,
        rounds=args.rounds,
    )
    g = r["graph"]
    print(
        f"graph: {g['nodes']:,} nodes, {g['edges']:,} edges, max degree {g['max_degree']:,}; "
        f"batch {r['batch_size']}, fanouts {r['fanouts']}, {r['threads']} threads"
    )
    print(
        f"{'sampler':<16}{'seeds/s (median)':>18}{'min-max':>24}{'gnnbench speedup':>28}{'nodes/batch':>13}"
        f"{'edges/batch':>13}"
    )
    for name, s in r["samplers"].items():
        sp = s.get("speedup_of_gnnbench") or {}
        sp_txt = ratio(sp.get("median"), sp.get("min"), sp.get("max"), digits=1)
        print(
            f"{name:<16}{s['seeds_per_s']:>18,.0f}{s['min']:>12,.0f}-{s['max']:<11,.0f}{sp_txt:>28}"
            f"{s['nodes_per_batch']:>13,.0f}{s['edges_per_batch']:>13,.0f}"
        )
    print(
        "gnnbench_labor: LABOR-0 with the same per-hop budget (one variate per source vertex shared by the "
        "batch); 'gnnbench speedup' is gnnbench's neighbour sampler's seeds/s over each other sampler's"
    )
    if len(r["samplers"]) == 2:
        print(f"(no peer installed: build torch-sparse with `{TORCH_SPARSE_INSTALL}` to compare)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry: parse ``argv`` (default ``sys.argv[1:]``) and run the comparison."""
    parser = argparse.ArgumentParser(
        prog="python -m gnnbench.microbench.sampler_compare", description=__doc__.split("\n\n")[0]
    )
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
