"""``gnnbench tune``: a greedy search over the registry, measured with ``compare``'s statistics.

:func:`tune` locates first (:func:`gnnbench.advice.diagnose.diagnose`; :func:`candidates_for` keeps the
entries that target a bottleneck worth optimizing), then measures, round by round, every candidate against
the flags chosen so far and makes the move with the largest *significant* gain within the accuracy limit.
Each round also measures **swap moves** (:func:`swap_moves`: a chosen entry replaced by one that paid
before but conflicts with it), since pure greedy addition can lock out an entry that paid on its own. The
search stops when nothing pays or the time budget would be exceeded; the chosen set is then measured against
the original baseline. :func:`format_tune` prints the rounds.

The search rules in full, with an example of a lock-out: ``docs/advice.md``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis, diagnose
from gnnbench.advice.rules import RULES
from gnnbench.env import resolve_device
from gnnbench.measure.calibration import BUDGET_FACTOR, DEFAULT_CALIBRATION_RUNS
from gnnbench.measure.comparison import ComparisonRow, compare
from gnnbench.measure.sweep import Entry, run_calibration, run_sweep, sweep_entries
from gnnbench.text import pp, ratio
from gnnbench.training import RunConfig, config_unavailable

__all__ = ["TuneRound", "TuneResult", "tune", "candidates_for", "format_tune", "swap_moves", "SWAP_PREFIX"]

SWAP_PREFIX = "swap:"  # label of a swap move: "swap:<out>-><in>"


@dataclass
class TuneRound:
    """One greedy round: what was measured against which flags, and what was kept."""

    base: list[str]  # entries chosen before this round
    measured: list[dict]  # per candidate: label, speedup [low, high], significant, acc delta
    added: str | None
    why: str
    seconds: float


@dataclass
class TuneResult:
    chosen: list[str]
    rounds: list[TuneRound] = field(default_factory=list)
    stop_reason: str = ""
    final: ComparisonRow | None = None  # the chosen set against the original baseline (a compare row)
    not_applicable: dict[str, str] = field(default_factory=dict)  # candidates that cannot apply: name -> reason
    diagnosis: dict | None = None
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)  # runs that failed (SweepResults.failed), every round

    def to_dict(self) -> dict:
        """JSON-ready; the final row as :meth:`ComparisonRow.to_dict` writes it."""
        return {**dataclasses.asdict(dataclasses.replace(self, final=None)),
                "final": self.final.to_dict() if self.final is not None else None}


def candidates_for(d: Diagnosis, config: RunConfig, *, worth_at: float = RULES.worth_at,
                   not_applicable: dict[str, str] | None = None) -> list[str]:
    """Registry entries for this task that target a group worth optimizing and can run here; those that cannot
    apply to ``config`` go into ``not_applicable`` (name -> reason) when given."""
    device = resolve_device(config.device)
    groups = {g for g, s in d.shares.items() if s >= worth_at}
    out = []
    for opt in registry.for_task(config.task):
        if not groups.intersection(opt.targets):
            continue
        reason = registry.not_applicable(config, [opt.name])
        if reason:
            if not_applicable is not None:
                not_applicable[opt.name] = reason
            continue
        cfg = registry.config_for(config, [opt.name])
        if cfg.flags == config.flags or config_unavailable(cfg, device):
            continue
        out.append(opt.name)
    return out


def _fields(name: str, base) -> set[str]:
    try:
        return set(registry.get(name).changes_for(base))
    except registry.NotApplicable:
        return set()


def _conflicts(names: list[str], base: RunConfig, device) -> bool:
    """Whether ``names`` cannot be switched on together: two set one field, or the set cannot run here."""
    seen: set[str] = set()
    for n in names:
        f = _fields(n, base.flags)
        if f & seen:
            return True
        seen |= f
    if registry.not_applicable(base, names):
        return True
    return bool(config_unavailable(registry.config_for(base, names), device))


def swap_moves(chosen: list[str], paid: list[str], base: RunConfig, *, tried: set[tuple[str, str]] = frozenset(),
               device=None) -> list[tuple[str, str, list[str]]]:
    """``(out, in, new set)`` for each entry of ``paid`` (entries that paid significantly in an earlier round,
    best first) that cannot be added to ``chosen`` but can replace exactly one chosen entry; swaps in
    ``tried`` are skipped. The new set keeps the order of ``chosen`` with ``in`` in the place of ``out``."""
    device = device if device is not None else resolve_device(base.device)
    moves = []
    for name in paid:
        if name in chosen or not _conflicts(chosen + [name], base, device):
            continue  # already chosen, or an ordinary addition
        for out in chosen:
            if (out, name) in tried:
                continue
            new = [name if c == out else c for c in chosen]
            if not _conflicts(new, base, device):
                moves.append((out, name, new))
                break
    return moves


def _swap_entries(base: RunConfig, moves: list[tuple[str, str, list[str]]], repeats: int) -> list[Entry]:
    """Sweep entries for swap moves, paired by round (seed) with :func:`sweep_entries`' baseline."""
    return [Entry(f"{SWAP_PREFIX}{out}->{new_in}",
                  registry.config_for(dataclasses.replace(base, seed=base.seed + r), new),
                  tuple(new), r)
            for r in range(repeats) for out, new_in, new in moves]


