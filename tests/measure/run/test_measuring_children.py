"""The measuring children of a run and of a sweep (:func:`gnnbench.process.run_child`): their timeout comes from
the run's time budget, and a child that fails or hangs gives a failed result with the end of its stderr or the
timeout, never a hung sweep. The children here are stand-ins (a sleeper, a crash) so that no test depends on the
machine's speed; the real child's command is tested by every isolated sweep."""

from __future__ import annotations

import dataclasses
import json
import sys
import time

import pytest

import gnnbench.measure.run.single as single
import gnnbench.measure.sweep.rounds as rounds
from gnnbench.measure.sweep import Entry
from gnnbench.process import DEFAULT_CHILD_TIMEOUT_S, budget_timeout
from tests.helpers import QUICK

CRASH = "import sys; print('Traceback (most recent call last):', file=sys.stderr); sys.exit('RuntimeError: broken run')"


def _stand_in(monkeypatch, module, argv: list[str], timeout: float) -> None:
    monkeypatch.setattr(module, "child_argv", lambda config_path, out, dist_timeout: argv)
    monkeypatch.setattr(module, "child_timeout", lambda config: timeout)


def test_a_childs_timeout_follows_the_time_budget_that_stops_its_run():
    assert single.child_timeout(QUICK) == DEFAULT_CHILD_TIMEOUT_S, "no budget: the default"
    assert single.child_timeout(dataclasses.replace(QUICK, max_seconds=60)) == budget_timeout(60)
    censored = dataclasses.replace(QUICK, epochs=None, censor_seconds=60)
    assert censored.clock_bound is None, "censoring alone stops no run (an accuracy run goes on to its plateau)"
    assert single.child_timeout(censored) == DEFAULT_CHILD_TIMEOUT_S
    to_target = dataclasses.replace(censored, stop_at=0.5)
    assert to_target.clock_bound == 60 and single.child_timeout(to_target) == budget_timeout(60)
    both = dataclasses.replace(to_target, max_seconds=30)
    assert both.clock_bound == 30


def test_an_isolated_sweep_run_that_hangs_is_a_failed_result_at_its_timeout(tmp_path, monkeypatch):
    _stand_in(monkeypatch, rounds, ["sh", "-c", "echo importing >&2; sleep 30"], timeout=1.0)
    entry = Entry("baseline", QUICK, ())
    path = tmp_path / entry.filename()
    started = time.monotonic()
    result = rounds._measure(entry, path, isolate=True, graphs={})
    assert time.monotonic() - started < 15, "the sweep waited for the hung process"
    assert result.status == "failed" and result.error.startswith("timed out after 1 s")
    assert "sleep 30" in result.error and result.config == QUICK.to_dict()
    failed = json.loads(path.with_suffix(".failed.json").read_text())
    assert failed["status"] == "failed" and failed["error"] == result.error
    assert not path.exists() and not list(tmp_path.glob(".*.config.json")), "no result, no stray config file"


def test_an_isolated_sweep_run_that_crashes_is_a_failed_result_with_its_stderr(tmp_path, monkeypatch):
    _stand_in(monkeypatch, rounds, [sys.executable, "-c", CRASH], timeout=30.0)
    entry = Entry("baseline", QUICK, ())
    result = rounds._measure(entry, tmp_path / entry.filename(), isolate=True, graphs={})
    assert result.status == "failed"
    assert result.error == "Traceback (most recent call last):\nRuntimeError: broken run"


@pytest.mark.parametrize(
    "argv, timeout, error",
    [
        ([sys.executable, "-c", CRASH], 30.0, "RuntimeError: broken run"),  # its last line, as before
        ([sys.executable, "-c", "pass"], 30.0, "no result in "),
        (["sh", "-c", "sleep 30"], 1.0, "timed out after 1 s"),
    ],
)
def test_a_run_in_a_process_of_its_own_that_fails_is_a_failed_result(tmp_path, monkeypatch, argv, timeout, error):
    _stand_in(monkeypatch, single, argv, timeout)
    started = time.monotonic()
    result = single._in_child(QUICK, tmp_path / "result.json", 60.0)
    assert time.monotonic() - started < 15
    assert result.status == "failed" and result.error.startswith(error) and result.config == QUICK.to_dict()
