"""The trainer builds once and steps: the pipeline assembled by the layers' factories, the step bodies behind
one interface, the batch sources' explicit protocol, and evaluation kept off the training clock."""

import ast
import dataclasses
import time
from pathlib import Path

import pytest

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec
from gnnbench.graphs.prepare import prepare
from gnnbench.sampling.batch import BatchSource
from gnnbench.sampling.sources import SHARDED_SOURCES, SOURCES, CachedBatches, make_batch_source
from gnnbench.training import Trainer
from gnnbench.training.evaluation import Evaluator
from gnnbench.training.pipeline import assemble
from gnnbench.training.steps import PartitionStep, SampledStep, TrainStep, step_for
from tests.helpers import QUICK, ROOT

TRAINING = ROOT / "gnnbench" / "training"


@pytest.fixture(scope="module")
def graph(quick_graph):
    return quick_graph


def test_every_batch_source_follows_the_protocol():
    for cls in [*SOURCES.values(), *SHARDED_SOURCES.values(), CachedBatches]:
        assert issubclass(cls, BatchSource), cls
        assert cls.norm_mode in ("batch", "source_degree", "full", "estimator"), cls


def test_min_epochs_comes_from_the_source(graph):
    prepared = prepare(graph, Flags())
    neighbor = make_batch_source(prepared, Flags(fanout=(3, 2)), seed=0)
    full = make_batch_source(prepared, registry.flags_for(["full_batch"]), seed=0)
    cached = make_batch_source(prepared, Flags(fanout=(3, 2), batch_cache_epochs=3), seed=0)
    try:
        assert neighbor.min_epochs(warmup_steps=3) == 1
        assert full.min_epochs(warmup_steps=3) == 3 + full.measured_steps  # one step per epoch
        assert cached.min_epochs(warmup_steps=3) == 4  # K + 1: K - 1 epochs replay
        assert neighbor.cache is None and cached.cache is not None
    finally:
        for s in (neighbor, full, cached):
            s.close()


def test_the_pipeline_is_assembled_once_on_one_setup_clock(graph):
    pipe = assemble(QUICK, graph)
    try:
        assert pipe.setup_seconds > 0 and pipe.setup_clock == pytest.approx(
            pipe.prepared.prepare_seconds + pipe.setup_seconds
        )
        assert pipe.partition is None and pipe.forward is pipe.model  # one process, no compile: the bare model
        assert pipe.graph_seconds == graph.meta.get("generate_seconds", 0.0)
        step = step_for(pipe)
        assert isinstance(step, SampledStep) and isinstance(step, TrainStep)
    finally:
        pipe.close()


def test_a_partition_pipeline_gets_the_partition_step():
    class Part:  # what step_for looks at: the pipeline holds a part of the graph
        pass

    pipe = type("P", (), {"partition": Part()})()
    assert isinstance(step_for(pipe), PartitionStep)


def test_a_graph_that_is_not_the_configs_is_refused(graph):
    other = dataclasses.replace(QUICK, spec=GraphSpec.preset("tiny", num_nodes=2000))
    with pytest.raises(ValueError, match="not generated from config.spec"):
        assemble(other, graph)


def _flag_reads(path: Path) -> list[str]:
    """``flags.<field>`` reads (and reads of a ``.flags`` attribute's fields) in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            base = node.value
            named = isinstance(base, ast.Name) and base.id == "flags"
            attr = isinstance(base, ast.Attribute) and base.attr == "flags"
            if named or attr:
                out.append(f"line {node.lineno}: .{node.attr}")
    return out


@pytest.mark.parametrize("module", ["trainer.py", "pipeline.py", "steps.py", "evaluation.py", "optim.py"])
def test_the_trainer_never_reads_a_flag_value(module):
    """Each layer's factory reads its own flags; the training band only passes them on."""
    assert _flag_reads(TRAINING / module) == []


def test_evaluation_stays_off_the_training_clock(graph, monkeypatch):
    cfg = dataclasses.replace(QUICK, eval_every=1)
    fast = Trainer(cfg, graph)
    for _ in fast.steps(evaluate=True):
        pass
    fast.close()

    real = Evaluator.evaluate

    def slow(self):
        time.sleep(0.25)
        metrics, seconds = real(self)
        return metrics, seconds + 0.25

    monkeypatch.setattr(Evaluator, "evaluate", slow)
    slowed = Trainer(cfg, graph)
    for _ in slowed.steps(evaluate=True):
        pass
    slowed.close()
    points = len(slowed.curve)
    assert points == 6
    assert slowed.evaluation.seconds >= 0.25 * points
    # six evaluations of 0.25 s more each: 1.5 s; none of it lands on the training clock
    assert slowed.train_seconds < fast.train_seconds + 0.75
    assert [p.seconds for p in slowed.curve] == sorted(p.seconds for p in slowed.curve)
    assert slowed.curve[-1].seconds < slowed.pipeline.setup_clock + slowed.train_seconds + 1e-9
