"""``gnnbench diagnose``: the classification rules (pure), the ranking, the quick template on ``tiny``, the
scenarios' recorded phase shares, and the CLI."""

import json
from dataclasses import replace

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gnnbench import registry
from gnnbench.advice.diagnose import Diagnosis, diagnose
from gnnbench.advice.diagnosis_text import format_diagnosis
from gnnbench.advice.op_profile import OUTSIDE, OpProfile, attribute_ops
from gnnbench.advice.recommend import recommend
from gnnbench.advice.rules import (
    FEWER_VERTICES,
    PHASE_GROUPS,
    RULES,
    Finding,
    Rules,
    classify,
    explosion_finding,
    group_shares,
)
from gnnbench.advice.scenarios import SCENARIOS, get_scenario
from gnnbench.advice.verdicts import verdicts, verify_names
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.measure.compare import ComparisonRow
from gnnbench.timing import PHASES
from gnnbench.training import RunConfig
from tests.helpers import DATA

TINY = GraphSpec.preset("tiny")
RECORDED = DATA / "scenario_shares.json"


@pytest.mark.parametrize(
    "shares, busy, expected, secondary",
    [
        ({"sampling": 0.05, "negatives": 0.0, "features": 0.02, "kernels": 0.93}, None, "kernels", None),
        ({"sampling": 0.55, "negatives": 0.0, "features": 0.05, "kernels": 0.40}, None, "sampling", "kernels"),
        ({"sampling": 0.15, "negatives": 0.45, "features": 0.10, "kernels": 0.30}, None, "negatives", "kernels"),
        ({"sampling": 0.10, "negatives": 0.0, "features": 0.60, "kernels": 0.30}, None, "features", "kernels"),
        # the device busy share (NVML) overrides the compute phases: a busy device is kernel-bound ...
        ({"sampling": 0.40, "negatives": 0.0, "features": 0.20, "kernels": 0.40}, 0.8, "kernels", "sampling"),
        # ... and an idle one is not, whatever the phases say
        ({"sampling": 0.30, "negatives": 0.0, "features": 0.05, "kernels": 0.65}, 0.2, "sampling", "kernels"),
        # little compute but no pipeline group worth a look (a loop without a loader, its time outside the phases):
        # the pipeline is not named with a share of 0%
        ({"sampling": 0.0, "negatives": 0.0, "features": 0.0, "kernels": 0.34}, None, "kernels", None),
        ({"sampling": 0.04, "negatives": 0.0, "features": 0.0, "kernels": 0.30}, None, "kernels", None),
    ],
)
def test_classify_follows_the_documented_rules(shares, busy, expected, secondary):
    f = classify(shares, busy_fraction=busy)
    assert f.bottleneck == expected and f.secondary == secondary
    assert f.compute_source == ("NVML" if busy is not None else "compute phases")
    assert f"{RULES.kernels_at:.0%}" in f.reason


def test_classify_thresholds_come_from_one_table():
    shares = {"sampling": 0.45, "negatives": 0.0, "features": 0.0, "kernels": 0.55}
    assert classify(shares).bottleneck == "kernels"
    assert classify(shares, rules=Rules(kernels_at=0.6)).bottleneck == "sampling"
    assert classify(shares, rules=Rules(worth_at=0.5)).secondary is None  # the runner-up is below worth_at
    with pytest.raises(ValueError, match="unknown phase groups"):
        classify({"network": 1.0})


def test_group_shares_cover_every_phase():
    phases = {
        "sample": 1.0,
        "negatives": 0.5,
        "gather": 0.25,
        "transfer": 0.25,
        "forward": 1.0,
        "backward": 0.75,
        "optimizer": 0.25,
    }
    shares = group_shares(phases, 4.0)
    assert shares == {"sampling": 0.25, "negatives": 0.125, "features": 0.125, "kernels": 0.5}
    assert {p for ps in PHASE_GROUPS.values() for p in ps} >= {
        "sample",
        "gather",
        "transfer",
        "forward",
        "backward",
        "optimizer",
    }
    with pytest.raises(ValueError, match="positive"):
        group_shares(phases, 0.0)


