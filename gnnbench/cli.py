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


def _spec_from_args(args: argparse.Namespace) -> GraphSpec:
    """The preset with the generator overrides given on the command line."""
    overrides = {k: getattr(args, k) for k in ("num_nodes", "avg_degree", "exponent", "num_classes",
                                               "feature_dim", "homophily", "feature_snr", "seed")}
    return GraphSpec.preset(args.preset, **overrides)


def _add_run_args(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("run")
    r.add_argument("--task", default="node", choices=["node", "link"],
                   help="node classification (accuracy) or link prediction (AUC, Hits@50); default node")
    r.add_argument("--model", default="gcn", choices=["gcn", "sage"], help="model (default gcn)")
    r.add_argument("--layers", type=int, default=None, help="model depth; must match the fanout's length")
    r.add_argument("--hidden", type=int, default=64, help="hidden width (default 64)")
    r.add_argument("--batch-size", type=int, default=None, help="seed nodes per batch (baseline default 1024)")
    r.add_argument("--fanout", default=None, help="baseline fanout, e.g. 10,5 (default 15,10,5)")
    r.add_argument("--epochs", type=int, default=2, help="training epochs (default 2)")
    r.add_argument("--max-steps", type=int, default=None, help="cap on steps per epoch")
    r.add_argument("--warmup", type=int, default=3, help="warm-up steps excluded from timings (default 3)")
    r.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    r.add_argument("--no-sync", action="store_true",
                   help="time whole steps only (no per-phase synchronization): the pure end-to-end figure")
    r.add_argument("--cache-dir", default=None, help="batch-cache directory")


def _config_from_args(args: argparse.Namespace, names: list[str]):
    from gnnbench.runner import RunConfig

    if args.load:
        raise ValueError("--load is not supported by run/compare yet: they measure generated graphs "
                         "(use `gnnbench graph --load` for a file's statistics)")
    spec = _spec_from_args(args)
    base = {}
    if args.batch_size is not None:
        base["batch_size"] = args.batch_size
    if args.fanout:
        try:
            base["fanout"] = tuple(int(k) for k in args.fanout.split(","))
        except ValueError:
            raise ValueError(f"--fanout must be comma-separated integers, e.g. 15,10 (got {args.fanout!r})") from None
    return RunConfig(spec=spec, flags=registry.flags_for(names, Flags(**base)), task=args.task, model=args.model,
                     num_layers=args.layers,
                     hidden=args.hidden, epochs=args.epochs, max_steps_per_epoch=args.max_steps,
                     warmup_steps=args.warmup, seed=args.seed or 0, device=args.device,
                     sync_phases=not args.no_sync, cache_dir=args.cache_dir)


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

    p = sub.add_parser("run", help="measure one configuration: phase breakdown, accuracy, memory",
                       description="Train and measure one configuration (default: the small preset, baseline "
                                   "flags, on the CPU) and print its phase breakdown.")
    _add_graph_args(p)
    _add_run_args(p)
    p.add_argument("--flags", type=_parse_flags, default=[], metavar="NAMES",
                   help="comma-separated optimizations to switch on (see `gnnbench flags`)")
    p.add_argument("--out", help="write the result JSON here (atomically)")
    p.add_argument("--json", action="store_true", help="print the result JSON")
    p.set_defaults(func=cmd_run)

    for name in ("compare", "sweep"):
        p = sub.add_parser(name, help="baseline vs baseline + each optimization vs all recommended"
                           + (" (alias of compare)" if name == "sweep" else ""),
                           description="Measure the baseline, baseline + each optimization and all recommended "
                                       "optimizations together; print speedups with intervals and accuracy deltas. "
                                       "Results are written atomically per configuration; rerunning resumes.")
        _add_graph_args(p)
        _add_run_args(p)
        p.add_argument("--flags", type=_parse_flags, default=None, metavar="NAMES",
                       help="optimizations to compare (default: all registered)")
        p.add_argument("--seeds", default="0", help="comma-separated seeds (accuracy spread across seeds)")
        p.add_argument("--out-dir", default=None, help="where per-configuration results go "
                       "(default: results/compare-<preset>-<device>)")
        p.add_argument("--no-resume", action="store_true", help="rerun configurations that already have results")
        p.add_argument("--in-process", action="store_true", help="run configurations in this process (faster, "
                       "but peak host memory is then shared)")
        p.add_argument("--json", action="store_true", help="print the comparison rows as JSON")
        p.set_defaults(func=cmd_compare)

    p = sub.add_parser("gpu-check", help="every flag on a GPU in one short call: one table (scripts/gpu_check.sh)",
                       description="Run the baseline, every registered optimization and all recommended ones on "
                                   "CUDA (default: the medium preset, 40 steps each after 5 warm-up, in one "
                                   "process with the graph generated once) and print one table.")
    _add_graph_args(p)
    p.add_argument("--steps", type=int, default=40, help="training steps per configuration (default 40)")
    p.add_argument("--out-dir", default="results/gpu-check", help="per-configuration results")
    p.add_argument("--device", default="cuda")
    p.set_defaults(func=cmd_gpu_check, preset="medium")

    p = sub.add_parser("profile", help="torch.profiler top operators and a Chrome trace of training steps")
    _add_graph_args(p)
    _add_run_args(p)
    p.add_argument("--flags", type=_parse_flags, default=[], metavar="NAMES")
    p.add_argument("--trace", default="gnnbench-trace.json", help="Chrome trace output (default gnnbench-trace.json)")
    p.add_argument("--top", type=int, default=15, help="operators to list (default 15)")
    p.add_argument("--active-steps", type=int, default=5, help="profiled steps after 2 skipped (default 5)")
    p.set_defaults(func=cmd_profile)

    p = sub.add_parser("report", help="write the self-contained HTML report of optimization gains",
                       description="Build one HTML file (no network needed to view it) from gnnbench run "
                                   "results (sweep directories), pytest-benchmark JSON and asv results.")
    p.add_argument("runs", nargs="*", default=["results"],
                   help="run result files or sweep directories (default: results/)")
    p.add_argument("--pytest-benchmark", action="append", default=[], metavar="JSON",
                   help="a pytest-benchmark --benchmark-json file (repeatable)")
    p.add_argument("--asv", default="results/asv", help="asv results directory (default results/asv)")
    p.add_argument("--out", default="results/report.html", help="output file (default results/report.html)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("env", help="device, versions and optional backends")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_env)

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
    spec = _spec_from_args(args)
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


def _progress_bar(desc: str):
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit="step", file=sys.stderr, leave=False, disable=None)

    def update(step: int, total: int) -> None:
        if total and bar.total != total:
            bar.total = total
        bar.n = step
        bar.refresh()

    return bar, update


def _format_accuracy(acc: dict) -> str:
    extra = "".join(f", {k} {v:.4f}" for k, v in acc.items() if "hits" in k)
    return (f"accuracy   {acc.get('metric', 'accuracy')}: val {acc['val']:.4f}, test {acc['test']:.4f}{extra} "
            "(full-neighbourhood evaluation)")


def format_run(r: dict) -> str:
    """Human-readable phase breakdown of one run result."""
    if r["status"] != "ok":
        return "unavailable:\n" + "\n".join(f"  {k}: {v}" for k, v in r["unavailable"].items())
    cfg = r["config"]
    step = r["step_seconds"]
    lines = [
        f"graph      {cfg['spec']['name']}: {r['graph']['num_nodes']:,} nodes, {r['graph']['num_edges']:,} edges "
        f"(generated in {r['graph']['generate_seconds']:.2f} s, prepared in {r['graph']['prepare_seconds']:.3f} s, "
        f"pipeline set up in {r['graph']['setup_seconds']:.2f} s)",
        f"model      {cfg['model']}, {len(cfg['flags']['fanout'])} layers, fanout {cfg['flags']['fanout']}, "
        f"device {r['environment']['device']} ({r['environment']['device_name']}), {r['environment']['threads']} threads",
        f"flags      {', '.join(f'{k}={v}' for k, v in Flags.from_dict(cfg['flags']).changed().items()) or 'baseline'}",
        f"steps      {r['steps']['measured']} measured after {r['steps']['warmup']} warm-up; timing mode {r['timing_mode']}",
        "",
        f"{'phase':<10}{'median ms':>11}{'IQR ms':>18}{'share':>8}",
    ]
    med = step["median"]
    for p, v in r["phases"].items():
        share = v["median"] / med if med else float("nan")
        lines.append(f"{p:<10}{1e3 * v['median']:>11.2f}{1e3 * v['q1']:>9.2f}-{1e3 * v['q3']:<8.2f}{share:>8.1%}")
    lines.append(f"{'step':<10}{1e3 * med:>11.2f}{1e3 * step['q1']:>9.2f}-{1e3 * step['q3']:<8.2f}"
                 f"   (min {1e3 * step['min']:.2f}, max {1e3 * step['max']:.2f})")
    lines.append("")
    def pct(x):
        return "n/a" if x is None else f"{x:.1%}"
    busy = pct(r["device_busy_fraction"]) if r["device_busy_fraction"] is not None else f"n/a ({r['device_busy_reason']})"
    lines += [
        f"data wait  {pct(r['data_wait_fraction'])} of a step; compute {pct(r['compute_fraction'])}; device busy {busy}",
        "epochs     " + ", ".join(f"{e:.2f} s" for e in r["epoch_seconds"]) + f"; evaluation {r['eval_seconds']:.2f} s",
        _format_accuracy(r["accuracy"]),
        f"transfer   {_human_bytes(r['transfer']['bytes_h2d_per_batch'])} host->device per batch",
        f"memory     host peak {_human_bytes(r['memory']['host_peak_bytes'])}"
        + (f", device peak {_human_bytes(r['memory']['device_peak_bytes'])}" if r["memory"]["device_peak_bytes"] else ""),
        f"overhead   instrumentation {pct(r['instrumentation_overhead_fraction'])} of a step",
    ]
    if r.get("compile"):
        c = r["compile"]
        lines.append(f"compile    first step {c['first_step_seconds']:.2f} s (~{c['estimated_compile_seconds']:.2f} s "
                     f"compiling), {c['unique_graphs']} graphs, {c['recompilations']} recompilations")
    for w in r.get("warnings", []):
        lines.append(f"WARNING    {w}")
    if r.get("batch_cache"):
        b = r["batch_cache"]
        lines.append(f"cache      {b['hits']} hits, {b['misses']} misses, {b['corrupt']} corrupt entries rejected")
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from gnnbench.runner import run

    config = _config_from_args(args, args.flags)
    bar, update = _progress_bar("training")
    try:
        result = run(config, out=args.out, progress=update)
    finally:
        bar.close()
    print(json.dumps(result, indent=1, default=str) if args.json else format_run(result))
    return 0


def format_compare(rows: list[dict]) -> str:
    head = f"{'configuration':<20}{'step ms':>9}  {'speedup [95% CI]':<22}{'test acc':>9}{'acc delta':>16}  note"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['label']:<20}{'-':>9}  {'-':<22}{'-':>9}{'-':>16}  {r['status']}: {r['reason']}")
            continue
        sp = f"{r['speedup']:.2f}x [{r['speedup_low']:.2f}, {r['speedup_high']:.2f}]"
        note = "" if r["label"] == "baseline" else ("" if r["significant"] else "no significant difference")
        delta = f"{r['acc_delta'] * 100:+.2f} pp" + (f" ±{r['acc_delta_spread'] * 50:.2f}" if r["seeds"] > 1 else "")
        lines.append(f"{r['label']:<20}{r['step_ms']:>9.1f}  {sp:<22}{r['test_acc']:>9.4f}{delta:>16}  {note}")
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    from gnnbench.sweep import compare_rows, run_sweep, sweep_entries

    base = _config_from_args(args, [])
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    entries = sweep_entries(base, args.flags, seeds=seeds)
    out_dir = args.out_dir or f"results/compare-{args.preset}-{base.device.replace(':', '')}"
    from tqdm import tqdm

    bar = tqdm(total=len(entries), desc="configurations", unit="run", file=sys.stderr, disable=None)

    def progress(done, total, entry, status):
        bar.n = done
        bar.set_postfix_str(f"{entry.label}: {status}")
        bar.refresh()

    try:
        results = run_sweep(entries, out_dir, isolate=not args.in_process, resume=not args.no_resume,
                            progress=progress)
    finally:
        bar.close()
    rows = compare_rows(results)
    print(json.dumps(rows, indent=1, default=str) if args.json else format_compare(rows))
    print(f"\nresults: {out_dir}", file=sys.stderr)
    return 0


