"""The ``gnnbench`` argument parser: one subcommand per command, each added by its own builder (``_add_<command>``,
listed in :data:`COMMANDS`) and bound to its function in :mod:`gnnbench.cli.commands` or
:mod:`gnnbench.cli.inspect_commands`."""

from __future__ import annotations

import argparse

import gnnbench.cli.commands as commands
import gnnbench.cli.inspect_parser as inspect_parser
from gnnbench.cli.distributed import add_distributed_args
from gnnbench.cli.options import (
    add_calibration_args,
    add_graph_args,
    add_run_args,
    parse_benches,
    parse_flags,
)
from gnnbench.measure.compare import DEFAULT_EQUIVALENCE_MARGIN
from gnnbench.measure.gate import (
    COUNT_PROCESSES,
    DEFAULT_BUDGET_SECONDS,
    DEFAULT_ROUNDS,
    DEFAULT_TIMEOUT_S,
    DESIGNS,
    DUET,
    MAX_ROUNDS,
)
from gnnbench.measure.stats import DEFAULT_REPEATS
from gnnbench.measure.stats import MIN_ROUNDS as ACCURACY_ROUNDS

__all__ = ["build_parser"]


def _margin(text: str) -> float:
    try:
        m = float(text)
    except ValueError:
        m = None
    if m is None or not 0.0 < m < 1.0:
        raise argparse.ArgumentTypeError(
            f"--equivalence-margin must be a fraction in (0, 1), e.g. 0.1 for +-10% (got {text!r})"
        )
    return m


def _accuracy_rounds(text: str) -> int:
    try:
        k = int(text)
    except ValueError:
        k = None
    if k is None or k < 2:
        raise argparse.ArgumentTypeError(
            f"--accuracy-rounds must be an integer >= 2: accuracy deltas need an interval (got {text!r})"
        )
    return k


def _int_at_least(option: str, low: int, why: str = ""):
    """An argparse type: an integer >= ``low``, refused naming ``option`` and the value."""

    def parse(text: str) -> int:
        try:
            k = int(text)
        except ValueError:
            k = None
        if k is None or k < low:
            raise argparse.ArgumentTypeError(f"{option} must be an integer >= {low}{why} (got {text!r})")
        return k

    return parse


_non_negative_int = _int_at_least("--measure", 0, " (0: measure nothing)")
_blocks = _int_at_least("--measure-blocks", 2, ": an interval needs two blocks")


def _add_run(sub: argparse._SubParsersAction) -> None:
    """``run``: one configuration measured (or the out-of-memory ladder)."""
    p = sub.add_parser(
        "run",
        help="measure one configuration: phase breakdown, accuracy, memory",
        description="Train and measure one configuration (default: the small preset, baseline "
        "flags, on the CPU) and print its phase breakdown.",
    )
    add_graph_args(p, load=True)
    add_run_args(p)
    add_distributed_args(p)
    p.add_argument(
        "--flags",
        type=parse_flags,
        default=[],
        metavar="NAMES",
        help="comma-separated optimizations to switch on (see `gnnbench flags`)",
    )
    p.add_argument("--out", help="write the result JSON here (atomically)")
    p.add_argument("--json", action="store_true", help="print the result JSON")
    p.add_argument(
        "--memory-budget",
        default=None,
        metavar="SIZE",
        help="walk the out-of-memory ladder (halve the fanout, halve the batch, fp16 features, "
        "Cluster-GCN) until a step's measured peak fits SIZE: 2GiB, 512MiB, 1.5GB or plain bytes; "
        "prints the path, exit status 1 when nothing fits",
    )
    p.set_defaults(func=commands.cmd_run)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    """``compare`` (alias ``sweep``): the baseline against each optimization, in interleaved rounds."""
    p = sub.add_parser(
        "compare",
        aliases=["sweep"],
        help="baseline vs baseline + each optimization vs all recommended, in interleaved rounds",
        description="Measure the baseline, baseline + each optimization and all recommended "
        "optimizations together, each in its own process, in --repeats interleaved "
        "rounds (round r trains with seed --seed + r); print speedups of time to "
        "a target accuracy fixed in advance (calibrated on the baseline's own seeds; a "
        "round that misses it is censored at the budget) with run-level intervals, the clocks, paired "
        "accuracy deltas and the machine's noise floor. Results are written "
        "atomically per configuration and round; rerunning resumes, reusing a result "
        "only when config, code and environment match.",
    )
    add_graph_args(p, load=True)
    add_run_args(p)
    add_distributed_args(p)
    _add_sweep_args(p)
    _add_executor_args(p)
    _add_sweep_output_args(p)
    p.set_defaults(func=commands.cmd_compare)


