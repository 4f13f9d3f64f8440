"""A sweep entry's steps timed against its round's baseline, interleaved
(:mod:`gnnbench.measure.run.interleaved`): the result a sweep reads its time per step from where the pair shares
a process (DESIGN.md §3, "Measure where the noise cancels").

The run itself (:func:`gnnbench.measure.run.single.run`) is unchanged: it trains as the sweep asks (short, to the
target or to the plateau) and gives the accuracy, the curve and every other block. The pair lands in the result's
``interleaved`` block (the pair's steps, order, setup clocks and which trainer was built first). A pair that cannot
be timed leaves the result as it is, with a warning that says why, and the comparison then reads that row across
processes.

An isolated sweep times the pair in a process of its own, started after the run's (:func:`add_pair`, this
module's ``main``): a run earlier in the same process changed what the pair read. In the sweep at 2c4859a
(``results/reference/compare-small-cpu-next``, its README) the baseline side of ``full_amp``'s pairs stepped
slower after a full_amp run to the plateau in that process than in any other pair, inflating the row's ratio;
``scripts/pair_carryover.py --from-sweep`` repeats that sequence and reproduces it (the figures are in
``results/reference/pair-carryover-sweep-small-cpu.json``).
:func:`run_paired` (run, then pair, in this process) serves sweeps that keep everything in one process
(``isolate=False``), where no process is fresh anyway.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from gnnbench.atomic import write_json_atomic
from gnnbench.measure.run.interleaved import BUILD_ORDERS, PairRefused, time_pair
from gnnbench.measure.run.results import RunResult, load_result
from gnnbench.measure.run.single import run
from gnnbench.training import RunConfig

__all__ = ["with_pair", "run_paired", "add_pair", "paired_argv", "PAIR_BLOCKS", "PAIR_TIMEOUT_S", "main"]

PAIR_BLOCKS = (
    8  # blocks of four interleaved steps per round (16 measured steps a side; whole epochs with paused workers)
)
PAIR_TIMEOUT_S = 900.0  # the pair's own process: imports, the graph, two setups and 2 x (warm-up + measured) steps


def with_pair(
    result: RunResult,
    config: RunConfig,
    pair_base: RunConfig,
    *,
    built_first: str,
    graph: Any = None,
    blocks: int = PAIR_BLOCKS,
) -> RunResult:
    """``result`` (``config``'s run) with ``config`` timed against ``pair_base`` in this process, steps
    interleaved, both on whole steps (no per-phase synchronization); a failed or refused run, or a pair that
    cannot be timed, comes back without one (with a warning saying why)."""
    if not result.ok:
        return result
    other = dataclasses.replace(config, sync_phases=False)
    base = dataclasses.replace(pair_base, sync_phases=False)
    try:
        pair = time_pair(base, other, graph=graph, blocks=blocks, built_first=built_first)
    except (PairRefused, ValueError, RuntimeError) as exc:  # an UnavailableError is a RuntimeError
        return dataclasses.replace(result, warnings=[*result.warnings, f"interleaved pair not measured: {exc}"])
    return dataclasses.replace(result, interleaved=pair.to_dict())


def run_paired(
    config: RunConfig,
    pair_base: RunConfig,
    *,
    built_first: str,
    out: str | Path | None = None,
    graph: Any = None,
    dist_timeout: float | None = None,
) -> RunResult:
    """:func:`~gnnbench.measure.run.single.run` of ``config``, then :func:`with_pair` on the same graph; the
    result is written to ``out`` atomically once, with its pair."""
    from gnnbench.training.pipeline import graph_of

    if built_first not in BUILD_ORDERS:
        raise ValueError(f"built_first must be one of {BUILD_ORDERS} (got {built_first!r})")
    graph = graph_of(config, graph)[0]
    kwargs = {} if dist_timeout is None else {"dist_timeout": dist_timeout}
    result = run(config, graph=graph, **kwargs)
    result = with_pair(result, config, pair_base, built_first=built_first, graph=graph)
    if out:
        write_json_atomic(out, result.to_dict())
    return result


def add_pair(
    out: str | Path, config: RunConfig, pair_base: RunConfig, *, built_first: str, graph: Any = None
) -> RunResult:
    """The result stored at ``out`` (``config``'s run, measured in another process) with its pair timed here
    (:func:`with_pair`), written back to ``out`` atomically; a missing or unreadable result, or one of another
    configuration, is an error that says so (nothing is timed)."""
    from gnnbench.training.pipeline import graph_of

    if built_first not in BUILD_ORDERS:
        raise ValueError(f"built_first must be one of {BUILD_ORDERS} (got {built_first!r})")
    result = load_result(out)
    if result is None:
        raise FileNotFoundError(f"no readable run result at {out}: the pair is timed after its run")
    if result.config != json.loads(json.dumps(config.to_dict(), default=str)):
        raise ValueError(f"the run stored at {out} is not of this configuration: its pair would not be its own")
    if not result.ok:
        return result
    result = with_pair(result, config, pair_base, built_first=built_first, graph=graph_of(config, graph)[0])
    write_json_atomic(out, result.to_dict())
    return result


def paired_argv(config_path: str | Path, out: str | Path, pair_path: str | Path, built_first: str) -> list[str]:
    """The command that times the pair of the run stored at ``out`` in a process of its own
    (:func:`add_pair`; ``python -m gnnbench.measure.run.paired``)."""
    return [
        sys.executable,
        "-m",
        "gnnbench.measure.run.paired",
        str(config_path),
        str(out),
        str(pair_path),
        built_first,
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m gnnbench.measure.run.paired CONFIG.json OUT.json PAIR_BASE.json base|other``: the run stored
    in OUT.json gets its pair (:func:`add_pair`); exit 1 when there is no run result of CONFIG to add it to."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 4 or argv[3] not in BUILD_ORDERS:
        print(
            "usage: python -m gnnbench.measure.run.paired CONFIG.json OUT.json PAIR_BASE.json base|other",
            file=sys.stderr,
        )
        return 2
    config = RunConfig.from_dict(json.loads(Path(argv[0]).read_text()))
    pair_base = RunConfig.from_dict(json.loads(Path(argv[2]).read_text()))
    try:
        add_pair(argv[1], config, pair_base, built_first=argv[3])
    except (FileNotFoundError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
