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
import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis, diagnose
from gnnbench.advice.rules import RULES
from gnnbench.advice.swaps import SWAP_PREFIX, changed_fields, swap_entries, swap_moves
from gnnbench.env import resolve_device
from gnnbench.measure.compare import BUDGET_FACTOR, DEFAULT_CALIBRATION_RUNS, Calibration, ComparisonRow
from gnnbench.measure.sweep import SweepOptions, run_calibration, sweep_and_compare
from gnnbench.text import pp, ratio
from gnnbench.training import RunConfig, config_unavailable

__all__ = ["TuneRound", "TuneResult", "tune", "candidates_for", "format_tune", "swap_moves", "SWAP_PREFIX"]


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
        return {
            **dataclasses.asdict(dataclasses.replace(self, final=None)),
            "final": self.final.to_dict() if self.final is not None else None,
        }


def candidates_for(
    d: Diagnosis, config: RunConfig, *, worth_at: float = RULES.worth_at, not_applicable: dict[str, str] | None = None
) -> list[str]:
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


def _acc_ok(row: ComparisonRow, max_acc_loss_pp: float) -> bool:
    delta = row.acc_delta
    return delta is not None and delta * 100 >= -max_acc_loss_pp


@dataclass
class _Search:
    """What the search carries from one round to the next."""

    pool: list[str]  # candidates still worth measuring (additions)
    paid: dict[str, float] = field(default_factory=dict)  # entries that paid significantly: their best speedup
    tried: set[tuple[str, str]] = field(default_factory=set)  # swaps (out, in) measured, or made and so beaten
    per_run: float | None = None  # seconds per run of the last round (the budget's estimate)


def tune(
    base: RunConfig,
    *,
    budget_s: float,
    out_dir: str | Path,
    repeats: int = 3,
    max_acc_loss_pp: float = 0.5,
    candidates: list[str] | None = None,
    diagnose_steps: int = 30,
    log: Callable[[str], None] = print,
    isolate: bool = True,
    calibration_runs: int = DEFAULT_CALIBRATION_RUNS,
    budget_factor: float = BUDGET_FACTOR,
) -> TuneResult:
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
    _check_settings(budget_s, max_acc_loss_pp, repeats)
    start = time.monotonic()
    out_dir = Path(out_dir)
    result = TuneResult(chosen=[])
    search = _Search(pool=_candidates(base, candidates, diagnose_steps, result, log))
    base, calibration = _calibrated(base, out_dir / "calibration", calibration_runs, budget_factor, isolate, log)
    device = resolve_device(base.device)
    for k in itertools.count(1):
        current = registry.config_for(base, result.chosen)
        search.pool = _still_open(search.pool, result.chosen, base, current)
        swaps = swap_moves(
            result.chosen, sorted(search.paid, key=lambda n: -search.paid[n]), base, tried=search.tried, device=device
        )
        result.stop_reason = _stop_before_round(search, swaps, repeats, budget_s - (time.monotonic() - start))
        if result.stop_reason:
            break
        rows, swap_sets, seconds = _measure_round(
            k, current, base, swaps, search, result, calibration, out_dir / f"round-{k}", repeats, isolate, log
        )
        best = _best_move(rows, search, max_acc_loss_pp)
        why = _why(rows, best)
        result.rounds.append(
            TuneRound(list(result.chosen), _measured(rows), best.label if best else None, why, seconds)
        )
        if best is None:
            result.stop_reason = why
            log(f"round {k}: {why}")
            break
        _make_move(k, best, why, rows, swap_sets, search, result, log)
    if result.chosen:
        result.final = _final(base, result, calibration, out_dir / "final", repeats, isolate, log)
    result.seconds = time.monotonic() - start
    return result


def _check_settings(budget_s: float, max_acc_loss_pp: float, repeats: int) -> None:
    if budget_s <= 0:
        raise ValueError(f"budget must be positive (got {budget_s} s)")
    if max_acc_loss_pp < 0:
        raise ValueError(f"max_acc_loss_pp must be >= 0 (got {max_acc_loss_pp})")
    if not isinstance(repeats, int) or repeats < 2:
        raise ValueError(f"tune needs at least 2 repeats per configuration for an interval (got {repeats!r})")