def _add_sweep_args(p: argparse.ArgumentParser) -> None:
    """``compare``: what the sweep measures, its rounds, its target and what is derived."""
    p.add_argument(
        "--flags",
        type=parse_flags,
        default=None,
        metavar="NAMES",
        help="comma-separated optimizations to compare, each against the baseline; join names with "
        "'+' to measure them together as one configuration, e.g. csr+sparse_agg "
        "(default: all registered)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help=f"at most this many processes per configuration, in interleaved rounds (default "
        f"{DEFAULT_REPEATS}); after 3 rounds a row whose verdict is settled receives no more "
        "(docs/statistics.md, 'Rounds that stop when decided')",
    )
    p.add_argument(
        "--no-interleave",
        action="store_true",
        help="time every row across processes only (default: an entry that does the baseline's work per step "
        "and can share a process with it is also timed against its round's baseline in that process, steps "
        "interleaved, and its time per step read from there; docs/statistics.md, 'Measure where the noise "
        "cancels')",
    )
    p.add_argument(
        "--all-rounds",
        action="store_true",
        help="give every row all --repeats rounds (no stopping rule; Holm at 5%% over the rows)",
    )
    p.add_argument(
        "--accuracy-rounds",
        type=_accuracy_rounds,
        default=ACCURACY_ROUNDS,
        metavar="K",
        help=f"rounds that train every configuration to its validation plateau and judge accuracy "
        f"(default {ACCURACY_ROUNDS}, the rounds every row receives); the later rounds, which a "
        "row receives only while its verdict is open, stop at the target and measure time to "
        "accuracy only. --accuracy-rounds equal to --repeats: every round to the plateau",
    )
    p.add_argument(
        "--equivalence-margin",
        type=_margin,
        default=DEFAULT_EQUIVALENCE_MARGIN,
        metavar="M",
        help=f"declared in sweep.json before the rounds (default {DEFAULT_EQUIVALENCE_MARGIN:g}): a row "
        "that keeps the work per step and whose steps to the target are shown within +-M of the "
        "baseline's (two one-sided tests) is judged by its time per step x the baseline's steps "
        "to the target",
    )
    p.add_argument(
        "--aa", action="store_true", help="also run the baseline against itself (A/A): the machine's noise check"
    )
    p.add_argument(
        "--no-all-recommended",
        action="store_true",
        help="leave out the row of the registry's recommended entries together (the static set)",
    )
    p.add_argument(
        "--no-best-set",
        action="store_true",
        help="after the single-entry rounds, do not measure the best set (the entries that paid at no "
        "accuracy cost, together) in rounds of its own (docs/best-set.md)",
    )
    p.add_argument(
        "--target-acc",
        type=float,
        default=None,
        help="validation target for time to accuracy (default: calibrated, see --calibration-runs)",
    )
    add_calibration_args(p)
    p.add_argument(
        "--no-derive",
        action="store_true",
        help="train every entry to the target, also those proven to keep the baseline's trajectory "
        "(default: those run short and their time to accuracy is derived from their time per "
        "step and the calibrated steps to the target)",
    )
    p.add_argument(
        "--also-measure",
        type=parse_flags,
        default=(),
        metavar="NAMES",
        help="derived entries to train to the target as well (rows '<name> (measured)'), to show "
        "the derived figure agrees with the measured one",
    )


def _add_executor_args(p: argparse.ArgumentParser) -> None:
    """``compare``: the rounds as jobs on identical machines."""
    p.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default=None,
        help="run the rounds as submitit jobs, each round whole on one machine: 'slurm' on a Slurm "
        "cluster of identical machines (the sweep folder on a shared file system), 'local' as "
        "processes here (for trying it); default: here, one round after another",
    )
    p.add_argument("--machines", type=int, default=2, help="with --executor: rounds at once (default 2)")
    p.add_argument("--slurm-partition", default=None, help="with --executor slurm: the partition")
    p.add_argument("--job-timeout", type=int, default=240, help="with --executor: a round job's limit, minutes")