def test_recommend_ranks_kernel_entries_by_their_operators_share():
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64))
    finding = Finding("kernels", 0.9, None, None, 0.9, "compute phases", "")
    ops = {"aten::bernoulli_": 0.40, "aten::index_select": 0.10, "aten::scatter_add_": 0.15, "aten::mm": 0.05}
    recs = recommend(finding, {"kernels": 0.9}, 10.0, config, torch.device("cpu"), OpProfile.from_shares(ops))
    names = [r.name for r in recs]
    assert names[:3] == ["fast_dropout", "sparse_agg", "partial_amp"], names  # 40% > 25% > 5%
    assert all(r.target == "kernels" for r in recs)
    costly = [r.costs_accuracy for r in recs]
    assert costly == sorted(costly), "entries that may cost accuracy come after the others"
    assert "aten::bernoulli_ 40%" in recs[0].motivation
    # an entry already on is not recommended again
    on = recommend(
        finding,
        {"kernels": 0.9},
        10.0,
        RunConfig(spec=TINY, flags=registry.flags_for(["fast_dropout"], Flags(fanout=(5, 3)))),
        torch.device("cpu"),
        OpProfile.from_shares(ops),
    )
    assert "fast_dropout" not in [r.name for r in on]


def test_an_entry_is_credited_only_with_its_operators_time_in_the_phases_it_targets():
    """The sampler's own sort (phase sample) is not evidence for csr, which removes the aggregation's per-batch
    sort (kernels); neither is it listed as something csr removes."""
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64))
    finding = Finding("kernels", 0.9, None, None, 0.9, "compute phases", "")
    shares = {"aten::sort": 0.08, "aten::scatter_add_": 0.15}
    phases = {"aten::sort": {"sample": 0.07, "forward": 0.01}, "aten::scatter_add_": {"forward": 0.15}}
    recs = {
        r.name: r
        for r in recommend(
            finding, {"kernels": 0.9}, 10.0, config, torch.device("cpu"), OpProfile.from_shares(shares, phases)
        )
    }
    assert recs["csr"].op_share == pytest.approx(0.01) and "aten::sort 1%" in recs["csr"].motivation
    only_sampler = {"aten::sort": {"sample": 0.08}, "aten::scatter_add_": {"forward": 0.15}}
    hot = attribute_ops(OpProfile.from_shares(shares, only_sampler), "node")
    assert next(h for h in hot if h.op == "aten::sort").entries == ()
    assert "csr" not in [h.entries for h in hot if h.op == "aten::sort"][0]


def test_loader_workers_rank_last_without_spare_cores():
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64))
    finding = Finding("sampling", 0.6, None, None, 0.3, "compute phases", "")
    crowded = recommend(finding, {"sampling": 0.6}, 10.0, config, torch.device("cpu"), cores=(2, 2))
    # entries that add workers on shared cores (workers_split gives them cores of their own: no caveat)
    adds_workers = {
        r.name
        for r in crowded
        if registry.get(r.name).apply(config.flags).num_workers > 0
        and registry.get(r.name).apply(config.flags).thread_placement == "shared"
    }
    assert adds_workers, "the registry has loader-worker entries targeting sampling"
    assert {r.name for r in crowded if r.caveat} == adds_workers
    assert [r.name for r in crowded][-len(adds_workers) :] == [r.name for r in crowded if r.caveat]
    assert all("2 cores" in r.caveat and "2 threads" in r.caveat for r in crowded if r.caveat)
    roomy = recommend(finding, {"sampling": 0.6}, 10.0, config, torch.device("cpu"), cores=(16, 2))
    assert not any(r.caveat for r in roomy)
    assert [r.name for r in roomy if r.name in adds_workers][0] == [r.name for r in roomy][0]  # safe ones first
    strict = recommend(
        finding, {"sampling": 0.6}, 10.0, config, torch.device("cpu"), cores=(3, 2), rules=Rules(worker_spare_cores=2)
    )
    assert {r.name for r in strict if r.caveat} == adds_workers


