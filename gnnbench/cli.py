"""The ``gnnbench`` command line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import CleanOptions, GraphError, GraphSpec, generate
from gnnbench.graphs.io import load_graph
from gnnbench.graphs.prepare import IndexOverflowError, prepare
from gnnbench.graphs.spec import PRESETS
from gnnbench.graphs.stats import graph_stats

__all__ = ["main", "build_parser"]


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError


def _parse_flags(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    for name in names:
        try:
            registry.get(name)
        except ValueError as exc:  # argparse shows ArgumentTypeError's message as is
            raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def _graph_layer_names() -> list[str]:
    return [o.name for o in registry.REGISTRY.values() if o.layer == "gnnbench.graphs.prepare"]


def _add_graph_args(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("graph source (generate a preset, or --load a file)")
    src.add_argument("--preset", default="small", choices=list(PRESETS),
                     help="size preset to generate (default: small)")
    src.add_argument("--load", metavar="PATH", help="load a graph from a .npz or a saved PyG Data (.pt)")
    gen = p.add_argument_group("generator overrides")
    gen.add_argument("--nodes", type=int, dest="num_nodes", help="number of nodes")
    gen.add_argument("--avg-degree", type=float, help="mean neighbours per node")
    gen.add_argument("--exponent", type=float, help="power-law exponent, in (2, 5]")
    gen.add_argument("--classes", type=int, dest="num_classes", help="number of classes")
    gen.add_argument("--feature-dim", type=int, help="feature dimension")
    gen.add_argument("--homophily", type=float, help="fraction of intra-class edges")
    gen.add_argument("--snr", type=float, dest="feature_snr", help="feature signal-to-noise ratio")
    gen.add_argument("--seed", type=int, help="random seed (default 0)")
    cl = p.add_argument_group("cleaning (for --load)")
    cl.add_argument("--no-dedupe", action="store_true", help="keep duplicate edges")
    cl.add_argument("--undirected", action="store_true", help="add the reverse of every edge")
    cl.add_argument("--self-loops", default="keep", choices=["keep", "remove", "add"],
                    help="self-loop handling (default: keep)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnnbench",
        description="Measure which GNN training optimizations pay off on your hardware and graph.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("graph", help="generate or load a graph and print its statistics",
                       description="Generate (or load) a graph, prepare it and print its statistics.")
    _add_graph_args(p)
    p.add_argument("--flags", type=_parse_flags, default=None, metavar="NAMES",
                   help="comma-separated optimizations to prepare with "
                        f"(default: the graph-layer ones: {', '.join(_graph_layer_names())})")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser("flags", help="list the registered optimizations")
    p.set_defaults(func=cmd_flags)

    p = sub.add_parser("pipeline", help="data-pipeline self-report: sampler uniformity, negative cost, batch cache",
                       description="Check the sampler's uniformity (chi-square), time negative sampling and "
                                   "show the batch cache's per-epoch hit behaviour on a graph.")
    _add_graph_args(p)
    p.add_argument("--cache-epochs", type=int, default=5, help="K for the batch-cache demonstration (default 5)")
    p.add_argument("--fanout", default="15,10", help="fanout for the batch-cache demonstration (default 15,10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=cmd_pipeline, preset="tiny")

    p = sub.add_parser("sampler-compare", help="gnnbench's neighbour sampler against torch-sparse / pyg-lib",
                       add_help=False)
    p.set_defaults(func=cmd_sampler_compare)

    p = sub.add_parser("cache", help="show or clean the batch cache")
    p.add_argument("--dir", help="cache directory (default: $GNNBENCH_CACHE_DIR or ~/.cache/gnnbench/batches)")
    p.add_argument("--clean", action="store_true", help="delete gnnbench's cached batches there")
    p.set_defaults(func=cmd_cache)
    return parser


def _graph_from_args(args: argparse.Namespace):
    if args.load:
        clean = CleanOptions(dedupe=not args.no_dedupe, to_undirected=args.undirected,
                             self_loops=args.self_loops)
        t0 = time.perf_counter()
        graph = load_graph(args.load, clean=clean, split_seed=args.seed or 0)
        return graph, {"source": args.load, "load_seconds": time.perf_counter() - t0}
    overrides = {k: getattr(args, k) for k in ("num_nodes", "avg_degree", "exponent", "num_classes",
                                               "feature_dim", "homophily", "feature_snr", "seed")}
    spec = GraphSpec.preset(args.preset, **overrides)
    graph = generate(spec)
    return graph, {"source": f"generated:{spec.name}", "spec": spec.to_dict(),
                   "generate_seconds": graph.meta["generate_seconds"]}


def cmd_graph(args: argparse.Namespace) -> int:
    graph, info = _graph_from_args(args)
    stats = graph_stats(graph)
    names = args.flags if args.flags is not None else _graph_layer_names()
    base = prepare(graph, Flags())
    flagged = prepare(graph, registry.flags_for(names))
    result = {
        **info,
        "stats": stats.to_dict(),
        "prepare": {
            "baseline_seconds": base.prepare_seconds,
            "flags": names,
            "flagged_seconds": flagged.prepare_seconds,
            "index_bytes_before": flagged.index_bytes_before,
            "index_bytes_after": flagged.index_bytes_after,
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(_format_graph_report(result))
    return 0


def _format_graph_report(r: dict) -> str:
    s = r["stats"]
    rows: list[tuple[str, str]] = [
        ("source", r["source"]),
        ("nodes", f"{s['num_nodes']:,}"),
        ("edges (directed)", f"{s['num_edges']:,}" + ("  (undirected graph)" if s["is_undirected"] else "")),
        ("features / classes", f"{s['num_features']} / {s['num_classes']}"),
        ("average degree", f"{s['avg_degree']:.2f}"),
        ("degree quantiles", "  ".join(f"{k}={v:g}" for k, v in s["degree_quantiles"].items())),
        ("max degree", f"{s['max_degree']:,}  ({s['max_degree'] / max(s['degree_quantiles']['p50'], 1):.0f}x the median)"),
        ("isolated nodes", f"{s['isolated_nodes']:,}"),
        ("tail exponent (Hill)", f"{s['hill_exponent']:.2f}"
         + (f"  (configured {r['spec']['exponent']})" if "spec" in r else "")),
        ("edge homophily", f"{s['edge_homophily']:.3f}"),
    ]
    for dtype, b in s["index_bytes"].items():
        rows.append((f"index bytes {dtype}", f"{_human_bytes(b['total'])}  (COO {_human_bytes(b['coo'])}"
                     f" + CSR offsets {_human_bytes(b['csr_rowptr'])})"))
    if "generate_seconds" in r:
        rows.append(("generation time", f"{r['generate_seconds']:.3f} s"))
    if "load_seconds" in r:
        rows.append(("load time", f"{r['load_seconds']:.3f} s"))
    p = r["prepare"]
    rows.append(("preparation (baseline)", f"{p['baseline_seconds']:.3f} s"))
    rows.append((f"preparation ({','.join(p['flags']) or 'none'})",
                 f"{p['flagged_seconds']:.3f} s; index storage {_human_bytes(p['index_bytes_before'])}"
                 f" at int64 -> {_human_bytes(p['index_bytes_after'])}"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def cmd_flags(args: argparse.Namespace) -> int:
    width = max(len(n) for n in registry.names()) + 2
    for opt in registry.REGISTRY.values():
        tags = [t for t, on in (("CUDA only", opt.requires), ("may cost accuracy", opt.costs_accuracy)) if on]
        print(f"{opt.name:<{width}}{opt.description}" + (f"  [{', '.join(tags)}]" if tags else ""))
        print(f"{'':<{width}}expected: {opt.expected_effect}")
    return 0


def _table(rows: list[dict], columns: list[tuple[str, str]]) -> str:
    """Plain-text table: ``columns`` are (key, format spec) pairs."""
    cells = [[format(r[k], f) for k, f in columns] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, (k, _) in enumerate(columns)]
    lines = ["  ".join(k.rjust(w) for (k, _), w in zip(columns, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def cmd_pipeline(args: argparse.Namespace) -> int:
    from gnnbench.sampling.report import cache_behaviour, negative_costs, uniformity_report

    graph, info = _graph_from_args(args)
    fanout = tuple(int(f) for f in args.fanout.split(","))
    flags = Flags(fanout=fanout, batch_cache_epochs=args.cache_epochs, keep_csr=True)
    result = {
        **info,
        "uniformity": uniformity_report(),
        "negatives": negative_costs(graph.link_split()),
        "batch_cache": cache_behaviour(prepare(graph, flags), flags, epochs=args.cache_epochs + 2),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"graph: {info['source']}, {graph.num_nodes:,} nodes, {graph.num_edges:,} edges\n")
    print("Sampling without replacement, chi-square against uniform over all k-subsets:")
    print(_table(result["uniformity"], [("degree", "d"), ("fanout", "d"), ("subsets", "d"), ("seen", "d"),
                                        ("draws", ",d"), ("chi2", ".1f"), ("p_value", ".3f")]))
    print("\nNegative sampling cost (median of 5 x 100k; strict = no training positive):")
    print(_table(result["negatives"], [("mode", "s"), ("strict", ""), ("ms_per_1k", ".3f"),
                                       ("ms_per_1k_min", ".3f"), ("ms_per_1k_max", ".3f"),
                                       ("rejected_fraction", ".4f")]))
    print(f"\nBatch cache, K={args.cache_epochs}, fanout {list(fanout)}:")
    print(_table(result["batch_cache"], [("epoch", "d"), ("window", "d"), ("batches", "d"), ("seconds", ".3f"),
                                         ("hits", "d"), ("misses", "d"), ("corrupt", "d"), ("cache_bytes", ",d")]))
    return 0


def cmd_sampler_compare(args: argparse.Namespace) -> int:
    from gnnbench.sampling.compare import main as compare_main

    return compare_main(args.rest)


def cmd_cache(args: argparse.Namespace) -> int:
    from gnnbench.sampling.cache import cache_size, clean_cache, default_cache_dir

    root = args.dir or default_cache_dir()
    if args.clean:
        freed = clean_cache(root)
        print(f"removed {_human_bytes(freed)} of cached batches from {root}")
    else:
        print(f"batch cache at {root}: {_human_bytes(cache_size(root))}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["sampler-compare"]:  # its options belong to gnnbench.sampling.compare
        args = argparse.Namespace(func=cmd_sampler_compare, rest=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (GraphError, IndexOverflowError, ValueError) as exc:
        print(f"gnnbench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
