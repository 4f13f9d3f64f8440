"""The human-readable report of a :class:`~gnnbench.advice.diagnose.Diagnosis`: breakdown, classification,
what to try (:func:`format_diagnosis`). Its pieces (:func:`bottleneck_line`, :func:`compute_line`,
:func:`hot_op_lines`, :func:`finding_lines`) also make ``gnnbench.watch``'s report, so a diagnosis of a user's
own loop reads like one of gnnbench's pipeline.
"""

from __future__ import annotations

from gnnbench.advice.diagnose import Diagnosis
from gnnbench.advice.op_profile import HOT_OP_SHARE, HotOp
from gnnbench.advice.rules import Finding
from gnnbench.text import human_bytes

__all__ = ["format_diagnosis", "bottleneck_line", "compute_line", "hot_op_lines", "finding_lines"]

UNTARGETED = "no entry targets it"  # a hot operator no registry entry removes or changes where it ran


def bottleneck_line(shares: dict[str, float]) -> str:
    """``by bottleneck: sampling 12%, features 3%, kernels 80%`` (negative sampling only where it took time)."""
    return "by bottleneck: " + ", ".join(f"{g} {s:.0%}" for g, s in shares.items() if s > 0 or g != "negatives")


def compute_line(finding: Finding, data_wait_share: float, device_busy: float | None = None) -> str:
    """The compute share the classification read (and where from), the share spent waiting for data, and
    the device's busy share where NVML measured one."""
    line = (
        f"compute share {finding.compute_share:.0%} ({finding.compute_source}); waiting for data {data_wait_share:.0%}"
    )
    if device_busy is not None and finding.compute_source != "NVML":
        line += f"; device busy {device_busy:.0%} (NVML)"
    return line


def hot_op_lines(hot_ops: list[HotOp]) -> list[str]:
    """The operators above :data:`HOT_OP_SHARE` of the profiled steps: each with the phases (and the code paths)
    it ran in and the registry entries that remove or change it there (with the share of the step each is
    credited with, where code paths attributed it), or :data:`UNTARGETED`."""
    if not hot_ops:
        return []
    lines = [f"operators above {HOT_OP_SHARE:.0%} of the profiled steps, where they ran and what targets them:"]
    for h in hot_ops:
        shown = [(p, s) for i, (p, s) in enumerate(h.phases.items()) if i == 0 or s >= 0.005]
        where = ", ".join(f"{p} {s:.0%}" for p, s in shown)
        paths = [(p, s) for p, s in h.paths.items() if s >= 0.005]
        if paths:
            where += "; in " + ", ".join(f"{p} {s:.0%}" for p, s in paths)
        if h.paths:  # attributed by code path: how much of it each entry removes or changes
            target = ", ".join(f"{e} {h.credits.get(e, 0.0):.0%}" for e in h.entries) if h.entries else UNTARGETED
        else:
            target = ", ".join(h.entries) if h.entries else UNTARGETED
        lines.append(f"  {h.op} {h.share:.0%} ({where}): {target}")
    return lines


def finding_lines(finding: Finding) -> list[str]:
    """``bottleneck: ...`` with its reason, and the runner-up worth a look."""
    lines = [f"bottleneck: {finding.bottleneck} ({finding.share:.0%} of the step): {finding.reason}"]
    if finding.secondary:
        lines.append(f"also worth a look: {finding.secondary} ({finding.secondary_share:.0%})")
    return lines


def process_line(proc: dict) -> str:
    """One line: the allocator and threads the process ran with (read back), and the measured steps' page faults
    and kernel share."""
    alloc, threads, usage = proc.get("allocator") or {}, proc.get("threads") or {}, proc.get("usage")
    name = alloc.get("allocator") or f"unrecognized {alloc.get('family', '?')} settings {alloc.get('settings')}"
    text = f"process: allocator {name} ({alloc.get('library') or '?'})"
    if threads:
        text += f", {threads.get('intra_op')} intra-op thread(s) on cores {threads.get('main_cores')}"
        if threads.get("worker_cores"):
            text += f", loader workers on {threads['worker_cores']}"
    if usage and usage.get("kernel_share") is not None:
        text += (
            f"; measured steps: {usage['minor_faults_per_step']:,.0f} page faults a step, "
            f"{usage['kernel_share']:.0%} of their CPU time in the kernel"
        )
    return text


