"""The process entries' allocators: set when the process starts, read back from it, refused where they cannot be
had, and harmless to the training trajectory (bit-identical losses and validation points).

The allocator libraries are Debian's ``libtcmalloc-minimal4`` and ``libjemalloc2``, which ``.ci/run`` installs;
with ``GNNBENCH_REQUIRE_ALLOCATORS=1`` (CI) a missing one fails instead of skipping.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gnnbench import process, registry
from gnnbench.flags import Flags
from gnnbench.measure.run import run
from gnnbench.process import allocators, readback
from tests.helpers import QUICK, ROOT

ALLOCATOR_ENTRIES = [name for name, opt in registry.REGISTRY.items() if "allocator" in opt.changes_for(Flags())]
REQUIRED = os.environ.get("GNNBENCH_REQUIRE_ALLOCATORS") == "1"


def _need(name: str) -> None:
    reason = allocators.allocator_unavailable(name)
    if reason is None:
        return
    if REQUIRED:
        pytest.fail(f"GNNBENCH_REQUIRE_ALLOCATORS=1 and {name} cannot be set here: {reason}")
    pytest.skip(reason)


# A child trains QUICK (3 epochs of 6 steps, a validation point every 3) with its allocator and prints its
# per-step losses, its validation points and the allocator read back from it.
_CHILD = """
import dataclasses, json, sys
from gnnbench import process, registry
from gnnbench.training import Trainer
from tests.helpers import QUICK
config = dataclasses.replace(QUICK, epochs=3, max_steps_per_epoch=6, eval_every=3, warmup_steps=0, lr=0.05, hidden=32)
config = registry.config_for(config, [n for n in sys.argv[1:]])
trainer = Trainer(config)
try:
    losses = [step.loss for step in trainer.steps(evaluate=True)]
finally:
    trainer.close()
print(json.dumps({"losses": losses, "curve": [[p.step, p.val, p.test] for p in trainer.curve],
                  "allocator": process.allocator_in_effect()}))
