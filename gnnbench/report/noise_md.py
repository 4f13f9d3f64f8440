"""docs/statistics.md's table of the two timing designs' noise, generated from the committed file of
``scripts/inprocess_aa.py`` (:func:`noise_markdown`); ``tests/project/test_readme.py`` checks the docs hold it."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "NOISE_MARKERS",
    "NOISE_FILES",
    "noise_markdown",
    "noise_tables",
    "DUET_MARKERS",
    "DUET_FILES",
    "duet_markdown",
    "duet_tables",
    "RATES_MARKERS",
    "inprocess_rates",
]

NOISE_MARKERS = ("<!-- noise:begin -->", "<!-- noise:end -->")
# in results/reference/: the machine idle, then busy
NOISE_FILES = ("inprocess-aa-small-cpu-idle.json", "inprocess-aa-small-cpu.json")


def noise_markdown(path: str | Path) -> str:
    """The table between :data:`NOISE_MARKERS`: per row (the A/A, then each entry) and design, the per-round
    ratio with its interval, the sd of the per-round log ratio and the mean log ratio; then where it was
    measured and the command."""
    data = json.loads(Path(path).read_text())
    env = data.get("environment") or {}
    lines = [
        "",
        f"Measured by `{data['command']}` ({data['rounds']} rounds, {data['measured_steps_per_side']} measured "
        f"steps a side after {data['warmup_steps']} warm-up, `{data['preset']}`, default GCN; "
        f"{env.get('hardware_class') or env.get('machine') or 'this machine'}, {data['seconds'] / 60:.0f} minutes; "
        f"condition: {data.get('condition', 'not recorded')}):",
        "",
        "| row | design | per-round ratio [95%] | sd of the per-round log ratio | mean log ratio |",
        "|---|---|---|---|---|",
    ]
    for row, designs in data["table"].items():
        name = "A/A (baseline against itself)" if row == "baseline" else f"`{row}`"
        for design, s in designs.items():
            lines.append(
                f"| {name} | {design} | {s['ratio']:.3f}x [{s['low']:.3f}, {s['high']:.3f}] | "
                f"{s['sd_log_ratio']:.4f} | {s['mean_log_ratio']:+.4f} |"
            )
    lines.append("")
    return "\n".join(lines)


def noise_tables(folder: str | Path) -> str:
    """:func:`noise_markdown` of each of :data:`NOISE_FILES` in ``folder``, in that order: what the docs hold
    between :data:`NOISE_MARKERS`."""
    return "".join(noise_markdown(Path(folder) / name) for name in NOISE_FILES)


DUET_MARKERS = ("<!-- duet:begin -->", "<!-- duet:end -->")
# in results/reference/: the gate's two round designs A/A (scripts/duet_aa.py), in the order docs/regression-gate.md
# shows them: Python's hash seed random per process; one seed (0) for every process; one seed per round, shared by
# both sides (the gate's default since)
DUET_FILES = (
    "gate-duet-aa-tiny-cpu.json",
    "gate-duet-aa-hashseed-tiny-cpu.json",
    "gate-duet-aa-roundseed-tiny-cpu.json",
)


def duet_markdown(path: str | Path) -> str:
    """docs/regression-gate.md's A/A table of the gate's round designs (``scripts/duet_aa.py``'s file): per
    benchmark, the sd of the per-round log ratio in duet and alternating, with the command and the machine."""
    data = json.loads(Path(path).read_text())
    env = data.get("environment") or {}
    extra = ", environment " + ", ".join(f"{k}={v}" for k, v in data["env"].items()) if data.get("env") else ""
    lines = [
        "",
        f"Measured by `{data['command']}` ({data['rounds']} rounds per design, interleaved, `{data['preset']}`, "
        f"{data['steps']} measured steps a benchmark, one thread a side{extra}; "
        f"{env.get('hardware_class') or env.get('machine') or 'this machine'}, {data['seconds'] / 60:.0f} minutes):",
        "",
        "| benchmark | sd of the per-round log ratio, duet | alternating | mean log ratio, duet | alternating |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, designs in data["table"].items():
        d, a = designs["duet"], designs["alternating"]
        lines.append(
            f"| `{name}` | {d['sd_log_ratio']:.4f} | {a['sd_log_ratio']:.4f} | {d['mean_log_ratio']:+.4f} | "
            f"{a['mean_log_ratio']:+.4f} |"
        )
    lines.append("")
    return "\n".join(lines)


def duet_tables(folder: str | Path) -> str:
    """Every committed duet A/A file's table (:data:`DUET_FILES` that exist), in order."""
    return "".join(duet_markdown(Path(folder) / f) for f in DUET_FILES if (Path(folder) / f).is_file())


RATES_MARKERS = ("<!-- inprocess-rates:begin -->", "<!-- inprocess-rates:end -->")


def inprocess_rates(folder: str | Path) -> str:
    """docs/statistics.md's error-rate table at the in-process spread: the stopping rule's simulation
    (:func:`gnnbench.measure.stats.inprocess_tables`) at each committed A/A file's measured per-round sd of the
    in-process A/A (:data:`NOISE_FILES`: its condition, idle or busy)."""
    from gnnbench.measure.stats import inprocess_tables

    sds = {}
    for name in NOISE_FILES:
        data = json.loads((Path(folder) / name).read_text())
        condition = str(data.get("condition") or name).split(":")[0]
        sds[condition] = data["table"]["baseline"]["one process"]["sd_log_ratio"]
    return "\n" + inprocess_tables(sds)