def test_entries_that_cannot_run_here_are_listed_with_their_reason():
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64))
    finding = Finding("features", 0.6, None, None, 0.3, "compute phases", "")
    recs = recommend(finding, {"features": 0.6}, 10.0, config, torch.device("cpu"))
    blocked = {r.name: r.unavailable for r in recs if r.unavailable}
    assert {"features_on_device", "uva", "feature_prefetch"} <= set(blocked), blocked  # CUDA-only, on a CPU
    assert all(reason for reason in blocked.values())


def test_quick_template_on_tiny():
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64), warmup_steps=1, hidden=16)
    d = diagnose(config, steps=6, profile_steps=2)
    assert d.steps == 6  # the profiled steps are not in the timings
    assert set(d.shares) == set(PHASE_GROUPS) and 0.8 < sum(d.shares.values()) <= 1.05
    assert d.finding.bottleneck in PHASE_GROUPS and d.top_ops
    assert d.recommendations and d.recommendations[0].unavailable is None
    text = format_diagnosis(d)
    assert f"bottleneck: {d.finding.bottleneck}" in text and "try, in this order:" in text
    json.dumps(d.to_dict(), default=str)
    labels = verify_names(d, top=3)
    assert labels[:3] == d.recommended[:3] and all(registry.combination(label) for label in labels)


def test_diagnose_refuses_bad_settings():
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3)))
    with pytest.raises(ValueError, match="steps must be"):
        diagnose(config, steps=0)
    with pytest.raises(ValueError, match="without --no-sync"):
        diagnose(RunConfig(spec=TINY, flags=Flags(fanout=(5, 3)), sync_phases=False), steps=3)


def test_verdicts_say_whether_each_recommendation_pays():
    row = dict(status="ok", primary="time to accuracy", acc_delta=0.0, acc_verdict="no accuracy cost")
    lines = verdicts(
        [
            ComparisonRow(label="baseline"),
            ComparisonRow(
                **row, label="fast_dropout", speedup=1.3, speedup_low=1.2, speedup_high=1.4, significant=True
            ),
            ComparisonRow(**row, label="int32", speedup=0.97, speedup_low=0.9, speedup_high=1.04, significant=False),
            ComparisonRow(**row, label="compile", speedup=0.8, speedup_low=0.75, speedup_high=0.85, significant=True),
            ComparisonRow(label="uva", status="unavailable", reason="needs CUDA"),
        ]
    )
    assert lines[0].startswith("fast_dropout: pays here, 1.30x")
    assert lines[1].startswith("int32: no significant difference: 0.97x [0.90, 1.04]")
    assert "admits a gain of up to 4%" in lines[1] and "does not pay" not in lines[1]
    assert lines[2].startswith("compile: does not pay here, it is slower")
    assert lines[3] == "uva: not measured (needs CUDA)"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios_are_classified_as_designed_from_recorded_shares(name):
    """The shares ``scripts/record_scenarios.py`` measured on the 2-core reference machine classify as the
    scenario says (no timing here: the classification of recorded numbers)."""
    recorded = json.loads(RECORDED.read_text())[name]
    scenario = get_scenario(name)
    assert classify(recorded["shares"], busy_fraction=recorded.get("busy_fraction")).bottleneck == scenario.expected
    assert recorded["config"]["flags"]["fanout"] == list(scenario.flags.fanout)  # recorded from this scenario


