"""The report of a watch: :class:`WatchReport` (what was measured and concluded), its :class:`Advice` lines and
its text (:meth:`WatchReport.format`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gnnbench.advice.op_profile import HotOp
from gnnbench.advice.rules import Finding

ADVICE_SHOWN = 5  # advice lines printed (the report keeps all)
WATCH_PHASES = ("wait", "sample", "gather", "transform", "transfer", "forward", "backward", "optimizer", "other")


@dataclass


class Advice:
    entry: str  # the registry entry that measures it
    setting: str  # what to change in the user's loop
    target: str  # the bottleneck group it relieves
    costs_accuracy: bool
    op_share: float | None = None  # share of the profiled steps in the operators it removes or shrinks


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
    overhead: float | None = None  # the instrumentation's cost, as a share of the median step
    device_busy: float | None = None
    reproduce: str | None = None  # the gnnbench command that measures the advice on a twin of the user's graph
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        lines = [f"gnnbench watch: {self.steps} measured steps after {self.warmup} warm-up, {self.mode} timing, "
                 f"{self.device}; step {self.step_ms['median']:.1f} ms (median; quartiles "
                 f"{self.step_ms['q1']:.1f}-{self.step_ms['q3']:.1f})"]
        if self.loader:
            lines.append("loader: " + ", ".join(f"{k} {v}" for k, v in self.loader.items()))
        lines.append("")
        lines.append(f"{'phase':<12}{'ms':>9}{'share':>8}")
        med = self.step_ms["median"]
        for p in WATCH_PHASES:
            if p in self.phase_ms:
                lines.append(f"{p:<12}{self.phase_ms[p]:>9.2f}{self.phase_ms[p] / med:>8.0%}")
        lines.append("")
        lines.append(f"bottleneck: {self.finding.bottleneck} ({self.finding.share:.0%} of the step): "
                     f"{self.finding.reason}")
        if self.hot_ops:
            lines.append("operators above 5% of the profiled steps:")
            for op in self.hot_ops:
                where = ", ".join(f"{ph} {v:.0%}" for ph, v in op.phases.items())
                lines.append(f"  {op.op} {op.share:.0%} ({where})" + (f"; entries: {', '.join(op.entries)}"
                                                                      if op.entries else ""))
        if self.advice:
            lines.append("try, in your loop (each measured by the gnnbench entry named):")
            for a in self.advice[:ADVICE_SHOWN]:
                why = f"; its operators {a.op_share:.0%} of the profile" if a.op_share else ""
                lines.append(f"  - {a.setting}  [{a.entry}{why}{'; may cost accuracy' if a.costs_accuracy else ''}]")
            if len(self.advice) > ADVICE_SHOWN:
                lines.append(f"  ({len(self.advice) - ADVICE_SHOWN} more in to_dict()['advice']: "
                             + ", ".join(a.entry for a in self.advice[ADVICE_SHOWN:]) + ")")
        if self.reproduce:
            lines.append(f"verify by measurement on a twin of your graph:\n  {self.reproduce}")
        if self.overhead is not None:
            lines.append(f"instrumentation overhead: about {self.overhead:.2%} of the step (each instrumented call's "
                         "cost, measured at entry, times its calls per step; a lower bound: cache effects are not in "
                         "it)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