def cmd_gpu_check(args: argparse.Namespace) -> int:
    import time as _time

    from gnnbench.env import environment, resolve_device
    from gnnbench.runner import RunConfig
    from gnnbench.sweep import compare_rows, run_sweep, sweep_entries

    device = resolve_device(args.device)
    base = RunConfig(spec=_spec_from_args(args), device=str(device), epochs=1,
                     max_steps_per_epoch=args.steps, warmup_steps=5)
    entries = sweep_entries(base, None)
    env = environment(device)
    print(f"gpu-check: {env['device_name']}, torch {env['torch']}, PyG {env['torch_geometric']}, "
          f"preset {args.preset}, {args.steps} steps per configuration", flush=True)
    t0 = _time.perf_counter()

    def progress(done, total, entry, status):
        if status != "running":
            print(f"  [{done}/{total}] {entry.label}: {status} ({_time.perf_counter() - t0:.0f} s)", flush=True)

    results = run_sweep(entries, args.out_dir, isolate=False, resume=False, progress=progress)
    rows = compare_rows(results)
    print()
    head = f"{'flag':<20}{'step ms':>9}  {'speedup [95% CI]':<22}{'acc delta':>11}{'GPU busy':>10}{'H2D/batch':>12}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        if r["status"] != "ok":
            print(f"{r['label']:<20}{'-':>9}  {'-':<22}{'-':>11}{'-':>10}{'-':>12}  {r['status']}: {r['reason']}")
            continue
        sp = f"{r['speedup']:.2f}x [{r['speedup_low']:.2f}, {r['speedup_high']:.2f}]"
        busy = "n/a" if r["device_busy"] is None else f"{r['device_busy']:.0%}"
        note = "" if r["label"] == "baseline" or r["significant"] else "no significant difference"
        print(f"{r['label']:<20}{r['step_ms']:>9.1f}  {sp:<22}{r['acc_delta'] * 100:>+9.2f}pp{busy:>10}"
              f"{_human_bytes(r['h2d_bytes_per_batch']):>12}  {note}")
    print(f"\ntotal {_time.perf_counter() - t0:.0f} s; results in {args.out_dir}")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from gnnbench.runner import run

    config = _config_from_args(args, args.flags)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if config.device.startswith("cuda") else [])
    prof = profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=args.active_steps),
                   on_trace_ready=lambda p: p.export_chrome_trace(args.trace))
    import dataclasses

    config = dataclasses.replace(config, epochs=1, max_steps_per_epoch=args.active_steps + 2)
    result = run(config, profiler=prof)
    if result["status"] != "ok":
        print(format_run(result))
        return 1
    sort = "self_cuda_time_total" if torch.cuda.is_available() and config.device.startswith("cuda") else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=args.top))
    print(f"Chrome trace: {args.trace} (open in chrome://tracing or https://ui.perfetto.dev)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from gnnbench.report import build_report, load_inputs

    inputs = load_inputs(runs=args.runs, pytest_benchmark=args.pytest_benchmark, asv_results=args.asv)
    path = build_report(inputs, args.out)
    asv_commits = len({d["commit_hash"] for d in inputs.asv["results"]}) if inputs.asv else 0
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB): {len(inputs.runs)} run results, "
          f"{len(inputs.pytest_benchmarks)} pytest-benchmark files, asv results for {asv_commits} commit(s)")
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
