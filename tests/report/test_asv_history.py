"""The committed asv history (results/asv/) holds one folder per machine, each one hardware class's (the identity
gnnbench's sweeps compare by: CPU, cores, memory; a fresh VM of the class joins its folder) and one environment's
measurements; the newest reaches at least 20 of the project's commits, with the baseline's step time at every
one of them; the report draws each machine as its own series and says how far before its own commit each ends."""

import json
import re
import subprocess

import pytest

from gnnbench.env import commits_since
from gnnbench.report import load_inputs
from gnnbench.report.inputs import asv_series
from gnnbench.report.sections.history import history_end_html
from tests.helpers import ROOT

ASV = ROOT / "results" / "asv"
REPORT = ROOT / "results" / "report.html"
MACHINE_FIELDS = ("arch", "cpu", "machine", "num_cpu")  # the hardware class, as gnnbench's sweeps identify a machine


def _same_class(doc: dict, machine: dict) -> list[str]:
    """What differs between a result's machine and its folder's beyond a fresh VM of the same class: the
    CPU, cores and name exactly; the kernel release (``Linux 6.18.44``, its build suffix aside) and the memory
    within 1% (a fresh VM reports a few KiB more or less)."""
    p = doc["params"]
    bad = [f for f in MACHINE_FIELDS if p[f] != machine[f]]
    if p["os"].split("-")[0] != machine["os"].split("-")[0]:
        bad.append("os")
    if abs(int(p["ram"]) - int(machine["ram"])) > 0.01 * int(machine["ram"]):
        bad.append("ram")
    return bad


MIN_COMMITS = 20
MAX_BEHIND = 10  # first-parent commits between the newest history's end and the report's own commit
BASELINE_STEP = "bench_optimizations.Optimization.time_step(baseline)"


def _machines() -> dict[str, tuple[dict, list[dict]]]:
    out = {}
    for folder in sorted(p for p in ASV.iterdir() if p.is_dir()):
        machine = json.loads((folder / "machine.json").read_text())
        docs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json")) if p.name != "machine.json"]
        out[folder.name] = (machine, docs)
    return out


def _newest(machines: dict) -> str:
    return max(machines, key=lambda m: max(int(d["date"]) for d in machines[m][1]))


def test_each_machine_folder_is_one_machine_and_one_environment():
    machines = _machines()
    assert machines
    for name, (machine, docs) in machines.items():
        assert machine["machine"] == name
        for doc in docs:
            assert not _same_class(doc, machine), (name, doc["commit_hash"][:8], _same_class(doc, machine))
        assert len({d["env_name"] for d in docs}) == 1, (name, sorted({d["env_name"] for d in docs}))


def test_the_newest_history_spans_twenty_commits_with_the_baseline_step_and_its_interval_at_each():
    machines = _machines()
    newest = _newest(machines)
    _, docs = machines[newest]
    series = asv_series(load_inputs(asv_results=ASV).asv)
    key = BASELINE_STEP + (f" [{newest}/{docs[0]['env_name']}]" if len(machines) > 1 else "")
    points = series[key]
    assert len(points) == len({d["commit_hash"] for d in docs}) >= MIN_COMMITS
    assert all(value > 0 for _, _, value, _, _ in points)
    assert all(low is not None and high is not None and low <= value <= high for _, _, value, low, high in points)


def _ends(page: str) -> list[dict]:
    pattern = (
        r"<li class='history-end' data-series='([^']*)' data-last='([^']*)' data-built='([^']*)' data-behind='(\d*)'>"
    )
    return [
        {"series": s, "last": last, "built": built, "behind": int(b) if b else None}
        for s, last, built, b in re.findall(pattern, page)
    ]


def test_the_committed_report_says_how_far_before_its_commit_each_history_ends_and_git_agrees():
    ends = _ends(REPORT.read_text(encoding="utf-8"))
    machines = _machines()
    assert {e["series"].split("/")[0] for e in ends} == set(machines)
    newest = next(e for e in ends if e["series"].startswith(_newest(machines) + "/"))
    assert newest["behind"] is not None and newest["behind"] <= MAX_BEHIND, newest
    for end in ends:
        recomputed = commits_since(end["last"], end["built"])
        if recomputed is None:
            pytest.skip(f"git cannot place {end['last'][:8]} before {end['built'][:8]} here (a shallow clone?)")
        assert recomputed == end["behind"], end


def test_the_history_end_line_counts_commits_and_says_when_git_cannot(monkeypatch):
    import gnnbench.report.sections.history as history

    docs = [
        {"commit_hash": "a" * 40, "date": 1_000, "env_name": "e", "params": {"machine": "m1"}},
        {"commit_hash": "b" * 40, "date": 2_000, "env_name": "e", "params": {"machine": "m1"}},
        {"commit_hash": "c" * 40, "date": 1_500, "env_name": "e", "params": {"machine": "m2"}},
    ]
    monkeypatch.setattr(history, "commits_since", lambda old, new: {"b" * 40: 3, "c" * 40: 0}[old])
    ends = _ends(history_end_html(docs, "f" * 40 + "+dirty"))
    assert ends == [
        {"series": "m1/e", "last": "b" * 40, "built": "f" * 40, "behind": 3},
        {"series": "m2/e", "last": "c" * 40, "built": "f" * 40, "behind": 0},
    ]
    page = history_end_html(docs, "f" * 40 + "+dirty")
    assert "3 first-parent commit(s) before this report's commit" in page and "at this report's own commit" in page
    assert "with uncommitted changes" in page
    monkeypatch.setattr(history, "commits_since", lambda old, new: None)
    assert "unknown here" in history_end_html(docs, "f" * 40)
    assert "not built in a git checkout" in history_end_html(docs, None)


def test_commits_since_counts_first_parent_commits_in_this_checkout():
    def rev(name: str) -> str | None:
        out = subprocess.run(["git", "rev-parse", name], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else None

    head, parent = rev("HEAD"), rev("HEAD~1")
    if not head or not parent:
        pytest.skip("not a git checkout with history")
    assert commits_since(head, head) == 0
    assert commits_since(parent, head) == 1
    assert commits_since(head, parent) is None  # a later commit is not in an earlier one's history


def test_readme_lists_each_machine_history_with_its_commits():
    """docs/tracking.md's "The committed history" names every folder with its commit count and first and last commit."""
    readme = (ROOT / "docs" / "tracking.md").read_text()
    section = readme[readme.index("**The committed history**") :]
    section = section[: section.index("```")]
    for name, (_, docs) in _machines().items():
        ordered = sorted(docs, key=lambda d: int(d["date"]))
        first, last = ordered[0]["commit_hash"][:8], ordered[-1]["commit_hash"][:8]
        line = next((ln for ln in section.split("\n- ") if ln.startswith(f"`{name}/`")), None)
        assert line is not None, f"docs/tracking.md does not list the history of {name}"
        assert f"{len({d['commit_hash'] for d in docs})} commits" in line, (name, line)
        assert f"`{first}`" in line and f"`{last}`" in line, (name, first, last, line)
