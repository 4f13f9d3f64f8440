"""Option groups shared by the ``gnnbench`` commands, and what parsed options turn into (a spec, a config, the
graph), resolved once per command (:func:`resolve_run`, :func:`resolve_graph`) and handed on in place of ``args``."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gnnbench import registry
from gnnbench.advice.scenarios import SCENARIOS, Scenario, get_scenario
from gnnbench.flags import HOT_RANKS, Flags
from gnnbench.graphs import CleanOptions, Graph, GraphSpec
from gnnbench.graphs.spec import PRESETS
from gnnbench.models.inference import DEFAULT_CHUNK_BYTES, MIN_CHUNK_BYTES
from gnnbench.models.nets import MODELS
from gnnbench.models.tasks import TASKS
from gnnbench.training import LR_SCHEDULES, OPTIMIZERS

if TYPE_CHECKING:
    from gnnbench.graphs.source import GraphSource
    from gnnbench.training import RunConfig

__all__ = [
    "parse_flags",
    "add_graph_args",
    "add_run_args",
    "spec_from_args",
    "config_from_args",
    "resolve_run",
    "resolve_graph",
    "GraphChoice",
    "graph_layer_names",
    "parse_hot_budget",
    "parse_eval_chunk",
    "parse_size",
    "check_graph_source",
    "clean_from_args",
    "loads_graph",
    "GENERATOR_OVERRIDES",
]

_SIZE_UNITS = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_flags(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    for name in names:
        try:
            registry.combination(name)
        except ValueError as exc:  # argparse shows ArgumentTypeError's message as is
            raise argparse.ArgumentTypeError(str(exc)) from None
    return names


def parse_benches(text: str) -> list[str]:
    """``regress --bench``: registry entries (``a+b`` combinations too), ``baseline`` and the micro-benchmarks
    (``micro:sampler``, ``micro:gather``, ``micro:aggregation``)."""
    from gnnbench.measure.gate import MICRO

    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n.startswith("micro:") and n not in MICRO]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown micro-benchmark {bad[0]!r}; accepted: {', '.join(MICRO)}")
    parse_flags(",".join(n for n in names if n != "baseline" and n not in MICRO))
    if not names:
        raise argparse.ArgumentTypeError(
            f"--bench needs at least one name (baseline, a registry entry or a micro-benchmark: {', '.join(MICRO)})"
        )
    return names


def parse_size(text: str, *, option: str = "the size") -> int:
    """Bytes in ``text``: a size with its unit (``2GiB``, ``512MiB``, ``1.5GB``; units of :data:`_SIZE_UNITS`,
    any case) or plain bytes (``2147483648``).

    Raises:
        ValueError: naming ``option``, the value and the accepted forms.
    """
    t = str(text).strip().lower().replace(" ", "")
    number = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(number) :]
    try:
        value = float(number) if unit else int(number)
    except ValueError:
        value = None
    if (
        value is None
        or unit not in ("", *_SIZE_UNITS)
        or not 0 < value < float("inf")
        or (value * _SIZE_UNITS.get(unit, 1) < 1)
    ):
        raise ValueError(
            f"{option} must be a size such as 2GiB, 512MiB or 1.5GB, or plain bytes such as 2147483648 "
            f"(units {', '.join(_SIZE_UNITS)}, any case; got {text!r})"
        )
    return int(value * _SIZE_UNITS.get(unit, 1))


def parse_hot_budget(text: str) -> dict[str, float | int]:
    """``--hot-budget``: a fraction in (0, 1] of the feature rows (``0.25``) or a size (``512MiB``, ``2GB``).

    Returns the Flags fields it sets: ``{"hot_budget_fraction": f}`` or
    ``{"hot_budget_bytes": n}`` (a size replaces the fraction).
    """
    t = text.strip().lower().replace(" ", "")
    number = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = None
    if value is not None and not unit:
        if 0 < value <= 1:
            return {"hot_budget_fraction": value}
        raise argparse.ArgumentTypeError(
            f"--hot-budget: a plain number is a fraction of the feature rows in (0, 1] "
            f"(got {text!r}); give a size with its unit for bytes, e.g. 512MiB"
        )
    if value is None or unit not in _SIZE_UNITS or value <= 0:
        raise argparse.ArgumentTypeError(
            f"--hot-budget must be a fraction in (0, 1] or a size such as 512MiB or "
            f"2GB (units {', '.join(_SIZE_UNITS)}; got {text!r})"
        )
    return {"hot_budget_bytes": max(1, int(value * _SIZE_UNITS[unit]))}


def parse_smoothing(text: str) -> int:
    """``--smoothing N``: a whole number of validation points >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or str(value) != text.strip():
        raise argparse.ArgumentTypeError(
            f"--smoothing takes a whole number of validation points >= 1 (got {text!r}); 1 reads each point alone"
        )
    return value


