"""The ``gnnbench`` commands that train and compare configurations: ``run``, ``compare``, ``diagnose``,
``tune``, ``regress``, ``gpu-check`` and ``profile``. Each parses its options, calls the library function that
does the work and prints through :mod:`gnnbench.cli.tables` (the progress it shows meanwhile:
:mod:`gnnbench.cli.progress`); the commands that compare no configurations are :mod:`.inspect_commands`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from gnnbench.cli.distributed import run_distributed, with_nproc
from gnnbench.cli.options import config_from_args, parse_size, resolve_graph, resolve_run
from gnnbench.cli.progress import RunLines, SweepLines, training_bar
from gnnbench.cli.tables import GPU_COLUMNS, format_compare, format_run

__all__ = ["cmd_run", "cmd_compare", "cmd_diagnose", "cmd_tune", "cmd_regress", "cmd_gpu_check", "cmd_profile"]


def cmd_run(args: argparse.Namespace) -> int:
    from gnnbench.measure.run import run

    if args.memory_budget is not None:
        return _memory_ladder(args, parse_size(args.memory_budget, option="--memory-budget"))
    config, chosen = resolve_run(args, args.flags)
    config = with_nproc(config, args)
    if config.nproc > 1:  # torchrun ranks (gnnbench.measure.run.launch)
        return run_distributed(config, args)
    bar, update = training_bar("training")
    try:
        result = run(config, out=args.out, progress=update, graph=chosen.graph)
    finally:
        bar.close()
    print(json.dumps(result.to_dict(), indent=1, default=str) if args.json else format_run(result))
    if result.status == "unavailable":  # refused here, with the reason (format_run printed it)
        why = "; ".join(f"{k}: {v}" for k, v in (result.unavailable or {}).items())
        print(f"gnnbench run: this configuration cannot run here: {why}", file=sys.stderr)
        return 2
    if result.status != "ok":
        print(f"gnnbench run: the run failed: {result.error}", file=sys.stderr)
        return 1
    return 0


def _failures(results, command: str) -> int:
    """1 (and the failed runs on stderr) when a measured run of ``results`` failed, else 0: an entry that
    cannot run here is reported as unavailable and is not a failure."""
    failed = results.failed()
    for line in failed:
        print(f"gnnbench {command}: run failed: {line}", file=sys.stderr)
    return 1 if failed else 0


def _memory_ladder(args: argparse.Namespace, budget: int) -> int:
    """``run --memory-budget``: the out-of-memory ladder's path (:mod:`gnnbench.advice.ladder`); 1 when nothing fits."""
    from gnnbench.advice.ladder import walk
    from gnnbench.atomic import write_json_atomic
    from gnnbench.cli.tables import format_ladder

    config = config_from_args(args, args.flags)
    result = walk(config, budget, progress=lambda r: print(f"  {r.rung}: {r.status}", file=sys.stderr, flush=True))
    if args.out:
        write_json_atomic(args.out, result.to_dict())
    print(json.dumps(result.to_dict(), indent=1) if args.json else format_ladder(result))
    return 0 if result.final is not None else 1


def default_runs_dir(preset: str, device: str) -> str:
    """``results/runs/<date>-<time>-<preset>-<device>-<commit>[+dirty]``: a fresh folder per invocation (one
    sweep, one identity), never a reference; ``--out-dir`` names an existing one to resume it."""
    from gnnbench.env import environment

    commit = environment("cpu").get("commit") or "nocommit"
    head, dirty = commit.partition("+")[::2]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"results/runs/{stamp}-{preset}-{device.replace(':', '')}-{head[:10]}{'+' + dirty if dirty else ''}"


