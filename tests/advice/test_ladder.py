"""The out-of-memory ladder (gnnbench.advice.ladder) and ``gnnbench run --memory-budget``."""

import dataclasses

import pytest

from gnnbench.advice.ladder import RUNGS, walk
from gnnbench.cli import main
from gnnbench.cli.options import parse_size
from gnnbench.cli.tables import format_ladder
from gnnbench.flags import Flags, UnavailableError
from gnnbench.graphs import GraphSpec
from gnnbench.measure.run import BENCH_FLAGS
from gnnbench.text import human_bytes
from gnnbench.training import RunConfig

BASE = BENCH_FLAGS
RUNG_NAMES = ["as given"] + [r.name for r in RUNGS]


@pytest.fixture(scope="module")
def config():
    return RunConfig(spec=GraphSpec.preset("tiny"), flags=BASE, epochs=1, max_steps_per_epoch=4)


@pytest.fixture(scope="module")
def every_rung(config, tiny_graph):
    """The whole ladder, walked under a budget of one byte (nothing fits)."""
    return walk(config, 1, graph=tiny_graph, probe_steps=2)


def test_each_rung_applies_its_change_on_top_of_the_ones_before(every_rung):
    path = every_rung.path
    assert [r.rung for r in path] == RUNG_NAMES
    halved = BASE.replace(fanout=(5, 2))
    expected = [
        BASE,
        halved,
        halved.replace(batch_size=128),
        halved.replace(batch_size=128, feature_dtype="float16"),
        halved.replace(batch_size=128, feature_dtype="float16", batch_source="cluster_gcn"),
    ]
    assert [r.flags for r in path] == expected
    assert path[1].change == "fanout [10, 5] -> [5, 2]" and path[2].change == "batch_size 256 -> 128"


def test_a_budget_nothing_meets_ends_with_the_smallest_peak(every_rung):
    assert every_rung.final is None
    measured = [r for r in every_rung.path if r.status == "over"]
    assert len(measured) >= 4 and all(r.peak_bytes > 0 and r.test_metric is not None for r in measured)
    smallest = every_rung.smallest
    assert smallest.peak_bytes == min(r.peak_bytes for r in measured)
    text = format_ladder(every_rung)
    assert f"nothing fits 1 B: the smallest peak reached is {human_bytes(smallest.peak_bytes)}" in text
    assert every_rung.to_dict()["fits"] is False


def test_walk_stops_at_the_first_rung_that_fits(every_rung, config, tiny_graph):
    given, fanout, batch = (r.peak_bytes for r in every_rung.path[:3])
    assert given > fanout > batch, "halving the fanout, then the batch, must lower the measured step peak"
    budget = fanout - 1  # below what the halved fanout needs, above what the halved batch needs
    result = walk(config, budget, graph=tiny_graph, probe_steps=2)
    assert [(r.rung, r.status) for r in result.path] == [
        ("as given", "over"),
        ("halve_fanout", "over"),
        ("halve_batch", "fits"),
    ]
    assert result.final.flags == BASE.replace(fanout=(5, 2), batch_size=128)
    assert [r.peak_bytes for r in result.path] == [given, fanout, batch], "the tracked peak is deterministic"
    assert "fits at rung 'halve_batch'" in format_ladder(result)


def test_rungs_that_do_not_apply_are_skipped_with_the_reason(config, tiny_graph):
    skip = {r.name: r.skip for r in RUNGS}
    assert "cannot be halved" in skip["halve_fanout"](Flags(fanout=(1, -1)))
    assert "batch_size 1 cannot be halved" == skip["halve_batch"](Flags(batch_size=1))
    assert "does not sample neighbours" in skip["halve_batch"](Flags(batch_source="full"))
    assert "fp16_features is already on" in skip["fp16_features"](Flags(feature_dtype="float16"))
    ones = dataclasses.replace(config, flags=BASE.replace(fanout=(1, 1)))
    result = walk(ones, 1, graph=tiny_graph, probe_steps=2, rungs=RUNGS[:1])
    assert [(r.rung, r.status) for r in result.path] == [("as given", "over"), ("halve_fanout", "skipped")]
    assert "fanout [1, 1] cannot be halved" in result.path[1].note


def test_bad_budgets_and_unrunnable_configurations_are_refused(config):
    for bad in (0, -5, 1.5, "2GiB", True):
        with pytest.raises(ValueError, match=r"positive number of bytes \(got"):
            walk(config, bad)
    with pytest.raises(UnavailableError, match="pin_memory"):
        walk(dataclasses.replace(config, flags=BASE.replace(pin_memory=True)), 2**30)
    with pytest.raises(UnavailableError, match="compile: the step-memory tracker off CUDA is a dispatch mode"):
        walk(dataclasses.replace(config, flags=BASE.replace(compile=True)), 2**30)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("2GiB", 2 * 2**30),
        ("512MiB", 512 * 2**20),
        ("1.5GB", 1_500_000_000),
        ("2147483648", 2**31),
        ("100 kb", 100_000),
        ("3gib", 3 * 2**30),
    ],
)
def test_sizes_accepted(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["abc", "1.5", "0", "0GiB", "2g", "infGB", "nanMB", "0.1b", "GiB", ""])
def test_bad_sizes_are_one_line_errors_naming_the_value(text, capsys):
    assert main(["run", "--preset", "tiny", f"--memory-budget={text}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--memory-budget must be a size such as 2GiB, 512MiB or 1.5GB, or plain bytes" in err
    assert f"got {text!r}" in err


def test_run_memory_budget_prints_the_path_and_exits_1_when_nothing_fits(capsys):
    args = [
        "run",
        "--preset",
        "tiny",
        "--nodes",
        "2000",
        "--epochs",
        "1",
        "--max-steps",
        "3",
        "--batch-size",
        "128",
        "--fanout",
        "4,2",
        "--memory-budget",
        "1",
    ]
    assert main(args) == 1
    out = capsys.readouterr().out
    for rung in RUNG_NAMES:
        assert rung in out
    assert "nothing fits 1 B" in out


def test_a_ladder_on_a_run_to_a_plateau_reads_accuracy_at_its_best_point(config, tiny_graph):
    """The CLI's default is a run to a validation plateau (epochs=None): each rung trains to it, evaluating on
    the way, and its accuracy is the test metric at the best validation point (no refusal, no traceback)."""
    plateau = dataclasses.replace(config, epochs=None, max_epochs=3, max_steps_per_epoch=4)
    result = walk(plateau, 2**40, graph=tiny_graph, probe_steps=2, rungs=RUNGS[:1])
    first = result.path[0]
    assert first.status == "fits" and 0 < first.test_metric <= 1, first
