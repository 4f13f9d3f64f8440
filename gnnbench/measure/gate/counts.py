"""Counted instructions: the gate's CPU benchmarks measured where the clock cannot resolve them.

On a busy 2-core runner the wall clock of a micro-benchmark moves from round to round by more than the slowdowns
the gate looks for; the number of instructions the same code executes on the same input does not move with the
machine's load. Each count is one process of the tree under test (the gate's worker, :mod:`gnnbench.measure.gate.worker`) run under
``valgrind --tool=callgrind --instr-atstart=no``: nothing is instrumented while Python, torch and the graph load;
the worker switches instrumentation on around the measured calls only, through a two-function marker library
(:func:`marker_library`: valgrind's client requests, compiled once with the machine's C compiler and cached),
and each region ends in a dump of its own, named after its benchmark (:func:`parse_dumps`).

What a count sees, and what it cannot (docs/regression-gate.md, "Counted instructions"):

* it sees more work: more Python bytecode, more calls, a slower algorithm, a kernel doing more arithmetic, all in
  the single thread the gate's benchmarks run in;
* it cannot see time that is not instructions: memory-bound code (cache misses, page faults: the allocator
  entries), waiting (sleep, I/O, a lock), other threads' and processes' parallelism, and the GPU. There wall time
  stays the verdict; a count is reported beside it, never in its place.

A count's benchmark regresses when HEAD's instructions per call exceed BASE's by more than the tolerance
(:data:`TOLERANCE`), and also by more than :data:`SPREAD_FACTOR` (3) times the spread the run itself saw between
its repeats of one tree. The tolerance is that same rule applied to the committed null measurements, for runs of
one process per tree that see no spread of their own (:func:`tolerance_from` over :func:`null_changes`: the
smallest rung of :data:`TOLERANCE_LADDER` at least 3 times the largest change a comparison of equal work has
shown); a test keeps the constant equal to it.

The counting stage of a gate run (:func:`count_gate`): the primary tier (:data:`COUNT_BENCHES`) counted in both
trees, :data:`COUNT_PROCESSES` processes per tree by default, in ABBA order, and judged per benchmark.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from gnnbench.atomic import write_json_atomic
from gnnbench.measure.gate.benches import MICRO, Bench
from gnnbench.measure.gate.rounds import WorkerFailed, run_tree

__all__ = [
    "TOLERANCE",
    "TOLERANCE_LADDER",
    "SPREAD_FACTOR",
    "tolerance_from",
    "null_changes",
    "MARKER_SOURCE",
    "ENV_MARKER",
    "MARKERS",
    "CountsUnavailable",
    "unavailable",
    "marker_library",
    "callgrind_command",
    "parse_dumps",
    "CountVerdict",
    "judge_counts",
    "counts_markdown",
    "COUNT_PROCESSES",
    "COUNT_BENCHES",
    "COUNT_CALLS",
    "COUNT_EPOCHS",
    "CountRunner",
    "count_gate",
    "per_unit",
]

TOLERANCE = 0.01  # a count more than 1% above BASE's is a regression: tolerance_from(the committed null changes)
TOLERANCE_LADDER = (0.005, 0.01, 0.02, 0.05)  # the tolerances a measurement may choose between
SPREAD_FACTOR = 3.0  # a count must move by more than this many times the spread of equal work to be a change
ENV_MARKER = "GNNBENCH_COUNT_MARKER"  # the marker library's path, in the worker's environment: count, not time

MARKER_SOURCE = r"""
#include <valgrind/callgrind.h>
/* gnnbench's count regions: instrumentation on around the measured calls only (gnnbench/measure/gate/counts.py) */
void gnnbench_count_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void gnnbench_count_stop(const char *name) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT(name); }
int gnnbench_count_running(void) { return RUNNING_ON_VALGRIND; }
"""


class CountsUnavailable(Exception):
    """Instruction counts cannot be taken here; the message says what is missing and what provides it."""


def unavailable() -> str | None:
    """Why instruction counts cannot be taken on this machine, or ``None``."""
    if not shutil.which("valgrind"):
        return "valgrind is not installed (Debian/Ubuntu: apt-get install valgrind)"
    try:
        marker_library()
    except CountsUnavailable as exc:
        return str(exc)
    return None


def _cache_dir() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "gnnbench"


def marker_library(cache_dir: Path | None = None) -> Path:
    """The marker library's path, compiled from :data:`MARKER_SOURCE` on first use into ``cache_dir`` (default
    ``~/.cache/gnnbench``) under a name that holds the source's hash; written to a temporary name and renamed, so
    a build that was interrupted is never loaded.

    Raises:
        CountsUnavailable: no C compiler, or no ``valgrind/callgrind.h`` (valgrind's headers).
    """
    folder = Path(cache_dir) if cache_dir is not None else _cache_dir()
    digest = hashlib.sha256(MARKER_SOURCE.encode()).hexdigest()[:12]
    path = folder / f"callgrind-marker-{digest}.so"
    if path.exists():
        return path
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise CountsUnavailable(
            "no C compiler (cc or gcc) to build the count marker (Debian/Ubuntu: apt-get install gcc)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        src, out = Path(tmp) / "marker.c", Path(tmp) / "marker.so"
        src.write_text(MARKER_SOURCE)
        proc = subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(out), str(src)], capture_output=True, text=True)
        if proc.returncode != 0:
            why = (proc.stderr or proc.stdout).strip().splitlines()
            header = any("callgrind.h" in line for line in why)
            raise CountsUnavailable(
                "valgrind's headers (valgrind/callgrind.h) are missing: the count marker cannot be built "
                "(Debian/Ubuntu: apt-get install valgrind; Fedora: valgrind-devel)"
                if header
                else f"the count marker did not compile with {cc}: {' | '.join(why[-3:])}"
            )
        os.replace(out, path)
    return path


def callgrind_command(argv: list[str], out_dir: Path, *, cache_sim: bool = False) -> list[str]:
    """``argv`` under callgrind, instrumentation off at start (the marker switches it on), one output file per
    dump in ``out_dir``; with ``cache_sim`` the first-level and last-level cache misses are counted too (about
    twice as slow)."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--cache-sim={'yes' if cache_sim else 'no'}",
        "--dump-instr=no",
        "--compress-strings=no",
        f"--callgrind-out-file={Path(out_dir) / 'callgrind.%p'}",
        *argv,
    ]