def _add_sweep_output_args(p: argparse.ArgumentParser) -> None:
    """``compare``: the run order, where results go and how the runs are kept."""
    p.add_argument("--order-seed", type=int, default=0, help="seed of the per-round run order (recorded)")
    p.add_argument(
        "--out-dir",
        default=None,
        help="where per-configuration results go "
        "(default: results/runs/<date>-<preset>-<device>-<commit>/; references live in "
        "results/reference/ and are written only with an explicit --out-dir)",
    )
    p.add_argument("--no-resume", action="store_true", help="rerun configurations that already have results")
    p.add_argument(
        "--in-process",
        action="store_true",
        help="run configurations in this process (faster, but peak host memory is then shared)",
    )
    p.add_argument("--json", action="store_true", help="print the comparison rows as JSON")


def _add_diagnose(sub: argparse._SubParsersAction) -> None:
    """``diagnose``: the bottleneck and the flags to try (``--verify``: measured; ``--script``: your loop)."""
    p = sub.add_parser(
        "diagnose",
        help="locate the bottleneck (phase shares) and name the flags to try; --verify measures them",
        description="Run the quick template (a fixed number of measured steps after warm-up), "
        "print the phase breakdown, the compute share and the data wait, classify "
        "the bottleneck (rules in gnnbench.advice.rules.RULES) and list the registry "
        "entries that target it, each with the measured number behind it. "
        "--verify measures the recommendations against the baseline with "
        "compare's statistics.",
    )
    add_graph_args(p, load=True)
    add_run_args(p)
    p.add_argument(
        "--flags",
        type=parse_flags,
        default=[],
        metavar="NAMES",
        help="optimizations already switched on in the configuration to diagnose",
    )
    p.add_argument("--steps", type=int, default=100, help="measured steps of the quick template (default 100)")
    p.add_argument(
        "--measure",
        type=_non_negative_int,
        default=3,
        metavar="N",
        help="time the top N recommendations that can share this process against the baseline, steps "
        "interleaved, after an A/A pair, and print each one's measured ratio and verdict first (default 3; 0: none)",
    )
    p.add_argument(
        "--measure-blocks",
        type=_blocks,
        default=8,
        metavar="B",
        help="--measure: blocks of four interleaved steps per pair (default 8; at least 2)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="measure the top recommendations (alone, and the ones that keep accuracy together)",
    )
    p.add_argument("--top", type=int, default=3, help="recommendations --verify measures (default 3)")
    p.add_argument(
        "--repeats",
        type=int,
        default=DEFAULT_REPEATS,
        help=f"--verify: processes per configuration, interleaved (default {DEFAULT_REPEATS})",
    )
    p.add_argument("--out-dir", default=None, help="--verify: where results go (default: a fresh results/runs/ folder)")
    add_calibration_args(p)
    p.add_argument("--json", action="store_true", help="print the diagnosis (and verification) as JSON")
    p.add_argument(
        "--watch-steps",
        type=int,
        default=30,
        help="--script: steps measured after the warm-up (default 30; then 5 profiled, then it stops)",
    )
    p.add_argument("--watch-warmup", type=int, default=5, help="--script: warm-up steps left out (default 5)")
    p.add_argument(
        "--sync", action="store_true", help="--script: synchronize CUDA at every phase boundary (the breakdown mode)"
    )
    p.add_argument(
        "--verify-rounds",
        type=int,
        default=4,
        help="--script --verify: rounds every variant receives (each runs the script as it is and every "
        "open variant once; default 4)",
    )
    p.add_argument(
        "--verify-max-rounds",
        type=int,
        default=20,
        help="--script --verify: rounds at most, whatever the budget allows (default 20); a variant stops "
        "once decided (compare's stopping rule)",
    )
    p.add_argument(
        "--verify-budget",
        type=float,
        default=15.0,
        help="--script --verify: minutes the rounds may take, the combination's included (default 15; "
        "0: exactly --verify-rounds rounds)",
    )
    p.add_argument(
        "--verify-steps", type=int, default=20, help="--script --verify: measured steps per run (default 20)"
    )
    p.add_argument(
        "--verify-warmup", type=int, default=3, help="--script --verify: warm-up steps per run, left out (default 3)"
    )
    p.add_argument(
        "--workers-curve",
        action="store_true",
        help="--script --verify: also measure num_workers from 1 to the usable cores and one above, "
        "each with the intra-op threads the workers leave",
    )
    p.add_argument(
        "--wait-bound",
        type=float,
        default=300.0,
        help="--script: a loader next() waiting longer (s) ends the run with the loader's state and "
        "exit 1 (default 300)",
    )
    p.add_argument(
        "--script",
        nargs=argparse.REMAINDER,
        default=None,
        metavar="SCRIPT ARGS",
        help="diagnose your own training script, unmodified: run it under gnnbench.watch (its "
        "loaders, model calls, backward and optimizer steps timed) for --watch-steps steps, "
        "then stop it and diagnose; everything after --script goes to the script",
    )
    p.set_defaults(func=commands.cmd_diagnose)


