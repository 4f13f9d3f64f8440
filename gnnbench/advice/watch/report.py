"""The report of a watch: :class:`WatchReport` (what was measured and concluded), its :class:`Advice` lines and
its text (:meth:`WatchReport.format`), laid out as ``gnnbench diagnose``'s (the same pieces:
:mod:`gnnbench.advice.diagnosis_text`)."""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gnnbench.advice.op_profile import HotOp
from gnnbench.advice.rules import Finding

ADVICE_SHOWN = 5  # advice lines printed (the report keeps all)
WATCH_PHASES = ("wait", "sample", "gather", "transform", "transfer", "forward", "backward", "optimizer", "other")
# The watch's end-to-end cost on a user-written PyG loop, measured by scripts/watch_overhead.py (one file a graph)
OVERHEAD_RESULTS = Path(__file__).resolve().parents[3] / "results" / "reference" / "watch-overhead"
OVERHEAD_DOC = "docs/advice.md, 'What gnnbench.watch costs a loop'"


def measured_overhead(folder: Path = OVERHEAD_RESULTS) -> list[dict[str, Any]]:
    """The watch's measured end-to-end cost (``scripts/watch_overhead.py``'s result files in ``folder``): per
    graph, the unwatched median step, the watched / unwatched ratio with its 95% interval and the processes it
    came from; smallest step first. Empty where the files are not there (an installed package)."""
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            doc = json.loads(path.read_text())
            out.append(
                {
                    "preset": doc["preset"],
                    "step_ms": 1e3 * statistics.median(doc["unwatched"]),
                    "ratio": float(doc["ratio"]),
                    "low": float(doc["low"]),
                    "high": float(doc["high"]),
                    "processes": int(doc["rounds"]),
                    "source": f"results/reference/watch-overhead/{path.name}",
                }
            )
        except (OSError, ValueError, KeyError, TypeError, statistics.StatisticsError):
            continue  # a file of another shape: not cited
    return sorted(out, key=lambda m: m["step_ms"])


@dataclass
class Advice:
    entry: str  # the registry entry that measures it
    setting: str  # what to change in the user's loop
    target: str  # the bottleneck group it relieves
    costs_accuracy: bool
    op_share: float | None = None  # share of the profiled steps in the operators it removes or changes


