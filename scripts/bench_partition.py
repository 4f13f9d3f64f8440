"""Compare the partitioners (METIS, degree buckets) on a generated graph: time, edge cut, balance, halo.

Generates the preset's graph once, partitions it with every method for every part count, and prints
one table plus the METIS / degree time ratio measured in the same run (target: degree >= 10x faster
than METIS on ``medium``). Times are wall seconds of the partitioner alone: median and minimum of
``--repeats`` runs after one untimed warm-up run (on a shared machine the noise only adds time, so
the minimum is the steadier figure); METIS runs ``--metis-repeats`` times, once by default and
without warm-up, as it is slow on big graphs and one run dwarfs first-touch costs.

    .venv/bin/python scripts/bench_partition.py --preset small --parts 2 4 [--out FILE.json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from gnnbench.atomic import write_json_atomic
from gnnbench.env import environment
from gnnbench.graphs import PRESETS, GraphSpec, generate
from gnnbench.parallel.partition import DEALS, partition

CONFIGS = [("metis", "round_robin")] + [("degree", deal) for deal in DEALS]
COLUMNS = ("method", "parts", "median s", "min s", "edge cut %", "node bal", "edge bal", "mean halo rows")


def measure(graph, num_parts: int, method: str, deal: str, repeats: int, warmup: int) -> dict:
    for _ in range(warmup):  # burn-in: first-touch allocation, thread-pool start
        partition(graph, num_parts, method, deal=deal, seed=0)
    runs = [partition(graph, num_parts, method, deal=deal, seed=0) for _ in range(repeats)]
    row = runs[-1].summary()
    row["seconds"] = statistics.median(p.seconds for p in runs)
    row["min_seconds"] = min(p.seconds for p in runs)
    row["runs_seconds"] = [p.seconds for p in runs]
    return row


def format_table(rows: list[dict]) -> str:
    cells = [
        [
            r["method"],
            str(r["parts"]),
            f"{r['seconds']:.4f}",
            f"{r['min_seconds']:.4f}",
            f"{100 * r['edge_cut_fraction']:.2f}",
            f"{r['node_balance']:.4f}",
            f"{r['edge_balance']:.4f}",
            f"{r['mean_halo_nodes']:.0f}",
        ]
        for r in rows
    ]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(COLUMNS)]
    line = lambda values: "  ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths)))
    return "\n".join([line(COLUMNS), line(["-" * w for w in widths]), *map(line, cells)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=list(PRESETS), default="small")
    parser.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    parser.add_argument(
        "--repeats",
        type=int,
        default=7,
        help="timed runs of each degree partition, after one untimed warm-up (median kept)",
    )
    parser.add_argument("--metis-repeats", type=int, default=1, help="runs of METIS (median kept)")
    parser.add_argument("--out", help="also write the rows, ratios and environment as JSON")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    graph = generate(GraphSpec.preset(args.preset))
    gen_s = time.perf_counter() - t0
    print(
        f"graph {args.preset}: {graph.num_nodes:,} nodes, {graph.num_edges:,} directed edges "
        f"(generated in {gen_s:.1f} s); torch threads {torch.get_num_threads()}",
        flush=True,
    )

    rows = []
    for k in args.parts:
        for method, deal in CONFIGS:
            repeats = args.metis_repeats if method == "metis" else args.repeats
            rows.append(measure(graph, k, method, deal, repeats, warmup=0 if method == "metis" else 1))
            print(f"  {rows[-1]['method']} parts={k}: {rows[-1]['seconds']:.3f} s", file=sys.stderr, flush=True)
    print(format_table(rows))
    ratios = {}
    for k in args.parts:
        by = {r["method"]: r for r in rows if r["parts"] == k}
        metis, degree = by["metis"], by["degree"]
        ratios[k] = {
            "median": metis["seconds"] / degree["seconds"],
            "min": metis["min_seconds"] / degree["min_seconds"],
        }
        print(
            f"parts={k}: METIS / degree time = {metis['seconds']:.3f} s / {degree['seconds']:.4f} s = "
            f"{ratios[k]['median']:.0f}x (medians), {ratios[k]['min']:.0f}x (minima)"
        )
    if args.out:
        write_json_atomic(
            args.out,
            {
                "preset": args.preset,
                "num_nodes": graph.num_nodes,
                "num_edges": graph.num_edges,
                "generate_seconds": gen_s,
                "rows": rows,
                "metis_over_degree_time": ratios,
                "command": " ".join(["scripts/bench_partition.py", *(argv or sys.argv[1:])]),
                "environment": environment("cpu"),
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
