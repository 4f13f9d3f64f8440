"""The peer samplers (torch-sparse, pyg-lib): how they are called, and the command's options.

Neither peer is a dependency, so the calls are checked against stand-in ops
that record their arguments; the real ones run in ``tests/perf`` when installed.
"""

import argparse
import sys
import types

import pytest
import torch

from gnnbench.microbench import sampler_compare as peers


def _fake_op(monkeypatch, module: str, namespace: str):
    calls = []
    monkeypatch.setitem(sys.modules, module, types.ModuleType(module))
    monkeypatch.setattr(
        torch.ops,
        namespace,
        types.SimpleNamespace(neighbor_sample=lambda *args: calls.append(args) or "out"),
        raising=False,
    )
    return calls


@pytest.mark.parametrize(
    "make, module, hint",
    [
        (peers.torch_sparse_sampler, "torch_sparse", "pip install --no-build-isolation torch-scatter torch-sparse"),
        (peers.pyg_lib_sampler, "pyg_lib", "pip install pyg-lib"),
    ],
)
def test_missing_peer_raises_import_error_with_install_hint(monkeypatch, make, module, hint):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    with pytest.raises(ImportError, match=hint):
        make(torch.tensor([0, 0]), torch.tensor([], dtype=torch.long), (2,))
    assert peers._peer_samplers(torch.tensor([0, 0]), torch.tensor([], dtype=torch.long), (2,)).get(module) is None


def test_torch_sparse_sampler_call(monkeypatch):
    calls = _fake_op(monkeypatch, "torch_sparse", "torch_sparse")
    rowptr, col, seeds = torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([0])
    assert peers.torch_sparse_sampler(rowptr, col, (15, 10))(seeds) == "out"
    (args,) = calls
    assert args[:3] == (rowptr, col, seeds) and args[3:] == ([15, 10], False, True)  # replace, directed


@pytest.mark.parametrize("edge_time, edge_weight", [(True, True), (False, False), (True, False)])
def test_pyg_lib_sampler_call_is_not_disjoint(monkeypatch, edge_time, edge_weight):
    from torch_geometric import typing as pyg_typing

    calls = _fake_op(monkeypatch, "pyg_lib", "pyg")
    monkeypatch.setattr(pyg_typing, "WITH_EDGE_TIME_NEIGHBOR_SAMPLE", edge_time)
    monkeypatch.setattr(pyg_typing, "WITH_WEIGHTED_NEIGHBOR_SAMPLE", edge_weight)
    rowptr, col, seeds = torch.tensor([0, 1, 2]), torch.tensor([1, 0]), torch.tensor([0])
    peers.pyg_lib_sampler(rowptr, col, (15, 10))(seeds)
    (args,) = calls
    assert args[:4] == (rowptr, col, seeds, [15, 10])
    optional = 2 + edge_time + edge_weight  # node_time, [edge_time], seed_time, [edge_weight]
    assert args[4 : 4 + optional] == (None,) * optional
    # csc, replace, directed, disjoint, temporal_strategy, return_edge_id
    assert args[4 + optional :] == (True, False, True, False, "uniform", True)


def test_add_arguments_and_run_from_args_compose_main(monkeypatch):
    parser = argparse.ArgumentParser()
    peers.add_arguments(parser)
    args = parser.parse_args(["--nodes", "300", "--fanouts", "3,2", "--rounds", "1"])
    assert (args.nodes, args.avg_degree, args.batch_size, args.fanouts, args.threads, args.rounds) == (
        300,
        20.0,
        1024,
        "3,2",
        2,
        1,
    )
    seen = []
    monkeypatch.setattr(peers, "run_from_args", lambda a: seen.append(a) or 0)
    assert peers.main(["--nodes", "300", "--fanouts", "3,2", "--rounds", "1"]) == 0
    assert vars(seen[0]) == vars(args)


def test_run_from_args_prints_the_table(capsys):
    parser = argparse.ArgumentParser()
    peers.add_arguments(parser)
    threads = torch.get_num_threads()
    try:
        code = peers.run_from_args(
            parser.parse_args(
                [
                    "--nodes",
                    "500",
                    "--avg-degree",
                    "4",
                    "--batch-size",
                    "64",
                    "--fanouts",
                    "3,2",
                    "--threads",
                    "1",
                    "--rounds",
                    "1",
                ]
            )
        )
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert code == 0
    assert "500 nodes" in out and "gnnbench" in out