def _acc_ok(row: ComparisonRow, max_acc_loss_pp: float) -> bool:
    delta = row.acc_delta
    return delta is not None and delta * 100 >= -max_acc_loss_pp


def _measured(r: ComparisonRow) -> dict:
    """A candidate's line of a round (:attr:`TuneRound.measured`); a row not measured has no figures."""
    ok = r.status == "ok"
    return {"label": r.label, "status": r.status, "speedup": r.speedup, "low": r.speedup_low,
            "high": r.speedup_high, "by": r.primary if ok else None, "significant": r.significant if ok else None,
            "acc_delta_pp": (r.acc_delta or 0.0) * 100 if ok else 0.0}


def tune(base: RunConfig, *, budget_s: float, out_dir: str | Path, repeats: int = 3, max_acc_loss_pp: float = 0.5,
         candidates: list[str] | None = None, diagnose_steps: int = 30,
         log: Callable[[str], None] = print, isolate: bool = True,
         calibration_runs: int = DEFAULT_CALIBRATION_RUNS, budget_factor: float = BUDGET_FACTOR) -> TuneResult:
    """Greedy search with swap moves (the rules: ``docs/advice.md``).

    Args:
        base: The starting configuration (its flags are the baseline).
        budget_s: Wall-clock budget in seconds for the whole search, final measurement included.
        out_dir: Where each round's sweep writes its results (``round-1/``, ..., ``final/``).
        repeats: Processes per configuration per round (interleaved rounds).
        max_acc_loss_pp: Largest accepted mean accuracy loss, in percentage points, paired by seed.
        candidates: Entries to consider (default: those :func:`candidates_for` the diagnosis picks).
        diagnose_steps: Measured steps of the diagnosis that picks the candidates.
        log: Receives one line per event.
        isolate: Run each configuration in its own process (as ``compare`` does).
        calibration_runs: Baseline runs on their own seeds that fix the accuracy target, the validation
            cadence and the budget once, before the first round (``out_dir/calibration/``); every round and the
            final measurement are judged against that one target. 0: no calibration.
        budget_factor: Each run's budget, in multiples of the calibrated time to the target.
    """
    if budget_s <= 0:
        raise ValueError(f"budget must be positive (got {budget_s} s)")
    if max_acc_loss_pp < 0:
        raise ValueError(f"max_acc_loss_pp must be >= 0 (got {max_acc_loss_pp})")
    if not isinstance(repeats, int) or repeats < 2:
        raise ValueError(f"tune needs at least 2 repeats per configuration for an interval (got {repeats!r})")
    start = time.monotonic()
    out_dir = Path(out_dir)
    result = TuneResult(chosen=[])
    if candidates is None:
        d = diagnose(base, steps=diagnose_steps)
        result.diagnosis = {"bottleneck": d.finding.bottleneck, "shares": d.shares}
        candidates = candidates_for(d, base, not_applicable=result.not_applicable)
        log(f"diagnosis: {d.finding.bottleneck} ({d.finding.share:.0%} of the step); candidates: "
            f"{', '.join(candidates) or 'none'}")
    else:
        for name in candidates:
            registry.get(name)
        result.not_applicable = {n: r for n in candidates if (r := registry.not_applicable(base, [n]))}
        candidates = [n for n in candidates if n not in result.not_applicable]
    for reason in result.not_applicable.values():
        log(f"not applicable: {reason}")
    calibration, _ = run_calibration(base, out_dir / "calibration", runs=calibration_runs, isolate=isolate,
                                     budget_factor=budget_factor)
    if calibration is not None:
        base = calibration.apply(base)
        log(f"target: validation {calibration.target:.4f} ({calibration.source}); budget "
            f"{calibration.budget_seconds:.1f} s per run" if calibration.target is not None
            else f"target: {calibration.source}")
    pool = list(candidates)
    per_run: float | None = None
    device = resolve_device(base.device)
    paid: dict[str, float] = {}  # entries that paid significantly in some round: their best speedup
    tried: set[tuple[str, str]] = set()
    k = 0
    while True:
        current = registry.config_for(base, result.chosen)
        taken = set().union(*(_fields(n, base.flags) for n in result.chosen)) if result.chosen else set()
        pool = [n for n in pool if n not in result.chosen and not (_fields(n, current.flags) & taken)
                and not registry.not_applicable(current, [n])
                and registry.config_for(current, [n]).flags != current.flags]
        swaps = swap_moves(result.chosen, sorted(paid, key=lambda n: -paid[n]), base, tried=tried, device=device)
        if not pool and not swaps:
            result.stop_reason = "no candidate left"
            break
        configs = len(pool) + len(swaps)
        runs_needed = (configs + 1) * repeats + 2 * repeats  # this round, then the final measurement
        left = budget_s - (time.monotonic() - start)
        if per_run is not None and runs_needed * per_run > left:
            result.stop_reason = (f"budget: the next round ({configs + 1} configurations x {repeats}) and the "
                                  f"final measurement need about {runs_needed * per_run / 60:.1f} min, "
                                  f"{left / 60:.1f} min left")
            break
        k += 1
        t0 = time.monotonic()
        what = ", ".join(f"{len(x)} {w}" for x, w in ((pool, "additions"), (swaps, "swaps")) if x)
        log(f"round {k}: {what} against {'+'.join(result.chosen) or 'the baseline'}")
        tried.update((out, new_in) for out, new_in, _ in swaps)
        entries = sweep_entries(current, pool, repeats=repeats, include_all_recommended=False)
        entries += _swap_entries(base, swaps, repeats)
        runs = run_sweep(entries, out_dir / f"round-{k}", isolate=isolate, resume=True)
        result.failed += runs.failed()
        swap_sets = {f"{SWAP_PREFIX}{out}->{new_in}": new for out, new_in, new in swaps}
        rows = [r for r in compare(runs, calibration=calibration).rows if r.label in pool or r.label in swap_sets]
        seconds = time.monotonic() - t0
        per_run = seconds / max(1, len(entries))
        measured = [_measured(r) for r in rows]
        paying = [r for r in rows if r.status == "ok" and r.significant and (r.speedup or 0) > 1
                  and _acc_ok(r, max_acc_loss_pp)]
        for r in paying:
            if r.label in pool:
                paid[r.label] = max(paid.get(r.label, 0.0), r.speedup)
        if not paying:
            costly = [r.label for r in rows if r.significant and (r.speedup or 0) > 1]
            why = "nothing pays significantly" + (
                f" within the accuracy limit (faster but too costly: {', '.join(costly)})" if costly else "")
            result.rounds.append(TuneRound(list(result.chosen), measured, None, why, seconds))
            result.stop_reason = why
            log(f"round {k}: {why}")
            break
        best = max(paying, key=lambda r: r.speedup)
        why = (f"{best.label}: {ratio(best.speedup, best.speedup_low, best.speedup_high)} by "
               f"{best.primary}, accuracy {pp(best.acc_delta)}")
        result.rounds.append(TuneRound(list(result.chosen), measured, best.label, why, seconds))
        if best.label in swap_sets:
            out, new_in = best.label[len(SWAP_PREFIX):].split("->")
            tried.add((new_in, out))  # never swap straight back: that set was just beaten
            result.chosen = list(swap_sets[best.label])
            log(f"round {k}: swapped {why}")
        else:
            result.chosen.append(best.label)
            log(f"round {k}: added {why}")
        pool = [r.label for r in rows if r.label != best.label and r.label not in swap_sets
                and (r.speedup or 0) > 1]
    if result.chosen:
        label = "+".join(result.chosen)
        log(f"final: {label} against the baseline")
        entries = sweep_entries(base, [label], repeats=repeats, include_all_recommended=False)
        runs = run_sweep(entries, out_dir / "final", isolate=isolate, resume=True)
        result.failed += runs.failed()
        result.final = next((r for r in compare(runs, calibration=calibration).rows if r.label == label), None)
    result.seconds = time.monotonic() - start
    return result