_TRIGGER = re.compile(r"^desc:\s*Trigger:\s*Client Request:\s*(.*)$")


def parse_dumps(out_dir: Path) -> dict[str, dict[str, int]]:
    """Per region (the name the marker dumped it under), its event totals (``{"Ir": instructions, ...}``), read
    from the callgrind files in ``out_dir``. Dumps not made by the marker (the one at exit, with nothing
    instrumented) are left out.

    Raises:
        ValueError: a marker's dump whose events or totals cannot be read (a truncated file), or a region
            dumped twice.
    """
    regions: dict[str, dict[str, int]] = {}
    for path in sorted(Path(out_dir).glob("callgrind.*")):
        name = events = totals = summary = None
        with open(path, errors="replace") as f:
            for line in f:
                m = _TRIGGER.match(line)
                if m:
                    name = m.group(1).strip()
                elif line.startswith("events:"):
                    events = line.split()[1:]
                elif line.startswith("totals:"):  # the dump's own events (its "summary:" may read 0 after a zeroing)
                    totals = [int(x) for x in line.split()[1:]]
                elif line.startswith("summary:"):
                    summary = [int(x) for x in line.split()[1:]]
        totals = totals if totals is not None else summary
        if name is None:
            continue
        if events is None or totals is None or len(totals) > len(events):
            raise ValueError(f"{path}: a dump of {name!r} without its events and totals (a truncated file?)")
        if name in regions:
            raise ValueError(f"{path}: the region {name!r} was dumped twice")
        regions[name] = dict(zip(events, totals + [0] * (len(events) - len(totals))))
    return regions


@dataclass
class CountVerdict:
    """One benchmark's instruction counts in both trees: per side, each process's instructions per unit (a
    micro-benchmark's call, a training step), their ratio and whether it is a regression.

    ``ratio`` is HEAD / BASE of the medians (above 1: HEAD executes more); ``spread`` the largest relative
    difference between two processes of one tree in this run; ``threshold`` the change that counts (the larger
    of :data:`TOLERANCE` and :data:`SPREAD_FACTOR` times ``spread``)."""

    name: str
    unit: str
    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    ratio: float | None = None
    spread: float | None = None
    threshold: float = TOLERANCE
    regression: bool = False
    improvement: bool = False
    status: str = "ok"
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _spread(values: list[float]) -> float:
    return (max(values) / min(values) - 1.0) if len(values) > 1 and min(values) > 0 else 0.0


def judge_counts(
    name: str, unit: str, base: list[float], head: list[float], *, tolerance: float = TOLERANCE
) -> CountVerdict:
    """The verdict of one benchmark's counts (see :class:`CountVerdict`)."""
    v = CountVerdict(name, unit, list(base), list(head))
    if not base or not head:
        v.status, v.reason = "not counted", f"no count in {'BASE' if not base else 'HEAD'}"
        return v
    import statistics

    v.ratio = statistics.median(head) / statistics.median(base)
    v.spread = max(_spread(base), _spread(head))
    v.threshold = max(tolerance, SPREAD_FACTOR * v.spread)
    v.regression = v.ratio > 1.0 + v.threshold
    v.improvement = v.ratio < 1.0 / (1.0 + v.threshold)
    return v


