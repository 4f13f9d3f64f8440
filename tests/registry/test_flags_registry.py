import dataclasses
import re

import pytest
import torch

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.registry import Optimization


def test_baseline_is_default_and_every_field_is_commented():
    base = Flags()
    assert base.changed() == {}
    import inspect

    src = inspect.getsource(Flags)
    for f in dataclasses.fields(Flags):
        line = next(l for l in src.splitlines() if l.strip().startswith(f"{f.name}:"))
        assert "#" in line, f"Flags.{f.name} has no comment"


def test_flags_validation_names_bad_value():
    with pytest.raises(ValueError, match=r"index_dtype must be one of 'int64', 'int32' \(got 'int16'\)"):
        Flags(index_dtype="int16")
    with pytest.raises(ValueError, match=r"cached_norm must be True or False \(got 'yes'\)"):
        Flags(cached_norm="yes")
    with pytest.raises(ValueError, match=r"unknown Flags field\(s\) \['fast'\]"):
        Flags().replace(fast=True)


def test_registry_entries_are_complete_and_change_flags():
    assert registry.names() == list(dict.fromkeys(registry.names()))
    for opt in registry.REGISTRY.values():
        assert opt.description and opt.expected_effect and opt.layer
        flags = opt.apply(Flags())
        assert flags != Flags(), f"{opt.name} changes nothing"
        assert set(flags.changed()) == set(opt.changes_for(Flags()))
        reason = opt.unavailable("cpu")
        assert (reason is not None) == (opt.requires == ("cuda",)), (opt.name, reason)
        if opt.nproc > 1 and torch.cuda.device_count() < opt.nproc:  # NCCL: one GPU per rank, or why not
            assert "NCCL ranks need one GPU each" in opt.unavailable("cuda"), opt.name
        else:
            assert opt.unavailable("cuda") is None, (opt.name, opt.unavailable("cuda"))


def test_expected_effects_are_short_and_name_their_source():
    """One or two sentences of what is commonly reported elsewhere, with its source in parentheses (docs, a
    user guide, a paper's year, an issue number); no figure this project measured (a time, a preset, a command)."""
    source = re.compile(r"\([^()]*(?:\([^()]*\)[^()]*)*(?:docs|guide|\b(?:19|20)\d\d\b|#\d+)")
    measured = re.compile(r"\d\s*(?:ms|s)\b|\bon (?:tiny|small|medium|large)\b|`gnnbench|field report|this CPU")
    for opt in registry.REGISTRY.values():
        text = opt.expected_effect
        assert 1 <= len(re.findall(r"[.!?](?:\s|$)", text)) <= 2, (opt.name, text)
        assert source.search(text), f"{opt.name}: name the source of the expected effect"
        assert not measured.search(text), f"{opt.name}: a measured figure belongs in results: {text}"


def test_cuda_only_entries_say_why_on_cpu():
    cuda_only = {o.name for o in registry.REGISTRY.values() if o.requires}
    assert cuda_only == {
        "pin_memory",
        "features_on_device",
        "hot_cold",
        "uva",
        "feature_prefetch",
        "gpu_sampling",
        "uva_sampling",
    }
    for name in cuda_only:
        assert "cpu" in registry.get(name).unavailable("cpu")


def test_registry_first_entries_present():
    assert {"int32", "cached_norm", "csr"} <= set(registry.names())


def test_flags_for_and_unknown_names():
    flags = registry.flags_for(["int32", "cached_norm"])
    assert flags == Flags(index_dtype="int32", cached_norm=True)
    with pytest.raises(ValueError, match="unknown optimization 'turbo'; accepted: int32, cached_norm, csr, fanout"):
        registry.flags_for(["turbo"])


def test_unavailable_reports_a_reason_for_missing_device():
    opt = Optimization(
        name="needs_cuda", changes={"feature_placement": "uva"}, description="d", expected_effect="e", layer="x"
    )
    assert "feature_placement='uva'" in opt.unavailable(torch.device("cpu"))
    assert opt.requires == ("cuda",)
    assert opt.unavailable("cuda") is None
    from gnnbench.flags import RunContext
    from gnnbench.training.availability import reasons

    assert reasons(Flags(pin_memory=True), RunContext(device="cpu")) == {
        "pin_memory": "pinned (page-locked) memory only exists with CUDA (device is cpu)"
    }
    with pytest.raises(ValueError, match="unknown Flags field"):
        Optimization(name="bad", changes={"nope": 1}, description="d", expected_effect="e", layer="x")


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        registry.REGISTRY["x"] = None  # type: ignore[index]


def _bases_in_use() -> dict[str, Flags]:
    """Every base the suites, tests and sweeps apply registry entries to."""
    from benchmarks import common
    from tests.helpers import QUICK
    from tests.perf import test_optimizations_perf
    from tests.registry import test_accuracy_regression, test_combinations

    return {
        "Flags()": Flags(),
        "asv": common.BENCH_FLAGS,
        "pytest-benchmark": test_optimizations_perf.BASE_FLAGS,
        "accuracy-regression": test_accuracy_regression.BASE,
        "combinations": test_combinations.BASE,
        "training-tests": QUICK.flags,
    }


@pytest.mark.parametrize(
    "base_name", ["Flags()", "asv", "pytest-benchmark", "accuracy-regression", "combinations", "training-tests"]
)
def test_entries_are_relative_changes_that_move_the_right_way(base_name):
    base = _bases_in_use()[base_name]
    for opt in registry.REGISTRY.values():
        flags = opt.apply(base)
        assert flags != base, f"{opt.name} is a no-op on the {base_name} base"
        if "fanout" in opt.changes_for(base):
            assert flags.fanout == base.fanout[:-1], f"{opt.name} must drop the last hop of {base.fanout}"
        for name in ("num_workers", "prefetch_factor", "batch_cache_epochs"):
            before, after = getattr(base, name) or 0, getattr(flags, name) or 0
            assert after >= before, f"{opt.name} lowers {name} from {before} to {after} on the {base_name} base"


def test_fanout_entry_drops_the_last_hop_and_is_not_applicable_to_a_single_hop():
    fanout = registry.get("fanout")
    assert fanout.apply(Flags()).fanout == (15, 10)
    assert fanout.apply(Flags(fanout=(10, 5))).fanout == (10,)
    with pytest.raises(registry.NotApplicable, match=r"fanout does not apply here: .*fanout \[10\] has only one"):
        fanout.apply(Flags(fanout=(10,)))


def test_an_entry_on_an_explicit_depth_changes_the_depth_with_the_fanout():
    """``--layers 2 --fanout 10,5``: the fanout entry drops the last hop and the last layer together; other
    entries keep the depth; a single-hop base lists the entry as not applicable instead of raising."""
    from gnnbench.training import RunConfig

    base = RunConfig(spec=GraphSpec.preset("tiny"), flags=Flags(fanout=(10, 5)), num_layers=2)
    derived = registry.config_for(base, ["fanout"])
    assert derived.flags.fanout == (10,) and derived.num_layers == 1
    assert registry.config_for(base, ["int32"]).num_layers == 2
    assert registry.config_for(dataclasses.replace(base, num_layers=None), ["fanout"]).num_layers is None
    single = RunConfig(spec=GraphSpec.preset("tiny"), flags=Flags(fanout=(10,)), num_layers=1)
    assert "has only one" in registry.not_applicable(single, ["fanout"])
    assert registry.not_applicable(single, ["int32"]) is None
    with pytest.raises(registry.NotApplicable):
        registry.config_for(single, ["int32", "fanout"])


def test_every_entry_says_what_it_relieves():
    """diagnose recommends by ``targets`` and ranks kernel entries by ``ops``: every entry has targets, and
    every op name is a profiler operator name."""
    from gnnbench.registry import BOTTLENECKS

    for opt in registry.REGISTRY.values():
        assert opt.targets and set(opt.targets) <= set(BOTTLENECKS), opt.name
        assert all(op.startswith("aten::") for op in opt.ops), opt.name
    with pytest.raises(ValueError, match="subset of"):
        registry.Optimization(name="x", changes={}, description="", expected_effect="", layer="m", targets=("network",))
