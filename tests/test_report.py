"""The published report: content, self-containment, and a real headless browser render."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gnnbench import registry
from gnnbench.report import build_report, load_inputs
from gnnbench.report.inputs import asv_series

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "compare-small-cpu"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from gnnbench.graphs import GraphSpec
    from gnnbench.flags import Flags
    from gnnbench.training import RunConfig
    from gnnbench.sweep import run_sweep, sweep_entries

    out_dir = tmp_path_factory.mktemp("sweep")
    base = RunConfig(spec=GraphSpec.preset("tiny", num_nodes=3000), flags=Flags(fanout=(5, 3), batch_size=96),
                     epochs=1, max_steps_per_epoch=5, warmup_steps=1, hidden=16)
    run_sweep(sweep_entries(base, ["int32", "sparse_agg", "pin_memory", "fanout"]), out_dir, isolate=False)
    path = tmp_path_factory.mktemp("report") / "report.html"
    build_report(load_inputs(runs=[out_dir]), path)
    return path


def test_report_lists_every_registry_entry_and_reasons(report):
    text = report.read_text()
    summary = re.search(r"<table class='summary' id='summary-0'>(.*?)</table>", text, re.S).group(1)
    for name in registry.names():
        assert f"<td>{name}</td>" in summary, name
    assert "not measured in these results" in summary
    if "pinned (page-locked) memory only exists with CUDA" not in summary:
        import torch

        assert torch.cuda.is_available()
    for div in ("speedup-0", "accuracy-0", "phases-0"):
        assert f'id="{div}"' in text


def test_report_is_self_contained(report):
    text = report.read_text()
    assert not re.search(r"<script[^>]+src=", text), "no external scripts"
    assert not re.search(r"<link[^>]+href=\s*['\"]https?:", text), "no external stylesheets"
    assert "Plotly" in text and len(text) > 1_000_000, "plotly.js is inlined"


def test_committed_reference_report_inputs_load():
    if not REFERENCE.exists():
        pytest.skip("no committed reference run")
    inputs = load_inputs(runs=[REFERENCE])
    labels = {r["label"] for r in inputs.runs}
    assert {"baseline", "all_recommended"} <= labels and set(registry.names()) <= labels


def test_asv_series_reads_compact_results():
    asv = {"benchmarks": {}, "results": [
        {"commit_hash": "a" * 40, "date": 1, "result_columns": ["result", "params"],
         "results": {"bench.Opt.time_step": [[0.5, None], [["'baseline'", "'int32'"]]]}},
        {"commit_hash": "b" * 40, "date": 2, "result_columns": ["result", "params"],
         "results": {"bench.Opt.time_step": [[0.4, 0.3], [["'baseline'", "'int32'"]]]}},
    ]}
    s = asv_series(asv)
    assert s["bench.Opt.time_step(baseline)"] == [(1, "aaaaaaaa", 0.5), (2, "bbbbbbbb", 0.4)]
    assert s["bench.Opt.time_step(int32)"] == [(2, "bbbbbbbb", 0.3)]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_renders_in_headless_chromium(report, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("GNNBENCH_REQUIRE_BROWSER"):
            pytest.fail("GNNBENCH_REQUIRE_BROWSER is set but no Chromium was found")
        pytest.skip("Chromium not installed (apt-get install chromium; .ci/run installs it)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=10000", "--window-size=1200,2000"]
    url = report.resolve().as_uri()
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [l for l in dom.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]
    assert not console, f"console output while loading the report: {console[:5]}"
    assert dom.stdout.count('class="main-svg"') >= 3, "plotly drew its charts"
    for name in registry.names():
        assert f"<td>{name}</td>" in dom.stdout
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=180,
                   check=True)
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    colors = img.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50, "the page is not blank"
    non_white = sum(c for c, rgb in colors if rgb != (255, 255, 255))
    assert non_white > 0.02 * img.width * img.height