def _add_tune(sub: argparse._SubParsersAction) -> None:
    """``tune``: the greedy search over the registry."""
    p = sub.add_parser(
        "tune",
        help="greedy search over the registry within a time budget, measured",
        description="Diagnose, then add round by round the entry with the largest significant "
        "gain (time to accuracy, else epoch time) whose accuracy cost stays within "
        "--max-acc-loss; stop when nothing pays or the budget would be exceeded; "
        "measure the final set against the baseline.",
    )
    add_graph_args(p, load=True)
    add_run_args(p)
    p.add_argument(
        "--flags",
        type=parse_flags,
        default=[],
        metavar="NAMES",
        help="optimizations already switched on in the starting configuration",
    )
    p.add_argument("--budget", type=float, default=20.0, help="wall-clock budget in minutes (default 20)")
    p.add_argument(
        "--max-acc-loss",
        type=float,
        default=0.5,
        help="largest accepted mean accuracy loss in percentage points, paired by seed (default 0.5)",
    )
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="processes per configuration per round (default 3: faster, less power than compare's 5)",
    )
    p.add_argument(
        "--candidates",
        type=parse_flags,
        default=None,
        metavar="NAMES",
        help="entries to consider (default: those targeting a bottleneck the diagnosis found)",
    )
    p.add_argument(
        "--out-dir", default=None, help="where each round's results go (default: a fresh results/runs/ folder)"
    )
    add_calibration_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=commands.cmd_tune)


def _add_regress(sub: argparse._SubParsersAction) -> None:
    """``regress``: the regression gate between two commits."""
    p = sub.add_parser(
        "regress",
        help="the regression gate: two commits timed at once, one per core (or alternating), per benchmark "
        "ratio, phase and accuracy; exit 1 on a regression",
        description="Check out BASE and HEAD side by side (temporary git worktrees; HEAD '.' is the "
        "working tree as it is), run the baseline and every registry entry that runs "
        "here for a fixed number of steps, one process per tree and round at one thread, the two trees of a "
        "round at once, each pinned to its own core (cores swapped every round; --design alternating, or "
        "fewer than two cores: one after the other, order shuffled per round), and compare them paired "
        "by round: step ratio with its interval, Holm across the set, the phase that "
        "moved, accuracy on the same seeds; setup and epoch time gated beside the "
        "step. Exit status 1 on a regression (a family-wise significant slowdown "
        "beyond max(3%, the benchmark's noise floor), or an accuracy drop beyond 1 "
        "pp) or a benchmark fine in BASE that HEAD lost; 2 when the trees cannot be "
        "compared (different dependencies) or a benchmark process crashed or timed "
        "out; 3 when no regression was seen but some benchmark could not have seen a "
        "slowdown of --sensitivity (rounds are added to those within --budget "
        "first).",
    )
    p.add_argument("base", help="the good commit (any git revision)")
    p.add_argument("head", nargs="?", default=".", help="the commit to check (default '.': the working tree)")
    _add_gate_args(p)
    p.add_argument(
        "--base-python",
        default=None,
        metavar="EXE",
        help="run the base side with this interpreter (another virtual environment: two torch or PyG "
        "versions; BASE and HEAD may then be the same commit)",
    )
    p.add_argument("--head-python", default=None, metavar="EXE", help="run the head side with this interpreter")
    p.add_argument(
        "--bisect",
        action="store_true",
        help="on a regression, binary-search BASE..HEAD (first-parent line) with the same gate over the "
        "regressed benchmarks and name the first bad commit",
    )
    p.add_argument("--out", default=None, help="write the gate's JSON here (atomically)")
    p.add_argument("--json", action="store_true", help="print the gate's JSON (for CI)")
    p.set_defaults(func=commands.cmd_regress)


