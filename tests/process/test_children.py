"""The one way to start a measuring child (:func:`gnnbench.process.run_child`): its output, its failures, its
timeout and interruption ending its whole process group, and its arguments refused with the bad value named.

No test depends on the machine's speed: the children are shell one-liners, the timeouts are a second or two
against children that would otherwise sleep 30 s, and a child that must be interrupted is interrupted only
once it has started the process that must not outlive it.
"""

from __future__ import annotations

import _thread
import math
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from gnnbench.process import DEFAULT_CHILD_TIMEOUT_S, ChildOutcome, budget_timeout, run_child
from gnnbench.process.children import BUDGET_FACTOR, BUDGET_MARGIN_S

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")

SLEEPER = 30  # seconds a child sleeps when only a kill can end it early


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _gone(pid: int, within: float = 2.0) -> bool:
    """Whether ``pid`` is gone (a SIGKILL is delivered asynchronously: allowed ``within`` seconds)."""
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _pid(path: Path) -> int:
    return int(path.read_text().strip())


def test_a_child_that_succeeds_gives_its_output_and_runs_where_and_with_what_it_is_told(tmp_path):
    code = "import os, sys; print('out', os.getcwd(), os.environ['CHILD_VALUE']); print('note', file=sys.stderr)"
    env = {**os.environ, "CHILD_VALUE": "42"}
    child = run_child([sys.executable, "-c", code], timeout=30, env=env, cwd=tmp_path)
    assert isinstance(child, ChildOutcome) and child.ok and child.returncode == 0 and not child.timed_out
    assert child.stdout == f"out {tmp_path} 42\n" and child.stderr == "note\n"
    assert child.error_text() == "note" and child.timeout == 30.0 and 0 < child.seconds < 30
    assert child.argv == (sys.executable, "-c", code)


def test_a_child_that_fails_gives_the_tail_of_its_stderr(tmp_path):
    code = "import sys\nfor i in range(30): print(f'line {i}', file=sys.stderr)\nsys.exit(3)"
    child = run_child([sys.executable, "-c", code], timeout=30)
    assert not child.ok and child.returncode == 3 and not child.timed_out
    assert child.tail(2) == "line 28\nline 29"
    assert child.error_text().splitlines() == [f"line {i}" for i in range(10, 30)], "the last 20 lines"
    assert child.tail(30, max_chars=7) == "line 29"


def test_a_child_killed_without_a_word_is_named_with_its_signal():
    child = run_child(["sh", "-c", "kill -9 $$"], timeout=30)
    assert child.returncode == -9 and not child.ok
    assert child.error_text() == "sh -c 'kill -9 $$' exited with signal SIGKILL and wrote nothing to stderr"


def test_a_child_past_its_timeout_is_ended_with_its_whole_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    child = run_child(
        ["sh", "-c", f"sleep {SLEEPER} & echo $! > {pid_file}; echo started >&2; sleep {SLEEPER}"],
        timeout=1.5,
        grace=1,
    )
    assert time.monotonic() - started < SLEEPER / 3, "it returned at the timeout, not when the child would end"
    assert child.timed_out and not child.ok and child.returncode < 0
    assert child.stderr == "started\n", "what it wrote before the timeout is kept"
    assert child.error_text().startswith("timed out after 1.5 s") and f"sleep {SLEEPER}" in child.error_text()
    assert _gone(_pid(pid_file)), "the grandchild it started outlived it"


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    child = run_child(["sh", "-c", f"trap '' TERM; sleep {SLEEPER} & echo $! > {pid_file}; wait"], timeout=1, grace=0.3)
    assert time.monotonic() - started < SLEEPER / 3 and child.timed_out and child.returncode == -9
    assert _gone(_pid(pid_file))