def test_scenario_errors_and_cli_json(capsys):
    from gnnbench.cli import main

    with pytest.raises(ValueError, match="unknown scenario 'nope'; accepted: sampling-bound"):
        get_scenario("nope")
    assert (
        main(
            [
                "diagnose",
                "--preset",
                "tiny",
                "--fanout",
                "5,3",
                "--batch-size",
                "64",
                "--steps",
                "3",
                "--warmup",
                "1",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["diagnosis"]["steps"] == 3 and out["diagnosis"]["finding"]["bottleneck"] in PHASE_GROUPS
    assert main(["diagnose", "--preset", "tiny", "--fanout", "5,3", "--steps", "3", "--flags", "uva"]) == 2
    assert "cannot run here" in capsys.readouterr().err


def test_an_explicit_depth_keeps_the_whole_diagnosis(capsys):
    """``--layers 2`` with a 2-hop fanout: the fanout entry drops the last hop and the last layer together,
    and the command prints its breakdown, bottleneck and ranked list (not that entry's error)."""
    from gnnbench.cli import main

    assert (
        main(
            [
                *("diagnose", "--preset", "tiny", "--fanout", "10,5", "--layers", "2", "--steps", "4", "--warmup", "1"),
                *("--measure", "0"),  # the measured candidates: tests/advice/test_measured.py
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "bottleneck:" in text and "try, in this order:" in text


def test_an_entry_that_cannot_apply_is_listed_with_its_reason(capsys):
    """A single-hop fanout: the fanout entry has no hop to drop; it is listed as not applicable, never raised."""
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5,), batch_size=64))
    finding = Finding("sampling", 0.6, None, None, 0.3, "compute phases", "")
    recs = recommend(finding, {"sampling": 0.6}, 10.0, config, torch.device("cpu"))
    fanout = next(r for r in recs if r.name == "fanout")
    assert "has only one" in fanout.not_applicable and fanout is recs[-1]
    d = Diagnosis(
        config=config.to_dict(),
        device="cpu",
        steps=1,
        step_ms={"mean": 10.0, "median": 10.0, "min": 10.0, "max": 10.0},
        phase_ms={"sample": 6.0},
        shares={"sampling": 0.6},
        data_wait_share=0.6,
        finding=finding,
        expected="",
        recommendations=recs,
        memory={"host_peak_bytes": 1},
    )
    assert "fanout" not in d.recommended
    assert "does not apply to this configuration:\n  - fanout: fanout does not apply here" in format_diagnosis(d)
    from gnnbench.advice.verdicts import verify_names

    assert "fanout" not in verify_names(d, top=len(recs))  # --verify measures what applies, lists the rest


def test_every_hot_operator_is_attributed_or_listed_as_untargeted():
    """A constructed profile: a sampler operator nobody targets is listed with its share and phase, beside a
    kernel operator with the entries that remove it; operators below 5% are not listed."""
    shares = {"aten::eq": 0.13, "aten::scatter_add_": 0.15, "aten::relu": 0.02}
    phases = {
        "aten::eq": {"sample": 0.13},
        "aten::scatter_add_": {"forward": 0.05, "backward": 0.10},
        "aten::relu": {"forward": 0.02},
    }
    hot = attribute_ops(OpProfile.from_shares(shares, phases), "node")
    assert [h.op for h in hot] == ["aten::scatter_add_", "aten::eq"]
    assert "sparse_agg" in hot[0].entries and list(hot[0].phases) == ["backward", "forward"]
    assert hot[1].entries == () and hot[1].phases == {"sample": 0.13}
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64))
    finding = Finding("kernels", 0.6, None, None, 0.6, "compute phases", "")
    d = Diagnosis(
        config=config.to_dict(),
        device="cpu",
        steps=1,
        step_ms={"mean": 10.0, "median": 10.0, "min": 10.0, "max": 10.0},
        phase_ms={"forward": 6.0},
        shares={"kernels": 0.6},
        data_wait_share=0.0,
        finding=finding,
        expected="",
        memory={"host_peak_bytes": 1},
        hot_ops=hot,
    )
    text = format_diagnosis(d)
    assert "aten::eq 13% (sample 13%): no entry targets it" in text
    assert "aten::scatter_add_ 15% (backward 10%, forward 5%): sparse_agg" in text and "aten::relu" not in text


def test_the_profiled_steps_attribute_operators_to_phases():
    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64), warmup_steps=1, hidden=16)
    d = diagnose(config, steps=3, profile_steps=2)
    assert d.hot_ops and all(set(h.phases) <= set(PHASES) | {OUTSIDE} for h in d.hot_ops)
    assert any("forward" in h.phases or "backward" in h.phases for h in d.hot_ops)
    assert sum(h.share for h in d.hot_ops) <= 1.0 + 1e-9


