"""The subcommands that compare no configurations (:mod:`gnnbench.cli.inspect_commands`, and
``sampler-compare``): one builder each, added to the parser by :func:`gnnbench.cli.parser.build_parser`."""

from __future__ import annotations

import argparse

import gnnbench.cli.inspect_commands as inspect_commands
from gnnbench.cli.options import add_graph_args, graph_layer_names, parse_flags
from gnnbench.microbench import sampler_compare as peers

__all__ = [
    "add_graph",
    "add_pipeline",
    "add_sampler_compare",
    "add_aggregation_compare",
    "add_report",
    "add_env",
    "add_flags",
    "add_cache",
]


def add_graph(sub: argparse._SubParsersAction) -> None:
    """``graph``: a graph's statistics and its preparation."""
    p = sub.add_parser(
        "graph",
        help="generate or load a graph and print its statistics",
        description="Generate (or load) a graph, prepare it and print its statistics.",
    )
    add_graph_args(p, load=True)
    p.add_argument(
        "--flags",
        type=parse_flags,
        default=None,
        metavar="NAMES",
        help="comma-separated optimizations to prepare with "
        f"(default: the graph-layer ones: {', '.join(graph_layer_names())})",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=inspect_commands.cmd_graph)


def add_report(sub: argparse._SubParsersAction) -> None:
    """``report``: the self-contained HTML report."""
    p = sub.add_parser(
        "report",
        help="write the self-contained HTML report of optimization gains",
        description="Build one HTML file (no network needed to view it) from gnnbench run "
        "results (sweep directories), pytest-benchmark JSON and asv results.",
    )
    p.add_argument(
        "runs", nargs="*", default=["results"], help="run result files or sweep directories (default: results/)"
    )
    p.add_argument(
        "--pytest-benchmark",
        action="append",
        default=[],
        metavar="JSON",
        help="a pytest-benchmark --benchmark-json file (repeatable)",
    )
    p.add_argument("--asv", default="results/asv", help="asv results directory (default results/asv)")
    p.add_argument(
        "--gate-rates",
        action="append",
        default=None,
        metavar="JSON",
        help="the regression gate's measured error rates (scripts/gate_error_rates.py's output, e.g. "
        "results/reference/gate-error-rates.json; repeatable, one table per file)",
    )
    p.add_argument(
        "--gate-runs",
        action="append",
        default=[],
        metavar="PATH",
        help="stored gate runs (gnnbench regress --out files, or a folder of them; repeatable): change "
        "points over their head step times",
    )
    p.add_argument("--out", default="results/report.html", help="output file (default results/report.html)")
    p.set_defaults(func=inspect_commands.cmd_report)


def add_env(sub: argparse._SubParsersAction) -> None:
    """``env``: device, versions and optional backends."""
    p = sub.add_parser("env", help="device, versions and optional backends")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=inspect_commands.cmd_env)


def add_flags(sub: argparse._SubParsersAction) -> None:
    """``flags``: the registered optimizations."""
    p = sub.add_parser("flags", help="list the registered optimizations")
    p.add_argument("--markdown", action="store_true", help="print the registry as docs/optimizations.md's table")
    p.add_argument("--names", action="store_true", help="print the names only, comma-separated (for --flags)")
    p.set_defaults(func=inspect_commands.cmd_flags)


def add_pipeline(sub: argparse._SubParsersAction) -> None:
    """``pipeline``: the data pipeline's self-check."""
    p = sub.add_parser(
        "pipeline",
        help="data-pipeline self-check: sampler uniformity, negative cost, batch cache",
        description="Check the sampler's uniformity (chi-square), time negative sampling and "
        "show the batch cache's per-epoch hit behaviour on a graph.",
    )
    add_graph_args(p, load=True)
    p.add_argument("--cache-epochs", type=int, default=5, help="K for the batch-cache demonstration (default 5)")
    p.add_argument("--fanout", default="15,10", help="fanout for the batch-cache demonstration (default 15,10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=inspect_commands.cmd_pipeline, preset="tiny")


def add_sampler_compare(sub: argparse._SubParsersAction) -> None:
    """``sampler-compare``: gnnbench's sampler against the installed peers."""
    p = sub.add_parser(
        "sampler-compare",
        help="gnnbench's neighbour sampler against torch-sparse / pyg-lib",
        description="Seeds per second of gnnbench's sampler and of each installed peer, "
        "interleaved round by round in one run.",
    )
    peers.add_arguments(p)
    p.set_defaults(func=peers.run_from_args)


def add_aggregation_compare(sub: argparse._SubParsersAction) -> None:
    """``aggregation-compare``: one batch's aggregation four ways."""
    p = sub.add_parser(
        "aggregation-compare",
        help="one batch's aggregation four ways (scatter, CSR built per "
        "batch, sampler-emitted CSR, prebuilt CSR), interleaved in one run",
        description="Time one GCN aggregation of one sampled batch with the per-batch CSR build "
        "included, against the sampler-emitted CSR and a prebuilt CSR product.",
    )
    add_graph_args(p, load=False)
    p.add_argument("--fanout", default="15,10,5", help="sampling fanout (default 15,10,5)")
    p.add_argument("--batch-size", type=int, default=1024, help="seed nodes (default 1024)")
    p.add_argument("--index-dtype", default="int64", choices=["int64", "int32"])
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=inspect_commands.cmd_aggregation_compare)


def add_cache(sub: argparse._SubParsersAction) -> None:
    """``cache``: the batch cache, shown or cleaned."""
    p = sub.add_parser("cache", help="show or clean the batch cache")
    p.add_argument("--dir", help="cache directory (default: $GNNBENCH_CACHE_DIR or ~/.cache/gnnbench/batches)")
    p.add_argument("--clean", action="store_true", help="delete gnnbench's cached batches there")
    p.set_defaults(func=inspect_commands.cmd_cache)
