"""The regression gate's published figures (docs/regression-gate.md), generated from the published files so that they cannot drift from them.

Two files, two measures: ``results/reference/gate-error-rates.json`` (``scripts/gate_error_rates.py``: default
gate runs on throwaway commits, judged by wall time) and ``results/reference/gate-counts.json``
(``scripts/gate_counts.py``: the primary tier's counted instructions). :func:`gate_markdown` words both;
``tests/project/test_readme.py`` checks docs/regression-gate.md's block between :data:`MARKERS` against it::

    python -m gnnbench.report.gate_md results/reference/gate-error-rates.json \\
        results/reference/gate-error-rates-work-busy.json results/reference/gate-counts.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from gnnbench.measure.gate import counts_markdown, summarize
from gnnbench.text import percent

__all__ = [
    "MARKERS",
    "GOALS_MARKERS",
    "gate_markdown",
    "goals_markdown",
    "wall_clock_markdown",
    "command",
    "EXIT_WORDS",
]

MARKERS = ("<!-- gate:start -->", "<!-- gate:end -->")

EXIT_WORDS = {
    0: "no regression",
    1: "a regression",
    2: "could not compare",
    3: "inconclusive: nothing regressed, but a primary benchmark could not resolve the sensitivity",
}


def _rate(r: dict) -> str:
    if not r["n"]:
        return "none measured"
    return (
        f"{r['k']} of {r['n']} ({percent(r['rate'], digits=0)} [{percent(r['low'], digits=0)}, "
        f"{percent(r['high'], digits=0)}])"
    )


def _exits(runs: list[dict]) -> str:
    """How many runs ended with each exit status; for exit 3, which primary benchmarks could not resolve the
    sensitivity, and in how many of those runs each (a file made before runs recorded them says nothing more)."""
    counts: dict[int, int] = {}
    for r in runs:
        counts[int(r["exit_status"])] = counts.get(int(r["exit_status"]), 0) + 1
    parts = []
    for code, n in sorted(counts.items()):
        words = EXIT_WORDS.get(code, "other")
        if code == 3:
            named: dict[str, int] = {}
            for r in runs:
                if int(r["exit_status"]) == 3:
                    for name in dict.fromkeys([*(r.get("blind") or []), *(r.get("time_blind") or [])]):
                        named[name] = named.get(name, 0) + 1
            if named:
                words += ": " + ", ".join(f"{name} in {k} run{'s' * (k != 1)}" for name, k in named.items())
        parts.append(f"{n} exit {code} ({words})")
    return "; ".join(parts)


def _seconds(runs: list[dict]) -> str:
    s = sorted(float(r["seconds"]) for r in runs)
    if not s:
        return "no runs"
    return f"{s[0]:.0f}-{s[-1]:.0f} s (median {statistics.median(s):.0f} s)"


def _machine_key(doc: dict) -> tuple[str, str, str]:
    """``(kind, cpu, cores)`` of an error-rate file's machine key (``vm|AMD EPYC|2``); ``?`` where missing."""
    return tuple((str(doc.get("machine", "?|?|?")).split("|") + ["?", "?"])[:3])