def cmd_compare(args: argparse.Namespace) -> int:
    from gnnbench.measure.sweep import check_also_measured, sweep_and_compare

    base, chosen = resolve_run(args, [])
    base = with_nproc(base, args)
    names = args.flags if args.flags is not None else ([] if args.aa else None)
    if names == [] and args.flags is None:
        print(
            "compare --aa without --flags measures the A/A pair only (the baseline against a copy of itself); "
            "add --flags NAMES, or --flags $(gnnbench flags --names) for every entry, to compare entries too",
            file=sys.stderr,
        )
    check_also_measured(base, names, args.also_measure)  # refused before the executor is built, as before anything
    out_dir = args.out_dir or default_runs_dir(chosen.name, base.device)
    lines = SweepLines(log=Path(out_dir) / "compare.log")  # the folder keeps its own timed log, across resumes
    measured = sweep_and_compare(base, names, out_dir, _compare_options(args, names, out_dir), progress=lines)
    if args.json:
        out = measured.comparison.to_dict()
        if measured.best_set is not None:
            out["best_set"] = measured.best_set.to_dict()
        print(json.dumps(out, indent=1, default=str))
    else:
        print(format_compare(measured.comparison, best_set=measured.best_set))
    print(f"\n{measured.results.summary()}; results: {out_dir}", file=sys.stderr)
    return _failures(measured.results, "compare")


def _compare_options(args: argparse.Namespace, names: list[str] | None, out_dir: str):
    """How ``compare`` measures, built once from its arguments (:class:`~gnnbench.measure.sweep.options.SweepOptions`)."""
    from gnnbench.measure.sweep import SweepOptions

    return SweepOptions(
        repeats=args.repeats,
        calibration_runs=args.calibration_runs,
        target_acc=args.target_acc,
        budget_factor=args.budget_factor,
        aa=args.aa,
        include_all_recommended=not (args.no_all_recommended or (args.aa and args.flags is None)),
        derive=not args.no_derive,
        interleave=not args.no_interleave,
        also_measured=tuple(args.also_measure),
        accuracy_rounds=args.accuracy_rounds,
        stop_when_settled=not args.all_rounds,
        equivalence_margin=args.equivalence_margin,
        order_seed=args.order_seed,
        isolate=not args.in_process,
        resume=not args.no_resume,
        dist_timeout=args.dist_timeout,
        executor=_executor(args, out_dir),
        record_outcome=True,
        best_set=not (args.no_best_set or names == []),
    )


def _executor(args: argparse.Namespace, out_dir: str):
    """``--executor``: the rounds as submitit jobs on identical machines (None: here, one after another)."""
    if not args.executor:
        return None
    from pathlib import Path

    from gnnbench.measure.sweep import RoundExecutor

    return RoundExecutor(
        args.executor,
        Path(out_dir) / "jobs",
        machines=args.machines,
        timeout_min=args.job_timeout,
        slurm={"slurm_partition": args.slurm_partition} if args.slurm_partition else {},
    )


def _restart_for_allocator(flags) -> None:
    """An allocator other than the baseline that this process does not run is set when a process starts: the
    command starts again in a process with it (same arguments); where it cannot be had, the command goes on and
    the trainer refuses it with the reason."""
    from gnnbench import process
    from gnnbench.process.allocators import allocator_unavailable

    if (
        flags.allocator == process.BASELINE_ALLOCATOR
        or process.was_placed()
        or allocator_unavailable(flags.allocator)
        or process.start_mismatch(flags) is None
    ):
        return
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "gnnbench.cli", *sys.argv[1:]], process.child_environment(flags))


def cmd_diagnose(args: argparse.Namespace) -> int:
    from gnnbench.advice.diagnose import diagnose
    from gnnbench.advice.diagnosis_text import format_diagnosis
    from gnnbench.advice.measured import format_measured
    from gnnbench.flags import UnavailableError
    from gnnbench.text import ratio_of
    from gnnbench.training.pipeline import graph_of

    if args.script is not None:
        return _diagnose_script(args)
    config, chosen = resolve_run(args, args.flags)
    _restart_for_allocator(config.flags)
    try:
        graph = graph_of(config, chosen.graph)[0]
        d = diagnose(config, steps=args.steps, graph=graph)
        measured = _measure_top(args, config, d, graph)
    except UnavailableError as exc:
        print(f"gnnbench diagnose: this configuration cannot run here: {exc}", file=sys.stderr)
        return 2
    out: dict = {"diagnosis": d.to_dict()}
    if measured is not None:
        out["measured"] = measured.to_dict()
    if not args.json:
        first = format_measured(measured) if measured is not None else None
        short = {r.name: f"{ratio_of(r.interval)}, {r.verdict}" for r in measured.rows} if measured else None
        print(format_diagnosis(d, first=first, measured=short))
    status = _verify(args, d, config, chosen.name, out) if args.verify else 0
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    return status