def parse_eval_chunk(text: str) -> int:
    """``--eval-chunk``: a size with its unit (``256MiB``, ``1GB``) or plain bytes, at least 64 KiB."""
    t = text.strip().lower().replace(" ", "")
    number = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(number) :] or "b"
    try:
        value = float(number)
    except ValueError:
        value = None
    if value is None or unit not in _SIZE_UNITS or value != value:
        raise argparse.ArgumentTypeError(
            f"--eval-chunk must be a size such as 256MiB or 1GB (units {', '.join(_SIZE_UNITS)}; got {text!r})"
        )
    nbytes = int(value * _SIZE_UNITS[unit])
    if nbytes < MIN_CHUNK_BYTES:
        raise argparse.ArgumentTypeError(f"--eval-chunk must be at least 64KiB ({MIN_CHUNK_BYTES} bytes; got {text!r})")
    return nbytes


def graph_layer_names() -> list[str]:
    """The registry entries that change graph preparation."""
    return [o.name for o in registry.REGISTRY.values() if o.layer == "gnnbench.graphs.prepare"]


GENERATOR_OVERRIDES = ("num_nodes", "avg_degree", "exponent", "num_classes", "feature_dim", "homophily", "feature_snr")


def add_graph_args(p: argparse.ArgumentParser, *, load: bool) -> None:
    """Graph source options: a preset to generate, or (``load``) a user's file or a named dataset."""
    src = p.add_argument_group(
        "graph source (generate a preset"
        + ("; or measure your own graph: --load FILE or --dataset NAME)" if load else ")")
    )
    src.add_argument("--preset", default=None, choices=list(PRESETS), help="size preset to generate (default: small)")
    if load:
        src.add_argument(
            "--load",
            metavar="PATH",
            help="your graph: .npz, a saved PyG Data (.pt), or an edge list (.csv/.tsv/.txt, features "
            "and labels in .npy files beside it); see docs/your-own.md",
        )
        src.add_argument(
            "--dataset",
            metavar="NAME",
            help="a named dataset: KarateClub, FakeDataset, Planetoid:Cora, Reddit, Flickr, ... or "
            "ogbn-arxiv (needs the ogb extra); downloaded only when online",
        )
        src.add_argument(
            "--root",
            metavar="DIR",
            default=None,
            help="--dataset: its directory (default $GNNBENCH_DATA or ~/.cache/gnnbench/datasets)",
        )
    gen = p.add_argument_group("generator overrides")
    gen.add_argument("--nodes", type=int, dest="num_nodes", help="number of nodes")
    gen.add_argument("--avg-degree", type=float, help="mean neighbours per node")
    gen.add_argument("--exponent", type=float, help="power-law exponent, in (2, 5]")
    gen.add_argument("--classes", type=int, dest="num_classes", help="number of classes")
    gen.add_argument("--feature-dim", type=int, help="feature dimension")
    gen.add_argument("--homophily", type=float, help="fraction of intra-class edges")
    gen.add_argument("--snr", type=float, dest="feature_snr", help="feature signal-to-noise ratio")
    gen.add_argument(
        "--seed",
        type=int,
        help="random seed (default 0); with --load/--dataset, the seed of the split drawn when the graph has none",
    )
    if load:
        cl = p.add_argument_group("cleaning (for --load / --dataset)")
        cl.add_argument("--no-dedupe", action="store_true", help="keep duplicate edges")
        cl.add_argument("--undirected", action="store_true", help="add the reverse of every edge")
        cl.add_argument(
            "--self-loops", default="keep", choices=["keep", "remove", "add"], help="self-loop handling (default: keep)"
        )


def loads_graph(args: argparse.Namespace) -> bool:
    """Whether the options name a user's graph (``--load`` or ``--dataset``) rather than a preset."""
    return bool(getattr(args, "load", None) or getattr(args, "dataset", None))