@dataclass
class WatchReport:
    """What :class:`Watch` measured on the user's loop and concluded."""

    steps: int  # measured steps (after the warm-up)
    warmup: int
    mode: str  # "sync" (CUDA synchronized at phase boundaries) or "end_to_end"
    device: str
    step_ms: dict[str, float]  # median, q1, q3, min, max
    phase_ms: dict[str, float]  # median per phase, over measured steps
    shares: dict[str, float]  # per bottleneck group, of the median step
    finding: Finding
    advice: list[Advice] = field(default_factory=list)
    hot_ops: list[HotOp] = field(default_factory=list)
    loader: dict[str, Any] = field(default_factory=dict)  # what the watched loader is (type, workers, backend)
    # the instrumentation's cost as a share of the median step: each instrumented call's cost, measured at entry,
    # times its calls per step; a lower bound (cache effects and torch's hook dispatch are not in it)
    overhead: float | None = None
    overhead_measured: list[dict[str, Any]] = field(default_factory=list)  # end to end (measured_overhead)
    device_busy: float | None = None  # NVML's mean device utilization over the measured steps (CUDA), in [0, 1]
    data_wait_share: float = 0.0  # of the median step: waiting for the loader's next batch
    reproduce: str | None = None  # the gnnbench command that measures the advice on a twin of the user's graph
    notes: list[str] = field(default_factory=list)
    # the script's process, read back: allocator, threads, the measured steps' page faults and kernel share, and
    # the allocation-cost finding (gnnbench.process)
    process: dict[str, Any] = field(default_factory=dict)
    # whether the profiled steps ran: None when none were asked for, False when the loop ended before them (the
    # advice is then ranked only by what was measured: entries no measurement credits are listed unranked)
    profiled: bool | None = None
    # where the watch's wall time went, in seconds: from entry to the end of the first step (the script's own
    # setup before its loop, and that step), the rest of the warm-up, the measured steps, the profiled steps,
    # the profile's analysis, the steps after it until the loop stopped, and the report itself
    wall_s: dict[str, float] = field(default_factory=dict)
    # diagnose --script: the command that applies the advice to the script itself and measures it there
    verify_in_script: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        """The text, laid out as ``gnnbench diagnose``'s: the step, the phase table, the shares by bottleneck,
        the hot operators, the bottleneck, what to try (here in the loop's own terms) and how to verify it."""
        from gnnbench.advice.diagnosis_text import (
            bottleneck_line,
            compute_line,
            finding_lines,
            hot_op_lines,
            process_line,
        )

        s = self.step_ms
        lines = [
            f"gnnbench watch: {self.steps} measured steps after {self.warmup} warm-up on {self.device}, "
            f"{self.mode} timing; step {s['median']:.1f} ms median (quartiles {s['q1']:.1f}-{s['q3']:.1f}, "
            f"min {s['min']:.1f}, max {s['max']:.1f})"
        ]
        if self.loader:
            lines.append("loader: " + ", ".join(f"{k} {v}" for k, v in self.loader.items()))
        lines.append("")
        lines.append(f"{'phase':<12}{'ms/step':>10}{'share':>8}")
        med = s["median"]
        for p in WATCH_PHASES:
            if p in self.phase_ms:
                lines.append(f"{p:<12}{self.phase_ms[p]:>10.2f}{self.phase_ms[p] / med:>8.0%}")
        lines.append("")
        lines.append(bottleneck_line(self.shares))
        lines.append(compute_line(self.finding, self.data_wait_share, self.device_busy))
        lines += hot_op_lines(self.hot_ops)
        if self.process:
            lines.append(process_line(self.process))
        lines.append("")
        lines += finding_lines(self.finding)
        if self.process.get("finding"):
            lines.append(self.process["finding"])
        lines.append("")
        ranked = self.advice if self.profiled is not False else [a for a in self.advice if a.op_share]
        unranked = [a for a in self.advice if a not in ranked]
        if ranked:
            lines.append("try, in your loop, in this order (each measured by the gnnbench entry named):")
            for i, a in enumerate(ranked[:ADVICE_SHOWN], 1):
                lines.append(f"  {i}. {self._advice_text(a)}")
            if len(ranked) > ADVICE_SHOWN:
                lines.append(
                    f"  ({len(ranked) - ADVICE_SHOWN} more in to_dict()['advice']: "
                    + ", ".join(a.entry for a in ranked[ADVICE_SHOWN:])
                    + ")"
                )
        if unranked:
            lines.append(
                "not ranked: the loop ended before the profiled steps, so nothing measured what these "
                "remove; candidates for the bottleneck, in no order:"
            )
            lines += [f"  - {self._advice_text(a)}" for a in unranked[:ADVICE_SHOWN]]
            if len(unranked) > ADVICE_SHOWN:
                lines.append(
                    f"  ({len(unranked) - ADVICE_SHOWN} more: "
                    + ", ".join(a.entry for a in unranked[ADVICE_SHOWN:])
                    + ")"
                )
        if not self.advice:
            lines.append("nothing in the registry targets it that applies to this loop")
        if self.reproduce:
            lines.append("")
            lines.append(f"verify by measurement on a twin of your graph:\n  {self.reproduce}")
        if self.verify_in_script:
            lines.append(
                f"or in your script itself (each change applied from the outside, measured against the "
                f"script as it is):\n  {self.verify_in_script}"
            )
        if self.overhead is not None:
            lines.append(self._overhead_text())
        lines += [f"note: {n}" for n in self.notes]
        if self.wall_s:
            lines.append("wall time: " + ", ".join(f"{k} {v:.1f} s" for k, v in self.wall_s.items()))
        return "\n".join(lines)

    @staticmethod
    def _advice_text(a: Advice) -> str:
        why = f"; the operators it removes or changes: {a.op_share:.0%} of the profile" if a.op_share else ""
        return f"{a.setting}  [{a.entry}{why}{'; may cost accuracy' if a.costs_accuracy else ''}]"

    def _overhead_text(self) -> str:
        text = (
            f"instrumentation overhead: at least {self.overhead:.2%} of the step (a lower bound: each "
            "instrumented call's cost, measured at entry, times its calls per step; cache effects and torch's "
            "hook dispatch are not in it)"
        )
        if self.overhead_measured:
            figures = "; ".join(
                f"{m['preset']} ({m['step_ms']:.1f} ms step) {m['ratio']:.3f}x "
                f"[{m['low']:.3f}, {m['high']:.3f}] (95%, {m['processes']} processes)"
                for m in self.overhead_measured
            )
            text += (
                "; measured end to end, watched / unwatched step of PyG's NeighborLoader + GraphSAGE loop "
                f"(scripts/watch_overhead.py, results/reference/watch-overhead/): {figures}"
            )
        else:
            text += f"; measured end to end: {OVERHEAD_DOC}"
        return text