def wall_clock_markdown(doc: dict) -> str:
    """The error-rate file in words: false alarms and every null run's exit, detection per size with the
    slowdowns delivered, and the time of every run, min to max."""
    s = summarize(doc)
    results = doc["results"]
    null = [r for name, res in results.items() if name.startswith("null") for r in res["detail"]]
    slow = [r for name, res in results.items() if name.startswith("slow-") for r in res["detail"]]
    settings = doc.get("settings") or {}
    kind, cpu, cores = _machine_key(doc)
    condition = f"; {doc['condition']}" if doc.get("condition") else ""
    pinned = (
        f", pinned to core {', '.join(str(c) for c in doc['cores'])}"
        if doc.get("cores") and len(doc["cores"]) < int(cores if str(cores).isdigit() else 0)
        else ""
    )
    by = (
        (
            lambda r, key: (
                f" (by wall time {_rate(r[key + '_wall'])}; by counted instructions {_rate(r[key + '_counts'])})"
            )
        )
        if s.get("counted")
        else (lambda r, key: "")
    )
    lines = [
        f"- **Where.** {cpu}, {cores} cores ({kind}){pinned}{condition}; {doc.get('threads', '?')} thread "
        f"per process, {_injection(settings)}, throwaway commits on "
        f"{str(doc.get('base', '?'))[:7]}, {_design(settings)}, {settings.get('rounds', '?')} rounds and a "
        f"{settings.get('budget') or 0:.0f} s budget per run, {s['default_set']} benchmarks, "
        f"{(doc.get('wall_seconds') or 0) / 60:.0f} minutes in all"
        + ("" if doc.get("complete") else " (incomplete)")
        + ".",
        (
            "- **False alarms.** No null commit measured yet: the file holds its slow commits only, and a rerun of "
            "its command resumes it."
            if not null
            else f"- **False alarms.** Default runs on null commits that failed the gate: {_rate(s['false_alarm'])}"
        )
        + (
            by(
                {"false_alarm_wall": s["false_alarm_wall"], "false_alarm_counts": s["false_alarm_counts"]},
                "false_alarm",
            )
            if s.get("counted") and null
            else ""
        )
        + (
            f"; benchmark verdicts by wall time: {_rate(s['false_alarm_per_bench'])}. Their exits: {_exits(null)}."
            if null
            else ""
        ),
    ]
    for pct, r in s["sizes"].items():
        delivered = [
            p["delivered"]["slowdown"]
            for p in (s["paths"][path].get(pct) for path in s["paths"])
            if p and p.get("delivered")
        ]
        halves = [
            (p["delivered"]["high"] - p["delivered"]["low"]) / 2
            for p in (s["paths"][path].get(pct) for path in s["paths"])
            if p and p.get("delivered") and p["delivered"].get("high") is not None
        ]
        span = (
            f"{100 * min(delivered):+.1f}"
            if delivered and min(delivered) == max(delivered)
            else f"{100 * min(delivered or [0]):+.1f} to {100 * max(delivered or [0]):+.1f}"
        )
        got = (
            f"; delivered {span}%, each checked by a "
            f"{settings.get('pilot_rounds', '?')}-round pilot"
            + (f" (95% intervals up to +-{100 * max(halves):.0f} points)" if halves else "")
            if delivered
            else ""
        )
        paths = [p for p in s["paths"] if pct in s["paths"][p]]
        lines.append(
            f"- **Detection at {pct}%.** The step {pct}% slower through "
            f"{', '.join(paths[:-1]) + ' or ' + paths[-1] if len(paths) > 1 else ''.join(paths)}{got}. "
            f"Runs that failed the gate: {_rate(r['detect'])}{by(r, 'detect')}; the right phase named in "
            f"{r['right_phase']['k']} of {r['right_phase']['n']}."
        )
    if s.get("counted"):
        lines.append(_counts_seen(doc["results"]))
    lines.append(
        f"- **Time.** A default run took {_seconds(null + slow)} over all {len(null) + len(slow)} runs"
        + (f"; the null runs {_seconds(null)}." if null else ".")
    )
    return "\n".join(lines)


GOALS_MARKERS = ("<!-- gate-goals:start -->", "<!-- gate-goals:end -->")
RUN_LIMIT_S = 300.0  # a default run's goal: at most 5 minutes


def _cell(r: dict) -> str:
    from gnnbench.measure.gate import rate_text

    return rate_text(r, "none measured")