def test_what_a_finished_child_leaves_behind_is_killed_and_cannot_hold_up_the_wait(tmp_path):
    """The grandchild keeps the child's stdout open: captured through pipes, the wait would last until it ends."""
    pid_file = tmp_path / "grandchild.pid"
    started = time.monotonic()
    child = run_child(["sh", "-c", f"sleep {SLEEPER} & echo $! > {pid_file}; echo done"], timeout=SLEEPER)
    assert time.monotonic() - started < SLEEPER / 3
    assert child.ok and child.stdout == "done\n"
    assert _gone(_pid(pid_file)), "a leftover of its group outlived it"


def test_an_interrupted_wait_ends_the_group_and_is_raised_again(tmp_path):
    pid_file = tmp_path / "grandchild.pid"

    def interrupt_once_started() -> None:
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.02)
        _thread.interrupt_main()  # KeyboardInterrupt in the waiting (main) thread, as Ctrl-C

    interrupter = threading.Thread(target=interrupt_once_started)
    interrupter.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_child(["sh", "-c", f"sleep {SLEEPER} & echo $! > {pid_file}; wait"], timeout=SLEEPER, grace=1)
    interrupter.join()
    assert time.monotonic() - started < SLEEPER / 3
    assert _gone(_pid(pid_file)), "the interrupted child's group outlived the interruption"


def test_a_log_receives_both_streams_in_order(tmp_path):
    log = tmp_path / "child.log"
    child = run_child(["sh", "-c", "echo one; echo two >&2; echo three; exit 1"], timeout=30, log=log)
    assert log.read_text() == "one\ntwo\nthree\n"
    assert (child.returncode, child.stdout, child.stderr) == (1, "", "")
    assert (
        child.error_text()
        == "sh -c 'echo one; echo two >&2; echo three; exit 1' exited with status 1 and wrote nothing to stderr"
    )


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "5", None, True])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=r"timeout must be a number of seconds > 0 \(got " + repr(bad)):
        run_child(["true"], timeout=bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"argv": "sleep 1"},
            "argv must be a non-empty list of strings, the command and its arguments (got 'sleep 1')",
        ),
        ({"argv": []}, "argv must be a non-empty list of strings, the command and its arguments (got [])"),
        ({"argv": ["sleep", 1]}, "argv must hold strings or paths (got 1 in ['sleep', 1])"),
        ({"grace": -1}, "grace must be a number of seconds >= 0 (got -1)"),
        ({"cwd": "/no/such/folder"}, "cwd must be an existing directory (got '/no/such/folder')"),
        ({"env": {"HOME": None}}, "env must map names to strings (got 'HOME'=None)"),
    ],
)
def test_malformed_arguments_are_refused_naming_the_bad_value(kwargs, message):
    call = {"argv": ["true"], "timeout": 5, **kwargs}
    with pytest.raises(ValueError) as info:
        run_child(call.pop("argv"), **call)
    assert str(info.value) == message


def test_a_timeout_from_a_time_budget_leaves_a_generous_margin():
    assert budget_timeout(None) == DEFAULT_CHILD_TIMEOUT_S == 3600.0
    assert budget_timeout(None, default=60) == 60.0
    assert budget_timeout(100) == BUDGET_FACTOR * 100 + BUDGET_MARGIN_S > 100 + 600
    with pytest.raises(ValueError, match=r"budget_seconds must be a number of seconds > 0 \(got 0\)"):
        budget_timeout(0)


def test_a_json_child_gives_what_it_wrote_to_its_out_file_or_says_why_it_did_not():
    """The measuring scripts' children write JSON to the ``--out`` they are given; a child that fails, or writes
    nothing, is an error carrying its stderr's tail."""
    import sys

    from gnnbench.process import run_json_child

    write = "import json, sys; json.dump({'steps': [1, 2]}, open(sys.argv[sys.argv.index('--out') + 1], 'w'))"
    assert run_json_child([sys.executable, "-c", write], 60.0) == {"steps": [1, 2]}
    with pytest.raises(RuntimeError, match="no luck"):
        run_json_child([sys.executable, "-c", "import sys; sys.exit('no luck')"], 60.0)
    with pytest.raises(RuntimeError):
        run_json_child([sys.executable, "-c", "pass"], 60.0)