def _candidates(
    base: RunConfig, candidates: list[str] | None, diagnose_steps: int, result: TuneResult, log: Callable[[str], None]
) -> list[str]:
    """The entries the search starts from: ``candidates`` that can apply, else those the diagnosis picks; the
    diagnosis and the entries set aside (with their reasons) go into ``result``."""
    if candidates is None:
        d = diagnose(base, steps=diagnose_steps)
        result.diagnosis = {"bottleneck": d.finding.bottleneck, "shares": d.shares}
        candidates = candidates_for(d, base, not_applicable=result.not_applicable)
        log(
            f"diagnosis: {d.finding.bottleneck} ({d.finding.share:.0%} of the step); candidates: "
            f"{', '.join(candidates) or 'none'}"
        )
    else:
        for name in candidates:
            registry.get(name)
        result.not_applicable = {n: r for n in candidates if (r := registry.not_applicable(base, [n]))}
        candidates = [n for n in candidates if n not in result.not_applicable]
    for reason in result.not_applicable.values():
        log(f"not applicable: {reason}")
    return list(candidates)


def _calibrated(
    base: RunConfig, out_dir: Path, runs: int, budget_factor: float, isolate: bool, log: Callable[[str], None]
) -> tuple[RunConfig, Calibration | None]:
    """The one calibration every round is judged against (``runs == 0``: none), and ``base`` with it applied."""
    options = SweepOptions(calibration_runs=runs, isolate=isolate, budget_factor=budget_factor)
    calibration, _ = run_calibration(base, out_dir, options)
    if calibration is None:
        return base, None
    log(
        f"target: validation {calibration.target:.4f} ({calibration.source}); budget "
        f"{calibration.budget_seconds:.1f} s per run"
        if calibration.target is not None
        else f"target: {calibration.source}"
    )
    return calibration.apply(base), calibration


def _still_open(pool: list[str], chosen: list[str], base: RunConfig, current: RunConfig) -> list[str]:
    """The candidates that can still be added to ``chosen``: not chosen, setting no field a chosen entry set,
    applicable to and changing the current flags."""
    taken = set().union(*(changed_fields(n, base.flags) for n in chosen)) if chosen else set()
    return [
        n
        for n in pool
        if n not in chosen
        and not (changed_fields(n, current.flags) & taken)
        and not registry.not_applicable(current, [n])
        and registry.config_for(current, [n]).flags != current.flags
    ]


def _stop_before_round(search: _Search, swaps: list, repeats: int, left: float) -> str:
    """Why the search stops before the next round ("" when it goes on): nothing left to measure, or the round
    and the final measurement would not fit the time ``left`` at the last round's seconds per run."""
    if not search.pool and not swaps:
        return "no candidate left"
    configs = len(search.pool) + len(swaps)
    runs_needed = (configs + 1) * repeats + 2 * repeats  # this round, then the final measurement
    if search.per_run is not None and runs_needed * search.per_run > left:
        return (
            f"budget: the next round ({configs + 1} configurations x {repeats}) and the final measurement "
            f"need about {runs_needed * search.per_run / 60:.1f} min, {left / 60:.1f} min left"
        )
    return ""


def _measure_round(
    k: int,
    current: RunConfig,
    base: RunConfig,
    swaps: list,
    search: _Search,
    result: TuneResult,
    calibration: Calibration | None,
    out_dir: Path,
    repeats: int,
    isolate: bool,
    log: Callable[[str], None],
) -> tuple[list[dict], dict[str, list[str]], float]:
    """Round ``k``: the open candidates added to the current flags and the swap moves, against the current flags;
    their compare rows, the swap moves' sets by label, and the round's seconds (``search.per_run`` follows)."""
    t0 = time.monotonic()
    what = ", ".join(f"{len(x)} {w}" for x, w in ((search.pool, "additions"), (swaps, "swaps")) if x)
    log(f"round {k}: {what} against {'+'.join(result.chosen) or 'the baseline'}")
    search.tried.update((out, new_in) for out, new_in, _ in swaps)
    swap_sets = {f"{SWAP_PREFIX}{out}->{new_in}": new for out, new_in, new in swaps}
    measured = sweep_and_compare(
        current,
        search.pool,
        out_dir,
        SweepOptions(
            repeats=repeats, calibration_runs=0, include_all_recommended=False, isolate=isolate, interleave=True
        ),
        calibration=calibration,
        extra_entries=swap_entries(base, swaps, repeats),
    )
    result.failed += measured.results.failed()
    rows = [r for r in measured.comparison.rows if r.label in search.pool or r.label in swap_sets]
    seconds = time.monotonic() - t0
    search.per_run = seconds / max(1, len(measured.entries))
    return rows, swap_sets, seconds