def _measure_top(args: argparse.Namespace, config, d, graph):
    """The diagnosis's top in-process candidates timed against the baseline in this process, steps interleaved
    (``--measure N``; 0: none), or ``None`` when none is asked for or the baseline cannot share a process."""
    from gnnbench.advice.measured import measure_top
    from gnnbench.process.sharing import own_process_reasons

    if args.measure == 0:
        return None
    reasons = own_process_reasons(config.flags)
    if reasons:
        if not args.json:
            print(f"diagnose: not measuring in this process: the configuration {'; '.join(reasons)}", file=sys.stderr)
        return None
    from gnnbench.measure.run import PairRefused

    log = None if args.json else (lambda line: print(f"diagnose: {line}", file=sys.stderr, flush=True))
    try:
        return measure_top(config, d, graph=graph, top=args.measure, blocks=args.measure_blocks, log=log)
    except PairRefused as exc:  # the baseline against itself could not be timed here (found while building)
        if not args.json:
            print(f"diagnose: not measuring in this process: {exc}", file=sys.stderr)
        return None


def _verify(args: argparse.Namespace, d, config, graph_name: str, out: dict) -> int:
    """``diagnose --verify``: the top recommendations measured against the baseline (``out["verify"]``) and
    whether each pays here; 1 when a measured run failed. ``graph_name`` names the default results folder."""
    from gnnbench.advice.verdicts import verdicts, verify_names
    from gnnbench.measure.sweep import SweepOptions, sweep_and_compare

    labels = verify_names(d, top=args.top)
    if not labels:
        print("\n--verify: nothing to measure (no recommendation can run here)")
        return 0
    out_dir = args.out_dir or default_runs_dir(f"diagnose-{graph_name}", config.device)
    if not args.json:
        print(
            f"\n--verify: {', '.join(labels)} against the baseline, {args.repeats} interleaved rounds ({out_dir})",
            flush=True,
        )
    options = SweepOptions(
        repeats=args.repeats,
        calibration_runs=args.calibration_runs,
        budget_factor=args.budget_factor,
        include_all_recommended=False,
        derive=True,
        interleave=True,
    )
    measured = sweep_and_compare(config, labels, out_dir, options, progress=SweepLines(seed_eta=False))
    comparison = measured.comparison
    out["verify"] = {
        "labels": labels,
        "rows": [r.to_dict() for r in comparison.rows],
        "floors": comparison.floors,
        "verdicts": verdicts(comparison.rows, comparison.floors),
    }
    if not args.json:
        print(format_compare(comparison))
        print("\nverdict:")
        for line in verdicts(comparison.rows, comparison.floors):
            print(f"  {line}")
    return _failures(measured.results, "diagnose --verify")