def _add_gate_args(p: argparse.ArgumentParser) -> None:
    """``regress``: the benchmarks, the rounds and what the gate must be able to see."""
    p.add_argument(
        "--bench",
        type=parse_benches,
        default=None,
        metavar="NAMES",
        help="benchmarks: baseline, registry entries, micro:sampler, micro:gather, micro:aggregation "
        "(default: all that run here)",
    )
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help=f"processes per tree (default {DEFAULT_ROUNDS})")
    p.add_argument(
        "--design",
        choices=DESIGNS,
        default=DUET,
        help="how a round times the two trees: duet (default: both at once, each pinned to its own core at one "
        "thread, cores swapped every round, so a drift of the machine lands on both) or alternating (one after "
        "the other); a duet needs --threads 1 and two usable cores, else the rounds alternate and the gate says "
        "why",
    )
    p.add_argument(
        "--sensitivity",
        type=float,
        default=0.10,
        help="the step slowdown every benchmark must be able to see before 'no regression' is said "
        "(default 0.10: 10%%); a benchmark that cannot reads 'inconclusive here'",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_SECONDS,
        metavar="SECONDS",
        help="wall-clock budget of the gate: inconclusive benchmarks get extra rounds while the next "
        f"one fits (default {DEFAULT_BUDGET_SECONDS:.0f}; 0: no extra rounds)",
    )
    p.add_argument("--max-rounds", type=int, default=MAX_ROUNDS, help=f"extra rounds stop here (default {MAX_ROUNDS})")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"a benchmark process running longer is killed and the gate exits 2 (default {DEFAULT_TIMEOUT_S:.0f})",
    )
    p.add_argument("--steps", type=int, default=20, help="measured steps per benchmark (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps per benchmark (default 3)")
    p.add_argument("--threads", type=int, default=1, help="threads per process (default 1)")
    p.add_argument("--preset", default="tiny", help="graph preset (default tiny)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--order-seed", type=int, default=0, help="seed of the per-round order (recorded)")
    p.add_argument(
        "--counts",
        type=int,
        default=COUNT_PROCESSES,
        metavar="N",
        help="also count the instructions of the baseline and the micro-benchmarks under valgrind's "
        f"callgrind, N processes per tree (default {COUNT_PROCESSES}; 0: off): a count beyond its "
        "threshold is a regression whatever the machine's noise (memory stalls, waiting, threads "
        "and the GPU stay the wall clock's); where valgrind or a C compiler is missing, said so",
    )
    p.add_argument(
        "--cache-sim",
        action="store_true",
        help="--counts: simulate the caches too (first- and last-level misses beside the instructions; "
        "about twice as slow)",
    )


def _add_gpu_check(sub: argparse._SubParsersAction) -> None:
    """``gpu-check``: every flag on a GPU in one short call."""
    p = sub.add_parser(
        "gpu-check",
        help="every flag on a GPU in one short call: one table (scripts/gpu_check.sh)",
        description="Run the baseline, every registered optimization and all recommended ones on "
        "CUDA (default: the medium preset, 40 steps each after 5 warm-up, one round, in one "
        "process with the graph generated once) and print one table.",
    )
    add_graph_args(p, load=True)
    p.add_argument("--steps", type=int, default=40, help="training steps per configuration (default 40)")
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds per configuration, in one process (default 1: "
        "a first look; `compare --device cuda` measures in separate processes with intervals)",
    )
    p.add_argument("--out-dir", default="results/gpu-check", help="per-configuration results")
    p.add_argument("--device", default="cuda")
    p.set_defaults(func=commands.cmd_gpu_check, preset="medium")


def _add_profile(sub: argparse._SubParsersAction) -> None:
    """``profile``: torch.profiler's top operators and a Chrome trace."""
    p = sub.add_parser("profile", help="torch.profiler top operators and a Chrome trace of training steps")
    add_graph_args(p, load=True)
    add_run_args(p)
    p.add_argument("--flags", type=parse_flags, default=[], metavar="NAMES")
    p.add_argument("--trace", default="gnnbench-trace.json", help="Chrome trace output (default gnnbench-trace.json)")
    p.add_argument("--top", type=int, default=15, help="operators to list (default 15)")
    p.add_argument("--active-steps", type=int, default=5, help="profiled steps after 2 skipped (default 5)")
    p.set_defaults(func=commands.cmd_profile)


# one builder per command, in the order ``gnnbench --help`` lists them
COMMANDS = (
    inspect_parser.add_graph,
    _add_run,
    _add_compare,
    _add_diagnose,
    _add_tune,
    _add_regress,
    _add_gpu_check,
    _add_profile,
    inspect_parser.add_report,
    inspect_parser.add_env,
    inspect_parser.add_flags,
    inspect_parser.add_pipeline,
    inspect_parser.add_sampler_compare,
    inspect_parser.add_aggregation_compare,
    inspect_parser.add_cache,
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``gnnbench`` command; each sets ``func`` to the function that runs it."""
    parser = argparse.ArgumentParser(
        prog="gnnbench",
        description="Measure which GNN training optimizations pay off on your hardware and graph.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser
