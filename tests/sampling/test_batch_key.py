"""The batch cache's key is declared on the ``Flags`` fields (``Flags.batch_key_fields``): every field whose
value changes the sampled batches must be part of it, or a shared cache replays batches another configuration
sampled.

For every field, an alternative value (from the registry entries that set it, else :data:`OTHER_VALUES`) is
built on the ``tiny`` graph beside its baseline with the same seed, and their batches are compared: the whole
first epoch (what the cache stores) and the first batches of the second (per-epoch effects: repartitioning,
worker streams, replay). A field whose batches differ must be in the key; a field in the key must differ in
at least one of its cases (else its cases do not exercise it). Values that cannot run on this machine are
skipped with the reason the layers give.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags, RunContext, format_reasons
from gnnbench.graphs.prepare import prepare
from gnnbench.models.tasks import TASKS
from gnnbench.sampling.cache import tensor_digest
from gnnbench.sampling.sources import make_batch_source
from gnnbench.training import availability

SEED = 0
# Each task's base: a short fanout, and batches large enough for a short epoch (tiny: 2,000 training nodes,
# 85,000 training edges).
BASE = {"node": Flags(fanout=(5, 3), batch_size=256), "link": Flags(fanout=(2,), batch_size=32768)}
SECOND_EPOCH_BATCHES = 1
PRODUCTION_ONLY = ("negatives_seconds", "sampled_in_worker")  # how a batch was produced, not what it holds

# Fields no registry entry sets: field -> (alternative value, other fields it needs to matter, task).
OTHER_VALUES: dict[str, tuple[Any, dict[str, Any], str]] = {
    "sample_replace": (True, {}, "node"),
    "sampler_backend": ("pyg", {}, "node"),
    "batch_size": (512, {}, "node"),
    "cluster_size": (1000, {"batch_source": "cluster_gcn"}, "node"),
    "clusters_per_batch": (2, {"batch_source": "cluster_gcn"}, "node"),
    "repartition_every": (1, {"batch_source": "cluster_gcn"}, "node"),
    "saint_roots": (500, {"batch_source": "saint_rw"}, "node"),
    "saint_walk_length": (3, {"batch_source": "saint_rw"}, "node"),
    "hot_rank": ("degree", {"feature_placement": "hot_cold"}, "node"),
    "hot_budget_fraction": (0.5, {"feature_placement": "hot_cold"}, "node"),
    "hot_budget_bytes": (1 << 20, {"feature_placement": "hot_cold"}, "node"),
    "feature_dtype": ("float16", {}, "node"),
    "negative_ratio": (2, {}, "link"),
    "topk_ratio": (0.05, {"parallel": "data", "grad_compression": "topk"}, "node"),
    "powersgd_rank": (4, {"parallel": "data", "grad_compression": "powersgd"}, "node"),
}


@dataclass(frozen=True)
class Case:
    """``flags`` differs from ``base`` in ``field`` alone (and whatever ``field`` needs to be valid)."""

    field: str
    base: Flags
    flags: Flags
    task: str
    origin: str  # where the alternative value comes from


def _cases() -> dict[str, list[Case]]:
    cases: dict[str, list[Case]] = {}
    for opt in registry.REGISTRY.values():
        changes = opt.changes_for(BASE[opt.task])
        for name in changes:
            try:  # the entry's other changes as the base, so the two differ in this field alone
                base = BASE[opt.task].replace(**{k: v for k, v in changes.items() if k != name})
            except ValueError:  # the other changes are invalid without this one (a loader option without workers)
                continue
            cases.setdefault(name, []).append(
                Case(name, base, base.replace(**{name: changes[name]}), opt.task, f"registry entry {opt.name!r}")
            )
    for name, (value, context, task) in OTHER_VALUES.items():
        base = BASE[task].replace(**context)
        cases.setdefault(name, []).append(Case(name, base, base.replace(**{name: value}), task, "OTHER_VALUES"))
    return cases


CASES = _cases()
FIELDS = [f.name for f in dataclasses.fields(Flags)]


def _content(batch) -> tuple:
    """What a batch holds (tensors by dtype, shape and contents), as the cache would store it."""
    return tuple(
        (k, tensor_digest(v) if isinstance(v, torch.Tensor) else v)
        for k, v in batch.to_dict().items()
        if k not in PRODUCTION_ONLY
    )


def _sample(graph, flags: Flags, task: str) -> list[tuple]:
    """The first epoch and the start of the second from the batch source a run of ``flags`` trains on."""
    training = TASKS[task](graph, torch.device("cpu"), seed=SEED)
    source = make_batch_source(prepare(training.train_graph, flags), flags, kind=training.source_kind(flags), seed=SEED)
    try:
        batches = [_content(b) for b in source.epoch(0)]
        second = source.epoch(1)
        batches += [_content(b) for b in islice(second, SECOND_EPOCH_BATCHES)]
        second.close()
    finally:
        source.close()
    return batches


@pytest.fixture(scope="module")
def sampled(tiny_graph):
    """``sampled(flags, task)``: :func:`_sample` on ``tiny``, once per configuration (cases share bases)."""
    memo: dict[tuple[Flags, str], list[tuple]] = {}

    def get(flags: Flags, task: str) -> list[tuple]:
        if (flags, task) not in memo:
            memo[flags, task] = _sample(tiny_graph, flags, task)
        return memo[flags, task]

    return get


def _unavailable(case: Case) -> str | None:
    ctx = RunContext(device="cpu", task=case.task)
    reasons = availability.reasons(case.base, ctx) | availability.reasons(case.flags, ctx)
    return format_reasons(reasons) or None


def test_the_cache_is_keyed_by_the_declared_fields(tiny_graph, tmp_path):
    def key(flags: Flags) -> tuple[str, dict]:
        source = make_batch_source(prepare(tiny_graph, flags), flags, seed=SEED, cache_dir=tmp_path)
        source.close()
        return source.cache.key, source.cache.material["flags"]

    base = BASE["node"].replace(batch_cache_epochs=2)
    base_key, material = key(base)
    assert tuple(material) == Flags.batch_key_fields()
    assert "aggregation" not in material and key(base.replace(aggregation="sparse"))[0] == base_key
    assert key(base.replace(keep_csr=True))[0] != base_key


@pytest.mark.parametrize("field", FIELDS)
def test_a_field_that_changes_the_batches_keys_the_cache(field, sampled):
    assert field in CASES, f"Flags.{field} has no alternative value: give it one in OTHER_VALUES"
    keyed = field in Flags.batch_key_fields()
    built, differ, skipped = [], [], []
    for case in CASES[field]:
        reason = _unavailable(case)
        if reason:
            skipped.append(f"{case.origin}: {reason}")
            continue
        built.append(case.origin)
        if sampled(case.base, case.task) != sampled(case.flags, case.task):
            differ.append(case.origin)
    if not built:
        pytest.skip(f"{field} cannot be built here: " + " | ".join(skipped))
    assert keyed or not differ, (
        f"Flags.{field} changes the sampled batches ({', '.join(differ)}) but does not "
        "key the batch cache: declare it with _batch_key(...) in gnnbench/flags.py"
    )
    assert differ or not keyed, (
        f"Flags.{field} keys the batch cache but none of its cases ({', '.join(built)}) "
        "changes the batches: give it a context where it matters in OTHER_VALUES"
    )