"""


def _train_in_child(names: list[str]) -> dict:
    flags = registry.flags_for(names)
    env = process.child_environment(flags)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *names], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def glibc_trajectory():
    return _train_in_child([])


def test_every_choice_has_its_entry_and_the_baseline_is_glibc():
    from gnnbench.flags import ALLOCATOR_NAMES

    assert tuple(allocators.ALLOCATORS) == ALLOCATOR_NAMES
    assert Flags().allocator == allocators.BASELINE_ALLOCATOR == "glibc"
    set_by_entries = {registry.get(n).changes_for(Flags())["allocator"] for n in ALLOCATOR_ENTRIES}
    assert set_by_entries == set(ALLOCATOR_NAMES) - {"glibc"}
    for name in ALLOCATOR_ENTRIES:  # proven below: their time to accuracy is derived from their time per step
        assert registry.get(name).same_trajectory, name


# glibc_tuned in the default run; the preloaded libraries (a child process each, ~10 s) with -m slow, as CI runs
@pytest.mark.parametrize(
    "name", [n if n == "glibc_tuned" else pytest.param(n, marks=pytest.mark.slow) for n in ALLOCATOR_ENTRIES]
)
def test_allocator_leaves_the_trajectory_bit_identical(glibc_trajectory, name):
    allocator = registry.get(name).changes_for(Flags())["allocator"]
    _need(allocator)
    other = _train_in_child([name])
    assert other["allocator"]["allocator"] == allocator, other["allocator"]  # read back: it really ran
    assert glibc_trajectory["allocator"]["allocator"] == "glibc", glibc_trajectory["allocator"]
    assert len(other["losses"]) == 18
    assert other["losses"] == glibc_trajectory["losses"]  # bit for bit
    assert other["curve"] == glibc_trajectory["curve"]


@pytest.mark.parametrize("name", ["tcmalloc", "jemalloc"])
def test_a_preloaded_allocator_is_read_back_with_its_own_report(name):
    _need(name)
    env = process.child_environment(Flags(allocator=name))
    code = "import json; from gnnbench.process import allocator_in_effect; print(json.dumps(allocator_in_effect()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    found = json.loads(out.stdout)
    assert found["family"] == name and name in os.path.basename(found["library"])
    assert found["allocator"] == name
    if name == "jemalloc":  # mallctl reports the options MALLOC_CONF set
        assert found["report"]["dirty_decay_ms"] == -1 and found["report"]["muzzy_decay_ms"] == -1
    else:
        assert found["report"].get("generic.heap_size", 0) > 0


def test_glibc_tuning_is_read_back_by_where_a_large_block_is_served():
    here = readback.allocator_in_effect()
    if here["family"] != "glibc":
        pytest.skip(f"this process's malloc is {here['library']}")
    env = process.child_environment(Flags(allocator="glibc_tuned"))
    code = "import json; from gnnbench.process import allocator_in_effect; print(json.dumps(allocator_in_effect()))"
    tuned = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120).stdout
    )
    plain = json.loads(
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env=process.child_environment(Flags()),
            timeout=120,
        ).stdout
    )
    assert tuned["allocator"] == "glibc_tuned" and tuned["report"]["large_block_on_heap"] is True
    assert plain["allocator"] == "glibc" and plain["report"]["large_block_on_heap"] is False


def test_child_environment_replaces_allocator_settings_and_keeps_the_rest():
    base = {
        "PATH": "/bin",
        "LD_PRELOAD": "/opt/libfoo.so:/usr/lib/libjemalloc.so.2",
        "MALLOC_CONF": "narenas:1",
        "MALLOC_TRIM_THRESHOLD_": "1",
        "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0:glibc.rtld.nns=2",
    }
    env = allocators.child_environment("glibc", base)
    assert env["LD_PRELOAD"] == "/opt/libfoo.so" and env["PATH"] == "/bin"
    assert "MALLOC_CONF" not in env and "MALLOC_TRIM_THRESHOLD_" not in env
    assert env["GLIBC_TUNABLES"] == "glibc.rtld.nns=2"
    tuned = allocators.child_environment("glibc_tuned", base)
    assert tuned["MALLOC_MMAP_THRESHOLD_"] == str(1 << 30) and tuned["MALLOC_TOP_PAD_"] == str(1 << 30)
    if allocators.allocator_unavailable("tcmalloc") is None:
        tc = allocators.child_environment("tcmalloc", base)
        assert tc["LD_PRELOAD"].split(":")[0].endswith("libtcmalloc_minimal.so.4")
        assert tc["LD_PRELOAD"].split(":")[1:] == ["/opt/libfoo.so"]


def test_a_missing_library_is_unavailable_with_the_package_that_provides_it(monkeypatch):
    monkeypatch.setattr(allocators, "_LIBRARY_DIRS", ())
    monkeypatch.delenv("GNNBENCH_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    why = registry.get("tcmalloc").unavailable("cpu")
    assert why and "libtcmalloc_minimal.so.4 is not installed" in why and "libtcmalloc-minimal4" in why, why
    assert "libjemalloc2" in registry.get("jemalloc").unavailable("cpu")
    with pytest.raises(ValueError, match="libjemalloc2"):
        allocators.child_environment("jemalloc_pyg")
    # never measured as a no-op: the run is refused with the reason, no process started for it
    result = run(registry.config_for(QUICK, ["tcmalloc"]))
    assert result.status == "unavailable" and "libtcmalloc-minimal4" in result.unavailable["allocator"]


def test_a_library_found_through_gnnbench_library_path(monkeypatch, tmp_path):
    monkeypatch.setattr(allocators, "_LIBRARY_DIRS", ())
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    (tmp_path / "libjemalloc.so.2").write_bytes(b"")
    monkeypatch.setenv("GNNBENCH_LIBRARY_PATH", str(tmp_path))
    assert allocators.library_path("libjemalloc.so.2") == str(tmp_path / "libjemalloc.so.2")
    assert allocators.allocator_unavailable("jemalloc") is None


def test_run_starts_a_process_for_another_allocator_and_records_what_it_ran():
    _need("glibc_tuned")
    result = run(registry.config_for(QUICK, ["glibc_tuned"]))
    assert result.status == "ok", result.error
    assert result.process["allocator"]["allocator"] == "glibc_tuned"
    assert result.process["allocator"]["report"]["large_block_on_heap"] is True
    usage = result.process["usage"]
    assert usage["steps"] >= 1 and usage["minor_faults_per_step"] >= 0 and 0 <= usage["kernel_share"] <= 1
    here = run(QUICK)  # the baseline runs in this (glibc) process and says so
    assert here.process["allocator"]["allocator"] == "glibc"


def test_the_trainer_refuses_an_allocator_its_process_does_not_run():
    from gnnbench.flags import UnavailableError
    from gnnbench.training import Trainer

    _need("tcmalloc")
    with pytest.raises(UnavailableError, match="set when a process starts"):
        Trainer(registry.config_for(QUICK, ["tcmalloc"]))


def test_a_child_that_still_runs_another_allocator_fails_instead_of_measuring_it(monkeypatch):
    _need("tcmalloc")
    monkeypatch.setenv(process.PLACED, "tcmalloc")  # as if this process had been started for tcmalloc
    result = run(registry.config_for(QUICK, ["tcmalloc"]))
    assert result.status == "failed" and "does not run its allocator" in result.error
