"""The regression gate's measured error rates (``scripts/gate_error_rates.py``), summarized with intervals.

A document of that script holds, per throwaway commit (``null-*``: nothing changed; ``slow-<path>-<pct>``: the
step ``pct`` percent slower, all of it in one code path), every gate run's verdict. :func:`summarize` turns it
into rates with 95% Wilson intervals: the family-wise false-alarm rate of a default gate run (null commits run
the whole default set, Holm across it), the per-benchmark false-alarm rate, and per slowdown size (and path) the
detection rate, how often the named phase was the right one and the slowdown the commit delivered (measured on
the baseline). Where slow commits ran the default set (the script's default), a detection is a default run
failing the gate; where they ran the baseline alone (older documents), their detection is also read at the
default set's strictest Holm step (``alpha / m`` for ``m`` benchmarks). Where the runs also counted instructions
(``--counts N``), each rate is also split by the measure that raised it (``*_wall``, ``*_counts``). ``gnnbench report --gate-rates`` shows
it; ``docs/regression-gate.md`` discusses it.
"""

from __future__ import annotations

import math
from typing import Any

from gnnbench.text import percent

__all__ = ["wilson", "summarize", "format_rates", "rate_text", "TARGETS", "CARRIERS"]

# the micro-benchmark that times each injected path alone (the optimizer and the loss have none)
CARRIERS = {"sample": "micro:sampler", "gather": "micro:gather", "aggregation": "micro:aggregation"}
# the gate's targets on a 2-core machine: false alarms per default gate run, detection at 10% and 5%, right phase
TARGETS = {"false_alarm": 0.05, "detect_10": 0.90, "detect_5": 0.50, "right_phase": 0.90}


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k / n`` (``(nan, nan)`` for ``n = 0``)."""
    if n <= 0:
        return float("nan"), float("nan")
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n] (got k={k}, n={n})")
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(k: int, n: int) -> dict[str, Any]:
    low, high = wilson(k, n)
    return {"k": k, "n": n, "rate": k / n if n else float("nan"), "low": low, "high": high}


def _strict_detect(run: dict, m: int, alpha: float) -> bool:
    """Whether a slow commit's baseline verdict would be flagged at Holm's first step among ``m`` benchmarks."""
    p, ratio, high, threshold = run.get("p_value"), run.get("ratio"), run.get("high"), run.get("threshold")
    if None in (p, ratio, high, threshold) or p != p:
        return False
    return p <= alpha / m and ratio < 1 / threshold and high < 1


def _wall(run: dict) -> list[str]:
    """The benchmarks a run flagged by wall time (``flagged`` also names the counted ones, as ``name (counts)``)."""
    return [n for n in run.get("flagged") or [] if not n.endswith(" (counts)")]


def summarize(doc: dict, *, alpha: float = 0.05) -> dict[str, Any]:
    """Rates of a ``gate_error_rates.py`` document (see the module docstring).

    Raises:
        ValueError: when the document holds no gate runs.
    """
    results = doc.get("results") or {}
    if not results:
        raise ValueError("the document holds no gate runs (is it scripts/gate_error_rates.py's output?)")
    m = max(1, len((doc.get("benches") or {}).get("null") or []))
    default_set = (doc.get("settings") or {}).get("bench") == "default"  # slow commits ran the whole set
    null_runs = [r for name, res in results.items() if name.startswith("null") for r in res["detail"]]
    per_bench = [(name in r["flagged"]) for r in null_runs for name in (r.get("per_bench") or {})]
    counted = int((doc.get("settings") or {}).get("counts") or 0) > 0  # runs that also counted instructions
    out: dict[str, Any] = {
        "machine": doc.get("machine"),
        "condition": doc.get("condition"),
        "base": doc.get("base"),
        "settings": doc.get("settings"),
        "wall_seconds": doc.get("wall_seconds"),
        "complete": doc.get("complete", False),
        "default_set": m,
        "shares": doc.get("shares") or {},
        "false_alarm": _rate(sum(bool(r["flagged"]) for r in null_runs), len(null_runs)),
        "false_alarm_per_bench": _rate(sum(per_bench), len(per_bench)),
        "null_gate_seconds": (sorted(r["seconds"] for r in null_runs)[len(null_runs) // 2] if null_runs else None),
        "sizes": {},
        "paths": {},
        "counted": counted,
    }
    if counted:  # which measure raised each alarm: the wall clock, the counted instructions
        out["false_alarm_wall"] = _rate(sum(bool(_wall(r)) for r in null_runs), len(null_runs))
        out["false_alarm_counts"] = _rate(sum(bool(r.get("count_flagged")) for r in null_runs), len(null_runs))
    for name, res in results.items():
        if not name.startswith("slow-"):
            continue
        _, path, pct = name.split("-")
        runs = res["detail"]
        strict = res["flagged"] if default_set else sum(_strict_detect(r, m, alpha) for r in runs)
        row = {
            "detect": _rate(res["flagged"], len(runs)),
            "right_phase": _rate(res["right_phase"], res["flagged"]),
            "detect_in_default_set": _rate(strict, len(runs)),
            "median_ratio": sorted(r["ratio"] for r in runs)[len(runs) // 2],
            "delivered": res.get("delivered"),
        }
        out["paths"].setdefault(path, {})[int(pct)] = row
        size = out["sizes"].setdefault(
            int(pct), {"flagged": 0, "runs": 0, "right": 0, "strict": 0, "wall": 0, "counts": 0}
        )
        size["wall"] += sum(bool(_wall(r)) for r in runs)
        size["counts"] += sum(bool(r.get("count_flagged")) for r in runs)
        if counted:
            row["detect_wall"] = _rate(sum(bool(_wall(r)) for r in runs), len(runs))
            row["detect_counts"] = _rate(sum(bool(r.get("count_flagged")) for r in runs), len(runs))
        size["flagged"] += res["flagged"]
        size["runs"] += len(runs)
        size["right"] += res["right_phase"]
        size["strict"] += strict
    out["slow_runs_default_set"] = default_set
    out["sizes"] = {
        pct: {
            "detect": _rate(s["flagged"], s["runs"]),
            "right_phase": _rate(s["right"], s["flagged"]),
            "detect_in_default_set": _rate(s["strict"], s["runs"]),
            **(
                {"detect_wall": _rate(s["wall"], s["runs"]), "detect_counts": _rate(s["counts"], s["runs"])}
                if counted
                else {}
            ),
        }
        for pct, s in sorted(out["sizes"].items())
    }
    return out


def rate_text(r: dict, missing: str = "n/a") -> str:
    """A rate as ``k/n = p% [low, high]`` (its 95% Wilson interval); ``missing`` when nothing was measured."""
    if not r["n"]:
        return missing
    return (
        f"{r['k']}/{r['n']} = {percent(r['rate'], digits=0)} "
        f"[{percent(r['low'], digits=0)}, {percent(r['high'], digits=0)}]"
    )


def format_rates(s: dict) -> str:
    """The summary as text: one line per rate, each with its count and 95% interval."""
    lines = [
        f"gate error rates on {s['machine']} (base {str(s['base'])[:10]}, "
        f"{(s['wall_seconds'] or 0) / 60:.0f} min{'' if s['complete'] else ', incomplete'}):",
        f"  false alarms per default gate run ({s['default_set']} benchmarks, Holm): {rate_text(s['false_alarm'])}"
        f" (target <= {percent(TARGETS['false_alarm'], digits=0)})",
        f"  false alarms per benchmark (wall time): {rate_text(s['false_alarm_per_bench'])}",
    ]
    if s.get("counted"):
        lines.insert(
            2,
            f"    by wall time {rate_text(s['false_alarm_wall'])}, by counted instructions {rate_text(s['false_alarm_counts'])}",
        )
    for pct, r in s["sizes"].items():
        if s.get("slow_runs_default_set"):
            lines.append(
                f"  step {pct}% slower: default runs failed {rate_text(r['detect'])}, right phase "
                f"{rate_text(r['right_phase'])}"
                + (
                    f" (by wall time {rate_text(r['detect_wall'])}, by counted instructions {rate_text(r['detect_counts'])})"
                    if s.get("counted")
                    else ""
                )
            )
        else:
            lines.append(
                f"  step {pct}% slower: detected {rate_text(r['detect'])}, right phase {rate_text(r['right_phase'])}, "
                f"at a default run's strictest Holm step {rate_text(r['detect_in_default_set'])}"
            )
    for path, sizes in s["paths"].items():
        share = s["shares"].get(path)
        lines.append(
            f"  {path}"
            + (f" ({percent(share, digits=0)} of the step)" if share else "")
            + ": "
            + "; ".join(
                f"{pct}%: {r['detect']['k']}/{r['detect']['n']} (right phase {r['right_phase']['k']}"
                + (f"; delivered {100 * r['delivered']['slowdown']:+.1f}%" if r.get("delivered") else "")
                + ")"
                for pct, r in sorted(sizes.items())
            )
        )
    return "\n".join(lines)