# ------------------------------------------------------------------------------------- neighbour explosion
KERNEL_BOUND = Finding("kernels", 0.97, None, None, 0.97, "compute phases", "")
WIDE = {"coverage": 0.69, "nodes_per_hop": [1024, 14000, 45000, 69000]}


def named_entries(text: str) -> list[str]:
    """The entries an explosion finding names."""
    return text.split("entries that compute fewer vertices: ")[1].split(", ")


@pytest.mark.parametrize("source", ["full", "cluster_gcn", "saint_rw"])
def test_no_explosion_where_coverage_is_by_design(source):
    """A full batch covers the whole graph and a subgraph batch its subgraph by design: kernel-bound at 100%
    coverage, they are not told "neighbour explosion ... try full_batch"."""
    assert (
        explosion_finding({"coverage": 1.0, "nodes_per_hop": []}, KERNEL_BOUND, flags=Flags(batch_source=source))
        is None
    )
    assert explosion_finding(WIDE, KERNEL_BOUND, flags=Flags(batch_source=source)) is None


def test_the_explosion_finding_never_names_an_entry_in_use_or_one_that_cannot_apply():
    assert named_entries(explosion_finding(WIDE, KERNEL_BOUND, flags=Flags())) == list(FEWER_VERTICES)
    on_labor = named_entries(explosion_finding(WIDE, KERNEL_BOUND, flags=Flags(sampler="labor")))
    assert on_labor == [n for n in FEWER_VERTICES if n != "labor"], "labor is in use"
    one_hop = named_entries(explosion_finding({"coverage": 0.4}, KERNEL_BOUND, flags=Flags(fanout=(25,))))
    assert "fanout" not in one_hop and "labor" in one_hop, "no hop to drop"
    link = named_entries(explosion_finding(WIDE, KERNEL_BOUND, flags=Flags(), task="link"))
    assert "labor" not in link and "fanout" in link, "LABOR samples node batches only"
    for name in link:
        assert "link" in registry.get(name).tasks


def test_full_batch_diagnosed_end_to_end_is_not_an_explosion():
    """The bug this guards: a kernel-bound full-batch run (coverage 100% by design) was told to try
    full_batch against a neighbour explosion."""
    config = RunConfig(
        spec=GraphSpec.preset("tiny", num_nodes=2000), flags=Flags(batch_source="full"), warmup_steps=1, hidden=16
    )
    d = diagnose(config, steps=3, profile_steps=0)
    assert d.sampled["coverage"] == 1.0 and d.sampled["nodes_per_hop"] == []
    assert d.explosion is None and "neighbour explosion" not in format_diagnosis(d)


# A neighbour-sampled batch on a small graph that holds most of it (200 of the 600 training nodes as seeds,
# fanout [10, 10], on 3,000 nodes: about 87% of the graph) and a wide model: sampling is cheap and the kernels
# are 90-95% of the step on the 2-core reference machine, far above the rule's 50%.
EXPLODING = [
    "--preset",
    "tiny",
    "--nodes",
    "3000",
    "--fanout",
    "10,10",
    "--batch-size",
    "200",
    "--model",
    "sage",
    "--hidden",
    "256",
    "--feature-dim",
    "128",
    "--warmup",
    "1",
    "--steps",
    "3",
]