def _diagnose_script(args: argparse.Namespace) -> int:
    """``diagnose --script train.py ARGS``: the user's own loop under gnnbench.watch; 1 when the script raised or
    could not be instrumented (the message says which piece was missing)."""
    from gnnbench.advice.watch import ScriptError, watch_script

    try:
        report = watch_script(
            args.script,
            steps=args.watch_steps,
            warmup=args.watch_warmup,
            sync=args.sync,
            device=None if args.device == "cpu" else args.device,
            wait_bound_s=args.wait_bound,
        )
    except ScriptError as exc:
        print(f"gnnbench diagnose --script: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"gnnbench diagnose --script: {exc}", file=sys.stderr)
        return 2
    if not args.verify:
        print(json.dumps(report.to_dict(), indent=1, default=str) if args.json else report.format())
        return 0
    out: dict = {"diagnosis": report.to_dict()}
    if not args.json:
        print(report.format(), flush=True)
    status = _verify_script(args, report, out)
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    return status


def _verify_script(args: argparse.Namespace, report, out: dict) -> int:
    """``diagnose --verify --script``: the top advice applied to the unmodified script and measured there
    (``out["verify"]``); 1 when the baseline's runs failed."""
    from gnnbench.advice.watch.verify import RunFailed, estimate_s, plan_rounds, verify_plan, verify_script
    from gnnbench.advice.watch.verify_text import format_verification

    changes, refused, notes = verify_plan(report, top=args.top, workers_curve=args.workers_curve)
    log = (
        (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    )
    for note in notes:
        log(f"--verify: {note}")
    if not changes:
        log(
            "\n--verify: nothing to measure in this script: "
            + ("; ".join(f"{k}: {v}" for k, v in refused.items()) or "no advice")
        )
        out["verify"] = {"refused": refused}
        return 0
    budget_s = 60 * args.verify_budget if args.verify_budget and args.verify_budget > 0 else None
    max_rounds = plan_rounds(
        report,
        changes,
        rounds=args.verify_rounds,
        steps=args.verify_steps,
        warmup=args.verify_warmup,
        budget_s=budget_s,
        cap=max(args.verify_rounds, args.verify_max_rounds),
    )
    runs, seconds = estimate_s(report, changes, rounds=max_rounds, steps=args.verify_steps, warmup=args.verify_warmup)
    compiled = " (compilation not counted)" if any(c.compile for c in changes) else ""
    if max_rounds > args.verify_rounds:
        log(
            f"\n--verify: {', '.join(c.label for c in changes)} against your script as it is, {args.verify_rounds} "
            f"to {max_rounds} alternating rounds (a variant stops once decided): at most {runs} runs, about "
            f"{seconds / 60:.1f} min at the diagnosed step{compiled}, within the budget of "
            f"{args.verify_budget:g} min"
        )
    else:
        log(
            f"\n--verify: {', '.join(c.label for c in changes)} against your script as it is, {max_rounds} "
            f"alternating rounds: {runs} runs, about {seconds / 60:.1f} min at the diagnosed step{compiled}"
        )
    try:
        v = verify_script(
            args.script,
            changes,
            refused=refused,
            rounds=args.verify_rounds,
            max_rounds=max_rounds,
            budget_s=budget_s,
            steps=args.verify_steps,
            warmup=args.verify_warmup,
            wait_bound_s=args.wait_bound,
            log=log,
        )
    except (RunFailed, ValueError) as exc:
        print(f"gnnbench diagnose --script --verify: {exc}", file=sys.stderr)
        return 1
    v.notes[:0] = notes
    out["verify"] = v.to_dict()
    if not args.json:
        print()
        print(format_verification(v))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from gnnbench.advice.tune import format_tune, tune

    config, chosen = resolve_run(args, args.flags)
    out_dir = args.out_dir or default_runs_dir(f"tune-{chosen.name}", config.device)
    log = (
        (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (lambda line: print(line, flush=True))
    )
    result = tune(
        config,
        budget_s=60 * args.budget,
        out_dir=out_dir,
        repeats=args.repeats,
        calibration_runs=args.calibration_runs,
        budget_factor=args.budget_factor,
        max_acc_loss_pp=args.max_acc_loss,
        candidates=args.candidates,
        log=log,
    )
    print(json.dumps(result.to_dict(), indent=1, default=str) if args.json else "\n" + format_tune(result))
    print(f"results: {out_dir}", file=sys.stderr)
    for line in result.failed:
        print(f"gnnbench tune: run failed: {line}", file=sys.stderr)
    return 1 if result.failed else 0


def cmd_regress(args: argparse.Namespace) -> int:
    """``gnnbench regress BASE [HEAD]``: the regression gate (:mod:`gnnbench.measure.gate.regress`). Exit 1 on a
    regression or a benchmark lost in HEAD; 2 when the trees cannot be compared or a benchmark process crashed
    or timed out (the JSON says which side, with its stderr's tail); 3 when no regression was seen but the
    machine was too noisy to see one of ``--sensitivity``; 0 otherwise."""
    import time

    from gnnbench.atomic import write_json_atomic
    from gnnbench.cli.options import gate_options
    from gnnbench.measure.gate import format_gate, run_gate

    clock = {"t0": time.perf_counter(), "done": 0}

    def progress(r, rounds, role):  # each process as it starts, with the time left at the pace so far
        done, elapsed = clock["done"], time.perf_counter() - clock["t0"]
        clock["done"] += 1
        if "counted" in role:
            print(
                f"  counts {r + 1}/{rounds}: {role}; {elapsed:.0f} s so far (about 1-2 min a counting process on tiny)",
                file=sys.stderr,
                flush=True,
            )
            return
        left = (
            ""
            if not done
            else f"; {elapsed:.0f} s so far, an extra round within the budget"
            if done >= 2 * rounds
            else f"; {elapsed:.0f} s so far, about {elapsed / done * (2 * rounds - done):.0f} s left for the planned rounds"
        )
        print(f"  round {r + 1}/{rounds}: {role}{left}", file=sys.stderr, flush=True)

    try:
        gated = run_gate(args.base, args.head, gate_options(args), progress)
    except (ValueError, OSError) as exc:
        print(f"gnnbench regress: {exc}", file=sys.stderr)
        return 2
    result = gated.result
    out = result.to_dict()
    if not args.json:
        print(format_gate(result), flush=True)
    if args.out:
        write_json_atomic(args.out, out)  # kept even if the bisection below fails
    if args.bisect and result.regressed and result.failure is None:
        _bisect(args, gated, out)
    if args.json:
        print(json.dumps(out, indent=1))
    return result.exit_status


def _bisect(args: argparse.Namespace, gated, out: dict) -> None:
    """``regress --bisect``: the first bad commit (``out["first_bad_commit"]``, and ``--out`` again)."""
    from gnnbench.atomic import write_json_atomic
    from gnnbench.measure.gate import WORKING_TREE

    if args.head == WORKING_TREE:
        print(
            "gnnbench regress: --bisect needs a HEAD commit (the working tree is not in the history)", file=sys.stderr
        )
        return
    try:
        first, tests = gated.bisect(log=lambda line: print(f"  bisect: {line}", file=sys.stderr, flush=True))
    except (ValueError, OSError) as exc:
        print(f"gnnbench regress --bisect: {exc}", file=sys.stderr)
        return
    out["first_bad_commit"] = first
    if not args.json:
        print(f"first bad commit: {first} ({tests} gate runs over {', '.join(gated.regressed)})")
    if args.out:
        write_json_atomic(args.out, out)


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from gnnbench.env import environment, resolve_device
    from gnnbench.measure.sweep import SweepOptions, sweep_and_compare
    from gnnbench.training import RunConfig

    device = resolve_device(args.device)
    chosen = resolve_graph(args)
    base = RunConfig(
        spec=chosen.spec,
        source=chosen.source,
        device=str(device),
        epochs=1,
        max_steps_per_epoch=args.steps,
        warmup_steps=5,
    )

    def header() -> str:
        env = environment(device)
        return (
            f"gpu-check: {env['device_name']}, torch {env['torch']}, PyG {env['torch_geometric']}, "
            f"graph {chosen.name}, {args.steps} steps per configuration"
        )

    lines = RunLines(header)
    # full batch: the trainer extends its epochs
    options = SweepOptions(repeats=args.repeats, calibration_runs=0, isolate=False, resume=False)
    measured = sweep_and_compare(base, None, args.out_dir, options, progress=lines)
    print()
    print(format_compare(measured.comparison, extra=GPU_COLUMNS))
    print(
        f"\nA first look: every configuration ran in this one process ({args.repeats} round(s)), so host-side "
        "phases (sample ms) drift between them; read a flag that acts on the GPU from its compute ms, and "
        "measure a verdict with `gnnbench compare --device cuda --flags ...` (separate processes, intervals)."
    )
    print(f"total {time.perf_counter() - lines.started:.0f} s; results in {args.out_dir}")
    return _failures(measured.results, "gpu-check")


def cmd_profile(args: argparse.Namespace) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from gnnbench.measure.run import run

    config, chosen = resolve_run(args, args.flags)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if config.device.startswith("cuda") else [])
    prof = profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=args.active_steps),
        on_trace_ready=lambda p: p.export_chrome_trace(args.trace),
    )
    config = dataclasses.replace(config, epochs=1, max_steps_per_epoch=args.active_steps + 2)
    result = run(config, profiler=prof, graph=chosen.graph)
    if not result.ok:
        print(format_run(result))
        return 1
    sort = (
        "self_cuda_time_total"
        if torch.cuda.is_available() and config.device.startswith("cuda")
        else "self_cpu_time_total"
    )
    print(prof.key_averages().table(sort_by=sort, row_limit=args.top))
    print(f"Chrome trace: {args.trace} (open in chrome://tracing or https://ui.perfetto.dev)")
    return 0