def goals_markdown(rates: list) -> str:
    """``docs/regression-gate.md``'s table of the measured rates against the goals, one column per error-rate
    file (its machine and condition in the header), generated so that the page cannot drift from the files."""
    from gnnbench.measure.gate import TARGETS

    docs = [(Path(p).name, json.loads(Path(p).read_text())) for p in rates]
    sums = [summarize(d) for _, d in docs]
    head = ["", *(f"`{name}`" for name, _ in docs), "goal"]
    rows = [
        ["where", *(_where_short(d) for _, d in docs), "a 2-core runner, idle and busy"],
        [
            "false alarm per default run",
            *(_cell(s["false_alarm"]) for s in sums),
            f"at most {percent(TARGETS['false_alarm'], digits=0)}",
        ],
    ]
    counted = any(s.get("counted") for s in sums)
    if counted:
        rows += [
            [f"... {label}", *(_cell(s[key]) if s.get("counted") else "not counted" for s in sums), "-"]
            for label, key in (("by wall time", "false_alarm_wall"), ("by counted instructions", "false_alarm_counts"))
        ]
    rows.append(["false alarm per benchmark (wall time)", *(_cell(s["false_alarm_per_bench"]) for s in sums), "-"])
    for pct, goal in ((5, TARGETS["detect_5"]), (10, TARGETS["detect_10"])):
        rows.append(
            [
                f"step {pct}% slower: detected",
                *(_cell(s["sizes"][pct]["detect"]) if pct in s["sizes"] else "none measured" for s in sums),
                f"at least {percent(goal, digits=0)}",
            ]
        )
        if counted:
            rows += [
                [
                    f"... {label}",
                    *(
                        _cell(s["sizes"][pct][key]) if s.get("counted") and pct in s["sizes"] else "not counted"
                        for s in sums
                    ),
                    "-",
                ]
                for label, key in (("by wall time", "detect_wall"), ("by counted instructions", "detect_counts"))
            ]
    rows.append(
        [
            "the right phase named, of the detections",
            *(
                f"{sum(r['right_phase']['k'] for r in s['sizes'].values())}/"
                f"{sum(r['right_phase']['n'] for r in s['sizes'].values())}"
                for s in sums
            ),
            "-",
        ]
    )
    rows.append(
        [
            "one default run, every run",
            *(_seconds([r for res in d["results"].values() for r in res["detail"]]) for _, d in docs),
            f"at most {RUN_LIMIT_S / 60:.0f} min",
        ]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n" + "\n".join(lines) + "\n"


def _where_short(doc: dict) -> str:
    kind, cpu, cores = _machine_key(doc)
    settings = doc.get("settings") or {}
    how = _HOW_SHORT.get(settings.get("injection", "spin"), "busy-waits")
    measures = "wall time and counts" if settings.get("counts") else "wall time"
    return (
        f"{cpu}, {cores} cores; {doc.get('condition') or 'condition not recorded'}; {how}; {measures}; "
        f"{_design(settings)}"
    )


# how each injection is named: in the goal table's short cell, and in a block's "Where" line
_HOW_SHORT = {"work": "work", "sleep": "sleeps", "spin": "busy-waits"}
_HOW = {
    "work": "slowdowns injected as the path's own work again",
    "sleep": "slowdowns injected as timed sleeps (not work: the core idles)",
    "spin": "slowdowns injected as timed busy-waits",
}


def _design(settings: dict) -> str:
    """How the file's gate runs timed the two trees (files made before duet rounds record no design: they
    alternated)."""
    if settings.get("design", "alternating") == "duet":
        return "duet rounds (both trees at once, one per core)"
    return "alternating rounds"


def _counts_seen(results: dict) -> str:
    """What the counted instructions saw: each slow commit's count ratio on the baseline (and on the path's
    micro-benchmark where it has one), and the largest count ratio of any null run."""
    from gnnbench.measure.gate import CARRIERS

    seen = []
    slow = sorted((n for n in results if n.startswith("slow-")), key=lambda n: (n.split("-")[1], int(n.split("-")[2])))
    for name in slow:
        res, path = results[name], name.split("-")[1]
        runs = [run.get("counts") or {} for run in res["detail"]]
        part = f"{name} baseline {_pct_span([c.get('baseline') for c in runs])}"
        carried = [c[CARRIERS[path]] for c in runs if CARRIERS.get(path) in c]
        if carried:
            part += f", {CARRIERS[path]} {_pct_span(carried)}"
        seen.append(part)
    null = [
        (v, bench)
        for name, res in results.items()
        if name.startswith("null")
        for run in res["detail"]
        for bench, v in (run.get("counts") or {}).items()
    ]
    worst = max(null, key=lambda vb: abs(vb[0] - 1.0)) if null else None
    return (
        "- **What the counts saw.** HEAD / BASE instructions: "
        + "; ".join(seen)
        + (f". Null runs: at most {_pct_change(worst[0])} ({worst[1]})." if worst else ".")
    )


def _pct_change(ratio: float | None) -> str:
    return "not counted" if ratio is None else f"{100 * (ratio - 1):+.2f}%"


def _pct_span(ratios: list) -> str:
    """One commit's count changes over its runs: the one value, or the lowest to the highest."""
    got = sorted(r for r in ratios if r is not None)
    if not got:
        return _pct_change(None)
    if len(got) == 1 or f"{got[0]:.4f}" == f"{got[-1]:.4f}":
        return _pct_change(got[0])
    return f"{100 * (got[0] - 1):+.2f} to {_pct_change(got[-1])}"


def _injection(settings: dict) -> str:
    return _HOW.get(settings.get("injection", "spin"), _HOW["spin"]) + (
        f", {settings['counts']} callgrind process per tree counting the primary tier"
        if settings.get("counts")
        else ", wall time only"
    )


def command(settings: dict) -> str:
    """The command line that made a file with ``settings`` (the options that differ from the script's defaults;
    a rerun with it resumes the file)."""
    defaults = {
        "base": "HEAD",
        "repeats": 2,
        "null_repeats": 6,
        "sizes": "5,10",
        "paths": "sample,gather,aggregation,optimizer,loss",
        "bench": "default",
        "rounds": 8,
        "budget": 600.0,
        "steps": 20,
        "pilot_rounds": 12,
        "calibrations": 2,
        "injection": "spin",
        "counts": 0,
        "design": "duet",
    }
    opts = [
        f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float) else f"--{k.replace('_', '-')} {v}"
        for k, v in settings.items()
        if k in defaults and k != "base" and v != defaults[k]
    ]
    if "design" not in settings:  # made before duet rounds, when every gate run alternated
        opts.append("--design alternating")
    return " ".join(["python scripts/gate_error_rates.py", *opts])