def tolerance_from(changes: list[float]) -> float:
    """The smallest rung of :data:`TOLERANCE_LADDER` at least :data:`SPREAD_FACTOR` times the largest of
    ``changes`` (relative changes of counts between runs of equal work, :func:`null_changes`): the verdict's
    own spread rule, with the spread measured apart.

    Raises:
        ValueError: for no changes (nothing measured decides it), a change that is not a finite number >= 0, or
            null changes too large for any rung (counts too noisy here to gate on).
    """
    import math

    if not changes:
        raise ValueError("no null changes given: a tolerance needs a measurement of equal work counted twice")
    bad = [c for c in changes if not (isinstance(c, (int, float)) and math.isfinite(c) and c >= 0)]
    if bad:
        raise ValueError(f"null changes must be finite fractions >= 0 (got {bad[0]!r})")
    need = SPREAD_FACTOR * max(changes)
    for rung in TOLERANCE_LADDER:
        if rung >= need:
            return rung
    raise ValueError(
        f"the largest null change, {max(changes):.3%}, needs a tolerance of {need:.2%}: above every rung of "
        f"{[f'{r:.1%}' for r in TOLERANCE_LADDER]}; counts this noisy cannot gate here"
    )


def null_changes(doc: dict) -> list[tuple[str, str, float]]:
    """``(case, benchmark, change)`` for every comparison of equal work in a measurement document: in
    ``scripts/gate_counts.py``'s file, the same-tree cases (``same*``: every process counts one tree, the
    change is the largest over the smallest, minus 1); in ``scripts/gate_error_rates.py``'s, the null commits'
    runs (``null-*``: ``|HEAD / BASE - 1|`` per counted benchmark). Documents without counts give none.

    Raises:
        ValueError: for a document of neither kind.
    """
    out: list[tuple[str, str, float]] = []
    if "cases" in doc:
        for case, c in doc["cases"].items():
            if not case.startswith("same"):
                continue
            for name, v in c["benches"].items():
                values = [x for x in (v.get("base") or []) + (v.get("head") or []) if x]
                if v.get("status") == "ok" and len(values) > 1:
                    out.append((case, name, max(values) / min(values) - 1.0))
        return out
    if "results" in doc:
        for case, c in doc["results"].items():
            if not case.startswith("null"):
                continue
            for k, run in enumerate(c.get("detail") or []):
                for name, ratio in (run.get("counts") or {}).items():
                    if ratio is not None:
                        out.append((f"{case}#{k + 1}", name, abs(ratio - 1.0)))
        return out
    raise ValueError(
        "not a counts document: expected scripts/gate_counts.py's 'cases' or gate_error_rates.py's 'results'"
    )


MARKERS = ("<!-- gate-counts:start -->", "<!-- gate-counts:end -->")  # a page's block of published counts