def explosion_line(text: str) -> str:
    line = next((x for x in text.splitlines() if x.startswith("neighbour explosion: ")), None)
    assert line is not None, text
    return line


def test_diagnose_reports_the_neighbour_explosion_end_to_end(capsys):
    """``gnnbench diagnose`` on a kernel-bound step whose batches cover most of the graph prints the finding:
    the coverage it measured (the sampled line's), the per-hop growth, and every entry that computes fewer
    vertices."""
    import re

    from gnnbench.cli import main

    assert main(["diagnose", *EXPLODING]) == 0
    text = capsys.readouterr().out
    assert "bottleneck: kernels" in text, text
    sampled = re.search(
        r"^sampled: (\d+) nodes per batch \(per hop: 200 / (\d+) / (\d+)\), (\d+)% of the "
        r"graph's nodes",
        text,
        re.M,
    )
    assert sampled, text
    coverage = int(sampled.group(4))
    assert coverage >= 100 * RULES.explosion_at
    line = explosion_line(text)
    assert line.startswith(
        f"neighbour explosion: a batch's sampled neighbourhood covers {coverage}% of the "
        f"graph's nodes (200 -> {sampled.group(2)} -> {sampled.group(3)} nodes per hop), at or "
        f"above 25%, and the step is kernel-bound"
    ), line
    assert named_entries(line) == list(FEWER_VERTICES)


@pytest.mark.slow
def test_diagnose_of_a_labor_run_does_not_name_labor(capsys):
    """The same workload already on LABOR still explodes (it covers most of the graph too), and the finding
    names the other entries only."""
    from gnnbench.cli import main

    assert main(["diagnose", *EXPLODING, "--flags", "labor"]) == 0
    text = capsys.readouterr().out
    assert "bottleneck: kernels" in text, text
    assert named_entries(explosion_line(text)) == [n for n in FEWER_VERTICES if n != "labor"]


