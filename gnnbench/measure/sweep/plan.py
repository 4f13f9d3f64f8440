"""The plan of a sweep: which configurations it runs, in which rounds, on which seeds.

:func:`sweep_entries` lists the baseline against baseline + each optimization and against all recommended
optimizations together, one :class:`Entry` per configuration and round. Round ``r`` trains with seed
``base.seed + r``, so timings and accuracies are paired by round (and by seed). The A/A copy of the baseline
trains on its own seed stream (``base.seed + AA_SEED_OFFSET + r``), so it shows the seed-to-seed spread too.
An entry whose every part keeps the trajectory runs short and its time to accuracy is derived
(:mod:`gnnbench.measure.compare.derived`); the later rounds of a sweep with a calibrated target are time-to-accuracy
runs (:func:`time_to_accuracy_config`). :mod:`gnnbench.measure.sweep.rounds` runs the entries.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from typing import TYPE_CHECKING, Iterable

from gnnbench import registry
from gnnbench.env import resolve_device
from gnnbench.measure.compare import (
    AA_DUET_LABEL,
    AA_INPROCESS_LABEL,
    AA_LABEL,
    AA_SEED_OFFSET,
    BASELINE,
    E2E_BASELINE,
    MEASURED_SUFFIX,
    is_derivable,
    short_config,
    short_epochs,
)
from gnnbench.measure.run import BUILD_ORDERS, DUET, INTERLEAVED, pair_refusal
from gnnbench.measure.stats import DEFAULT_REPEATS
from gnnbench.parallel.data_parallel import world_size_for
from gnnbench.training import RunConfig, config_unavailable

if TYPE_CHECKING:
    import torch

__all__ = [
    "Entry",
    "sweep_entries",
    "validate_base",
    "check_also_measured",
    "derivable_base",
    "time_to_accuracy_config",
    "on_ranks",
    "ALL_RECOMMENDED",
]

ALL_RECOMMENDED = "all_recommended"


def shares_process(cfg: RunConfig) -> bool:
    """Whether ``cfg`` can be timed beside another trainer in one process."""
    return pair_refusal(cfg, cfg) is None


def _changes_work(parts: Iterable[str]) -> bool:
    return any(registry.get(p).changes_work for p in parts)


@dataclasses.dataclass(frozen=True)
class Entry:
    """One configuration of a sweep, in one round."""

    label: str  # "baseline", an optimization name, "all_recommended" or the A/A copy of the baseline
    config: RunConfig
    optimizations: tuple[str, ...]
    round: int = 0  # interleaved round (its seed is base.seed + round)
    not_applicable: str | None = None  # why its optimizations cannot apply to the base (config: the base's)
    derived: bool = False  # a short run; time to accuracy derived (gnnbench.measure.compare.derived)
    # the round's baseline it is timed against in one process (a fresh one, after its run's), steps interleaved
    # (gnnbench.measure.run.paired), or in duet (pair_design); None: timed across processes only
    pair_with: RunConfig | None = None
    # how its pair is timed: "interleaved" (one process) or "duet" (its process and the baseline's at once, one
    # core each: an entry that sets the process, gnnbench.measure.sweep.duet)
    pair_design: str = INTERLEAVED

    @property
    def built_first(self) -> str:
        """Which trainer its pair builds first: alternating from round to round (counterbalanced)."""
        return BUILD_ORDERS[self.round % 2]

    def key(self) -> str:
        d = self.config.to_dict()
        if self.pair_with is not None:  # a paired result holds what a lone one does not
            d = {**d, "pair_with": self.pair_with.to_dict(), "built_first": self.built_first}
            if self.pair_design != INTERLEAVED:
                d["pair_design"] = self.pair_design
        blob = json.dumps(d, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def filename(self) -> str:
        """``<label>-r<round>-<key>.json``, the label made safe for a file name (the A/A label has a slash)."""
        return f"{re.sub(r'[^A-Za-z0-9_.]+', '_', self.label)}-r{self.round}-{self.key()}.json"


def validate_base(base: RunConfig) -> None:
    """Refuse, before running anything, a sweep whose configuration cannot produce a measured step."""
    epochs = base.epochs if base.epochs is not None else base.max_epochs
    if base.max_steps_per_epoch is not None and base.warmup_steps >= epochs * base.max_steps_per_epoch:
        raise ValueError(
            f"no step would be measured: {epochs} epoch(s) x {base.max_steps_per_epoch} steps with "
            f"{base.warmup_steps} warm-up steps; lower --warmup below {epochs * base.max_steps_per_epoch} "
            "or raise --epochs / --max-epochs / --max-steps"
        )


def on_ranks(cfg: RunConfig) -> RunConfig:
    """A ``--nproc N`` sweep runs its parallel entries on N ranks, the rest (the baseline: one process on the
    same global batch, what scaling efficiency compares with) in one process."""
    return dataclasses.replace(cfg, nproc=world_size_for(cfg.flags, cfg.nproc))


def derivable_base(base: RunConfig) -> bool:
    """Whether a short run keeps the trajectory on ``base``: only with a constant learning rate (a cosine
    horizon follows the run's length) and gnnbench's sampler (PyG's native one draws from each worker's own
    state)."""
    return base.lr_schedule == "constant" and base.flags.sampler_backend == "gnnbench"


def check_also_measured(base: RunConfig, names: Iterable[str] | None, also_measured: Iterable[str]) -> None:
    """Refuse, before anything runs (calibration included), an ``also_measured`` name that this sweep cannot
    derive: not among its entries (``names``; ``None``: every registered one), not declared
    ``same_trajectory``, or a base configuration on which no short run keeps the trajectory."""
    entries = list(names) if names is not None else registry.names()
    for n in also_measured:
        if n not in entries:
            shown = ", ".join(entries) if entries else "none: with --aa and no --flags it is the A/A check alone"
            raise ValueError(
                f"--also-measure {n!r}: not an entry of this sweep (its entries: {shown}); name it in --flags too"
            )
        if not is_derivable(registry.combination(n)):
            declared = ", ".join(o.name for o in registry.REGISTRY.values() if o.same_trajectory)
            raise ValueError(
                f"--also-measure {n!r}: not declared same_trajectory, so it is trained to the target "
                f"anyway; entries whose time to accuracy is derived: {declared}"
            )
        if not derivable_base(base):
            raise ValueError(
                f"--also-measure {n!r}: no time to accuracy is derived on this base configuration "
                f"(lr schedule {base.lr_schedule!r}, sampler backend {base.flags.sampler_backend!r}; "
                "derived needs 'constant' and 'gnnbench')"
            )


def sweep_entries(
    base: RunConfig,
    names: Iterable[str] | None = None,
    *,
    repeats: int = DEFAULT_REPEATS,
    include_all_recommended: bool = True,
    aa: bool = False,
    derive_per_epoch: int | None = None,
    also_measured: Iterable[str] = (),
    accuracy_rounds: int | None = None,
    target: float | None = None,
    interleave: bool = False,
) -> list[Entry]:
    """Baseline, baseline + each named optimization (default: all registered) and all recommended together,
    for each of ``repeats`` rounds; ``aa`` adds a second copy of the baseline (the A/A noise check).

    With ``derive_per_epoch`` (the baseline's steps per epoch, from the calibration) an entry whose every part
    is declared ``same_trajectory`` runs as a short run (:func:`gnnbench.measure.compare.derived.short_config`) and its
    time to accuracy is derived; each name in ``also_measured`` is, besides, trained to the target as
    ``"<name> (measured)"``, to show the derived figure agrees with the measured one.

    With ``accuracy_rounds`` K and the calibrated ``target``, only rounds ``0..K-1`` train to the plateau (they
    judge accuracy); the later rounds, which a row receives only while its verdict is open, are time-to-accuracy
    runs (:func:`time_to_accuracy_config`): they stop at the target, or past the censoring budget without it.
    ``None``: every round trains to the plateau.

    With ``interleave``, an entry that does the baseline's work per step and can share a process with it
    (:func:`gnnbench.measure.run.interleaved.pair_refusal`) is, after its run, timed against its round's baseline
    in one process (a process of its own in an isolated sweep), steps interleaved (``Entry.pair_with``), and so is an in-process A/A copy of the
    baseline with ``aa`` (:data:`AA_INPROCESS_LABEL`): the comparison reads their time per step from the pairs. An
    entry that sets its process (an allocator) is timed in duet instead (``Entry.pair_design``, its process and the
    baseline's at once, one core each: :mod:`gnnbench.measure.sweep.duet`), with the duet's A/A copy of the
    baseline (:data:`AA_DUET_LABEL`) where there is one and ``aa``."""
    _check_rounds(repeats, accuracy_rounds, target)
    validate_base(base)
    plan = _plan(
        base,
        names,
        include_all_recommended=include_all_recommended,
        aa=aa,
        derive_per_epoch=derive_per_epoch,
        also_measured=also_measured,
        target=target,
        interleave=interleave,
    )
    keep = plan.keep_steps(base)
    entries = []
    for r in range(repeats):
        tta_only = accuracy_rounds is not None and r >= accuracy_rounds
        entries.extend(plan.round_entries(time_to_accuracy_config(base, target, keep) if tta_only else base, r))
    return entries


def _check_rounds(repeats: int, accuracy_rounds: int | None, target: float | None) -> None:
    """Refuse fewer than one round, fewer than two accuracy rounds, or accuracy rounds without the target."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1 (got {repeats!r})")
    if accuracy_rounds is not None:
        if isinstance(accuracy_rounds, bool) or not isinstance(accuracy_rounds, int) or accuracy_rounds < 2:
            raise ValueError(
                f"accuracy_rounds must be an integer >= 2: accuracy deltas need an interval (got {accuracy_rounds!r})"
            )
        if target is None:
            raise ValueError("accuracy_rounds needs the calibrated target: the later rounds stop at it")


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What every round of a sweep shares (:func:`sweep_entries`, whose options the fields repeat)."""

    names: list[str]  # the entries' labels
    parts: dict[str, tuple[str, ...]]  # label -> its optimizations ("a+b": one configuration with both)
    derived: dict[str, bool]  # label -> a short run whose time to accuracy is derived
    inapplicable: dict[str, str | None]  # label -> why it cannot apply to the base (None: it can)
    overlap: list[str]  # labels whose gain is overlap: run end to end, against an end-to-end baseline
    e2e_short: bool  # the end-to-end baseline is a short run (every overlap row is derived)
    include_all_recommended: bool
    recommended: list[str]  # the optimizations of the all-recommended entry
    aa: bool
    interleave: bool
    derivable: bool  # a short run keeps the trajectory on the base (derivable_base)
    derive_per_epoch: int | None
    also: list[str]  # labels also trained to the target
    target: float | None

    def keep_steps(self, base: RunConfig) -> int:
        """The steps a time-to-accuracy baseline still trains: the epochs the same round's short runs are
        read against (0 without any)."""
        if self.derive_per_epoch and any(self.derived.values()):
            return short_epochs(self.derive_per_epoch, base.warmup_steps) * self.derive_per_epoch
        return 0

    def short(self, cfg: RunConfig) -> RunConfig:
        """``cfg`` as a short run, its time to accuracy derived (:func:`short_config`)."""
        return short_config(cfg, self.derive_per_epoch)

    def pair_base(self, n: str, cfg: RunConfig, b: RunConfig) -> tuple[RunConfig | None, str]:
        """The round's baseline ``n`` is timed against and how: in one process, steps interleaved; or, for an
        entry that sets the process, in duet (:func:`gnnbench.measure.sweep.duet.duet_pair_refusal`);
        ``(None, "interleaved")``: neither (read across processes)."""
        from gnnbench.measure.sweep.duet import duet_pair_refusal

        if not self.interleave or _changes_work(self.parts[n]):
            return None, INTERLEAVED
        if pair_refusal(b, cfg) is None:
            return b, INTERLEAVED
        if duet_pair_refusal(b, cfg) is None:
            return b, DUET
        return None, INTERLEAVED

    def round_entries(self, base: RunConfig, r: int) -> list[Entry]:
        """Round ``r``'s entries on ``base`` (the sweep's base, or its time-to-accuracy version), seed
        ``base.seed + r``: the baselines, each named entry, and all recommended together."""
        b = dataclasses.replace(base, seed=base.seed + r)
        entries = self._baselines(base, b, r)
        for n in self.names:
            entries += self._named(n, b, r)
        duet_rows = any(e.pair_design == DUET for e in entries)
        if self.aa and duet_rows and self.derivable and self.derive_per_epoch is not None:
            # the duet's A/A: the baseline against itself, the floor of the rows timed in duet
            entries.append(Entry(AA_DUET_LABEL, self.short(b), (), r, derived=True, pair_with=b, pair_design=DUET))
        if self.include_all_recommended:
            rec = self.recommended
            entries.append(Entry(ALL_RECOMMENDED, on_ranks(registry.config_for(b, rec)), tuple(rec), r))
        return entries

    def _baselines(self, base: RunConfig, b: RunConfig, r: int) -> list[Entry]:
        """Round ``r``'s baseline ``b``; with ``aa`` its A/A copy on its own seed stream (and, interleaved, the
        in-process A/A copy); with overlap entries on a per-phase base, the end-to-end baseline."""
        entries = [Entry(BASELINE, on_ranks(b), (), r)]
        if self.aa:  # its own seed stream: the seed-to-seed spread is part of what the A/A row must show
            entries.append(
                Entry(AA_LABEL, on_ranks(dataclasses.replace(base, seed=base.seed + AA_SEED_OFFSET + r)), (), r)
            )
        if self.aa and self.interleave and self.derivable and self.derive_per_epoch is not None and shares_process(b):
            entries.append(Entry(AA_INPROCESS_LABEL, self.short(b), (), r, derived=True, pair_with=b))
        if self.overlap and base.sync_phases:
            e2e = dataclasses.replace(b, sync_phases=False)
            cfg = on_ranks(self.short(e2e) if self.e2e_short else e2e)
            entries.append(Entry(E2E_BASELINE, cfg, (), r, derived=self.e2e_short))
        return entries

    def _named(self, n: str, b: RunConfig, r: int) -> list[Entry]:
        """Round ``r``'s entry ``n`` on the baseline ``b`` (listed with the reason where it cannot apply, instead
        of measured), and its copy trained to the target where ``n`` is also measured."""
        parts = self.parts[n]
        if self.inapplicable[n]:
            return [Entry(n, on_ranks(b), parts, r, not_applicable=self.inapplicable[n])]
        cfg = registry.config_for(b, parts)
        if n in self.overlap:
            cfg = dataclasses.replace(cfg, sync_phases=False)
        run_cfg = on_ranks(self.short(cfg) if self.derived[n] else cfg)
        pair_with, design = self.pair_base(n, run_cfg, b)
        entries = [Entry(n, run_cfg, parts, r, derived=self.derived[n], pair_with=pair_with, pair_design=design)]
        if n in self.also:  # the same entry trained to the target: the derived figure's check (its time to
            # accuracy only: the same trajectory is proven by test, so its accuracy needs no plateau run)
            measured = time_to_accuracy_config(cfg, self.target) if self.target is not None else cfg
            entries.append(Entry(f"{n}{MEASURED_SUFFIX}", on_ranks(measured), parts, r))
        return entries


def _plan(
    base: RunConfig,
    names: Iterable[str] | None,
    *,
    include_all_recommended: bool,
    aa: bool,
    derive_per_epoch: int | None,
    also_measured: Iterable[str],
    target: float | None,
    interleave: bool,
) -> _Plan:
    """The entries of :func:`sweep_entries` on ``base`` and what decides their configurations, refusing an
    ``also_measured`` name the sweep cannot derive."""
    also = list(also_measured)
    names = list(names) if names is not None else registry.names()
    check_also_measured(base, names, also)
    parts = {n: registry.combination(n) for n in names}  # "a+b": one configuration with both
    derivable = derivable_base(base)
    derived = {n: derive_per_epoch is not None and derivable and is_derivable(parts[n]) for n in names}
    _check_also_derived(also, derived)
    device = resolve_device(base.device)
    inapplicable = {n: registry.not_applicable(base, parts[n]) for n in names}
    recommended = _recommended(base, device) if include_all_recommended else []
    overlap = _overlapping(base, names, parts, inapplicable, device)
    return _Plan(
        names=names,
        parts=parts,
        derived=derived,
        inapplicable=inapplicable,
        overlap=overlap,
        # the end-to-end baseline is only the reference of overlap rows: short too when all of them are derived
        e2e_short=all(derived[n] and n not in also for n in overlap),
        include_all_recommended=include_all_recommended,
        recommended=recommended,
        aa=aa,
        interleave=interleave,
        derivable=derivable,
        derive_per_epoch=derive_per_epoch,
        also=also,
        target=target,
    )


def _check_also_derived(also: list[str], derived: dict[str, bool]) -> None:
    """Refuse an ``also_measured`` name whose time to accuracy is not derived (no calibration, or --no-derive)."""
    for n in also:
        if not derived.get(n):
            raise ValueError(
                f"--also-measure {n!r}: its time to accuracy is derived only with a calibration "
                "(and without --no-derive); without one there is no derived figure to check"
            )


def _recommended(base: RunConfig, device: torch.device) -> list[str]:
    """The recommended optimizations that are available on ``device``, apply to ``base`` and can run here."""
    return [
        o.name
        for o in registry.REGISTRY.values()
        if o.recommended
        and o.unavailable(device) is None
        and not registry.not_applicable(base, [o.name])
        and not config_unavailable(on_ranks(registry.config_for(base, [o.name])), device)
    ]


def _overlapping(
    base: RunConfig,
    names: list[str],
    parts: dict[str, tuple[str, ...]],
    inapplicable: dict[str, str | None],
    device: torch.device,
) -> list[str]:
    """The applicable entries whose gain is overlap and that can run here: they run end to end (per-phase
    synchronization would serialize them), compared with an end-to-end copy of the baseline in the same round."""
    return [
        n
        for n in names
        if not inapplicable[n]
        and any(registry.get(p).overlap for p in parts[n])
        and not config_unavailable(on_ranks(registry.config_for(base, parts[n])), device)
    ]


def time_to_accuracy_config(config: RunConfig, target: float, keep_steps: int = 0) -> RunConfig:
    """``config`` as a time-to-accuracy run: it stops at its first validation point at or above ``target``, or
    once past its censoring budget without it (``RunConfig.stop_at``), and not before ``keep_steps`` steps (the
    epochs the same round's short runs are read against); the plateau rule's minimum is dropped with it (a run
    whose accuracy is never read need not wait for a plateau)."""
    return dataclasses.replace(config, stop_at=target, min_steps=keep_steps)
