"""The ``gnnbench`` commands that compare no configurations: a graph's statistics (``graph``), the data
pipeline's self-check (``pipeline``), one batch's aggregation four ways (``aggregation-compare``), the HTML
report, the environment, the registry (``flags``) and the batch cache. Each turns parsed options into one library
call and prints through :mod:`gnnbench.cli.tables`."""

from __future__ import annotations

import argparse
import json
import sys

from gnnbench import registry
from gnnbench.cli.options import check_graph_source, clean_from_args, graph_layer_names, spec_from_args
from gnnbench.cli.tables import format_graph_report, registry_markdown, table
from gnnbench.flags import Flags
from gnnbench.graphs import generate
from gnnbench.graphs.prepare import prepare
from gnnbench.graphs.stats import graph_stats
from gnnbench.text import human_bytes

__all__ = ["cmd_graph", "cmd_pipeline", "cmd_aggregation_compare", "cmd_report", "cmd_env", "cmd_flags", "cmd_cache"]


def _graph_from_args(args: argparse.Namespace):
    """The graph the options name, read directly (no prepared copy: these commands measure no sweep); a loaded
    graph comes with its load time, the peak memory the load added and what was substituted for missing parts."""
    check_graph_source(args)
    if getattr(args, "load", None) or getattr(args, "dataset", None):
        from gnnbench.graphs.io import measure_load

        graph, seconds, peak = measure_load(
            args.load or args.dataset,
            clean=clean_from_args(args),
            split_seed=args.seed or 0,
            root=getattr(args, "root", None),
        )
        info = {
            "source": args.load or f"dataset:{args.dataset}",
            "load_seconds": seconds,
            "load_peak_bytes": peak,
            "graph_bytes": graph.nbytes(),
        }
        for key in ("notes", "substituted"):
            if graph.meta.get(key):
                info[key] = graph.meta[key]
        from gnnbench.graphs.twin import closest_preset

        info["twin"] = closest_preset(graph)
        return graph, info
    spec = spec_from_args(args)
    graph = generate(spec)
    return graph, {
        "source": f"generated:{spec.name}",
        "spec": spec.to_dict(),
        "generate_seconds": graph.meta["generate_seconds"],
    }


def cmd_graph(args: argparse.Namespace) -> int:
    graph, info = _graph_from_args(args)
    names = args.flags if args.flags is not None else graph_layer_names()
    base = prepare(graph, Flags())
    flagged = prepare(graph, registry.flags_for(names))
    result = {
        **info,
        "stats": graph_stats(graph).to_dict(),
        "prepare": {
            "baseline_seconds": base.prepare_seconds,
            "flags": names,
            "flagged_seconds": flagged.prepare_seconds,
            "index_bytes_before": flagged.index_bytes_before,
            "index_bytes_after": flagged.index_bytes_after,
        },
    }
    print(json.dumps(result, indent=2) if args.json else format_graph_report(result))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from gnnbench.report import build_report, load_inputs

    try:
        inputs = load_inputs(
            runs=args.runs,
            pytest_benchmark=args.pytest_benchmark,
            asv_results=args.asv,
            gate_rates=args.gate_rates,
            gate_runs=args.gate_runs,
        )
    except ValueError as exc:
        print(f"gnnbench report: {exc}", file=sys.stderr)
        return 2
    path = build_report(inputs, args.out)
    asv_commits = len({d["commit_hash"] for d in inputs.asv["results"]}) if inputs.asv else 0
    print(
        f"wrote {path} ({human_bytes(path.stat().st_size)}): {len(inputs.runs)} run results, "
        f"{len(inputs.pytest_benchmarks)} pytest-benchmark files, asv results for {asv_commits} commit(s)"
    )
    return 0


def cmd_env(args: argparse.Namespace) -> int:
    import torch

    from gnnbench.env import environment
    from gnnbench.sampling.sampler import native_backend_status

    info = environment("cuda" if torch.cuda.is_available() else "cpu")
    info["native_sampler"] = native_backend_status() or "available"
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    for k, v in info.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={'yes' if b else 'no'}" for a, b in v.items())
        print(f"{k:<18} {v}")
    return 0