def test_an_operator_is_attributed_by_the_code_path_that_issued_it():
    """On a GCN with scatter aggregation ``aten::mul`` comes from the per-edge normalization multiply, the self
    weight, the normalization build and dropout (forward, and their backward through the autograd sequence
    numbers); its time is attributed to those code paths and so to the entries that remove or change them
    (sparse_agg, fast_dropout), not listed as "no entry targets it".

    Every check is on where an operator ran (its phase and code path) or on the attribution rule applied to the
    shares this profile measured; none expects a particular share, which a loaded machine shifts (dropout's
    multiply can outweigh the edge multiply, or not)."""
    from gnnbench.advice.diagnosis_text import UNTARGETED, hot_op_lines
    from gnnbench.advice.op_profile import MIN_CREDIT_OF_OP, UNMARKED, op_profile
    from gnnbench.training import Trainer

    config = RunConfig(spec=TINY, flags=Flags(fanout=(5, 3), batch_size=64), model="gcn", warmup_steps=1, hidden=32)
    assert config.flags.aggregation == "scatter"
    trainer = Trainer(config)
    loop = trainer.steps(epochs=float("inf"))
    try:
        next(loop)
        profile = op_profile(loop, 2, trainer.device, trainer.timer)
    finally:
        loop.close()
        trainer.close()
    mul = profile.shares["aten::mul"]
    paths = profile.paths["aten::mul"]
    cells = profile.cells["aten::mul"]
    assert {"aggregate.edge_norm", "dropout"} <= set(paths), paths
    unmarked = {cell for cell, v in cells.items() if cell[1] == UNMARKED and v > 0}
    assert not unmarked, ("aten::mul ran outside every marked code path", unmarked)
    # a backward operator counts in the path of its forward: the edge multiply's backward is a mul in backward
    by_phase = profile.phases["aten::mul"]
    assert by_phase.get("backward", 0) > 0 and by_phase.get("forward", 0) > 0, by_phase
    assert cells.get(("backward", "aggregate.edge_norm"), 0) > 0, cells
    # both entries are credited with the multiplies of their own paths, and the listing follows the rule
    credits = {
        name: profile.credit(registry.get(name)).get("aten::mul", 0.0)
        for name in ("sparse_agg", "fast_dropout", "fanout", "workers")
    }
    assert credits["sparse_agg"] > 0 and credits["fast_dropout"] > 0, credits
    hot = {h.op: h for h in attribute_ops(profile, "node", threshold=0.0)}
    expected = {
        o.name for o in registry.for_task("node") if profile.credit(o).get("aten::mul", 0.0) >= MIN_CREDIT_OF_OP * mul
    }
    assert set(hot["aten::mul"].entries) == expected and expected & {"sparse_agg", "fast_dropout"}, (
        hot["aten::mul"],
        credits,
    )
    assert hot["aten::mul"].paths == paths
    line = next(ln for ln in hot_op_lines([hot["aten::mul"]]) if "aten::mul" in ln)
    assert UNTARGETED not in line and all(f"{e} " in line for e in hot["aten::mul"].entries), line
    assert all(p in line for p, s in paths.items() if s >= 0.005), line
    # the loader entries are credited with the sampler's multiplies only, never the model's
    in_sampler = sum(v for (phase, path), v in cells.items() if path == "sample")
    assert credits["fanout"] == pytest.approx(in_sampler) and credits["workers"] == pytest.approx(in_sampler)
    # the sampler's and the gather's operators are theirs too
    assert any("sample" in p for p in profile.paths.values()) and any("gather" in p for p in profile.paths.values())
    # the credit an entry gets is the time in its paths: sparse_agg's covers the scatter path's index_add_
    sparse = profile.credit(registry.get("sparse_agg"))
    assert sparse.get("aten::index_add_", 0) > 0 and sparse["aten::mul"] == pytest.approx(
        sum(v for p, v in paths.items() if p in registry.get("sparse_agg").paths)
    )


def test_code_path_ranges_cost_nothing_without_a_profiler_and_every_path_is_marked_somewhere():
    """Outside a profiler a code path is a ``nullcontext`` (no profiler call on the measured clocks); every path
    of CODE_PATHS is marked somewhere in gnnbench's source, and every registry entry's paths are known."""
    import contextlib

    from gnnbench.timing import CODE_PATHS, PATH_RANGE, code_path
    from tests.helpers import ROOT

    assert isinstance(code_path("dropout"), contextlib.nullcontext)
    with torch.profiler.profile() as prof:
        with code_path("dropout"):
            torch.ones(3).mul(2)
        with pytest.raises(ValueError, match="unknown code path 'nope'"):
            code_path("nope")
    assert any(e.name == PATH_RANGE + "dropout" for e in prof.events())
    marking = "\n".join(
        p.read_text() for p in (ROOT / "gnnbench").rglob("*.py") if p.name not in ("timing.py", "registry.py")
    )  # the table and its readers left out
    assert not [name for name in CODE_PATHS if f'"{name}"' not in marking], "a code path no code marks"
    for opt in registry.REGISTRY.values():
        assert set(opt.paths) <= set(CODE_PATHS), opt.name
    with pytest.raises(ValueError, match="must name code paths"):
        registry.Optimization(
            name="x",
            changes={},
            description="",
            expected_effect="",
            layer="m",
            targets=("kernels",),
            paths=("aggregate.nowhere",),
        )


SMALL = GraphSpec.preset("tiny", num_nodes=1500)
# entries a user may already have on (device-independent, single process)
# in-process diagnoses: an allocator is set when a process starts (the CLI starts one for it), so not here
ALREADY_ON = [
    o.name
    for o in registry.REGISTRY.values()
    if o.nproc == 1 and not o.unavailable("cpu") and "allocator" not in o.changes_for(Flags())
]