def _make_move(
    k: int,
    best: ComparisonRow,
    why: str,
    rows: list[ComparisonRow],
    swap_sets: dict[str, list[str]],
    search: _Search,
    result: TuneResult,
    log: Callable[[str], None],
) -> None:
    """Add the best row's entry, or make its swap; the candidates that beat the current flags stay open."""
    if best.label in swap_sets:
        out, new_in = best.label[len(SWAP_PREFIX) :].split("->")
        search.tried.add((new_in, out))  # never swap straight back: that set was just beaten
        result.chosen = list(swap_sets[best.label])
        log(f"round {k}: swapped {why}")
    else:
        result.chosen.append(best.label)
        log(f"round {k}: added {why}")
    search.pool = [r.label for r in rows if r.label != best.label and r.label not in swap_sets and (r.speedup or 0) > 1]


def _measured(rows: list[ComparisonRow]) -> list[dict]:
    """A round's rows as :attr:`TuneRound.measured` keeps them; a row not measured has no figures."""
    out = []
    for r in rows:
        ok = r.status == "ok"
        out.append(
            {
                "label": r.label,
                "status": r.status,
                "speedup": r.speedup,
                "low": r.speedup_low,
                "high": r.speedup_high,
                "by": r.primary if ok else None,
                "significant": r.significant if ok else None,
                "acc_delta_pp": (r.acc_delta or 0.0) * 100 if ok else 0.0,
            }
        )
    return out


def _best_move(rows: list[ComparisonRow], search: _Search, max_acc_loss_pp: float) -> ComparisonRow | None:
    """The row with the largest significant gain within the accuracy limit (``None``: nothing pays); every
    addition that paid is remembered in ``search.paid`` (a later round may swap it in)."""
    paying = [
        r for r in rows if r.status == "ok" and r.significant and (r.speedup or 0) > 1 and _acc_ok(r, max_acc_loss_pp)
    ]
    for r in paying:
        if r.label in search.pool:
            search.paid[r.label] = max(search.paid.get(r.label, 0.0), r.speedup)
    return max(paying, key=lambda r: r.speedup) if paying else None


def _why(rows: list[ComparisonRow], best: ComparisonRow | None) -> str:
    """The round's outcome in words: the move made, or why none pays."""
    if best is not None:
        return (
            f"{best.label}: {ratio(best.speedup, best.speedup_low, best.speedup_high)} by "
            f"{best.primary}, accuracy {pp(best.acc_delta)}"
        )
    costly = [r.label for r in rows if r.significant and (r.speedup or 0) > 1]
    return "nothing pays significantly" + (
        f" within the accuracy limit (faster but too costly: {', '.join(costly)})" if costly else ""
    )


def _final(
    base: RunConfig,
    result: TuneResult,
    calibration: Calibration | None,
    out_dir: Path,
    repeats: int,
    isolate: bool,
    log: Callable[[str], None],
) -> ComparisonRow | None:
    """The chosen set against the original baseline: its compare row (its failed runs go into ``result``)."""
    label = "+".join(result.chosen)
    log(f"final: {label} against the baseline")
    measured = sweep_and_compare(
        base,
        [label],
        out_dir,
        SweepOptions(
            repeats=repeats, calibration_runs=0, include_all_recommended=False, isolate=isolate, interleave=True
        ),
        calibration=calibration,
    )
    result.failed += measured.results.failed()
    return next((r for r in measured.comparison.rows if r.label == label), None)


def format_tune(r: TuneResult) -> str:
    lines = []
    for i, rnd in enumerate(r.rounds, 1):
        lines.append(f"round {i} (on top of {'+'.join(rnd.base) or 'baseline'}, {rnd.seconds / 60:.1f} min):")
        for m in sorted(rnd.measured, key=lambda m: -(m["speedup"] or 0)):
            if m["speedup"] is None:
                lines.append(f"    {m['label']:<20} {m['status']}")
                continue
            sig = "" if m["significant"] else " (n.s.)"
            lines.append(
                f"    {m['label']:<20} {ratio(m['speedup'], m['low'], m['high'])}{sig} by {m['by']}, "
                f"accuracy {pp(m['acc_delta_pp'] / 100)}"
            )
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
            lines.append(
                f"against the baseline: {ratio(f.speedup, f.speedup_low, f.speedup_high)}{sig} by "
                f"{f.primary}; accuracy {pp(f.acc_delta, f.acc_delta_low, f.acc_delta_high)} "
                f"({f.acc_verdict})"
            )
    elif not r.chosen:
        lines.append("final flag set: the baseline (no entry paid here)")
    lines.append(f"total {r.seconds / 60:.1f} min")
    return "\n".join(lines)
