"""Neighbour-sampler comparison: gnnbench's sampler against torch-sparse's
``neighbor_sample`` (and pyg-lib's, when installed), measured in one run.

Run: ``python -m gnnbench.sampling.compare`` (see ``--help``). torch-sparse is
not a dependency; build it locally to compare
(``pip install --no-build-isolation torch-scatter torch-sparse``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

from gnnbench.graphs import GraphSpec, generate

__all__ = ["compare_samplers", "main"]


def _peer_samplers(rowptr, col, fanouts) -> dict[str, Callable]:
    peers: dict[str, Callable] = {}
    try:
        import torch_sparse  # noqa: F401 - registers torch.ops.torch_sparse

        peers["torch_sparse"] = lambda seeds: torch.ops.torch_sparse.neighbor_sample(
            rowptr, col, seeds, list(fanouts), False, True)
    except ImportError:
        pass
    try:
        import pyg_lib  # noqa: F401

        peers["pyg_lib"] = lambda seeds: torch.ops.pyg.neighbor_sample(
            rowptr, col, seeds, list(fanouts), None, None, None, None, True, False, True, True, "uniform", True)
    except ImportError:
        pass
    return peers


def compare_samplers(spec: GraphSpec, *, batch_size: int = 1024, fanouts=(15, 10), threads: int = 2,
                     rounds: int = 7, batches_per_round: int = 10, seed: int = 0) -> dict:
    """Seeds per second of each available sampler, interleaved round by round.

    Returns:
        A dict with the graph's size, and per sampler the median seeds/s with
        min-max over rounds, plus each peer's speed ratio (ours / peer) as a
        median and a [min, max] interval over paired rounds.
    """
    from gnnbench.sampling.neighbor import NeighborSampleCore

    torch.set_num_threads(threads)
    graph = generate(spec)
    rowptr, col = graph.rowptr, graph.edge_index[0].contiguous()
    core = NeighborSampleCore(rowptr, col, fanouts, seed=seed)
    samplers = {"gnnbench": core.sample, **_peer_samplers(rowptr, col, fanouts)}
    perm = torch.randperm(graph.num_nodes, generator=torch.Generator().manual_seed(seed))
    batches = [perm[i * batch_size:(i + 1) * batch_size] for i in range(batches_per_round)]
    for fn in samplers.values():  # warm-up, excluded
        for b in batches[:2]:
            fn(b)
    per_round: dict[str, list[float]] = {name: [] for name in samplers}
    for _ in range(rounds):
        for name, fn in samplers.items():
            t0 = time.perf_counter()
            for b in batches:
                fn(b)
            per_round[name].append(batch_size * len(batches) / (time.perf_counter() - t0))
    result = {"graph": {"nodes": graph.num_nodes, "edges": graph.num_edges, "max_degree": int(graph.deg.max())},
              "batch_size": batch_size, "fanouts": list(fanouts), "threads": threads, "samplers": {}}
    for name, values in per_round.items():
        result["samplers"][name] = {"seeds_per_s": statistics.median(values), "min": min(values), "max": max(values)}
        if name != "gnnbench":
            ratios = [a / b for a, b in zip(per_round["gnnbench"], values)]
            result["samplers"][name]["speedup_of_gnnbench"] = {
                "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gnnbench.sampling.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=200_000)
    p.add_argument("--avg-degree", type=float, default=20.0)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanouts", default="15,10")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    spec = GraphSpec.preset("small", num_nodes=args.nodes, avg_degree=args.avg_degree)
    r = compare_samplers(spec, batch_size=args.batch_size, fanouts=tuple(int(f) for f in args.fanouts.split(",")),
                         threads=args.threads, rounds=args.rounds)
    g = r["graph"]
    print(f"graph: {g['nodes']:,} nodes, {g['edges']:,} edges, max degree {g['max_degree']:,}; "
          f"batch {r['batch_size']}, fanouts {r['fanouts']}, {r['threads']} threads")
    print(f"{'sampler':<14}{'seeds/s (median)':>18}{'min-max':>24}{'gnnbench speedup':>28}")
    for name, s in r["samplers"].items():
        sp = s.get("speedup_of_gnnbench")
        sp_txt = f"{sp['median']:.1f}x [{sp['min']:.1f}, {sp['max']:.1f}]" if sp else "-"
        print(f"{name:<14}{s['seeds_per_s']:>18,.0f}{s['min']:>12,.0f}-{s['max']:<11,.0f}{sp_txt:>28}")
    if len(r["samplers"]) == 1:
        print("(no peer installed: build torch-sparse with "
              "`pip install --no-build-isolation torch-scatter torch-sparse` to compare)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