@st.composite
def user_configs(draw):
    fanout = tuple(draw(st.lists(st.integers(1, 12), min_size=1, max_size=3)))
    task = draw(st.sampled_from(["node", "link"]))
    on = draw(st.lists(st.sampled_from(ALREADY_ON), max_size=2, unique=True))
    flags = Flags(fanout=fanout, batch_size=draw(st.sampled_from([16, 64, 256])))
    try:
        flags = registry.flags_for(on, flags)
    except registry.NotApplicable:
        assume(False)
    depth = draw(st.booleans())
    return RunConfig(
        spec=SMALL,
        flags=flags,
        task=task,
        model=draw(st.sampled_from(["gcn", "sage"])),
        num_layers=len(flags.fanout) if depth else None,
        hidden=draw(st.sampled_from([4, 16, 32])),
        epochs=1,
        max_steps_per_epoch=4,
        warmup_steps=1,
    )


@settings(max_examples=12, deadline=None)
@given(user_configs())
def test_any_valid_user_configuration_gets_a_diagnosis_and_a_sweep(config):
    """diagnose always prints a bottleneck and a ranked list (or says nothing targets it), and compare's entry
    derivation never raises: an entry that cannot apply is listed as such."""
    from gnnbench.measure.sweep import sweep_entries
    from gnnbench.training import config_unavailable

    assume(not config_unavailable(config))
    entries = sweep_entries(config, repeats=1, include_all_recommended=True)
    assert {e.label for e in entries} >= set(registry.names())
    assert all(e.not_applicable or e.config.num_layers in (None, len(e.config.flags.fanout)) for e in entries)
    d = diagnose(config, steps=2, profile_steps=1)
    text = format_diagnosis(d)
    assert "bottleneck: " in text
    assert "try, in this order:" in text or "nothing in the registry targets it" in text


def test_a_result_inside_the_noise_floor_is_not_resolved_never_does_not_pay():
    """[0.95, 1.04] under a +-8% floor: any gain it admits is below the floor, so it is not resolved; the same
    interval under a +-2% floor admits a gain the floor could resolve: no significant difference."""
    row = ComparisonRow(
        status="ok",
        primary="time to accuracy",
        acc_delta=0.0,
        acc_verdict="no accuracy cost",
        label="int32",
        speedup=0.99,
        speedup_low=0.95,
        speedup_high=1.04,
        significant=False,
    )
    wide = verdicts([row], {"time_to_accuracy": 1.08})[0]
    assert wide.startswith("int32: not resolved: any effect is below the +-8.0% floor")
    narrow = verdicts([row], {"time_to_accuracy": 1.02})[0]
    assert narrow.startswith("int32: no significant difference") and "up to 4%" in narrow
    epoch = verdicts([replace(row, primary="epoch time")], {"time_to_accuracy": 1.08, "epoch": 1.10})[0]
    assert "below the +-10.0% floor" in epoch
    assert not any("does not pay" in line for line in (wide, narrow, epoch))


@pytest.mark.slow
def test_diagnose_reports_what_compile_built():
    import dataclasses

    from gnnbench import registry
    from gnnbench.advice.diagnose import diagnose
    from gnnbench.advice.diagnosis_text import format_diagnosis
    from tests.helpers import QUICK

    plain = diagnose(QUICK, steps=2, profile_steps=0)
    assert plain.compile is None and "\ncompile: " not in format_diagnosis(plain)
    cfg = dataclasses.replace(QUICK, flags=registry.flags_for(["compile"], QUICK.flags))
    d = diagnose(cfg, steps=2, profile_steps=0)
    assert d.compile["graphs"] >= 1 and d.compile["graph_breaks"] == 0, d.compile
    assert d.compile["recompilations"] == d.compile["graphs"] - 1 and d.compile["first_step_seconds"] > 0
    assert f"\ncompile: {d.compile['graphs']} graph(s), 0 graph break(s)" in format_diagnosis(d)
