"""The human-readable report of a :class:`~gnnbench.advice.diagnose.Diagnosis`: breakdown, classification,
what to try (:func:`format_diagnosis`).
"""

from __future__ import annotations

from gnnbench.advice.diagnose import Diagnosis
from gnnbench.advice.op_profile import HOT_OP_SHARE
from gnnbench.text import human_bytes

__all__ = ["format_diagnosis"]


def format_diagnosis(d: Diagnosis) -> str:
    """The human-readable report: breakdown, classification, what to try."""
    f = d.finding
    lines = [f"diagnose: {d.steps} measured steps on {d.device}; step {d.step_ms['mean']:.1f} ms mean "
             f"(median {d.step_ms['median']:.1f}, min {d.step_ms['min']:.1f}, max {d.step_ms['max']:.1f})", ""]
    lines.append(f"{'phase':<12}{'ms/step':>10}{'share':>8}")
    for p, ms in d.phase_ms.items():
        if ms > 0 or p != "negatives":
            lines.append(f"{p:<12}{ms:>10.2f}{ms / d.step_ms['mean']:>8.0%}")
    lines.append("")
    lines.append("by bottleneck: " + ", ".join(f"{g} {s:.0%}" for g, s in d.shares.items()
                                               if s > 0 or g != "negatives"))
    lines.append(f"compute share {f.compute_share:.0%} ({f.compute_source}); waiting for data "
                 f"{d.data_wait_share:.0%}")
    mem = d.memory
    mem_txt = f"host peak {human_bytes(mem['host_peak_bytes'])}"
    if mem.get("device_peak_bytes") is not None:
        mem_txt += f", device peak {human_bytes(mem['device_peak_bytes'])}"
    lines.append(f"memory: {mem_txt}")
    s = d.sampled
    if s:
        hops = (" (per hop: " + " / ".join(f"{v:.0f}" for v in s["nodes_per_hop"]) + ")") if s.get("nodes_per_hop") else ""
        lines.append(f"sampled: {s['nodes_per_batch']:.0f} nodes per batch{hops}, {s['coverage']:.0%} of the graph's "
                     f"nodes; {s['edges_per_batch']:.0f} edges")
    if d.compile is not None:
        c = d.compile
        lines.append(f"compile: {c['graphs']} graph(s), {c['graph_breaks']} graph break(s), {c['recompilations']} "
                     f"recompilation(s); first step {c['first_step_seconds'] or 0:.1f} s (compilation included)"
                     + (f"; breaks: {'; '.join(c['break_reasons'])}" if c["break_reasons"] else ""))
    if d.hot_ops:
        lines.append(f"operators above {HOT_OP_SHARE:.0%} of the profiled steps, where they ran and what targets them:")
        for h in d.hot_ops:
            shown = [(p, s) for i, (p, s) in enumerate(h.phases.items()) if i == 0 or s >= 0.005]
            where = ", ".join(f"{p} {s:.0%}" for p, s in shown)
            target = ", ".join(h.entries) if h.entries else "no entry targets it"
            lines.append(f"  {h.op} {h.share:.0%} ({where}): {target}")
    elif d.top_ops:
        lines.append("top operators (profiled steps): " + ", ".join(f"{op} {v:.0%}" for op, v in d.top_ops[:5]))
    lines.append("")
    lines.append(f"bottleneck: {f.bottleneck} ({f.share:.0%} of the step): {f.reason}")
    if d.explosion:
        lines.append(d.explosion)
    if f.secondary:
        lines.append(f"also worth a look: {f.secondary} ({f.secondary_share:.0%})")
    lines.append(f"commonly expected for this case (docs/rules.md): {d.expected}")
    lines.append("")
    runnable = [r for r in d.recommendations if r.unavailable is None and r.not_applicable is None]
    lines.append("try, in this order:" if runnable else "nothing in the registry targets it and can run here")
    for i, r in enumerate(runnable, 1):
        cost = " (may cost accuracy: judge it by time to accuracy)" if r.costs_accuracy else ""
        lines.append(f"  {i}. {r.name}{cost}: {r.motivation}")
        lines.append(f"     {r.expected_effect}")
        if r.caveat:
            lines.append(f"     unlikely to pay on this machine: {r.caveat}")
    blocked = [r for r in d.recommendations if r.unavailable is not None]
    if blocked:
        lines.append("would target it, but cannot run here:")
        for r in blocked:
            lines.append(f"  - {r.name}: {r.unavailable}")
    inapplicable = [r for r in d.recommendations if r.not_applicable is not None]
    if inapplicable:
        lines.append("would target it, but does not apply to this configuration:")
        for r in inapplicable:
            lines.append(f"  - {r.name}: {r.not_applicable}")
    if runnable:
        lines.append("")
        lines.append("measure them: gnnbench diagnose ... --verify (or gnnbench compare --flags "
                     f"{','.join(r.name for r in runnable)})")
    return "\n".join(lines)