def check_graph_source(args: argparse.Namespace) -> None:
    """Refuse options that contradict each other: two sources, or generator overrides on a loaded graph."""
    if not loads_graph(args):
        return
    if args.load and args.dataset:
        raise ValueError(f"give one graph source: --load {args.load} or --dataset {args.dataset}, not both")
    given = "--load" if args.load else "--dataset"
    if args.preset is not None:
        raise ValueError(
            f"--preset {args.preset} generates a graph; it cannot be combined with {given} "
            "(to mimic your graph with a generated one, see `gnnbench graph " + given + " ...`)"
        )
    bad = [k for k in GENERATOR_OVERRIDES if getattr(args, k, None) is not None]
    if bad:
        raise ValueError(
            f"generator overrides ({', '.join('--' + k for k in bad)}) shape generated graphs; they do "
            f"not apply to {given}"
        )
    if getattr(args, "dataset", None) is None and getattr(args, "root", None):
        raise ValueError(f"--root {args.root} is a dataset directory; it needs --dataset NAME")


def clean_from_args(args: argparse.Namespace) -> CleanOptions:
    return CleanOptions(
        dedupe=not getattr(args, "no_dedupe", False),
        to_undirected=getattr(args, "undirected", False),
        self_loops=getattr(args, "self_loops", "keep"),
    )


@dataclass(frozen=True)
class GraphChoice:
    """The graph a command's options name, resolved once per command (:func:`resolve_graph`, :func:`resolve_run`)
    and handed on in place of the options: nothing about it is kept on ``args``.

    Attributes:
        spec: The preset, or the ``--scenario``'s graph, with the generator overrides; ``None`` for a user's graph.
        name: What the options measure, for folder names: the loaded graph's label, the scenario or the preset.
        source: The user's graph (``--load`` / ``--dataset``) with its fingerprint, for each
            :class:`~gnnbench.training.config.RunConfig`; ``None`` for a preset.
        graph: That graph as opened (loaded, cleaned, fingerprinted, its prepared copy written for the sweep's
            processes): a run in this process trains on it; ``None`` for a preset.
    """

    spec: GraphSpec | None
    name: str
    source: GraphSource | None = None
    graph: Graph | None = None


def _scenario(args: argparse.Namespace) -> Scenario | None:
    return get_scenario(args.scenario) if getattr(args, "scenario", None) else None


def resolve_graph(args: argparse.Namespace) -> GraphChoice:
    """The graph the options name (:class:`GraphChoice`), its ``--scenario`` looked up and a user's graph opened.

    Raises:
        ValueError: for options that contradict each other (:func:`check_graph_source`) or a spec out of range.
        GraphError: for a user's graph that cannot be read.
    """
    return _graph_choice(args, _scenario(args))


def _graph_choice(args: argparse.Namespace, scenario: Scenario | None) -> GraphChoice:
    if not loads_graph(args):
        name = getattr(args, "scenario", None) or args.preset or "small"
        return GraphChoice(spec=_spec(args, scenario), name=name)
    from gnnbench.graphs.source import open_source

    check_graph_source(args)
    kind, location = ("file", args.load) if args.load else ("dataset", args.dataset)
    source, graph = open_source(kind, location, root=args.root, clean=clean_from_args(args), split_seed=args.seed or 0)
    return GraphChoice(spec=None, source=source, graph=graph, name=source.label.replace("@", "-"))


def spec_from_args(args: argparse.Namespace) -> GraphSpec:
    """The preset (or the ``--scenario``'s graph) with the generator overrides given on the command line."""
    return _spec(args, _scenario(args))


def _spec(args: argparse.Namespace, scenario: Scenario | None) -> GraphSpec:
    overrides = {k: getattr(args, k) for k in (*GENERATOR_OVERRIDES, "seed")}
    if scenario is None:
        return GraphSpec.preset(args.preset or "small", **overrides)
    given = {k: v for k, v in overrides.items() if v is not None}
    return GraphSpec.preset(scenario.preset, **{**scenario.spec_overrides, **given})