def format_tune(r: TuneResult) -> str:
    lines = []
    for i, rnd in enumerate(r.rounds, 1):
        lines.append(f"round {i} (on top of {'+'.join(rnd.base) or 'baseline'}, {rnd.seconds / 60:.1f} min):")
        for m in sorted(rnd.measured, key=lambda m: -(m["speedup"] or 0)):
            if m["speedup"] is None:
                lines.append(f"    {m['label']:<20} {m['status']}")
                continue
            sig = "" if m["significant"] else " (n.s.)"
            lines.append(f"    {m['label']:<20} {ratio(m['speedup'], m['low'], m['high'])}{sig} by {m['by']}, "
                         f"accuracy {pp(m['acc_delta_pp'] / 100)}")
        verb = "swapped " if rnd.added and rnd.added.startswith(SWAP_PREFIX) else "added "
        lines.append(f"  -> {verb + rnd.why if rnd.added else rnd.why}")
    for reason in r.not_applicable.values():
        lines.append(f"not applicable: {reason}")
    lines.append(f"stopped: {r.stop_reason}")
    if r.chosen and r.final:
        f = r.final
        sig = "" if f.significant else " (no significant difference)"
        lines.append(f"final flag set: {','.join(r.chosen)}")
        if f.speedup is not None:
            lines.append(f"against the baseline: {ratio(f.speedup, f.speedup_low, f.speedup_high)}{sig} by "
                         f"{f.primary}; accuracy {pp(f.acc_delta, f.acc_delta_low, f.acc_delta_high)} "
                         f"({f.acc_verdict})")
    elif not r.chosen:
        lines.append("final flag set: the baseline (no entry paid here)")
    lines.append(f"total {r.seconds / 60:.1f} min")
    return "\n".join(lines)
