"""Time per sampled edge of the neighbour sampler at several fanouts, on a dense power-law graph.

One hop from a frontier of nodes (16,384 by default: the size of a second hop's frontier, where the per-row
work of drawing distinct neighbours dominates the sampler), a median over repeats after a warm-up; printed per fanout as microseconds per call and nanoseconds per sampled edge. Flat
nanoseconds per edge across fanouts mean the work per row is linear in the fanout.

    python scripts/sampler_fanout.py [--nodes 50000 --avg-degree 150 --fanouts 5,15,40,100 --frontier 16384]

Run it in two checkouts (e.g. ``git worktree add``), alternating, to compare two versions of the sampler.
``--method loop`` or ``--method sorted`` forces one variant of Floyd's algorithm for rows of degree > 2k (step
by step, or with one sort; default: the sampler's own choice by ``FLOYD_LOOP_MAX_FANOUT``), to see where the
two cross.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from gnnbench.graphs import GraphSpec, generate
from gnnbench.sampling import neighbor
from gnnbench.sampling.neighbor import NeighborSampleCore

METHODS = {"auto": None, "loop": 10**9, "sorted": 0}  # FLOYD_LOOP_MAX_FANOUT for each --method


def measure(
    nodes: int, avg_degree: float, fanouts: list[int], frontier: int, repeats: int, seed: int = 0, device: str = "cpu"
) -> list[dict]:
    g = generate(GraphSpec(num_nodes=nodes, avg_degree=avg_degree, seed=seed))
    rowptr, col = g.rowptr.to(device), g.edge_index[0].contiguous().to(device)
    seeds = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(seed))[:frontier].to(device)
    sync = torch.cuda.synchronize if rowptr.is_cuda else (lambda: None)
    rows = []
    for k in fanouts:
        core = NeighborSampleCore(rowptr, col, (k,), seed=seed)
        for _ in range(3):  # warm-up
            out = core.sample(seeds)
        times = []
        for _ in range(repeats):
            sync()
            t0 = time.perf_counter()
            out = core.sample(seeds)
            sync()
            times.append(time.perf_counter() - t0)
        edges = out.edge.numel()
        median = statistics.median(times)
        rows.append({"fanout": k, "edges": edges, "us_per_call": 1e6 * median, "ns_per_edge": 1e9 * median / edges})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=50_000)
    p.add_argument("--avg-degree", type=float, default=150.0)
    p.add_argument("--fanouts", default="5,15,40,100")
    p.add_argument("--frontier", type=int, default=16_384)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    p.add_argument("--method", choices=list(METHODS), default="auto")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the sampler runs on the CSR's device)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if METHODS[a.method] is not None:
        neighbor.FLOYD_LOOP_MAX_FANOUT = METHODS[a.method]
    rows = measure(
        a.nodes, a.avg_degree, [int(k) for k in a.fanouts.split(",")], a.frontier, a.repeats, device=a.device
    )
    if a.json:
        print(json.dumps(rows))
        return
    print(f"{'fanout':>6} {'edges':>8} {'us/call':>10} {'ns/edge':>9}   (threads {torch.get_num_threads()})")
    for r in rows:
        print(f"{r['fanout']:>6} {r['edges']:>8} {r['us_per_call']:>10.0f} {r['ns_per_edge']:>9.1f}")


if __name__ == "__main__":
    main()