def add_run_args(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("run")
    r.add_argument(
        "--scenario",
        default=None,
        choices=list(SCENARIOS),
        help="a workload with a known bottleneck (sets graph, task, model, width and base flags; "
        "--batch-size, --fanout and --flags still apply): "
        + "; ".join(f"{s.name}: {s.expected}" for s in SCENARIOS.values()),
    )
    r.add_argument(
        "--task",
        default=None,
        choices=list(TASKS),
        help="node classification (accuracy) or link prediction (AUC, Hits@50); default node",
    )
    r.add_argument("--model", default=None, choices=list(MODELS), help="model (default gcn)")
    r.add_argument("--layers", type=int, default=None, help="model depth; must match the fanout's length")
    r.add_argument("--hidden", type=int, default=None, help="hidden width (default 64)")
    r.add_argument("--batch-size", type=int, default=None, help="seed nodes per batch (baseline default 1024)")
    r.add_argument("--fanout", default=None, help="baseline fanout, e.g. 10,5 (default 15,10,5)")
    r.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="training epochs (default: train to a validation plateau, see --patience and --max-epochs)",
    )
    r.add_argument("--max-epochs", type=int, default=None, help="budget in epochs of a run to a plateau (default 200)")
    r.add_argument(
        "--patience",
        type=float,
        default=None,
        help="a run to a plateau stops after this many epochs (at least 20 steps) without a new best "
        "validation metric (default 5)",
    )
    r.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="budget on the run clock (setup + training, evaluation excluded), for any run (default: "
        "none; compare calibrates one per sweep)",
    )
    r.add_argument("--max-steps", type=int, default=None, help="cap on steps per epoch")
    r.add_argument(
        "--optimizer",
        default=None,
        choices=list(OPTIMIZERS),
        help="adam (default) or sgd with --momentum; top-k compression's error feedback wants sgd "
        "(its momentum then moves into the hook: DGC's momentum correction)",
    )
    r.add_argument("--lr", type=float, default=None, help="learning rate (default 0.01)")
    r.add_argument("--momentum", type=float, default=None, help="--optimizer sgd: momentum (default 0.9)")
    r.add_argument(
        "--lr-schedule",
        default=None,
        choices=list(LR_SCHEDULES),
        help="constant (default) or cosine: epoch e of E trains at lr (1 + cos(pi e / E)) / 2",
    )
    r.add_argument("--warmup", type=int, default=None, help="warm-up steps excluded from timings (default 3)")
    r.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or auto")
    r.add_argument(
        "--no-sync",
        action="store_true",
        help="time whole steps only (no per-phase synchronization): the pure end-to-end figure",
    )
    r.add_argument(
        "--cache-dir",
        default=None,
        help="batch-cache directory shared across runs (default: a fresh temporary one per run)",
    )
    r.add_argument(
        "--hot-budget",
        type=parse_hot_budget,
        default=None,
        help="hot_cold: device budget for hot feature rows, a fraction of the rows (e.g. 0.25) or a size "
        "(e.g. 512MiB); default 0.25 of the rows, at most half the free device memory",
    )
    r.add_argument(
        "--hot-rank",
        default=None,
        choices=list(HOT_RANKS),
        help="hot_cold: choose hot rows by measured access (default; one profiled epoch) or degree",
    )
    r.add_argument(
        "--eval-chunk",
        type=parse_eval_chunk,
        default=DEFAULT_CHUNK_BYTES,
        metavar="SIZE",
        help="full-neighbourhood evaluation runs layer by layer, a chunk of target nodes at a time: "
        "memory budget of one chunk, e.g. 64MiB (default 256MiB, at least 64KiB)",
    )
    r.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help="validation every N steps, off the clock (default: 4 points per epoch in a run to a "
        "plateau, else every epoch; compare calibrates it: 10 points before the target)",
    )


def add_calibration_args(p: argparse.ArgumentParser) -> None:
    """The target of a sweep, fixed before it (gnnbench.measure.compare.calibration): compare, diagnose --verify, tune."""
    from gnnbench.measure.compare import BUDGET_FACTOR, DEFAULT_CALIBRATION_RUNS, DEFAULT_SMOOTHING, TARGET_MARGIN

    p.add_argument(
        "--calibration-runs",
        type=int,
        default=DEFAULT_CALIBRATION_RUNS,
        help=f"baseline runs on seeds no measured round uses, trained to a plateau before the "
        f"comparison; the target is their median plateau minus {100 * TARGET_MARGIN:g} pp (default "
        f"{DEFAULT_CALIBRATION_RUNS}; 0: no calibration, the target is then read from the measured "
        "baseline itself)",
    )
    p.add_argument(
        "--smoothing",
        type=parse_smoothing,
        default=DEFAULT_SMOOTHING,
        metavar="N",
        help="read the target on the mean of the last N validation points: a run stops when that mean "
        "reaches it, and its steps and time to the target are read where the mean crosses it, so one lucky "
        f"evaluation near the plateau does not end the count early (default {DEFAULT_SMOOTHING}; 1: each "
        "point alone)",
    )
    p.add_argument(
        "--budget-factor",
        type=float,
        default=BUDGET_FACTOR,
        help=f"every configuration may train for this many times the calibrated baseline's time to the "
        f"target; a round still short of it is censored there (default {BUDGET_FACTOR:g})",
    )


def config_from_args(args: argparse.Namespace, names: list[str]) -> RunConfig:
    """The :class:`~gnnbench.training.config.RunConfig` the run options describe, with ``names`` switched on
    (:func:`resolve_run`, for a caller that needs no more than the configuration)."""
    return resolve_run(args, names)[0]