def cmd_flags(args: argparse.Namespace) -> int:
    if args.markdown:
        print(registry_markdown())
        return 0
    if args.names:
        print(",".join(registry.names()))
        return 0
    width = max(len(n) for n in registry.names()) + 2
    for opt in registry.REGISTRY.values():
        tags = [
            t
            for t, on in (
                ("CUDA only", opt.requires),
                ("may cost accuracy", opt.costs_accuracy),
                (f"{opt.task} task only", len(opt.tasks) == 1),
                ("changes the work per step", opt.changes_work),
            )
            if on
        ]
        print(f"{opt.name:<{width}}{opt.description}" + (f"  [{', '.join(tags)}]" if tags else ""))
        print(f"{'':<{width}}expected: {opt.expected_effect}")
    return 0


def cmd_pipeline(args: argparse.Namespace) -> int:
    from gnnbench.microbench.pipeline_check import cache_behaviour, negative_costs, uniformity_report

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
    print(
        table(
            result["uniformity"],
            [
                ("degree", "d"),
                ("fanout", "d"),
                ("subsets", "d"),
                ("seen", "d"),
                ("draws", ",d"),
                ("chi2", ".1f"),
                ("p_value", ".3f"),
            ],
        )
    )
    print("\nNegative sampling cost (median of 5 x 100k; strict = no training positive):")
    print(
        table(
            result["negatives"],
            [
                ("mode", "s"),
                ("strict", ""),
                ("ms_per_1k", ".3f"),
                ("ms_per_1k_min", ".3f"),
                ("ms_per_1k_max", ".3f"),
                ("rejected_fraction", ".4f"),
            ],
        )
    )
    print(f"\nBatch cache, K={args.cache_epochs}, fanout {list(fanout)}:")
    print(
        table(
            result["batch_cache"],
            [
                ("epoch", "d"),
                ("window", "d"),
                ("batches", "d"),
                ("seconds", ".3f"),
                ("hits", "d"),
                ("misses", "d"),
                ("corrupt", "d"),
                ("cache_bytes", ",d"),
            ],
        )
    )
    return 0


def cmd_aggregation_compare(args: argparse.Namespace) -> int:
    from gnnbench.microbench.aggregation_compare import MODES, aggregation_ratios

    r = aggregation_ratios(
        spec_from_args(args),
        fanout=tuple(int(k) for k in args.fanout.split(",")),
        batch_size=args.batch_size,
        index_dtype=args.index_dtype,
        rounds=args.rounds,
    )
    if args.json:
        print(json.dumps(r, indent=1))
        return 0
    b = r["batch"]
    print(
        f"one GCN aggregation of a sampled batch: {b['nodes']:,} nodes, {b['edges']:,} edges, F={b['features']}, "
        f"{b['index_dtype']}; {r['rounds']} interleaved rounds, {r['threads']} threads"
    )
    rows = [
        {
            "mode": m,
            "median_ms": r["median_ms"][m],
            "x_prebuilt": r["vs_prebuilt"][m]["median"],
            "speedup_vs_scatter": r["speedup_over_scatter"][m]["median"],
            "range": f"[{r['speedup_over_scatter'][m]['min']:.2f}, {r['speedup_over_scatter'][m]['max']:.2f}]",
        }
        for m in MODES
    ]
    print(
        table(
            rows,
            [("mode", "s"), ("median_ms", ".2f"), ("x_prebuilt", ".2f"), ("speedup_vs_scatter", ".2f"), ("range", "s")],
        )
    )
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from gnnbench.sampling.cache import cache_size, clean_cache, default_cache_dir

    root = args.dir or default_cache_dir()
    if args.clean:
        freed = clean_cache(root)
        print(f"removed {human_bytes(freed)} of cached batches from {root}")
    else:
        print(f"batch cache at {root}: {human_bytes(cache_size(root))}")
    return 0