def gate_markdown(rates: str | Path | list, counts: str | Path) -> str:
    """docs/regression-gate.md's gate block: the error rates of each file of ``rates`` (one path or several, each made by
    ``scripts/gate_error_rates.py`` under its own settings and condition) and the counted instructions of
    ``counts``, each with the file it comes from and the command that made it."""
    parts = []
    for path in rates if isinstance(rates, list) else [rates]:
        doc = json.loads(Path(path).read_text())
        settings = doc.get("settings") or {}
        what = "Wall clock and counted instructions" if settings.get("counts") else "Wall clock"
        name = f"results/reference/{Path(path).name}"
        parts.append(
            f"\n**{what}** (`{name}`, made by `{command(settings)} --out {name}`; 95% Wilson "
            "intervals):\n\n" + wall_clock_markdown(doc) + "\n"
        )
    return (
        "".join(parts) + "\n"
        "**Counted instructions** (`results/reference/gate-counts.json`; `slow-*` are the same injected "
        "slowdowns, timed busy-waits that run longer under instrumentation, so their counted size exceeds their "
        "wall-clock size: the verdict carries over, the size does not):\n" + counts_markdown(counts)
    )


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) < 3:
        print("usage: python -m gnnbench.report.gate_md RATES.json [RATES.json ...] COUNTS.json", file=sys.stderr)
        raise SystemExit(2)
    print(gate_markdown(sys.argv[1:-1], sys.argv[-1]), end="")
