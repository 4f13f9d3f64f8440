"""Duet rounds of the regression gate: BASE and HEAD at once, one per core, a barrier before each benchmark."""

from __future__ import annotations

import threading
import time

import pytest

from gnnbench.measure.gate import Bench, GateOptions, duet_cores, duet_refusal, gate
from gnnbench.measure.gate.duet import run_both
from gnnbench.measure.gate.rounds import run_tree
from gnnbench.measure.gate.worker import DUET_ABORTED, barrier, script_in
from tests.helpers import QUICK, ROOT


def test_a_duet_needs_one_thread_a_side_and_two_cores_and_swaps_the_cores_every_round():
    assert duet_refusal(1, [0, 1]) is None and duet_refusal(1, [3, 5, 7]) is None
    assert "2 threads" in duet_refusal(2, [0, 1, 2, 3]) and "alternate" in duet_refusal(2, [0, 1, 2, 3])
    assert "1 usable core" in duet_refusal(1, [0])
    assert [duet_cores(r, [4, 2]) for r in range(3)] == [
        {"base": 2, "head": 4},
        {"base": 4, "head": 2},
        {"base": 2, "head": 4},
    ]
    with pytest.raises(ValueError, match="two usable cores"):
        duet_cores(0, [0])


def test_the_barrier_releases_both_sides_together_and_a_lost_peer_ends_the_process(tmp_path):
    released, arrived = {}, {}

    def side(me: str, peer: str, delay: float) -> None:
        time.sleep(delay)
        arrived[me] = time.monotonic()
        barrier({"dir": str(tmp_path), "me": me, "peer": peer, "timeout": 10}, 0)
        released[me] = time.monotonic()

    threads = [threading.Thread(target=side, args=a) for a in (("base", "head", 0.0), ("head", "base", 0.3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert released["base"] >= arrived["head"], "base left the barrier before head reached it"
    with pytest.raises(SystemExit) as lost:
        barrier({"dir": str(tmp_path), "me": "base", "peer": "head", "timeout": 0.2}, 1)
    assert lost.value.code == DUET_ABORTED
    (tmp_path / "abort").touch()
    t0 = time.monotonic()
    with pytest.raises(SystemExit) as stopped:
        barrier({"dir": str(tmp_path), "me": "base", "peer": "head", "timeout": 30}, 2)
    assert stopped.value.code == DUET_ABORTED and time.monotonic() - t0 < 1.0


def test_run_both_runs_the_sides_at_once_and_tells_the_peer_when_one_fails(tmp_path):
    both = threading.Barrier(2, timeout=30)  # passes only if the two sides run at the same time

    def call(role: str) -> str:
        both.wait()
        if role == "head":
            raise RuntimeError("head crashed")
        return "ok"

    got = run_both(call, tmp_path)
    assert got["base"] == "ok" and isinstance(got["head"], RuntimeError)
    assert (tmp_path / "abort").exists()


def test_a_duet_round_runs_each_benchmark_in_both_trees_at_the_same_moment(tmp_path):
    """The real worker, two benchmarks, two rounds: each benchmark starts in both processes within a few
    milliseconds of each other (the barrier), each process on the core the round gave it."""
    worker = script_in(tmp_path)
    seen: list[tuple[str, dict]] = []

    def runner(role, spec, out):
        got = run_tree(ROOT, spec, out, 1, worker, 600.0)
        seen.append((role, got))
        return got

    benches = [Bench("baseline", QUICK), Bench("micro:sampler", QUICK)]
    result = gate({"base": ROOT, "head": ROOT}, benches, GateOptions(rounds=2, cores=[0, 1]), runner=runner)
    assert result.failure is None and result.design == "duet" and result.design_note is None
    assert result.cores == [{"base": 0, "head": 1}, {"base": 1, "head": 0}]
    assert result.to_dict()["design"] == "duet"
    assert len(seen) == 4
    for r in range(2):
        base, head = (dict(seen[2 * r : 2 * r + 2])[role] for role in ("base", "head"))
        for b in benches:
            assert base[b.name]["status"] == "ok" and head[b.name]["status"] == "ok"
            assert abs(base[b.name]["started"] - head[b.name]["started"]) < 0.25, (r, b.name)


def test_a_gate_asked_for_a_duet_on_a_runner_that_cannot_hold_one_alternates_and_says_why():
    calls = []

    def runner(role, spec, out):
        calls.append(role)
        return {"baseline": {"status": "ok", "step": 0.01, "steps": 5, "phases": {}, "test": 0.5, "seconds": 0.1}}

    result = gate(
        {"base": ROOT, "head": ROOT}, [Bench("baseline", QUICK)], GateOptions(rounds=2, cores=[0]), runner=runner
    )
    assert result.design == "alternating" and "1 usable core" in result.design_note and not result.cores
    assert sorted(calls) == ["base", "base", "head", "head"]


def test_both_sides_of_a_round_start_with_the_round_s_hash_seed(tmp_path):
    """Python's per-process string-hash seed moves a process's speed (docs/regression-gate.md): a round's spec
    carries one seed for both trees, another per round, and the benchmark process starts with it."""
    from gnnbench.measure.gate.rounds import _spec_env, hash_seed, spec_file

    specs = [spec_file([Bench("baseline", QUICK)], r, tmp_path, {"me": side}) for r in (0, 3) for side in ("a", "b")]
    seeds = [_spec_env(p)["PYTHONHASHSEED"] for p in specs]
    assert seeds == [str(hash_seed(0))] * 2 + [str(hash_seed(3))] * 2 and seeds[0] != seeds[2]
    assert _spec_env(tmp_path / "missing.json") == {}