def format_diagnosis(d: Diagnosis, first: list[str] | None = None, measured: dict[str, str] | None = None) -> str:
    """The human-readable report: breakdown, classification, what to try.

    Args:
        d: The diagnosis.
        first: Lines that open the report, under its first line (``diagnose``'s measured candidates).
        measured: Entries measured above: name -> a short reading, shown beside each in the ranked list.
    """
    f = d.finding
    measured = measured or {}
    lines = [
        f"diagnose: {d.steps} measured steps on {d.device}; step {d.step_ms['mean']:.1f} ms mean "
        f"(median {d.step_ms['median']:.1f}, min {d.step_ms['min']:.1f}, max {d.step_ms['max']:.1f})",
        "",
    ]
    if first:
        lines += [*first, ""]
    lines.append(f"{'phase':<12}{'ms/step':>10}{'share':>8}")
    for p, ms in d.phase_ms.items():
        if ms > 0 or p != "negatives":
            lines.append(f"{p:<12}{ms:>10.2f}{ms / d.step_ms['mean']:>8.0%}")
    lines.append("")
    lines.append(bottleneck_line(d.shares))
    lines.append(compute_line(f, d.data_wait_share))
    mem = d.memory
    mem_txt = f"host peak {human_bytes(mem['host_peak_bytes'])}"
    if mem.get("device_peak_bytes") is not None:
        mem_txt += f", device peak {human_bytes(mem['device_peak_bytes'])}"
    lines.append(f"memory: {mem_txt}")
    if d.process:
        lines.append(process_line(d.process))
    s = d.sampled
    if s:
        hops = (
            (" (per hop: " + " / ".join(f"{v:.0f}" for v in s["nodes_per_hop"]) + ")") if s.get("nodes_per_hop") else ""
        )
        lines.append(
            f"sampled: {s['nodes_per_batch']:.0f} nodes per batch{hops}, {s['coverage']:.0%} of the graph's "
            f"nodes; {s['edges_per_batch']:.0f} edges"
        )
    if d.compile is not None:
        c = d.compile
        lines.append(
            f"compile: {c['graphs']} graph(s), {c['graph_breaks']} graph break(s), {c['recompilations']} "
            f"recompilation(s); first step {c['first_step_seconds'] or 0:.1f} s (compilation included)"
            + (f"; breaks: {'; '.join(c['break_reasons'])}" if c["break_reasons"] else "")
        )
    if d.hot_ops:
        lines += hot_op_lines(d.hot_ops)
    elif d.top_ops:
        lines.append("top operators (profiled steps): " + ", ".join(f"{op} {v:.0%}" for op, v in d.top_ops[:5]))
    lines.append("")
    lines += finding_lines(f)[:1]
    if d.explosion:
        lines.append(d.explosion)
    if d.process.get("finding"):
        lines.append(d.process["finding"])
    lines += finding_lines(f)[1:]
    lines.append(f"commonly expected for this case (docs/rules.md): {d.expected}")
    lines.append("")
    runnable = [r for r in d.recommendations if r.unavailable is None and r.not_applicable is None]
    lines.append("try, in this order:" if runnable else "nothing in the registry targets it and can run here")
    for i, r in enumerate(runnable, 1):
        cost = " (may cost accuracy: judge it by time to accuracy)" if r.costs_accuracy else ""
        seen = f" [measured above: {measured[r.name]}]" if r.name in measured else ""
        lines.append(f"  {i}. {r.name}{seen}{cost}: {r.motivation}")
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
        lines.append(
            "measure them: gnnbench diagnose ... --verify (or gnnbench compare --flags "
            f"{','.join(r.name for r in runnable)})"
        )
    return "\n".join(lines)