def counts_markdown(path: str | Path) -> str:
    """The published counts (``scripts/gate_counts.py``'s file) as a page's block: per case, each counted
    benchmark's HEAD / BASE instructions per unit and its verdict; the same-tree cases' spread between
    processes; the machine and the time a case took."""
    import json

    doc = json.loads(Path(path).read_text())
    cases = doc["cases"]
    names = list(dict.fromkeys(n for c in cases.values() for n in c["benches"]))
    lines = ["", f"| case | {' | '.join(names)} | seconds |", f"|---|{'---|' * len(names)}---|"]
    for case, c in cases.items():
        cells = []
        for n in names:
            v = c["benches"].get(n)
            if not v or v["status"] != "ok":
                cells.append("-" if not v else v["status"])
                continue
            mark = " **regression**" if v["regression"] else " improvement" if v["improvement"] else ""
            spread = f" (spread {v['spread']:.3%})" if c["repeats"] > 1 else ""
            cells.append(f"{v['ratio']:.4f}x{spread}{mark}")
        lines.append(f"| {case} | {' | '.join(cells)} | {c['seconds']:.0f} |")
    m = doc.get("machine", {})
    lines += [
        "",
        f"HEAD / BASE instructions per unit (a call; the baseline: a step), one callgrind process per tree "
        f"(two in the same-tree cases), tolerance {doc['tolerance']:.0%}; measured on "
        f"{m.get('hardware_class', '?')} at {str(m.get('commit', '?'))[:7]}, made by "
        "`python scripts/gate_counts.py`.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) > 1:  # the block from a published file
        print(counts_markdown(sys.argv[1]), end="")
        raise SystemExit(0)
    try:  # the marker's path, built if needed
        print(marker_library())
    except CountsUnavailable as exc:
        print(f"unavailable: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


# ------------------------------------------------------------------ the counting stage of a gate run
COUNT_PROCESSES = 1  # the CLI's default counting processes per tree (their repeatability: docs/regression-gate.md)
COUNT_BENCHES = ("baseline", *MICRO)  # the primary tier: the code paths every configuration runs through
COUNT_CALLS = 40  # a micro-benchmark's counted calls
COUNT_EPOCHS = (1, 2)  # the baseline's counted runs: their difference is one epoch of steps
CountRunner = Callable[[str, Path, Path], tuple[dict, dict]]  # (role, spec, folder) -> (results, regions)


def _count_spec(benches: list[Bench], seed: int, folder: Path) -> Path:
    import dataclasses

    spec = {
        "graph": dataclasses.asdict(benches[0].config.spec),
        "seed": seed,
        "benches": {b.name: dataclasses.replace(b.config, seed=seed).to_dict() for b in benches},
        "counts": {"calls": COUNT_CALLS, "epochs": list(COUNT_EPOCHS)},
    }
    path = folder / f"count-spec-{seed}.json"
    write_json_atomic(path, spec)
    return path


def per_unit(result: dict, regions: dict[str, dict[str, int]]) -> float | None:
    """A benchmark's instructions per unit from its worker result and the regions dumped: a micro-benchmark's
    region over its calls, a training configuration's two regions' difference over the steps between them."""
    c = result.get("counted") if result.get("status") == "ok" else None
    if not c or not c.get("units"):
        return None
    got = [regions.get(name, {}).get("Ir") for name in c["regions"]]
    if any(x is None for x in got):
        return None
    total = got[0] if len(got) == 1 else got[1] - got[0]
    return total / c["units"] if total > 0 else None


def count_gate(
    trees: dict[str, Path],
    benches: list[Bench],
    *,
    repeats: int = 2,
    folder: Path,
    worker: Path,
    pythons: dict[str, str],
    timeout: float = 1800.0,
    seed: int = 0,
    cache_sim: bool = False,
    tolerance: float | None = None,
    runner: CountRunner | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[list[Any], str | None]:
    """The benchmarks of :data:`COUNT_BENCHES` among ``benches`` counted in both trees (:mod:`gnnbench.measure.gate.counts`),
    ``repeats`` processes per tree (ABBA order), and judged per benchmark; with the reason when counts cannot be
    taken here (then no verdict: the wall clock stays the only measure)."""
    chosen = [b for b in benches if b.name in COUNT_BENCHES]
    if not chosen:
        return [], None
    if runner is None:
        why = unavailable()
        if why:
            return [], why
        marker = marker_library()

        def runner(role: str, spec: Path, out_dir: Path) -> tuple[dict, dict]:
            out_dir.mkdir(parents=True, exist_ok=True)
            result = run_tree(
                trees[role],
                spec,
                out_dir / "result.json",
                1,
                worker,
                timeout,
                pythons[role],
                wrap=lambda argv: callgrind_command(argv, out_dir, cache_sim=cache_sim),
                env_extra={ENV_MARKER: str(marker), "PYTHONHASHSEED": "0"},
            )
            return result, parse_dumps(out_dir)

    spec = _count_spec(chosen, seed, folder)
    values: dict[str, dict[str, list[float]]] = {b.name: {"base": [], "head": []} for b in chosen}
    reasons: dict[str, str] = {}
    for k in range(repeats):
        for role in ("base", "head") if k % 2 == 0 else ("head", "base"):  # ABBA: neither side always first
            if progress:
                progress(k, repeats, f"{role} (counted instructions)")
            try:
                result, regions = runner(role, spec, folder / f"counts-{role}-{k}")
            except WorkerFailed as exc:
                return [], (
                    f"{role}'s counting process {exc.kind}"
                    + (f" (exit {exc.returncode})" if exc.returncode is not None else "")
                    + f": {exc.stderr[-300:]}"
                )
            except ValueError as exc:  # a dump that cannot be read
                return [], f"{role}'s counts could not be read: {exc}"
            for b in chosen:
                got = result.get(b.name, {})
                x = per_unit(got, regions)
                if x is None:
                    reasons.setdefault(b.name, f"{role}: {got.get('status', 'missing')}: {got.get('reason') or ''}")
                else:
                    values[b.name][role].append(x)
    verdicts = []
    for b in chosen:
        unit = "step" if not b.name.startswith("micro:") else "call"
        v = judge_counts(
            b.name,
            unit,
            values[b.name]["base"],
            values[b.name]["head"],
            tolerance=TOLERANCE if tolerance is None else tolerance,
        )
        if v.status != "ok" and b.name in reasons:
            v.reason = reasons[b.name]
        verdicts.append(v)
    return verdicts, None