def resolve_run(args: argparse.Namespace, names: list[str]) -> tuple[RunConfig, GraphChoice]:
    """A command's run options resolved once: the :class:`~gnnbench.training.config.RunConfig` they describe,
    with ``names`` switched on, and the graph it trains on (:class:`GraphChoice`). The ``--scenario`` is looked
    up once and a user's graph opened once; the command hands on these two, not ``args``.

    Raises:
        ValueError: for an option out of range or options that contradict each other (named, with the value).
        GraphError: for a user's graph that cannot be read.
    """
    from gnnbench.training import RunConfig

    scenario = _scenario(args)
    base = _base_flags(args, scenario)
    # given on the command line > the scenario's > the defaults
    defaults = {"task": "node", "model": "gcn", "hidden": 64, "epochs": None, "warmup": 3}
    if scenario:
        defaults.update(
            task=scenario.task,
            model=scenario.model,
            hidden=scenario.hidden,
            epochs=scenario.epochs,
            warmup=scenario.warmup_steps,
        )
    run = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in defaults.items()}
    # the optimizer options given; the rest keep RunConfig's defaults
    optimizer = {
        k: getattr(args, k)
        for k in ("optimizer", "lr", "momentum", "lr_schedule")
        if getattr(args, k, None) is not None
    }
    stopping = {
        k: getattr(args, k) for k in ("max_epochs", "patience", "max_seconds") if getattr(args, k, None) is not None
    }
    if "momentum" in optimizer and optimizer.get("optimizer", RunConfig.optimizer) != "sgd":
        raise ValueError(
            f"--momentum {optimizer['momentum']} applies to --optimizer sgd only "
            f"(got optimizer {optimizer.get('optimizer', RunConfig.optimizer)!r}); Adam has no momentum"
        )
    chosen = _graph_choice(args, scenario)
    if chosen.source is not None and run["task"] == "link" and chosen.source.num_edges == 0:
        raise ValueError(f"{chosen.source.location} has no edges: link prediction needs edges to hold out and predict")
    config = RunConfig(
        spec=chosen.spec,
        source=chosen.source,
        flags=registry.flags_for(names, Flags.from_dict(base)),
        task=run["task"],
        model=run["model"],
        hidden=run["hidden"],
        num_layers=args.layers,
        epochs=run["epochs"],
        max_steps_per_epoch=args.max_steps,
        warmup_steps=run["warmup"],
        seed=args.seed or 0,
        **optimizer,
        **stopping,
        device=args.device,
        sync_phases=not args.no_sync,
        cache_dir=args.cache_dir,
        eval_every=args.eval_every,
        eval_chunk_bytes=getattr(args, "eval_chunk", DEFAULT_CHUNK_BYTES),
        smoothing=getattr(args, "smoothing", 1),  # the commands that read a target: --smoothing
    )
    return config, chosen


def _base_flags(args: argparse.Namespace, scenario: Scenario | None) -> dict:
    """The base flags: the scenario's, with ``--batch-size``, ``--fanout`` and the hot-cold options given."""
    base = scenario.flags.to_dict() if scenario else {}
    if args.batch_size is not None:
        base["batch_size"] = args.batch_size
    if args.fanout:
        try:
            base["fanout"] = tuple(int(k) for k in args.fanout.split(","))
        except ValueError:
            raise ValueError(f"--fanout must be comma-separated integers, e.g. 15,10 (got {args.fanout!r})") from None
    if getattr(args, "hot_budget", None):
        base.update(args.hot_budget)
    if getattr(args, "hot_rank", None):
        base["hot_rank"] = args.hot_rank
    return base


def gate_options(args: argparse.Namespace) -> Any:
    """``regress``'s arguments as the gate's options (:class:`gnnbench.measure.gate.GateOptions`), built once: what
    the run, its rounds and every bisection probe use."""
    from gnnbench.measure.gate import GateOptions

    pythons = None
    if args.base_python or args.head_python:
        pythons = (args.base_python or sys.executable, args.head_python or sys.executable)
    return GateOptions(
        preset=args.preset,
        warmup=args.warmup,
        device=args.device,
        bench=tuple(args.bench) if args.bench is not None else None,
        steps=args.steps,
        rounds=args.rounds,
        threads=args.threads,
        order_seed=args.order_seed,
        sensitivity=args.sensitivity,
        budget_seconds=None if args.budget <= 0 else args.budget,
        max_rounds=args.max_rounds,
        timeout=args.timeout,
        pythons=pythons,
        counts=args.counts,
        cache_sim=args.cache_sim,
        design=args.design,
    )
